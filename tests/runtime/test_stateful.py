"""Generated scenarios: several workers instances share one in-memory store while jobs are
scheduled, fail, hang, renew their locks, instances crash or stop, and the clock jumps.

Each example is a list of actions run under trio's ``MockClock`` (``anyio.run`` inside the
test; trio's scheduling order is seeded by hypothesis, so examples replay and shrink). The
invariants checked throughout and at the end:

* **One live owner.** An execution is *live* while its handler runs and the runtime has not
  declared it stale; it *holds* the job while its stored lock (``lockedUntil`` as written by
  its claim or its last successful renewal) is in the future. At no time do two live
  executions hold the same job. And a live execution never outlives its stored lock: once
  ``lockedUntil`` has passed it must already be stale (cancelled, or a detached zombie with
  ``cancel_on_stale=False``). Two exemptions, both by design: the very instant of a clock jump,
  when the due watchdogs and the claims they race with all run at once; and a renewal write
  that started before the lock expired (or was held up by a jump) and is still in flight (the
  renewal machine keeps the watchdog at that write's deadline and lets its outcome decide: a
  lost lock makes the execution stale when the write returns).
* **Tries are counted at every claim**: each claim of an event record returns
  ``tries`` = the number of times that record has been claimed.
  An operator's ``retry_now`` or ``reschedule`` of a failed record and a handler's ``Snooze``
  set the stored tries back; the count follows them.
* **Nothing is lost.** Given time without crashes, every scheduled event job ends in exactly one
  final state: deleted after exactly one successful (owning) execution, deleted by an
  operator's ``cancel`` with a ``cancelled`` row and no successful one (or with the one
  success row of a handler that had returned before the cancel: that row is written before
  the completion and wins), or marked
  ``maxTriesReached`` with no successful execution; nothing is left locked.

Operators act meanwhile: ``cancel``, ``retry_now`` and ``reschedule`` of a scheduled job, at any
moment (also while it runs, while it is being claimed, during a renewal).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import anyio
import anyio.abc
import anyio.lowlevel
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dogs_core import AlreadyFinished, Cancelled, NotFound, Rescheduled, Running, Snooze
from dogs_core.domain.controls import RateLimit, rate_window
from dogs_core.domain.events import Event, ExecutionEnded, JobStarted
from dogs_core.domain.outcome import Defer, Reschedule
from dogs_core.domain.records import (
    ClaimedJob,
    ClaimRequest,
    HistoryStatus,
    JobRecord,
    JobStatus,
    JobType,
    Scheduled,
)
from dogs_core.domain.settle import Settlement
from dogs_core.domain.steering import JobChange
from dogs_core.jobs import Jobs
from dogs_core.runtime import DogsClient, JobContext, LoopClock, Workers
from dogs_core.runtime.execution.execution import Execution
from dogs_core.runtime.plumbing.telemetry import Telemetry
from dogs_testing.memory import SyncInMemoryJobStore
from tests.runtime.conftest import START, RecordingStore, assert_nothing_locked

Step = Literal["ok", "fail", "hang", "long", "extend", "snooze"]
Kind = Literal["plain", "zombie", "beat", "capped", "limited", "rated"]
KINDS: tuple[Kind, ...] = ("plain", "zombie", "beat", "capped", "limited", "rated")
GLOBAL_LIMIT = 2
RATE = RateLimit(2, 15)

LOCK_TIME = 10
POLL = 5
MAX_TRIES = 4
SETTLE = 300


@dataclass(frozen=True)
class Schedule:
    kind: Kind
    run_in: int
    plan: tuple[Step, ...]
    key: str | None


@dataclass(frozen=True)
class Sleep:
    seconds: int


@dataclass(frozen=True)
class Crash:
    instance: int


@dataclass(frozen=True)
class Stop:
    instance: int
    grace: int | None


@dataclass(frozen=True)
class Jump:
    seconds: int


@dataclass(frozen=True)
class Cancel:
    job: int


@dataclass(frozen=True)
class Pause:
    kind: Kind | None  # None: every job
    resume: bool


@dataclass(frozen=True)
class RetryNow:
    job: int


@dataclass(frozen=True)
class Move:
    job: int
    run_in: int


Action = Schedule | Sleep | Crash | Stop | Jump | Cancel | RetryNow | Move | Pause


@dataclass(frozen=True)
class Config:
    instances: int
    workers_count: int
    n_partitions: int
    claim_delay: int = 0
    """Latency of the first instance's claims (the others have none)."""
    extend_delay: int = 0
    """Latency of the first instance's lock writes."""


