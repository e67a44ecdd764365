"""Following a running job through the real runtime and the in-memory store, on virtual time:
progress written by the lock's renewals at most once per interval (however often reported),
fenced, copied to the history row, refused after the lock was lost; log lines kept per
execution, capped, batched, never failing the job; the clients' streams; the telemetry."""

from __future__ import annotations

import itertools
import logging
from datetime import datetime
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from dogs_core.domain.events import Event, ProgressWritten
from dogs_core.domain.log_lines import LogLine
from dogs_core.domain.progress import Progress
from dogs_core.domain.records import HistoryStatus
from dogs_core.errors import (
    InvalidIdError,
    InvalidProgressError,
    JobNotFoundError,
    LockLostError,
    MissingRoleError,
    StoreError,
)
from dogs_core.jobs import Jobs
from dogs_core.ports import REQUIRED_ROLES, Role
from dogs_core.runtime import JobContext, Workers
from dogs_core.runtime.plumbing.telemetry import Telemetry
from tests.runtime.conftest import Harness, RecordingStore, now

pytestmark = pytest.mark.anyio

Params = dict[str, Any] | None


class FollowedStore(RecordingStore):
    """Counts the following role's writes (and can fail the log lines')."""

    def __init__(self) -> None:
        super().__init__()
        self.progress_writes: list[tuple[float, Progress, datetime | None]] = []
        self.line_writes: list[int] = []
        self.lines_error: Exception | None = None

    async def write_progress(
        self, job_id: str, lock_id: str, progress: Progress, *, locked_until: datetime | None
    ) -> bool:
        self.progress_writes.append((now(), progress, locked_until))
        return await super().write_progress(job_id, lock_id, progress, locked_until=locked_until)

    async def write_log_lines(self, lines: Any) -> None:
        self.line_writes.append(len(lines))
        if self.lines_error is not None:
            raise self.lines_error
        await super().write_log_lines(lines)

    def lines(self, owner: str) -> list[LogLine]:
        return self.sync.read_log_lines(owner, limit=10_000)


class WithoutFollowing(RecordingStore):
    """A store written before the following role: it lists only the required roles."""

    @property
    def roles(self) -> frozenset[Role]:
        return REQUIRED_ROLES


def harness(jobs: Jobs) -> tuple[Harness, FollowedStore]:
    store = FollowedStore()
    return Harness(jobs, store=store), store


# -- progress -------------------------------------------------------------------------------------


async def test_progress_on_every_item_is_written_once_per_interval() -> None:
    jobs = Jobs()
    seen: list[Progress | None] = []

    @jobs.event
    async def crunch(params: Params, ctx: JobContext) -> str:
        for i in range(2_000):  # 2,000 items, 1 ms each: 2 s
            await anyio.sleep(0.001)
            await ctx.progress((i + 1) / 2_000, f"item {i + 1}", data={"i": i})
        return "done"

    h, store = harness(jobs)
    job_id = (await h.client.schedule(crunch)).id  # type: ignore[union-attr]
    async with h.workers(progress_interval=0.5) as workers:
        await anyio.sleep(1.2)
        record = h.store.record(job_id)
        seen.append(None if record is None else record.progress)
        await anyio.sleep(5)
        await workers.stop()
    writes = store.progress_writes
    assert 3 <= len(writes) <= 2 / 0.5 + 1, [t for t, _, _ in writes]
    starts = [t for t, _, _ in writes]
    assert all(b - a >= 0.5 - 1e-9 for a, b in itertools.pairwise(starts)), starts
    assert all(until is not None for _, _, until in writes), "each write renews the lock"
    (mid,) = seen
    assert mid is not None
    assert 0 < (mid.fraction or 0) < 1
    (row,) = store.history("crunch")
    assert row.status is HistoryStatus.SUCCESS
    assert row.progress is not None
    assert (row.progress.fraction, row.progress.message, row.progress.data) == (
        1.0,
        "item 2000",
        {"i": 1_999},
    ), "the history row keeps the last report, written or not"


