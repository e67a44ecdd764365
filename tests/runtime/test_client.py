"""The scheduling clients (Dogs ``defineJob.test.ts``, the scheduling part of ``events.test.ts``
and ``service/index.test.ts``, and the bulk scenarios of ``JobsRepo.test.ts``).

Every behavioural test runs twice: with the async :class:`DogsClient` over the harness's store,
and with the generated :class:`SyncDogsClient` over the same state's sync face (awaited through
:class:`Awaited` so that one test body checks both)."""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Sequence
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import anyio
import anyio.lowlevel
import pydantic
import pytest

from dogs_core.domain.records import (
    BulkScheduleResult,
    Duplicate,
    NewJob,
    Scheduled,
    ScheduleOutcome,
)
from dogs_core.errors import InvalidParamsError, JobNotRegisteredError, TransientStoreError
from dogs_core.jobs import Jobs, event_job, event_job_method
from dogs_core.runtime import DogsClient, JobContext, ScheduleItem, SyncDogsClient
from dogs_core.runtime.client.blocking import BlockingDogsClient
from dogs_core.runtime.plumbing._sync import retry as sync_retry
from dogs_testing.memory import InMemoryJobStore, SyncInMemoryJobStore
from tests.runtime.conftest import START, Harness, RecordingStore

pytestmark = pytest.mark.anyio

Params = dict[str, Any] | None


class Count(pydantic.BaseModel):
    n: int


class Awaited:
    """A :class:`SyncDogsClient` whose methods are awaited like the async client's (each call
    still runs synchronously, in the test's thread)."""

    def __init__(self, client: SyncDogsClient) -> None:
        self.sync = client

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self.sync, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return method(*args, **kwargs)

        return call


