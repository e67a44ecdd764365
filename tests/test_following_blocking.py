"""The blocking client over an async store (the in-memory one): the store's feeds do not cross
its portal, so following a job polls, and still ends with the job."""

from __future__ import annotations

import time

from dogs_core import JobContext, Jobs, Scheduled
from dogs_core.runtime.client.blocking import BlockingDogsClient
from dogs_core.runtime.worker.blocking import BlockingWorkers
from dogs_testing import InMemoryJobStore

jobs = Jobs()


@jobs.event(store_logs=True)
def steps(params: None, ctx: JobContext) -> str:
    for step in (1, 2):
        time.sleep(0.05)
        ctx.progress(step / 2, f"step {step}")
        ctx.logger.info("step %d", step)
    return "done"


def test_the_portal_client_polls() -> None:
    store = InMemoryJobStore()
    with BlockingDogsClient(store, jobs) as client:
        outcome = client.schedule(steps)
        assert isinstance(outcome, Scheduled)
        with BlockingWorkers(store, jobs, poll_interval="50ms", progress_interval="50ms"):
            lines = [line.message for line in client.follow_logs(outcome.id, poll_interval="50ms")]
            updates = [u.message for u in client.watch_progress(outcome.id, poll_interval="50ms")]
        assert lines == ["step 1", "step 2"]
        assert updates[-1] == "step 2"
        assert [line.message for line in client.get_logs(outcome.id)] == lines