async def test_progress_after_the_lock_was_lost_raises_lock_lost() -> None:
    jobs = Jobs()
    raised: list[LockLostError] = []

    @jobs.event(cancel_on_stale=False, lock_time=30)
    async def slow(params: Params, ctx: JobContext) -> None:
        try:
            for i in range(100):
                await ctx.progress(i / 100)
                await anyio.sleep(0.5)
        except LockLostError as error:
            raised.append(error)

    h, store = harness(jobs)
    job_id = (await h.client.schedule(slow)).id  # type: ignore[union-attr]
    async with h.workers(progress_interval=1) as workers:
        await anyio.sleep(2.2)
        # Every lock released (as ``dogs unlock-all`` does): the next fenced progress write
        # matches nothing, the execution is stale, and the handler's next report is refused.
        await h.client.unlock_all()
        await anyio.sleep(5)
        await workers.stop()
    (error,) = raised
    assert error.job_id == job_id
    assert "lost its lock" in str(error)
    assert HistoryStatus.STALE in [row.status for row in store.job_history(job_id)]


async def test_a_stale_execution_cannot_write_over_its_successor() -> None:
    jobs = Jobs()
    outcomes: dict[int, str] = {}

    @jobs.event(cancel_on_stale=False, lock_time=5)
    async def racer(params: Params, ctx: JobContext) -> None:
        await ctx.progress(0.1, f"try {ctx.tries} started")
        if ctx.tries == 1:
            await anyio.sleep(8)  # past its lock: another execution claims the job
            try:
                await ctx.progress(0.9, "try 1 late")
                outcomes[1] = "written"
            except LockLostError:
                outcomes[1] = "refused"
            return
        await anyio.sleep(10)
        outcomes[2] = "done"

    h, store = harness(jobs)
    job_id = (await h.client.schedule(racer)).id  # type: ignore[union-attr]
    async with h.workers(progress_interval=0.1, default_lock_time=5) as workers:
        await anyio.sleep(9)
        record = h.store.record(job_id)
        assert record is not None
        assert record.progress is not None
        assert record.progress.message == "try 2 started"
        await anyio.sleep(10)
        await workers.stop()
    assert outcomes == {1: "refused", 2: "done"}
    assert all(p.message != "try 1 late" for _, p, _ in store.progress_writes)