@pytest.fixture(params=["async", "sync"])
def flavor(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def client_of(h: Harness, flavor: str, **options: Any) -> Any:
    """The harness's client of ``flavor``: both write the same in-memory state."""
    options = {"clock": h.clock, "rng": random.Random(h.seed), **options}
    if flavor == "async":
        return DogsClient(h.store, h.jobs, **options)
    return Awaited(SyncDogsClient(h.store.sync, h.jobs, **options))


def registry() -> Jobs:
    jobs = Jobs()

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> None:
        return None

    @jobs.event
    async def counted(params: Count, ctx: JobContext) -> None:
        return None

    return jobs


async def test_schedule_with_run_in_run_at_or_now(flavor: str) -> None:
    h = Harness(registry())
    client = client_of(h, flavor)
    await anyio.lowlevel.checkpoint()
    a = await client.schedule("job", run_in=5)
    b = await client.schedule("job", run_at=START + timedelta(hours=2))
    c = await client.schedule("job")
    d = await client.schedule("job", run_in=timedelta(0))
    records = {r.id: r for r in h.store.records()}
    ids = [getattr(o, "id", None) for o in (a, b, c, d)]
    assert [records[i].next_run_at for i in ids if i is not None] == [
        h.at(5),
        START + timedelta(hours=2),
        h.at(0),
        h.at(0),
    ]
    assert all(r.priority == 100 and r.params is None for r in records.values())


async def test_params_are_validated_and_coerced_by_the_params_model(flavor: str) -> None:
    jobs = Jobs()
    received: list[Count] = []

    @jobs.event
    async def counted(params: Count, ctx: JobContext) -> None:
        received.append(params)

    h = Harness(jobs)
    client = client_of(h, flavor)
    await client.schedule(counted, {"n": "10"})
    (record,) = h.store.records()
    assert record.params == {"n": 10}
    with pytest.raises(InvalidParamsError, match="params"):
        await client.schedule(counted, {"n": "ten"})
    assert len(h.store.records()) == 1, "nothing is written when validation fails"
    async with h.workers() as workers:
        await anyio.sleep(1)
        await workers.stop()
    assert received == [Count(n=10)]


async def test_an_unregistered_definition_cannot_be_scheduled(flavor: str) -> None:
    h = Harness(registry())
    client = client_of(h, flavor)

    async def stray(params: Params, ctx: JobContext) -> None:
        return None

    with pytest.raises(JobNotRegisteredError):
        await client.schedule(event_job(stray))
    assert h.store.records() == []


async def test_schedule_many_with_mixed_timing_and_priority(flavor: str) -> None:
    h = Harness(registry())
    client = client_of(h, flavor)
    result = await client.schedule_many(
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
    empty = await client.schedule_many("job", [])
    assert (empty.scheduled_count, empty.skipped_count, empty.errors) == (0, 0, ())


async def test_schedule_many_reports_invalid_items_and_still_writes_the_others(flavor: str) -> None:
    h = Harness(registry())
    client = client_of(h, flavor)
    result = await client.schedule_many(
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


async def test_concurrent_bulk_schedules_dedupe_overlapping_unique_keys(flavor: str) -> None:
    h = Harness(registry())
    client = client_of(h, flavor)
    results = []

    async def caller() -> None:
        results.append(
            await client.schedule_many(
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


async def test_records_get_a_partition_in_range(flavor: str) -> None:
    h = Harness(registry())
    client = client_of(h, flavor, n_partitions=4)
    for _ in range(30):
        await client.schedule("job")
    await client.schedule_many("job", [ScheduleItem() for _ in range(30)])
    partitions = [r.partition for r in h.store.records()]
    assert set(partitions) <= {0, 1, 2, 3}
    assert len(set(partitions)) > 1


async def test_service_methods_run_as_jobs(flavor: str) -> None:
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
    client = client_of(h, flavor)
    await client.schedule("send", {"n": "7"})
    async with h.workers() as workers:
        await anyio.sleep(1)
        await workers.stop()
    assert ran == [("mail", 7)]


# ----------------------------------------------------------------------------------------------
# Transient store errors: one retry helper, the same bounded backoff in both clients
# ----------------------------------------------------------------------------------------------


class FlakyInserts(SyncInMemoryJobStore):
    """Fails the next inserts (single and bulk): ``before`` of them before anything is written,
    then ``after`` of them after the write landed (its reply lost)."""

    def __init__(self, *, before: int = 0, after: int = 0) -> None:
        super().__init__()
        self.before, self.after = before, after
        self.calls: list[str] = []

    def _flaky(self, name: str, write: Callable[[], Any]) -> Any:
        self.calls.append(name)
        if self.before:
            self.before -= 1
            raise TransientStoreError("no primary", write_may_have_applied=False)
        result = write()
        if self.after:
            self.after -= 1
            raise TransientStoreError("connection reset", write_may_have_applied=True)
        return result

    def insert_job(self, job: NewJob, *, session: object | None = None) -> ScheduleOutcome:
        outcome: ScheduleOutcome = self._flaky(
            "insert_job", lambda: super(FlakyInserts, self).insert_job(job, session=session)
        )
        return outcome

    def insert_jobs(
        self, jobs: Sequence[NewJob], *, session: object | None = None
    ) -> BulkScheduleResult:
        result: BulkScheduleResult = self._flaky(
            "insert_jobs",
            lambda: super(FlakyInserts, self).insert_jobs(jobs, session=session),
        )
        return result


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The sync client's backoff sleeps, recorded instead of slept (the async client's sleep on
    the virtual clock); the monotonic clock advances by what was slept."""
    slept: list[float] = []
    virtual = SimpleNamespace(sleep=slept.append, monotonic=lambda: sum(slept))
    monkeypatch.setattr(sync_retry, "time", virtual)
    return slept


def flaky_harness(**faults: int) -> tuple[Harness, FlakyInserts]:
    flaky = FlakyInserts(**faults)
    return Harness(registry(), store=RecordingStore(sync=flaky)), flaky


async def test_an_insert_failing_before_the_write_is_retried_with_backoff(
    flavor: str, sleeps: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    h, flaky = flaky_harness(before=2)
    client = client_of(h, flavor)
    started = anyio.current_time()
    with caplog.at_level(logging.WARNING, logger="dogs.retry"):
        outcome = await client.schedule("job", unique_key="k")
    assert isinstance(outcome, Scheduled)
    assert [r.id for r in h.store.records()] == [outcome.id]
    assert flaky.calls == ["insert_job"] * 3
    waited = sleeps if flavor == "sync" else [anyio.current_time() - started]
    assert sum(waited) == pytest.approx(0.05 + 0.1)
    assert "schedule job hit a transient store error (attempt 1/6), retrying in 0.05s" in (
        caplog.text
    )
    assert "(attempt 2/6), retrying in 0.10s" in caplog.text


async def test_a_lost_insert_reply_is_read_back_not_resent(
    flavor: str, sleeps: list[float]
) -> None:
    h, flaky = flaky_harness(after=1)
    client = client_of(h, flavor)
    outcome = await client.schedule("job")
    assert isinstance(outcome, Scheduled)
    assert [r.id for r in h.store.records()] == [outcome.id]
    assert flaky.calls == ["insert_job"], "the insert that landed was not sent again"
    assert sleeps == []


async def test_inserts_give_up_after_six_attempts(
    flavor: str, sleeps: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    h, flaky = flaky_harness(before=10)
    client = client_of(h, flavor)
    started = anyio.current_time()
    with caplog.at_level(logging.WARNING, logger="dogs.retry"), pytest.raises(TransientStoreError):
        await client.schedule("job")
    assert flaky.calls == ["insert_job"] * 6
    waited = sleeps if flavor == "sync" else [anyio.current_time() - started]
    assert sum(waited) == pytest.approx(0.05 + 0.1 + 0.2 + 0.4 + 0.8)
    assert "schedule job failed after 6 attempts: no primary" in caplog.text
    assert h.store.records() == []


async def test_an_ambiguous_bulk_insert_is_settled_item_by_item(
    flavor: str, sleeps: list[float]
) -> None:
    h, flaky = flaky_harness(after=1)
    client = client_of(h, flavor)
    result = await client.schedule_many("job", [ScheduleItem(unique_key=f"u{i}") for i in range(3)])
    assert (result.scheduled_count, result.skipped_count, result.errors) == (3, 0, ())
    assert len(h.store.records()) == 3
    assert flaky.calls == ["insert_jobs", "insert_job", "insert_job", "insert_job"]
    assert all(isinstance(o, Scheduled) for o in result.outcomes)


# ----------------------------------------------------------------------------------------------
# The sync client from threads, and the blocking client over sync and async stores
# ----------------------------------------------------------------------------------------------


def test_sync_clients_in_threads_dedupe_overlapping_unique_keys() -> None:
    store = SyncInMemoryJobStore()
    client = SyncDogsClient(store, registry())
    results: list[BulkScheduleResult] = []

    def caller() -> None:
        items = [ScheduleItem(params={"i": i}, unique_key=f"u{i}") for i in range(250)]
        results.append(client.schedule_many("job", items))

    threads = [threading.Thread(target=caller) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(r.scheduled_count for r in results) == 250
    assert sum(r.skipped_count for r in results) == 750
    assert len(store.find_records(limit=1000)) == 250


class ThreadRecording(SyncInMemoryJobStore):
    """Records the thread of every ``schedule`` call."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[int] = []

    def insert_job(self, job: NewJob, *, session: object | None = None) -> ScheduleOutcome:
        self.threads.append(threading.get_ident())
        return super().insert_job(job, session=session)


def test_the_blocking_client_calls_a_sync_store_in_the_callers_thread() -> None:
    store = ThreadRecording()
    before = threading.active_count()
    with BlockingDogsClient(store, registry()) as client:
        assert isinstance(client, SyncDogsClient)
        assert isinstance(client.schedule("job"), Scheduled)
        assert threading.active_count() == before, "no event loop thread was started"
        assert [r.job_name for r in client.find_jobs("job")] == ["job"]
    assert store.threads == [threading.get_ident()]


def test_the_blocking_client_calls_an_async_store_through_its_loop_thread() -> None:
    store = InMemoryJobStore()
    jobs = registry()
    with BlockingDogsClient(store, jobs, backend="trio") as client:
        outcome = client.schedule("job", unique_key="once")
        again = client.schedule("job", unique_key="once")
        assert isinstance(outcome, Scheduled)
        assert isinstance(again, Duplicate)
        assert again.existing_id == outcome.id
        assert client.get_job(outcome.id) is not None
        counts = client.status()
        assert [(c.job_name, c.scheduled_later + c.due) for c in counts] == [("job", 1)]
        assert client.unlock_all() == 0
    assert [r.id for r in store.sync.find_records()] == [outcome.id]