# -- the tracker: what the handlers and the store wrapper report ---------------------------------


class Violation(AssertionError):
    pass


@dataclass
class Tracker:
    clock: LoopClock
    deadlines: dict[str, datetime] = field(default_factory=dict)  # lock id -> stored lockedUntil
    running: dict[str, dict[str, JobContext]] = field(default_factory=dict)  # job id -> live
    renewing: dict[str, tuple[datetime, float]] = field(default_factory=dict)  # write starts
    claims: Counter[str] = field(default_factory=Counter)
    handler_successes: Counter[str] = field(default_factory=Counter)  # owner or zombie
    snoozed: set[str] = field(default_factory=set)  # jobs whose handler snoozed once
    rated_starts: list[datetime] = field(default_factory=list)  # starts of "rated" handlers
    cancelled: dict[str, datetime] = field(default_factory=dict)  # job id -> when cancelled
    jump_instant: float | None = None

    def check(self) -> None:
        now = self.clock.now()
        exempt = self.jump_instant == anyio.current_time()
        for job_id, executions in self.running.items():
            live = [ctx for ctx in executions.values() if not _stale(ctx)]
            holders = [ctx for ctx in live if self.deadlines[ctx.execution_id] > now]
            if len(holders) > 1:
                raise Violation(f"job {job_id}: {len(holders)} live executions hold the lock")
            for ctx in live:
                deadline = self.deadlines[ctx.execution_id]
                renewal = self.renewing.get(ctx.execution_id)
                if renewal is not None and (
                    renewal[0] < deadline or renewal[1] == self.jump_instant
                ):
                    continue
                if deadline < now and not exempt:
                    raise Violation(
                        f"job {job_id}: execution {ctx.execution_id} (try {ctx.tries}) is live "
                        f"past its lock {self.deadlines[ctx.execution_id]} at {now}"
                    )

    def enter(self, ctx: JobContext) -> None:
        self.running.setdefault(ctx.job_id, {})[ctx.execution_id] = ctx
        if ctx.job_name == "rated":
            self.rated_starts.append(self.clock.now())
        self.check()
        self.check_limited()

    def check_limited(self) -> None:
        """Never more than GLOBAL_LIMIT live executions of "limited" hold their lock, across
        every instance (the one-live-owner rule covers the rest)."""
        now = self.clock.now()
        holders = [
            ctx
            for executions in self.running.values()
            for ctx in executions.values()
            if ctx.job_name == "limited"
            and not _stale(ctx)
            and self.deadlines[ctx.execution_id] > now
        ]
        if len(holders) > GLOBAL_LIMIT:
            raise Violation(f"{len(holders)} executions of the limited job run at once")

    def leave(self, ctx: JobContext) -> None:
        executions = self.running.get(ctx.job_id, {})
        executions.pop(ctx.execution_id, None)
        if not executions:
            self.running.pop(ctx.job_id, None)


def _stale(ctx: JobContext) -> bool:
    # "Declared stale by the runtime": the execution's own flag (set synchronously when the
    # watchdog fires, a renewal loses the lock, or a fenced write matches nothing).
    execution = ctx._execution
    assert isinstance(execution, Execution)
    return execution.stale