async def test_a_report_waiting_for_its_flush_is_dropped_when_the_lock_is_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    jobs = Jobs()

    @jobs.event(cancel_on_stale=False, lock_time=2, max_tries=1)
    async def silent(params: Params, ctx: JobContext) -> None:
        await ctx.progress(0.1, "first")  # written at once, with the lock
        await anyio.sleep(0.1)
        await ctx.progress(0.2, "second")  # waits for the flush, 10 s later
        await anyio.sleep(12)  # the lock runs out at 2 s: stale before the flush

    h, store = harness(jobs)
    job_id = (await h.client.schedule(silent)).id  # type: ignore[union-attr]
    with caplog.at_level(logging.ERROR):
        async with h.workers(progress_interval=10, default_lock_time=2) as workers:
            await anyio.sleep(15)
            await workers.stop()
    assert [p.message for _, p, _ in store.progress_writes] == ["first"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    (row,) = store.job_history(job_id)
    assert row.status is HistoryStatus.STALE
    assert row.progress is not None
    assert row.progress.message == "second", "the latest report, not written, is in the row"


async def test_bad_progress_raises_and_writes_nothing() -> None:
    jobs = Jobs()
    errors: list[str] = []

    @jobs.event
    async def bad(params: Params, ctx: JobContext) -> None:
        for fraction, message, data in ((2, None, None), (None, None, None), (0.5, 7, None)):
            try:
                await ctx.progress(fraction, message, data=data)  # type: ignore[arg-type]
            except InvalidProgressError as error:
                errors.append(error.field)
        await anyio.sleep(2)

    h, store = harness(jobs)
    await h.client.schedule(bad)
    async with h.workers() as workers:
        await anyio.sleep(3)
        await workers.stop()
    assert errors == ["fraction", "fraction", "message"]
    assert store.progress_writes == []
    (row,) = store.history("bad")
    assert row.progress is None


async def test_a_cleared_watchdog_still_writes_progress_alone() -> None:
    jobs = Jobs()

    @jobs.event
    async def managed(params: Params, ctx: JobContext) -> None:
        await anyio.lowlevel.checkpoint()
        ctx.clear_stale_timeout()
        await ctx.progress(0.5, "half")
        await anyio.sleep(1)

    h, store = harness(jobs)
    await h.client.schedule(managed)
    async with h.workers() as workers:
        await anyio.sleep(2)
        await workers.stop()
    ((_, progress, until),) = store.progress_writes
    assert (progress.message, until) == ("half", None)


async def test_progress_rides_the_heartbeat_and_reaches_telemetry() -> None:
    jobs = Jobs()
    events: list[Event] = []
    telemetry = Telemetry()
    telemetry.subscribe(events.append, ProgressWritten)

    @jobs.event(heartbeat=True, lock_time=3)
    async def beat(params: Params, ctx: JobContext) -> None:
        await ctx.progress(0.1, "start")
        await anyio.sleep(2.5)
        await ctx.progress(0.6, "later")  # a heartbeat (every 1 s) carries it
        await anyio.sleep(0.2)

    h, store = harness(jobs)
    await h.client.schedule(beat)
    workers = Workers(
        store, jobs, clock=h.clock, poll_interval=1, watch_changes=False, telemetry=telemetry
    )
    async with workers:
        await anyio.sleep(4)
        await workers.stop()
    messages = [p.message for _, p, _ in store.progress_writes]
    assert messages == ["start", "later"]
    assert [e.progress.message for e in events if isinstance(e, ProgressWritten)] == messages


async def test_a_store_without_the_role_is_named() -> None:
    jobs = Jobs()
    raised: list[Exception] = []

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> None:
        try:
            await ctx.progress(0.5)
        except MissingRoleError as error:
            raised.append(error)

    store = WithoutFollowing()
    h = Harness(jobs, store=store)
    await h.client.schedule(job)
    async with h.workers() as workers:
        await anyio.sleep(2)
        await workers.stop()
    (error,) = raised
    assert "ctx.progress needs the store's 'following' role" in str(error)

    logged = Jobs()

    @logged.event(store_logs=True)
    async def keeps(params: Params, ctx: JobContext) -> None:
        return None

    with pytest.raises(MissingRoleError, match=r"store_logs \(of keeps\) needs .*'following'"):
        Workers(store, logged)
    with pytest.raises(MissingRoleError, match="get_logs needs the store's 'following' role"):
        await h.client.get_logs("0190c2c4-0000-7000-8000-000000000000")


# -- log lines ----------------------------------------------------------------------------------


async def test_lines_are_kept_at_the_level_capped_and_batched() -> None:
    jobs = Jobs()

    @jobs.event(store_logs="info", max_log_lines=30)
    async def chatty(params: Params, ctx: JobContext) -> None:
        for i in range(40):
            ctx.logger.debug("noise %d", i)  # below the level: not kept
            ctx.logger.info("line %d of %s", i, "chatty")
        try:
            raise ValueError("bad row")
        except ValueError:
            ctx.logger.exception("an error")  # past the cap: counted as dropped

    h, store = harness(jobs)
    job_id = (await h.client.schedule(chatty)).id  # type: ignore[union-attr]
    async with h.workers() as workers:
        await anyio.sleep(2)
        await workers.stop()
    lines = store.lines(job_id)
    assert [line.message for line in lines[:2]] == ["line 0 of chatty", "line 1 of chatty"]
    assert len(lines) == 31
    assert lines[-1].message == "11 lines dropped (max_log_lines=30 per execution)"
    assert lines[-1].level_name == "WARNING"
    assert [line.seq for line in lines] == list(range(31))
    assert [line.id for line in lines] == sorted(line.id for line in lines)
    assert sum(store.line_writes) == 31
    assert len(store.line_writes) <= 2, "in batches"
    (row,) = store.history("chatty")
    assert {line.execution_id for line in lines} == {row.execution_id}
    assert lines[0].expires_at == lines[0].time + jobs.get("chatty").save_executions_for


async def test_lines_of_every_execution_and_their_exceptions() -> None:
    jobs = Jobs()

    @jobs.event(store_logs=True)
    async def flaky(params: Params, ctx: JobContext) -> None:
        ctx.logger.info("try %d", ctx.tries)
        if ctx.tries == 1:
            try:
                raise ValueError("first try fails")
            except ValueError:
                ctx.logger.exception("failing")
                raise

    h, store = harness(jobs)
    job_id = (await h.client.schedule(flaky)).id  # type: ignore[union-attr]
    async with h.workers() as workers:
        await anyio.sleep(10)
        await workers.stop()
    lines = await h.client.get_logs(job_id)
    assert [line.message for line in lines] == ["try 1", "failing", "try 2"]
    assert lines[1].exception is not None
    assert "ValueError: first try fails" in lines[1].exception
    first, second = store.job_history(job_id)
    assert [line.message for line in await h.client.get_logs(second.execution_id)] == ["try 2"]
    assert await h.client.get_logs(job_id, after=lines[0].id, limit=1) == [lines[1]]
    with pytest.raises(JobNotFoundError):
        await h.client.get_logs("0190c2c4-0000-7000-8000-000000000000")
    with pytest.raises(InvalidIdError, match="id='no-such-id'"):
        await h.client.get_logs("no-such-id")
    with pytest.raises(InvalidIdError, match="after='garbage': not a log line id"):
        await h.client.get_logs(job_id, after="garbage")
    assert await h.client.get_logs(job_id.upper()) == lines
    assert await h.client.get_logs(first.execution_id, after=lines[-1].id) == []


async def test_a_failing_line_write_never_fails_the_job(caplog: pytest.LogCaptureFixture) -> None:
    jobs = Jobs()

    @jobs.event(store_logs=True)
    async def logs_a_lot(params: Params, ctx: JobContext) -> str:
        for i in range(3):
            ctx.logger.info("line %d", i)
            await anyio.sleep(1)
        return "fine"

    h, store = harness(jobs)
    store.lines_error = StoreError("disk full")
    job_id = (await h.client.schedule(logs_a_lot)).id  # type: ignore[union-attr]
    with caplog.at_level(logging.WARNING, logger="dogs.logs"):
        async with h.workers() as workers:
            await anyio.sleep(5)
            await workers.stop()
    (row,) = store.history("logs_a_lot")
    assert (row.status, row.result) == (HistoryStatus.SUCCESS, "fine")
    assert store.lines(job_id) == []
    assert len(store.line_writes) >= 2, "each batch was tried"
    warnings = [r for r in caplog.records if r.name == "dogs.logs"]
    assert len(warnings) == 1, "logged once, then counted"
    assert "disk full" in warnings[0].getMessage()


async def test_a_batch_in_flight_when_the_workers_stop_is_written_by_the_final_flush() -> None:
    """The writer is cancelled at the stop, maybe in the middle of a write: that batch is not
    lost (it is written again; a line's id makes a second write of a kept line a no-op)."""
    jobs = Jobs()

    @jobs.event(store_logs=True)
    async def brief(params: Params, ctx: JobContext) -> None:
        for i in range(3):
            ctx.logger.info("line %d", i)

    class SlowFirstWrite(FollowedStore):
        async def write_log_lines(self, lines: Any) -> None:
            if not self.line_writes:
                self.line_writes.append(len(lines))
                await anyio.sleep(3600)  # still writing when the workers stop
            await super().write_log_lines(lines)

    store = SlowFirstWrite()
    h = Harness(jobs, store=store)
    job_id = (await h.client.schedule(brief)).id  # type: ignore[union-attr]
    async with h.workers() as workers:
        await anyio.sleep(2)
        assert store.line_writes == [3], "the first write is in flight"
        await workers.stop()
    assert [line.message for line in store.lines(job_id)] == ["line 0", "line 1", "line 2"]
    assert store.line_writes == [3, 3]


async def test_lines_the_final_flush_cannot_write_in_time_are_counted_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    jobs = Jobs()

    @jobs.event(store_logs=True)
    async def brief(params: Params, ctx: JobContext) -> None:
        ctx.logger.info("a line")

    class HangingWrites(FollowedStore):
        async def write_log_lines(self, lines: Any) -> None:
            self.line_writes.append(len(lines))
            await anyio.sleep(3600)

    store = HangingWrites()
    h = Harness(jobs, store=store)
    await h.client.schedule(brief)
    with caplog.at_level(logging.WARNING, logger="dogs.logs"):
        async with h.workers() as workers:
            await anyio.sleep(2)
            await workers.stop()
    shipper = workers._services.logs
    assert shipper is not None
    assert (shipper.written, shipper.lost) == (0, 1)
    (warning,) = [r for r in caplog.records if r.name == "dogs.logs"]
    assert "the final write did not end within 10 s" in warning.getMessage()


async def test_lines_keep_the_trace_id() -> None:
    jobs = Jobs()

    @jobs.event(store_logs=True)
    async def traced(params: Params, ctx: JobContext) -> None:
        ctx.logger.info("hello")

    telemetry = Telemetry()
    telemetry.trace_id_source = lambda: "4bf92f3577b34da6a3ce929d0e0e4736"
    h, store = harness(jobs)
    job_id = (await h.client.schedule(traced)).id  # type: ignore[union-attr]
    workers = Workers(
        store, jobs, clock=h.clock, poll_interval=1, watch_changes=False, telemetry=telemetry
    )
    async with workers:
        await anyio.sleep(2)
        await workers.stop()
    (line,) = store.lines(job_id)
    assert line.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"


async def test_without_tracing_lines_keep_the_scheduling_trace() -> None:
    jobs = Jobs()

    @jobs.event(store_logs=True)
    async def traced(params: Params, ctx: JobContext) -> None:
        ctx.logger.info("hello")

    scheduling = Telemetry()
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    scheduling.subscribe(
        lambda event: getattr(event, "trace_context", {}).update(traceparent=parent)
    )
    h, store = harness(jobs)
    client = h.client
    client.telemetry = scheduling
    job_id = (await client.schedule(traced)).id  # type: ignore[union-attr]
    async with h.workers() as workers:
        await anyio.sleep(2)
        await workers.stop()
    (line,) = store.lines(job_id)
    assert line.trace_id == "0af7651916cd43dd8448eb211c80319c"


# -- the clients' streams -----------------------------------------------------------------------


async def test_watch_progress_and_follow_logs_end_with_the_job() -> None:
    jobs = Jobs()

    @jobs.event(store_logs=True)
    async def steps(params: Params, ctx: JobContext) -> None:
        for i in range(1, 5):
            await ctx.progress(i / 4, f"step {i}")
            ctx.logger.info("step %d", i)
            await anyio.sleep(2)

    h, _ = harness(jobs)
    job_id = (await h.client.schedule(steps)).id  # type: ignore[union-attr]
    updates: list[str | None] = []
    lines: list[str] = []

    async def watch() -> None:
        async for update in h.client.watch_progress(job_id, poll_interval=0.5):
            updates.append(update.message)

    async def follow() -> None:
        async for line in h.client.follow_logs(job_id, poll_interval=0.5):
            lines.append(line.message)

    async with h.workers(progress_interval=1) as workers:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                group.start_soon(watch)
                group.start_soon(follow)
        await workers.stop()
    assert updates == ["step 1", "step 2", "step 3", "step 4"]
    assert lines == ["step 1", "step 2", "step 3", "step 4"]
    with pytest.raises(JobNotFoundError):
        async for _ in h.client.watch_progress("0190c2c4-0000-7000-8000-000000000000"):
            pass
