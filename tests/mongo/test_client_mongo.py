"""Both scheduling clients against the real mongod: the async DogsClient on AsyncMongoJobStore
and the generated SyncDogsClient on MongoJobStore (its calls in the test's thread), through one
set of test bodies."""

from __future__ import annotations

from typing import Any

import pytest

from dogs_core import (
    DogsClient,
    Duplicate,
    JobContext,
    Jobs,
    Scheduled,
    ScheduleItem,
    SyncDogsClient,
)
from dogs_mongo import AsyncMongoJobStore, MongoJobStore
from tests.runtime.test_client import Awaited

pytestmark = [pytest.mark.mongo, pytest.mark.anyio]


def registry() -> Jobs:
    jobs = Jobs()

    @jobs.event(priority=7)
    async def mail(params: dict[str, Any] | None, ctx: JobContext) -> None:
        return None

    return jobs


@pytest.fixture(params=["async", "sync"])
def client(
    request: pytest.FixtureRequest, async_store: AsyncMongoJobStore, sync_store: MongoJobStore
) -> Any:
    if request.param == "async":
        return DogsClient(async_store, registry(), n_partitions=3)
    return Awaited(SyncDogsClient(sync_store, registry(), n_partitions=3))


async def test_schedule_dedupe_and_read_back(client: Any) -> None:
    outcome = await client.schedule("mail", {"to": "a@example.com"}, unique_key="a")
    assert isinstance(outcome, Scheduled)
    again = await client.schedule("mail", {"to": "other"}, unique_key="a")
    assert isinstance(again, Duplicate)
    assert again.existing_id == outcome.id
    record = await client.get_job(outcome.id)
    assert record is not None
    assert (record.params, record.priority) == ({"to": "a@example.com"}, 7)
    assert record.partition in {0, 1, 2}
    assert [r.id for r in await client.find_jobs("mail")] == [outcome.id]
    (status,) = await client.status()
    assert (status.job_name, status.due) == ("mail", 1)
    assert await client.get_executions("mail") == []
    assert await client.unlock_all() == 0


async def test_schedule_many_skips_taken_keys_and_reports_bad_items(client: Any) -> None:
    first = await client.schedule("mail", unique_key="k1")
    result = await client.schedule_many(
        "mail",
        [
            ScheduleItem(unique_key="k1"),
            {"params": {"n": 2}, "unique_key": "k2", "run_in": 60},
            {"run_at": "tomorrow"},
            ScheduleItem(params={"n": 3}),
        ],
    )
    assert (result.scheduled_count, result.skipped_count) == (2, 1)
    assert [e.index for e in result.errors] == [2]
    duplicate = result.outcomes[0]
    assert isinstance(duplicate, Duplicate)
    assert duplicate.existing_id == first.id
    assert len(await client.find_jobs()) == 3
