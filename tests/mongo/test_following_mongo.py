"""Following a job on the real mongod with the generated sync client over the sync store (change
streams). Nothing here asserts a duration."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from pymongo import MongoClient

from dogs_core import JobContext, Jobs, Scheduled, SyncDogsClient
from dogs_core.runtime.worker.blocking import BlockingWorkers
from dogs_mongo import MongoJobStore

pytestmark = pytest.mark.mongo

jobs = Jobs()


@jobs.event(store_logs=True)
def steps(params: dict[str, int], ctx: JobContext) -> str:
    for step in range(1, params["steps"] + 1):
        time.sleep(0.1)
        ctx.progress(step / params["steps"], f"step {step}")
        ctx.logger.info("step %d", step)
    return "done"


def _id(outcome: object) -> str:
    assert isinstance(outcome, Scheduled)
    return outcome.id


def test_the_sync_client_follows_with_change_streams(
    sync_mongo_client: MongoClient[dict[str, Any]], mongo_database_name: str
) -> None:
    store = MongoJobStore(sync_mongo_client, mongo_database_name)
    client = SyncDogsClient(store, jobs)
    job_id = _id(client.schedule(steps, {"steps": 6}))
    updates: list[str | None] = []
    watcher = threading.Thread(
        target=lambda: updates.extend(
            update.message for update in client.watch_progress(job_id, poll_interval=5)
        )
    )
    with BlockingWorkers(store, jobs, poll_interval="100ms", progress_interval="100ms"):
        watcher.start()
        lines = [line.message for line in client.follow_logs(job_id, poll_interval=5)]
        watcher.join(30)
    assert lines == [f"step {n}" for n in range(1, 7)]
    assert updates[-1] == "step 6", "the final progress, from the history row at the latest"
    assert updates == sorted(set(updates), key=updates.index), "each update once, in order"
