"""The scheduler loop, capacity, stop, and the hint probe (Dogs ``WorkerService.test.ts``)."""

from __future__ import annotations

import gc
import weakref
from collections import Counter
from typing import Any

import anyio
import pytest

from dogs_core.domain.hints import Hint
from dogs_core.errors import InvalidOptionError, StoreError, ValidationError, WorkersStateError
from dogs_core.jobs import Jobs
from dogs_core.runtime import JobContext, Workers
from tests.runtime.conftest import Gauge, Harness, RecordingStore, now

pytestmark = pytest.mark.anyio

Params = dict[str, Any] | None


def idle_jobs() -> Jobs:
    jobs = Jobs()

    @jobs.event
    async def nothing(params: Params, ctx: JobContext) -> None:
        return None

    return jobs


# -- validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("n_partitions", 0),
        ("n_partitions", 1.5),
        ("workers_count", 0),
        ("max_tries_reached_retention", -1),
        ("max_tries_reached_retention", float("nan")),
        ("poll_interval", 0),
    ],
)
async def test_invalid_options_are_refused(option: str, value: object) -> None:
    options: dict[str, Any] = {option: value}
    with pytest.raises(ValidationError, match=option):
        Workers(RecordingStore(), idle_jobs(), **options)


async def test_workers_need_at_least_one_job() -> None:
    """Dogs skips the probe when there are no jobs; here workers refuse to start without any."""
    with pytest.raises(InvalidOptionError, match="no jobs"):
        Workers(RecordingStore(), Jobs())


# -- the poll loop ------------------------------------------------------------------------------


async def test_one_poll_loop_regardless_of_workers_count() -> None:
    h = Harness(idle_jobs())
    async with h.workers(workers_count=20, poll_interval=1, probe_enabled=False) as workers:
        await anyio.sleep(5.5)
        await workers.stop()
    per_instant = Counter(call.started for call in h.store.claims)
    assert per_instant == {0.0: 1, 1.0: 1, 2.0: 1, 3.0: 1, 4.0: 1, 5.0: 1}


async def test_every_partition_is_visited_before_waiting() -> None:
    h = Harness(idle_jobs())
    async with h.workers(
        workers_count=20, n_partitions=4, poll_interval=1, probe_enabled=False
    ) as workers:
        await anyio.sleep(2.5)
        await workers.stop()
    by_instant: dict[float, list[int]] = {}
    for call in h.store.claims:
        by_instant.setdefault(call.started, []).append(call.request.partition)
    assert sorted(by_instant) == [0.0, 1.0, 2.0]
    for partitions in by_instant.values():
        assert sorted(partitions) == [0, 1, 2, 3], "one empty sweep: each partition once"


async def test_capacity_is_filled_and_refilled_immediately() -> None:
    jobs = Jobs()
    gauge = Gauge()

    @jobs.event
    async def work(params: Params, ctx: JobContext) -> None:
        with gauge:
            await anyio.sleep(10)

    h = Harness(jobs)
    for _ in range(5):
        await h.client.schedule(work)
    # A long poll interval: only capacity releases can explain the refill times.
    async with h.workers(workers_count=2, poll_interval=1000) as workers:
        await anyio.sleep(35)
        await workers.stop()
    assert [t for t, kind in gauge.events if kind == "start"] == [0, 0, 10, 10, 20]
    assert gauge.maximum == 2


async def test_a_stale_execution_frees_capacity_without_settling() -> None:
    jobs = Jobs()
    finished: list[tuple[str, float]] = []

    @jobs.event(lock_time=5, cancel_on_stale=False)
    async def hangs(params: Params, ctx: JobContext) -> None:
        if ctx.tries == 1:
            await anyio.sleep(30)
        finished.append(("hangs", now()))

    @jobs.event
    async def quick(params: Params, ctx: JobContext) -> None:
        finished.append(("quick", now()))

    h = Harness(jobs)
    await h.client.schedule(hangs, priority=200)
    await h.client.schedule(quick)
    running: list[int] = []
    async with h.workers(workers_count=1, poll_interval=1000) as workers:
        await anyio.sleep(6)
        running.append(workers.running_executions)
        await anyio.sleep(30)
        running.append(workers.running_executions)
        await workers.stop()
    assert finished == [("quick", 5.0), ("hangs", 5.0), ("hangs", 30.0)], (
        "the slot was reused as soon as 'hangs' went stale (quick first: the stale job was "
        "demoted), and the stale coroutine kept running (cancel_on_stale=False)"
    )
    assert running == [0, 0]


