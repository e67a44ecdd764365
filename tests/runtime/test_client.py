"""The scheduling client (Dogs ``defineJob.test.ts``, the scheduling part of ``events.test.ts``
and ``service/index.test.ts``, and the bulk scenarios of ``JobsRepo.test.ts``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import anyio
import anyio.lowlevel
import pydantic
import pytest

from dogs_core.domain.records import Duplicate, Scheduled
from dogs_core.errors import InvalidParamsError, JobNotRegisteredError
from dogs_core.jobs import Jobs, event_job, event_job_method
from dogs_core.runtime import JobContext, ScheduleItem
from tests.runtime.conftest import START, Harness

pytestmark = pytest.mark.anyio

Params = dict[str, Any] | None


class Count(pydantic.BaseModel):
    n: int


def registry() -> Jobs:
    jobs = Jobs()

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> None:
        return None

    @jobs.event
    async def counted(params: Count, ctx: JobContext) -> None:
        return None

    return jobs


async def test_schedule_with_run_in_run_at_or_now() -> None:
    h = Harness(registry())
    await anyio.lowlevel.checkpoint()
    a = await h.client.schedule("job", run_in=5)
    b = await h.client.schedule("job", run_at=START + timedelta(hours=2))
    c = await h.client.schedule("job")
    d = await h.client.schedule("job", run_in=timedelta(0))
    records = {r.id: r for r in h.store.records()}
    ids = [getattr(o, "id", None) for o in (a, b, c, d)]
    assert [records[i].next_run_at for i in ids if i is not None] == [
        h.at(5),
        START + timedelta(hours=2),
        h.at(0),
        h.at(0),
    ]
    assert all(r.priority == 100 and r.params is None for r in records.values())


async def test_params_are_validated_and_coerced_by_the_params_model() -> None:
    jobs = Jobs()
    received: list[Count] = []

    @jobs.event
    async def counted(params: Count, ctx: JobContext) -> None:
        received.append(params)

    h = Harness(jobs)
    await h.client.schedule(counted, {"n": "10"})
    (record,) = h.store.records()
    assert record.params == {"n": 10}
    with pytest.raises(InvalidParamsError, match="params"):
        await h.client.schedule(counted, {"n": "ten"})
    assert len(h.store.records()) == 1, "nothing is written when validation fails"
    async with h.workers() as workers:
        await anyio.sleep(1)
        await workers.stop()
    assert received == [Count(n=10)]


async def test_an_unregistered_definition_cannot_be_scheduled() -> None:
    h = Harness(registry())

    async def stray(params: Params, ctx: JobContext) -> None:
        return None

    with pytest.raises(JobNotRegisteredError):
        await h.client.schedule(event_job(stray))
    assert h.store.records() == []


async def test_schedule_many_with_mixed_timing_and_priority() -> None:
    h = Harness(registry())
    result = await h.client.schedule_many(
        "job",
        [
            ScheduleItem(params={"i": 0}, run_in=10),
            {"params": {"i": 1}, "run_at": START + timedelta(minutes=1), "priority": 5},
            ScheduleItem(params={"i": 2}),
        ],
    )
    assert (result.scheduled_count, result.skipped_count, result.errors) == (3, 0, ())
    records = sorted(h.store.records(), key=lambda r: r.params["i"] if r.params else -1)
    assert [(r.next_run_at, r.priority) for r in records] == [
        (h.at(10), 100),
        (START + timedelta(minutes=1), 5),
        (h.at(0), 100),
    ]
    empty = await h.client.schedule_many("job", [])
    assert (empty.scheduled_count, empty.skipped_count, empty.errors) == (0, 0, ())


async def test_schedule_many_reports_invalid_items_and_still_writes_the_others() -> None:
    h = Harness(registry())
    result = await h.client.schedule_many(
        "counted",
        [
            {"params": {"n": 1}},
            {"params": {"n": 2}, "run_at": "tomorrow"},  # a bad date
            {"params": {"n": "x"}},
            {"params": {"n": "3"}},
        ],
    )
    assert result.scheduled_count == 2
    assert [e.index for e in result.errors] == [1, 2]
    assert sorted(r.params["n"] for r in h.store.records() if r.params) == [1, 3]


async def test_concurrent_bulk_schedules_dedupe_overlapping_unique_keys() -> None:
    h = Harness(registry())
    results = []

    async def caller() -> None:
        results.append(
            await h.client.schedule_many(
                "job", [ScheduleItem(params={"i": i}, unique_key=f"u{i}") for i in range(250)]
            )
        )

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(caller)
    assert sum(r.scheduled_count for r in results) == 250
    assert sum(r.skipped_count for r in results) == 750
    assert all(r.errors == () for r in results)
    assert len(h.store.records()) == 250
    duplicates = [o for r in results for o in r.outcomes if isinstance(o, Duplicate)]
    scheduled = {o.id for r in results for o in r.outcomes if isinstance(o, Scheduled)}
    assert {d.existing_id for d in duplicates} == scheduled


async def test_records_get_a_partition_in_range() -> None:
    h = Harness(registry())
    client = type(h.client)(h.store, h.jobs, n_partitions=4, clock=h.clock)
    for _ in range(30):
        await client.schedule("job")
    await client.schedule_many("job", [ScheduleItem() for _ in range(30)])
    partitions = [r.partition for r in h.store.records()]
    assert set(partitions) <= {0, 1, 2, 3}
    assert len(set(partitions)) > 1


async def test_service_methods_run_as_jobs() -> None:
    ran: list[tuple[str, int]] = []

    class Mailer:
        def __init__(self) -> None:
            self.prefix = "mail"

        @event_job_method(max_tries=2)
        async def send(self, params: Count, ctx: JobContext) -> None:
            ran.append((self.prefix, params.n))

    jobs = Jobs()
    jobs.add_service(Mailer())
    h = Harness(jobs)
    await h.client.schedule("send", {"n": "7"})
    async with h.workers() as workers:
        await anyio.sleep(1)
        await workers.stop()
    assert ran == [("mail", 7)]