class TrackingStore(RecordingStore):
    """Reports every lock the runtime obtains to the tracker, and checks tries at each claim."""

    def __init__(self, tracker: Tracker, *, sync: SyncInMemoryJobStore | None = None) -> None:
        super().__init__(sync=sync)
        self.tracker = tracker

    async def claim(self, request: ClaimRequest) -> ClaimedJob | None:
        job = await super().claim(request)
        if job is not None:
            self._claimed(job, request.locked_until)
        return job

    async def claim_many(self, requests: Sequence[ClaimRequest]) -> list[ClaimedJob]:
        jobs = await super().claim_many(requests)
        for job in jobs:
            self._claimed(job, requests[0].locked_until)  # the requests agree on it
        return jobs

    def _claimed(self, job: ClaimedJob, locked_until: datetime) -> None:
        self.tracker.deadlines[job.execution_id] = locked_until
        if job.type is JobType.EVENT:
            self.tracker.claims[job.job_id] += 1
            count = self.tracker.claims[job.job_id]
            assert job.tries == count, f"claim {count} of {job.job_id} returned tries {job.tries}"

    async def extend_lock(self, job_id: str, lock_id: str, locked_until: datetime) -> bool:
        self.tracker.renewing[lock_id] = (self.tracker.clock.now(), anyio.current_time())
        try:
            matched = await super().extend_lock(job_id, lock_id, locked_until)
        finally:
            self.tracker.renewing.pop(lock_id, None)
        if matched:
            self.tracker.deadlines[lock_id] = locked_until
        return matched

    async def settle_many(self, settlements: Sequence[Settlement]) -> list[bool]:
        verdicts = await super().settle_many(settlements)
        for settlement, matched in zip(settlements, verdicts, strict=True):
            tries = getattr(settlement.command, "tries", None)
            if matched and isinstance(settlement.command, Reschedule | Defer) and tries is not None:
                self.tracker.claims[settlement.job_id] = tries  # a snooze gave its try back
        return verdicts

    async def modify_record(
        self, job_id: str, change: JobChange, *, now: datetime
    ) -> JobRecord | None:
        record = await super().modify_record(job_id, change, now=now)
        if record is not None and change.tries is not None:
            self.tracker.claims[job_id] = change.tries  # a failed job revived
        return record


# -- the jobs -------------------------------------------------------------------------------------


def build_jobs(tracker: Tracker) -> Jobs:
    jobs = Jobs()

    async def body(params: dict[str, Any] | None, ctx: JobContext, kind: Kind) -> str:
        assert params is not None
        plan: list[Step] = params["plan"]
        step: Step = plan[ctx.tries - 1] if ctx.tries <= len(plan) else "ok"
        if kind == "beat" and step == "hang":
            step = "long"  # a heartbeat would keep a hanging job alive forever
        if step == "snooze":
            if ctx.job_id in tracker.snoozed:
                step = "ok"  # the same try comes back after a snooze: snooze once per job
            else:
                tracker.snoozed.add(ctx.job_id)
                raise Snooze(7)
        tracker.enter(ctx)
        try:
            if step == "extend":
                await ctx.extend_lock_time(3 * LOCK_TIME)
                tracker.check()
            if step == "hang":
                await anyio.sleep_forever()
            await anyio.sleep({"ok": 2, "fail": 1, "long": 15, "extend": 15}[step])
            tracker.check()
            if step == "fail":
                raise ValueError(f"planned failure on try {ctx.tries}")
            tracker.handler_successes[ctx.job_id] += 1
            return "ok"
        finally:
            tracker.leave(ctx)

    @jobs.event
    async def plain(params: dict[str, Any] | None, ctx: JobContext) -> str:
        return await body(params, ctx, "plain")

    @jobs.event(cancel_on_stale=False, lock_time=6)
    async def zombie(params: dict[str, Any] | None, ctx: JobContext) -> str:
        return await body(params, ctx, "zombie")

    @jobs.event(heartbeat=True, lock_time=6)
    async def beat(params: dict[str, Any] | None, ctx: JobContext) -> str:
        return await body(params, ctx, "beat")

    @jobs.event(max_parallel_executions_per_server=1)
    async def capped(params: dict[str, Any] | None, ctx: JobContext) -> str:
        return await body(params, ctx, "capped")

    @jobs.event(global_concurrency=GLOBAL_LIMIT)
    async def limited(params: dict[str, Any] | None, ctx: JobContext) -> str:
        return await body(params, ctx, "limited")

    @jobs.event(rate_limit=RATE)
    async def rated(params: dict[str, Any] | None, ctx: JobContext) -> str:
        return await body(params, ctx, "rated")

    @jobs.recurrent(run_every=20)
    async def ticker(ctx: JobContext) -> None:
        await anyio.sleep(1)

    return jobs


