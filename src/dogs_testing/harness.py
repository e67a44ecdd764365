"""Test your jobs without a database: a fake context, inline runs, and a harness of workers.

Three levels, from the smallest to the most complete:

:func:`run_job_inline` / :func:`run_job_inline_sync`
    Call one job's handler right here with a :class:`FakeJobContext`: no store, no workers.
    Params are validated exactly as ``schedule`` validates them, then loaded as the handler
    receives them. The :class:`InlineRun` tells what the handler returned or raised and, on a
    failure, what its ``on_error`` decided::

        run = await run_job_inline(send_welcome, {"user_id": 42})
        assert run.ok and run.result == "sent"
        run = await run_job_inline(send_welcome, {"user_id": -1}, tries=3)
        assert isinstance(run.on_error_decision, Discard)

:class:`FakeJobContext`
    The :class:`~dogs_core.runtime.execution.context.JobContext` surface, recording lock extensions
    and
    clears, so a test can check that a long job keeps its lock::

        run = await run_job_inline(import_catalog, {"url": "s3://bucket/big.csv"})
        assert len(run.context.lock_extensions) >= 10
        ctx = FakeJobContext(params={"n": 1}, tries=2)
        ctx.cancel()  # as at shutdown: ctx.raise_if_cancelled() now raises

:class:`JobsHarness`
    The real runtime (a :class:`~dogs_core.runtime.worker.workers.Workers` and a
    :class:`~dogs_core.runtime.client._async.client.DogsClient`) over an
    :class:`~dogs_testing.memory.InMemoryJobStore`, on a
    :class:`~dogs_core.runtime.plumbing.clock.LoopClock`. Meant for virtual time: with anyio's
    pytest
    plugin and trio's ``MockClock(autojump_threshold=0)``, a day of schedules takes
    milliseconds::

        @pytest.fixture
        def anyio_backend(dogs_virtual_clock):
            return ("trio", {"clock": dogs_virtual_clock})

        @pytest.mark.anyio
        async def test_welcome_is_sent() -> None:
            async with JobsHarness(jobs) as harness:
                await harness.schedule(send_welcome, {"user_id": 42}, run_in="5m")
                harness.assert_scheduled(send_welcome, {"user_id": 42})
                await harness.advance("5m")
                await harness.run_until_idle()
                harness.assert_ran(send_welcome, times=1, status="success")

:class:`ManualClock`
    A :class:`~dogs_core.ports.Clock` you move by hand, for code that takes a clock but runs no
    event loop (a scheduling client under test, a custom ``next_run`` function).

Thread-run (``def``) handlers and virtual time: the event loop counts a worker thread's work as
idle time, so with ``autojump_threshold=0`` the clock may jump while a sync handler runs (and
fire its lock watchdog). Test sync handlers with :func:`run_job_inline`, with a positive
autojump threshold, or with a real clock.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterable
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Final, Self

import anyio
import anyio.lowlevel

from dogs_core.domain.claimable import ClaimScope, is_claimable, is_failed
from dogs_core.domain.definitions import EventJobDefinition, JobDefinition, validate_params
from dogs_core.domain.records import (
    ClaimedJob,
    HistoryRecord,
    HistoryStatus,
    JobRecord,
    JobType,
    ScheduleOutcome,
)
from dogs_core.domain.schedules import parse_duration
from dogs_core.errors import InvalidOptionError, WorkersStateError
from dogs_core.jobs import Jobs
from dogs_core.ports import Clock
from dogs_core.runtime.client._async.client import DogsClient
from dogs_core.runtime.plumbing.clock import LoopClock
from dogs_core.runtime.plumbing.loop import Signal
from dogs_core.runtime.plumbing.settings import DurationLike, WorkerSettings
from dogs_core.runtime.worker.workers import Workers
from dogs_testing.fakes import DEFAULT_START, FakeJobContext, LockExtension, ManualClock, _aware
from dogs_testing.inline import InlineRun, run_job_inline, run_job_inline_sync
from dogs_testing.memory import InMemoryJobStore

__all__ = [
    "DEFAULT_START",
    "FakeJobContext",
    "HarnessFactory",
    "InlineRun",
    "JobsHarness",
    "LockExtension",
    "ManualClock",
    "run_job_inline",
    "run_job_inline_sync",
]

_HISTORY_LIMIT: Final = 1_000_000
_DEFAULT_POLL_INTERVAL: Final = timedelta(hours=1)
_RECHECK_SECONDS: Final = 600.0
_WAKE_MARGIN_SECONDS: Final = 1e-5


class _Any:
    def __repr__(self) -> str:
        return "ANY"


_ANY_PARAMS: Final[Any] = _Any()


# --------------------------------------------------------------------------------------------
# The harness


class JobsHarness:
    """Workers, a client and an in-memory store on one loop clock: the runtime under test.

    ::

        async with JobsHarness(jobs, workers_count=2) as harness:
            await harness.schedule(send_welcome, {"user_id": 42})
            await harness.run_until_idle()
            harness.assert_ran(send_welcome, times=1, status="success")
            assert harness.scheduled(send_welcome) == []

    ``jobs`` is a :class:`~dogs_core.jobs.Jobs` registry or an iterable of definitions. Worker
    options (``workers_count``, ``max_tries``, ...) are those of
    :class:`~dogs_core.runtime.plumbing.settings.WorkerSettings`. While :meth:`run_until_idle` or
    :meth:`advance` runs, the harness wakes the workers as soon as a job falls due (its time
    came, a lock expired, a retry is due), so jobs start on time and the cost of a long advance
    is the number of runs, not the length of time; ``poll_interval`` (default 1 h here, 3 s in
    production) is only a fallback: lower it to reproduce production polling.
    ``registry_enabled`` defaults to ``False`` here: the workers' registry beats every 10 s,
    which a harness advancing days of virtual time would pay for at every beat; pass ``True``
    to test what an operator sees of the fleet.

    ``store`` defaults to a new :class:`InMemoryJobStore` on the harness clock (so retention
    TTLs expire in virtual time); ``clock`` to a
    :class:`~dogs_core.runtime.plumbing.clock.LoopClock`
    starting at ``start``. Give two harnesses the same ``store`` and ``clock`` to test two
    worker instances sharing a database.

    The workers start on entry (``start_workers=False`` delays that until the first
    :meth:`run_until_idle`, :meth:`advance` or :meth:`start_workers`: handy to check what code
    under test scheduled before anything runs) and stop on exit, cancelling what still runs
    after ``exit_grace`` (0 by default) and releasing its lock.
    """

    def __init__(
        self,
        jobs: Jobs | Iterable[JobDefinition],
        *,
        store: InMemoryJobStore | None = None,
        clock: Clock | None = None,
        start: datetime | None = None,
        seed: int | None = 0,
        start_workers: bool = True,
        exit_grace: DurationLike | None = 0,
        **worker_options: Any,
    ) -> None:
        self.jobs = jobs if isinstance(jobs, Jobs) else Jobs(jobs)
        if clock is not None and start is not None:
            raise InvalidOptionError("start", start, "pass either clock or start, not both")
        self.clock: Clock = clock or LoopClock(_aware("start", start or DEFAULT_START))
        self.store = store if store is not None else InMemoryJobStore(clock=self.clock)
        worker_options.setdefault("poll_interval", _DEFAULT_POLL_INTERVAL)
        worker_options.setdefault("registry_enabled", False)
        self.settings = WorkerSettings(**worker_options)
        self._seed = seed
        self.client = DogsClient(
            self.store,
            self.jobs,
            n_partitions=self.settings.n_partitions,
            clock=self.clock,
            rng=random.Random(seed),
        )
        self._start_on_enter = start_workers
        self._exit_grace = (
            None if exit_grace is None else parse_duration(exit_grace, field="exit_grace")
        )
        self._workers: Workers | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._entered = False
        self._finished_executions = 0
        self._finished = Signal()

    # -- lifecycle -------------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._entered:
            raise WorkersStateError("this JobsHarness was already used; create a new one")
        self._entered = True
        self._stack = contextlib.AsyncExitStack()
        if self._start_on_enter:
            try:
                await self.start_workers()
            except BaseException:
                stack, self._stack = self._stack, None
                with anyio.CancelScope(shield=True):
                    await stack.aclose()
                raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        stack, self._stack = self._stack, None
        if self._workers is not None and exc_type is None:
            await self._workers.stop(grace=self._exit_grace)
        if stack is None:
            return None
        try:
            return await stack.__aexit__(exc_type, exc, tb)
        except BaseExceptionGroup as group:
            # The workers' task group wraps the body's error (an assertion, say): unwrap it.
            if exc is not None and _sole_leaf(group) is exc:
                raise exc from None
            raise

    async def start_workers(self) -> None:
        """Start the workers now (idempotent) and wait until they have set up the store and
        the records of the recurrent jobs."""
        if self._workers is not None:
            return
        if self._stack is None:
            raise WorkersStateError("use the harness as 'async with JobsHarness(...) as harness'")
        workers = Workers(
            self.store,
            self.jobs,
            self.settings,
            clock=self.clock,
            rng=random.Random(self._seed),
            on_execution_ended=self._on_execution_finished,
        )
        await self._stack.enter_async_context(workers)
        self._workers = workers
        recurrent = {d.name for d in self.jobs if d.type is JobType.RECURRENT}
        for _ in range(10_000):
            if not workers.running:
                raise WorkersStateError("the workers stopped while starting; see the dogs logs")
            if workers.capabilities is not None:
                present = {r.job_name for r in self.store.sync.all_records()}
                if recurrent <= present:
                    return
            await anyio.lowlevel.checkpoint()
        raise WorkersStateError("the workers did not finish starting")

    def _on_execution_finished(self, job: ClaimedJob) -> None:
        self._finished_executions += 1
        self._finished.notify()

    @property
    def workers(self) -> Workers:
        """The running workers (to ``stop(grace=...)`` them, or read their counters)."""
        if self._workers is None:
            raise WorkersStateError("the workers are not started yet")
        return self._workers

    def now(self) -> datetime:
        """The application time (the harness clock)."""
        return self.clock.now()

    # -- driving ---------------------------------------------------------------------------------

    async def schedule(
        self,
        job: EventJobDefinition | str,
        params: object = None,
        *,
        run_in: DurationLike | None = None,
        run_at: datetime | None = None,
        priority: int | None = None,
        unique_key: str | None = None,
    ) -> ScheduleOutcome:
        """Schedule an event job through the client (see
        :meth:`~dogs_core.runtime.client._async.client.DogsClient.schedule`) and wake idle workers
        so
        that a due job starts at once."""
        outcome = await self.client.schedule(
            job, params, run_in=run_in, run_at=run_at, priority=priority, unique_key=unique_key
        )
        if self._workers is not None:
            self._workers.wake()
        return outcome

    async def run_until_idle(self, timeout: DurationLike = "1h") -> None:  # noqa: ASYNC109
        """Let the workers run until no job is due and none is running.

        "Due" means claimable now by these workers (``next_run_at`` reached, lock free or
        expired, not terminal); a job scheduled later, a retry waiting for its backoff, and the
        next run of a recurrent job are not due: move time with :meth:`advance`. Raises
        ``TimeoutError`` naming what is still due or running after ``timeout`` (of the event
        loop's time: virtual under a mock clock).
        """
        await self.start_workers()
        workers = self.workers
        seconds = parse_duration(timeout, field="timeout").total_seconds()
        deadline = anyio.current_time() + seconds
        while True:
            due = self._due()
            running = workers.claims_succeeded - self._finished_executions
            if not due and running <= 0:
                return
            if due:
                if not workers.running:
                    raise WorkersStateError(
                        f"the workers are stopped; {len(due)} job(s) due: {_describe(due)}"
                    )
                workers.wake()
            remaining = deadline - anyio.current_time()
            if remaining <= 0:
                raise TimeoutError(
                    f"not idle after {timeout}: {running} execution(s) running, "
                    f"{len(due)} job(s) due: {_describe(due)}"
                )
            await self._finished.wait(self._next_wait(remaining))

    async def advance(self, duration: DurationLike) -> None:
        """Let ``duration`` pass (virtual time under a mock clock) with the workers running.

        The workers are woken whenever a job falls due. Work that falls due exactly at the end
        may still be in progress when this returns: follow with :meth:`run_until_idle`.
        """
        seconds = parse_duration(duration, field="duration").total_seconds()
        await self.start_workers()
        end = anyio.current_time() + seconds
        while True:
            if self._due():
                self.workers.wake()
            remaining = end - anyio.current_time()
            if remaining <= 0:
                return
            await self._finished.wait(self._next_wait(remaining))

    def _runnable_names(self) -> frozenset[str]:
        return frozenset(
            d.name
            for d in self.jobs
            if not (isinstance(d, EventJobDefinition) and d.max_parallel_executions_per_server == 0)
        )

    def _due(self) -> list[JobRecord]:
        """The records due for these workers: each judged for a claim of its own partition,
        whichever partitions the workers sweep."""
        runnable = self._runnable_names()
        now = self.clock.now()
        return [
            r
            for r in self.store.sync.all_records()
            if is_claimable(r, ClaimScope(partition=r.partition, job_names=runnable, now=now))
        ]

    def _next_wait(self, remaining: float) -> float:
        """How long to wait before looking again: until the next moment a record of these
        workers may fall due (its ``next_run_at`` or lock expiry), a fallback period, or the
        end. Executions that finish cut the wait short."""
        runnable = self._runnable_names()
        now = self.clock.now()
        soonest: datetime | None = None
        for record in self.store.sync.all_records():
            if record.job_name not in runnable or is_failed(record):
                continue
            for moment in (record.next_run_at, record.locked_until):
                if moment is not None and moment > now and (soonest is None or moment < soonest):
                    soonest = moment
        wait = min(remaining, _RECHECK_SECONDS)
        if soonest is not None:
            # A little more than exact, against float rounding of the loop clock; stored times
            # are truncated to the millisecond, so this never shifts the next run of a job.
            wait = min(wait, (soonest - now).total_seconds() + _WAKE_MARGIN_SECONDS)
        return wait

    # -- reading ---------------------------------------------------------------------------------

    def scheduled(self, job: JobDefinition | str | None = None) -> list[JobRecord]:
        """The records still to run (pending, running, waiting for a retry, and the records of
        recurrent jobs), of one job or all, in claim order. Terminal records (an event job that
        reached its attempt limit) are left out: see ``harness.store.sync.all_records()``."""
        name = _name(job) if job is not None else None
        return [
            record for record in self.store.sync.all_records(job_name=name) if not is_failed(record)
        ]

    def history(self, job: JobDefinition | str) -> list[HistoryRecord]:
        """Every finished execution of ``job``, oldest first."""
        rows = self.store.sync.read_history(_name(job), limit=_HISTORY_LIMIT)
        return sorted(rows, key=lambda row: (row.started_at, row.ended_at))

    # -- assertions ------------------------------------------------------------------------------

    def assert_scheduled(
        self,
        job: JobDefinition | str,
        params: object = _ANY_PARAMS,
        *,
        count: int | None = None,
    ) -> list[JobRecord]:
        """Assert that ``job`` has records still to run: ``count`` of them exactly, or at least
        one; only those with ``params`` when given (compared as stored, so a params model
        instance and the equivalent dict match). Returns the matching records."""
        name = _name(job)
        records = self.scheduled(name)
        matching = records
        if params is not _ANY_PARAMS:
            expected = self._stored_params(job, params)
            matching = [record for record in records if record.params == expected]
        if (count is None and matching) or (count is not None and len(matching) == count):
            return matching
        wanted = "at least one" if count is None else str(count)
        where = "" if params is _ANY_PARAMS else f" with params {params!r}"
        raise AssertionError(
            f"expected {wanted} scheduled {name!r} job(s){where}, found {len(matching)}; "
            f"scheduled {name!r} records: {_describe(records)}"
        )

    def assert_ran(
        self,
        job: JobDefinition | str,
        *,
        times: int | None = None,
        status: HistoryStatus | str | None = None,
    ) -> list[HistoryRecord]:
        """Assert that ``job`` finished ``times`` executions (at least one when ``None``), of
        ``status`` (``"success"``, ``"error"``, ``"stale"``) when given, else of any status.
        Returns the matching history rows, oldest first."""
        name = _name(job)
        rows = self.history(name)
        wanted_status = None if status is None else HistoryStatus(status)
        matching = [row for row in rows if wanted_status is None or row.status is wanted_status]
        if (times is None and matching) or (times is not None and len(matching) == times):
            return matching
        wanted = "at least one" if times is None else str(times)
        kind = "" if wanted_status is None else f" {wanted_status.value}"
        seen = ", ".join(f"{row.status.value} (try {row.tries})" for row in rows) or "none"
        raise AssertionError(
            f"expected {wanted}{kind} execution(s) of {name!r}, found {len(matching)}; "
            f"its executions: {seen}"
        )

    def _stored_params(self, job: JobDefinition | str, params: object) -> object:
        definition = self.jobs.get(job) if isinstance(job, str) else job
        if isinstance(definition, EventJobDefinition):
            return validate_params(definition, params)
        return params


class HarnessFactory:
    """Builds :class:`JobsHarness` instances sharing one store and one clock (the
    ``dogs_harness_factory`` fixture): each is one worker instance on the same "database"."""

    def __init__(self, *, start: datetime = DEFAULT_START) -> None:
        self.clock = LoopClock(start)
        self.store = InMemoryJobStore(clock=self.clock)

    def __call__(self, jobs: Jobs | Iterable[JobDefinition], **options: Any) -> JobsHarness:
        """``JobsHarness(jobs, store=<shared>, clock=<shared>, **options)``."""
        return JobsHarness(jobs, store=self.store, clock=self.clock, **options)


def _sole_leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def _name(job: JobDefinition | str) -> str:
    return job if isinstance(job, str) else job.name


def _describe(records: list[JobRecord]) -> str:
    if not records:
        return "none"
    shown = [
        f"{r.job_name}(params={dict(r.params) if r.params is not None else None}, "
        f"next_run_at={r.next_run_at.isoformat()}, tries={r.tries or 0}"
        f"{', locked' if r.locked_until is not None else ''})"
        for r in records[:10]
    ]
    more = f" and {len(records) - 10} more" if len(records) > 10 else ""
    return ", ".join(shown) + more