async def test_an_in_flight_claim_during_stop_is_still_executed() -> None:
    jobs = Jobs()
    ran: list[float] = []

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> None:
        await anyio.sleep(2)
        ran.append(now())

    h = Harness(jobs)
    await h.client.schedule(job)
    h.store.hooks.claim_delay = 5
    async with h.workers(workers_count=1, probe_enabled=False) as workers:
        await anyio.sleep(1)
        assert h.store.claims_in_flight == 1
        await workers.stop()
        stopped_at = now()
        assert not workers.running
    assert ran == [7.0]
    assert stopped_at == 7.0
    assert h.store.records() == []


async def test_stop_is_idempotent_and_serve_returns() -> None:
    h = Harness(idle_jobs())
    async with h.workers() as workers:
        assert workers.running
        async with anyio.create_task_group() as tg:
            tg.start_soon(workers.serve)
            await anyio.sleep(1)
            await workers.stop()
            await workers.stop()
    await workers.stop()
    assert not workers.running


async def test_claim_errors_are_logged_and_retried_after_the_poll_interval() -> None:
    jobs = Jobs()
    ran: list[float] = []

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> None:
        ran.append(now())

    h = Harness(jobs)
    await h.client.schedule(job)
    failures = iter(range(2))

    def fail_twice(request: object) -> None:
        if next(failures, None) is not None:
            raise StoreError("primary stepped down")

    h.store.hooks.before_claim = fail_twice
    async with h.workers(workers_count=1, poll_interval=3) as workers:
        await anyio.sleep(10)
        await workers.stop()
    assert ran == [6.0]


# -- hints ----------------------------------------------------------------------------------------