# -- running one scenario -------------------------------------------------------------------------


class Instance:
    """One workers "process": it can crash (cancelled without stop) and be restarted."""

    def __init__(self, index: int, make: Callable[[int, int], Workers]) -> None:
        self.index = index
        self.make = make
        self.generation = 0
        self.workers: Workers | None = None
        self.scope: anyio.CancelScope | None = None

    async def start(self, tg: anyio.abc.TaskGroup) -> None:
        self.generation += 1
        self.workers = self.make(self.index, self.index * 1000 + self.generation)
        await tg.start(self._run, self.workers)

    async def _run(self, workers: Workers, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        with anyio.CancelScope() as scope:
            self.scope = scope
            async with workers:
                task_status.started()
                await workers.serve()

    def crash(self) -> None:
        assert self.scope is not None
        self.scope.cancel()


def run_scenario(config: Config, actions: list[Action]) -> None:
    mock_clock = trio.testing.MockClock(autojump_threshold=0)

    async def main() -> None:
        clock = LoopClock(START)
        tracker = Tracker(clock)
        store = TrackingStore(tracker)
        jobs = build_jobs(tracker)
        client = DogsClient(
            store, jobs, n_partitions=config.n_partitions, clock=clock, rng=random.Random(7)
        )

        lagging = TrackingStore(tracker, sync=store.sync)
        lagging.hooks.claim_delay = config.claim_delay
        lagging.hooks.extend_delay = config.extend_delay

        hub, events = Telemetry(), Counter[tuple[str, str]]()
        hub.subscribe(lambda event: events.update([_event_key(event)]), JobStarted, ExecutionEnded)

        def make(index: int, seed: int) -> Workers:
            return Workers(
                lagging if index == 0 else store,
                jobs,
                telemetry=hub,
                clock=clock,
                rng=random.Random(seed),
                workers_count=config.workers_count,
                n_partitions=config.n_partitions,
                poll_interval=POLL,
                default_lock_time=LOCK_TIME,
                max_tries=MAX_TRIES,
            )

        scheduled: list[str] = []
        async with anyio.create_task_group() as tg:

            async def monitor() -> None:
                while True:
                    await anyio.sleep(1)
                    tracker.check()
                    tracker.check_limited()

            tg.start_soon(monitor)
            instances = [Instance(i, make) for i in range(config.instances)]
            for instance in instances:
                await instance.start(tg)
            for action in actions:
                if isinstance(action, Schedule):
                    outcome = await client.schedule(
                        action.kind,
                        {"plan": list(action.plan)},
                        run_in=action.run_in,
                        unique_key=action.key,
                    )
                    if isinstance(outcome, Scheduled):
                        scheduled.append(outcome.id)
                elif isinstance(action, Sleep):
                    await anyio.sleep(action.seconds)
                elif isinstance(action, Jump):
                    mock_clock.jump(action.seconds)
                    tracker.jump_instant = anyio.current_time()
                    await anyio.lowlevel.checkpoint()
                elif isinstance(action, Crash):
                    instance = instances[action.instance % len(instances)]
                    instance.crash()
                    await anyio.lowlevel.checkpoint()
                    await instance.start(tg)
                elif isinstance(action, Stop):
                    instance = instances[action.instance % len(instances)]
                    assert instance.workers is not None
                    await instance.workers.stop(action.grace)
                    await instance.start(tg)
                elif isinstance(action, Pause):
                    if action.resume:
                        await client.resume(action.kind)
                    else:
                        await client.pause(action.kind)
                elif scheduled:
                    await operate(client, tracker, scheduled, action)
            for paused in await client.paused():  # let everything finish
                await client.resume(None if paused == "*" else paused)

            def settled() -> bool:
                for job_id in scheduled:
                    record = store.record(job_id)
                    if record is not None and record.status is not JobStatus.MAX_TRIES_REACHED:
                        return False
                return True

            for _ in range(SETTLE // 10):  # give every job time to finish, without crashes
                await anyio.sleep(10)
                if settled():
                    break
            tracker.check()
            for instance in instances:
                assert instance.workers is not None
                await instance.workers.stop()
            tg.cancel_scope.cancel()

        end = clock.now()
        assert_nothing_locked(store, at=end)
        windows = Counter(rate_window(start, RATE.period)[0] for start in tracker.rated_starts)
        assert max(windows.values(), default=0) <= RATE.limit, windows
        for job_id in scheduled:
            record = store.record(job_id)
            name_rows = [
                row for name in KINDS for row in store.history(name) if row.job_id == job_id
            ]
            successes = [row for row in name_rows if row.status is HistoryStatus.SUCCESS]
            if record is None and job_id in tracker.cancelled:
                # A handler that returned before the cancel wrote its success row first (the
                # row goes before the completion) and that row wins over the cancelled one.
                cancelled_at = tracker.cancelled[job_id]
                assert all(row.ended_at <= cancelled_at for row in successes), (
                    f"{job_id} was cancelled and succeeded after it"
                )
                statuses = [row.status for row in name_rows]
                # Likewise a handler that snoozed or failed just before the cancel: its row
                # (written before its reschedule, which the cancel then fenced off) wins.
                ended_first = any(row.ended_at <= cancelled_at for row in name_rows)
                assert HistoryStatus.CANCELLED in statuses or ended_first, statuses
            elif record is None:
                assert len(successes) == 1, f"{job_id} was deleted after {len(successes)} successes"
                assert tracker.handler_successes[job_id] >= 1
            else:
                assert record.status is JobStatus.MAX_TRIES_REACHED, f"{job_id} never finished"
                assert successes == []
                assert record.tries == tracker.claims[job_id]
                assert record.lock_id is None
        check_events(events, store)
        assert not tracker.running or all(
            _stale(ctx) for executions in tracker.running.values() for ctx in executions.values()
        )

    anyio.run(main, backend="trio", backend_options={"clock": mock_clock})


def _event_key(event: Event) -> tuple[str, str]:
    assert isinstance(event, JobStarted | ExecutionEnded)
    return event.job.execution_id, "start" if isinstance(event, JobStarted) else event.outcome


def check_events(events: Counter[tuple[str, str]], store: TrackingStore) -> None:
    """Telemetry agrees with what happened: an execution ends at most once and only after it
    started, and every success row has its succeeded event."""
    started = {execution for (execution, what), n in events.items() if what == "start"}
    ended: Counter[str] = Counter()
    for (execution, what), count in events.items():
        assert count == 1, f"execution {execution}: {what} {count} times"
        if what != "start":
            ended[execution] += 1
            assert execution in started, f"execution {execution} ended ({what}) unstarted"
    assert max(ended.values(), default=1) == 1, ended.most_common(1)
    for name in KINDS:
        for row in store.history(name):
            if row.status is HistoryStatus.SUCCESS:
                assert (row.execution_id, "succeeded") in events, row


async def operate(
    client: DogsClient, tracker: Tracker, scheduled: list[str], action: Cancel | RetryNow | Move
) -> None:
    """An operator's action on one of the scheduled jobs."""
    job_id = scheduled[action.job % len(scheduled)]
    if isinstance(action, Cancel):
        outcome = await client.cancel(job_id)
        if isinstance(outcome, Cancelled):
            tracker.cancelled.setdefault(job_id, tracker.clock.now())
        else:
            assert isinstance(outcome, NotFound | AlreadyFinished), outcome
    elif isinstance(action, RetryNow):
        moved = await client.retry_now(job_id)
        assert isinstance(moved, Rescheduled | Running | NotFound), moved
    else:
        moved = await client.reschedule(job_id, run_in=action.run_in)
        assert isinstance(moved, Rescheduled | Running | NotFound), moved


# -- strategies ---------------------------------------------------------------------------------

steps = st.sampled_from(["ok", "fail", "hang", "long", "extend", "snooze"])
schedules = st.builds(
    Schedule,
    kind=st.sampled_from(KINDS),
    run_in=st.integers(0, 60),
    plan=st.lists(steps, max_size=5).map(tuple),
    key=st.none() | st.sampled_from(["k1", "k2"]),
)
actions = st.one_of(
    schedules,
    schedules,
    st.builds(Sleep, st.integers(1, 40)),
    st.builds(Crash, st.integers(0, 2)),
    st.builds(Stop, st.integers(0, 2), st.none() | st.integers(0, 8)),
    st.builds(Jump, st.integers(1, 30)),
    st.builds(Cancel, st.integers(0, 9)),
    st.builds(Pause, st.none() | st.sampled_from(KINDS), st.booleans()),
    st.builds(RetryNow, st.integers(0, 9)),
    st.builds(Move, st.integers(0, 9), st.integers(0, 30)),
)
configs = st.builds(
    Config,
    instances=st.integers(1, 3),
    workers_count=st.integers(1, 4),
    n_partitions=st.integers(1, 3),
    claim_delay=st.integers(0, 2),
    extend_delay=st.integers(0, 1),
)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(config=configs, scenario=st.lists(actions, min_size=1, max_size=25))
def test_generated_scenarios_keep_the_invariants(config: Config, scenario: list[Action]) -> None:
    run_scenario(config, scenario)


def test_a_crash_during_a_long_run_and_a_jump() -> None:
    """One hand-written scenario, so a regression shows up without hypothesis' search."""
    run_scenario(
        Config(instances=2, workers_count=2, n_partitions=2, claim_delay=1, extend_delay=1),
        [
            Schedule("plain", 0, ("long", "fail", "ok"), None),
            Schedule("zombie", 0, ("hang", "hang"), "k1"),
            Schedule("beat", 5, ("long",), None),
            Schedule("capped", 0, ("extend",), None),
            Schedule("capped", 0, ("ok",), None),
            Sleep(3),
            Crash(0),
            Sleep(4),
            Jump(25),
            Sleep(10),
            Stop(1, 2),
            Schedule("plain", 0, ("hang", "hang", "hang", "hang"), None),
            Sleep(30),
        ],
    )


def test_operators_cancel_retry_and_move_jobs_while_they_run() -> None:
    """The operator actions against running, hanging, failing and snoozing jobs."""
    run_scenario(
        Config(instances=2, workers_count=2, n_partitions=2, extend_delay=1),
        [
            Schedule("plain", 0, ("long", "ok"), None),
            Schedule("zombie", 0, ("hang", "hang"), None),
            Schedule("beat", 0, ("long",), None),
            Schedule("plain", 0, ("fail", "fail", "fail", "fail"), None),
            Schedule("capped", 0, ("snooze", "fail"), None),
            Schedule("plain", 30, ("ok",), None),
            Sleep(3),
            Cancel(0),
            Cancel(1),
            Cancel(2),
            Move(5, 2),
            Sleep(60),
            RetryNow(3),
            Cancel(4),
            Sleep(20),
        ],
    )