def timings(per_cycle: list[dict[str, float] | None], interval: float = 60) -> Any:
    """A probe timing function: ``per_cycle[c]`` gives each hint's time in the cycle that runs
    at ``c * interval`` seconds; ``None`` makes that cycle fail."""

    def timing(hint: str, started: float) -> float:
        cycle = min(int(started // interval), len(per_cycle) - 1)
        values = per_cycle[cycle]
        if values is None:
            raise StoreError("explain timed out")
        return values[hint]

    return timing


GLOBAL_WINS = {"byJobName": 5.0, "globalPriority": 1.0}
BY_NAME_WINS = {"byJobName": 1.0, "globalPriority": 5.0}
TIE = {"byJobName": 2.0, "globalPriority": 2.0}


async def test_the_by_job_name_hint_is_forced_while_a_cap_filters_names() -> None:
    jobs = Jobs()
    window: list[float] = []

    @jobs.event(max_parallel_executions_per_server=1)
    async def capped(params: Params, ctx: JobContext) -> None:
        window.append(now())
        await anyio.sleep(10)
        window.append(now())

    @jobs.event
    async def free(params: Params, ctx: JobContext) -> None:
        return None

    h = Harness(jobs)
    h.store.hooks.probe_timing = timings([GLOBAL_WINS])
    async with h.workers(workers_count=4, poll_interval=1) as workers:
        await anyio.sleep(1.5)
        assert workers.selected_hint is Hint.GLOBAL_PRIORITY
        await h.client.schedule(capped)
        await anyio.sleep(15)
        await workers.stop()
    start, end = window
    assert (start, end) == (2.0, 12.0)
    during = [c.request for c in h.store.claims if start < c.started < end]
    after = [c.request for c in h.store.claims if c.started > end]
    before = [c.request for c in h.store.claims if 1 <= c.started < start]
    assert during
    assert after
    assert before
    assert all(r.hint == "byJobName" and r.job_names == ("free",) for r in during)
    assert all(r.hint == "globalPriority" and r.job_names == ("capped", "free") for r in after)
    assert all(r.hint == "globalPriority" for r in before)
    assert workers.selected_hint is Hint.GLOBAL_PRIORITY, "the override never changes the selection"


async def test_probe_adopts_at_startup_then_needs_two_consecutive_wins() -> None:
    h = Harness(idle_jobs())
    h.store.hooks.probe_timing = timings(
        [GLOBAL_WINS, BY_NAME_WINS, TIE, BY_NAME_WINS, None, BY_NAME_WINS, BY_NAME_WINS]
    )
    selected: list[Hint] = []
    async with h.workers(probe_interval=60, poll_interval=100) as workers:
        selected.append(workers.selected_hint)
        for _ in range(7):
            await anyio.sleep(1)
            selected.append(workers.selected_hint)
            await anyio.sleep(59)
        await workers.stop()
    assert selected == [
        Hint.BY_JOB_NAME,  # before the first probe completed
        Hint.GLOBAL_PRIORITY,  # cycle 0: the startup winner is adopted at once
        Hint.GLOBAL_PRIORITY,  # cycle 1: one challenger win
        Hint.GLOBAL_PRIORITY,  # cycle 2: a tie resets the streak
        Hint.GLOBAL_PRIORITY,  # cycle 3: one win
        Hint.GLOBAL_PRIORITY,  # cycle 4: a failure resets the streak
        Hint.GLOBAL_PRIORITY,  # cycle 5: one win
        Hint.BY_JOB_NAME,  # cycle 6: the second consecutive win switches
    ]
    # 3 samples per cycle, both hints each, the order alternating by cycle parity
    by_cycle: dict[int, list[str]] = {}
    for call in h.store.probes:
        by_cycle.setdefault(round(call.started) // 60, []).append(call.hint)
    assert by_cycle[0] == ["byJobName", "globalPriority"] * 3
    assert by_cycle[1] == ["globalPriority", "byJobName"] * 3
    assert by_cycle[2] == ["byJobName", "globalPriority"] * 3
    assert by_cycle[4] == ["byJobName"], "a failing probe stops at the first failure"


async def test_periodic_probes_never_overlap() -> None:
    h = Harness(idle_jobs())
    h.store.hooks.probe_delay = 3  # one probe (6 explains) takes 18 s, longer than the interval
    h.store.hooks.probe_timing = timings([GLOBAL_WINS])
    async with h.workers(probe_interval=5, poll_interval=100) as workers:
        await anyio.sleep(100)
        await workers.stop()
    assert len(h.store.probes) >= 12
    assert h.store.max_probes_in_flight == 1
    starts = [call.started for call in h.store.probes]
    # each probe starts 5 s after the previous one ended
    assert starts[6] == 18 + 5


async def test_stop_during_a_probe_skips_the_rest_of_the_cycle() -> None:
    h = Harness(idle_jobs())
    h.store.hooks.probe_delay = 10
    h.store.hooks.probe_timing = timings([GLOBAL_WINS])
    async with h.workers(probe_interval=60, poll_interval=100) as workers:
        await anyio.sleep(1)
        assert h.store.probes_in_flight == 1
        await workers.stop()
        assert now() <= 10, "stop does not wait for the rest of the cycle"
    await anyio.sleep(100)
    assert len(h.store.probes) == 1
    assert workers.selected_hint is Hint.BY_JOB_NAME, "an incomplete cycle decides nothing"


async def test_no_probes_when_disabled() -> None:
    h = Harness(idle_jobs())
    async with h.workers(probe_enabled=False, probe_interval=1) as workers:
        await anyio.sleep(10)
        await workers.stop()
    assert h.store.probes == []


async def test_workers_cannot_be_started_twice() -> None:
    h = Harness(idle_jobs())
    workers = h.workers()
    async with workers:
        await workers.stop()
    with pytest.raises(WorkersStateError):
        async with workers:
            pass
    with pytest.raises(WorkersStateError):
        await h.workers().serve()


class SlowWrites(RecordingStore):
    """Settlements (with the rows they carry) and history rows take a second each."""

    async def settle_many(self, settlements: Any) -> list[bool]:
        await anyio.sleep(1)
        return await super().settle_many(settlements)

    async def write_history_many(self, records: Any) -> None:
        await anyio.sleep(1)
        await super().write_history_many(records)


async def test_stop_waits_for_the_batched_completion_and_history_row() -> None:
    """A stop requested while a finished job's batched writes are on their way waits for them:
    the record is deleted and its history row written before the workers have stopped."""
    jobs = Jobs()
    started = anyio.Event()

    @jobs.event
    async def quick(params: Params, ctx: JobContext) -> None:
        started.set()

    store = SlowWrites()
    h = Harness(jobs, store=store)
    await h.client.schedule(quick)
    async with h.workers(workers_count=4, poll_interval=1) as workers:
        await started.wait()
        await workers.stop()
        assert now() == pytest.approx(1.0), "one second for the settlement, its row carried"
    assert await store.find_records() == []
    [row] = await store.read_history("quick")
    assert row.status.value == "success"


async def test_an_ended_execution_is_freed_without_the_garbage_collector() -> None:
    """No reference cycle outlives an execution (the cost of a no-op job includes whatever the
    garbage collector has to find): with the collector off, its context is freed at once."""
    jobs = Jobs()
    contexts: list[weakref.ref[JobContext]] = []

    @jobs.event
    async def noop(params: object, ctx: JobContext) -> None:
        contexts.append(weakref.ref(ctx))

    h = Harness(jobs)
    for _ in range(3):
        await h.client.schedule(noop)
    gc.collect()
    gc.disable()
    try:
        async with h.workers() as workers:
            await anyio.sleep(2)
            await workers.stop()
        alive = [ref for ref in contexts if ref() is not None]
    finally:
        gc.enable()
    assert len(contexts) == 3
    assert alive == []
