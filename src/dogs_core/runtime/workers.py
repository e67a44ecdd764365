"""The workers of one instance: one scheduler loop, its executions and background loops.

Structure (all in one anyio task group, so nothing outlives :meth:`Workers.stop`):

- ``claim_concurrency`` claim lanes share one capacity ledger, one partition rotation and one
  selected hint. Each lane reserves capacity (up to ``claim_batch_size`` slots offering the same
  names), claims in the next partition (one job with ``claim``, several with ``claim_many``; a
  batch claim takes a partition no other batch claim of this instance is reading), and starts
  an execution per job claimed. Dogs awaits one claim of one job at a time; several lanes and
  batches keep a worker from being bound by one database round trip per job. Lanes only claim
  side by side while claims find jobs; after a miss (and at startup) at most one claim per
  partition not yet tried in the current sweep is in flight. A full sweep of every partition
  that found nothing puts all lanes to sleep for ``poll_interval``, so an idle scheduler sends
  one sweep (``n_partitions`` claims) per interval whatever its ``workers_count``.
- The hint probe (every ``probe_interval``) and the partition reconciler run beside them, and
  so do three services shared by every execution: one timer task for all lock watchdogs, and
  the batch writers of completions and history rows.
- Executions run on runner tasks in their own task group, so that ``stop`` can drain them, then
  cancel what is left after the grace period and release those locks for other workers. A
  runner that finishes an execution waits for the next one instead of ending.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import math
import random
from types import TracebackType
from typing import Any, Self

import anyio
import anyio.abc

from dogs_core.domain.capacity import CapacityLedger, Reservation
from dogs_core.domain.definitions import EventJobDefinition, JobDefinition
from dogs_core.domain.hints import DecisionReason, Hint, HintSelector, claim_hint
from dogs_core.domain.partitions import PartitionRotation, assign_partition
from dogs_core.domain.reconcile import BATCH_SIZE, next_reconcile_delay
from dogs_core.domain.records import ClaimedJob, ClaimRequest, HistoryRecord, JobType
from dogs_core.domain.schedules import parse_duration
from dogs_core.errors import InvalidOptionError, WorkersStateError
from dogs_core.ids import new_execution_id
from dogs_core.jobs import Jobs
from dogs_core.ports import AsyncJobStore, Clock, StoreCapabilities
from dogs_core.runtime.batching import GroupCommit
from dogs_core.runtime.clock import SystemClock
from dogs_core.runtime.deadlines import Deadlines
from dogs_core.runtime.execution import Execution
from dogs_core.runtime.isolation import run_in_context
from dogs_core.runtime.retry import retry_transient
from dogs_core.runtime.settings import DurationLike, WorkerSettings
from dogs_core.runtime.signal import Signal

__all__ = ["Workers"]

logger = logging.getLogger("dogs.workers")

_MAX_BATCH = 500  # items per batched completion or history write
_HISTORY_WRITE_TIMEOUT = 30.0  # seconds; a batch of history rows that takes longer is dropped


class Workers:
    """Runs the jobs of a :class:`~dogs_core.jobs.Jobs` registry against a store.

    Use it as an async context manager (workers start on entry and drain on exit)::

        async with Workers(store, jobs, workers_count=8) as workers:
            await workers.serve()          # until stop() or cancellation

    or call :meth:`run` to start and serve in one call.
    """

    def __init__(
        self,
        store: AsyncJobStore,
        jobs: Jobs,
        settings: WorkerSettings | None = None,
        *,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        **options: Any,
    ) -> None:
        if settings is not None and options:
            raise InvalidOptionError(
                "options", sorted(options), "pass either settings or keyword options, not both"
            )
        if not isinstance(jobs, Jobs):
            raise InvalidOptionError("jobs", jobs, "must be a dogs_core.Jobs registry")
        if len(jobs) == 0:
            raise InvalidOptionError("jobs", jobs, "the registry has no jobs to run")
        self.settings = settings if settings is not None else WorkerSettings(**options)
        self.store = store
        self.jobs = jobs
        self.clock: Clock = clock or SystemClock()
        self.rng = rng or random.Random()
        self._definitions: dict[str, JobDefinition] = {d.name: d for d in jobs}
        self._names = tuple(self._definitions)
        self._ledger = CapacityLedger(
            self.settings.workers_count,
            {
                d.name: (
                    d.max_parallel_executions_per_server
                    if isinstance(d, EventJobDefinition)
                    else None
                )
                for d in jobs
            },
        )
        self._rotation = PartitionRotation(self.settings.n_partitions, self.rng)
        self._hints = HintSelector()
        self._thread_limiter = anyio.CapacityLimiter(self.settings.workers_count)
        # Shared by every execution: one timer task for all lock watchdogs, and the completions
        # and history rows of concurrent executions written in batches (group commit).
        self.deadlines = Deadlines()
        self.completions: GroupCommit[tuple[str, str], bool] = GroupCommit(
            store.complete_many, what="complete", max_batch=_MAX_BATCH
        )
        self.history: GroupCommit[HistoryRecord, None] = GroupCommit(
            self._write_history_batch,
            what="history",
            max_batch=_MAX_BATCH,
            timeout=_HISTORY_WRITE_TIMEOUT,
        )
        self._active: dict[str, Execution] = {}
        self._zombies: dict[str, Execution] = {}
        self._finishing: set[str] = set()  # released their slot, still writing history
        self._idle_runners: list[_Handoff] = []  # runner tasks waiting for their next execution
        self._forgotten = Signal()
        self._capacity = Signal()
        self._wake = Signal()
        self._idle_until: float | None = None
        self._hot = False  # the last claim found a job: every lane may claim
        self._claims_in_flight = 0  # claim calls awaiting their reply (each maybe a batch)
        self._wake_generation = 0  # bumped by wake(): older misses no longer count
        self._batches_in_flight: set[int] = set()  # partitions with a batch claim in flight
        self._started = False
        self._running = False
        self._stop_requested = anyio.Event()
        self._stopped = anyio.Event()
        self._grace: float | None = None
        self._exit_stack: contextlib.AsyncExitStack | None = None
        self._startup_scope: anyio.CancelScope | None = None
        self._task_group: anyio.abc.TaskGroup | None = None
        self._executions_group: anyio.abc.TaskGroup | None = None
        self._capabilities: StoreCapabilities | None = None
        self.claims_attempted = 0
        self.claims_succeeded = 0

    # -- public state ---------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """True from start until a stop was requested."""
        return self._running

    @property
    def workers_count(self) -> int:
        return self.settings.workers_count

    @property
    def running_executions(self) -> int:
        """Active executions (a stale execution no longer counts, even if still running)."""
        return len(self._active)

    @property
    def selected_hint(self) -> Hint:
        """The acquisition hint chosen by the probe (claims may still force byJobName)."""
        return self._hints.current

    @property
    def capabilities(self) -> StoreCapabilities | None:
        return self._capabilities

    def wake(self) -> None:
        """Cut an idle wait short: a job was scheduled that these workers may run now."""
        self._idle_until = None
        self._wake_generation += 1
        self._rotation.reset_misses()  # the next sweep must look at every partition again
        self._wake.notify()

    # -- lifecycle --------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._started:
            raise WorkersStateError("these workers were already started; create new Workers")
        async with contextlib.AsyncExitStack() as stack:
            task_group = await stack.enter_async_context(anyio.create_task_group())
            await task_group.start(self._run)
            self._exit_stack = stack.pop_all()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        stack, self._exit_stack = self._exit_stack, None
        # A failing or cancelled body gets no grace: its executions are cancelled and their
        # locks released at once, so other workers can take the jobs without waiting for expiry.
        grace = 0.0 if exc_type is not None else self._grace
        self._request_stop(grace)
        if self._started:
            # The workers run shielded from the caller's cancellation (see _run), so this wait
            # is the drain itself; a cancelled caller is cancelled again once it has finished.
            with anyio.CancelScope(shield=True):
                await self._stopped.wait()
        if stack is not None:
            return await stack.__aexit__(exc_type, exc, tb)
        return None

    async def serve(self) -> None:
        """Wait until the workers stop (after :meth:`stop`, or a fatal startup error)."""
        if not self._started:
            raise WorkersStateError("serve() needs started workers: use 'async with workers'")
        await self._stopped.wait()

    async def run(self) -> None:
        """Start, then serve until :meth:`stop` is called or this task is cancelled."""
        async with self:
            await self.serve()

    async def stop(self, grace: DurationLike | None = None) -> None:
        """Stop claiming, drain, and wait until everything has stopped. Idempotent.

        Active executions get ``grace`` to finish (``None``: until each finishes or its lock goes
        stale, as Dogs does). What is still running then is cancelled and its lock released, so
        another worker can claim the job at once. A claim already in flight is still executed.
        """
        grace_seconds = None
        if grace is not None:
            grace_seconds = parse_duration(grace, field="grace").total_seconds()
        self._request_stop(grace_seconds)
        if self._started:
            await self._stopped.wait()

    def _request_stop(self, grace: float | None) -> None:
        if not self._stop_requested.is_set():
            self._grace = grace
            self._running = False
            self._stop_requested.set()
            if self._startup_scope is not None:
                # Stopped while still waiting for the database at startup: nothing to drain.
                self._startup_scope.cancel()
            self._wake.notify()
            self._capacity.notify()

    # -- the main task ------------------------------------------------------------------------

    async def _run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        self._started = True
        self._running = True
        try:
            # Shielded: cancelling the caller's scope must not cancel executions before they
            # release their locks; __aexit__ turns that cancellation into stop(grace=0).
            with anyio.CancelScope(shield=True):
                await self._run_shielded(task_status)
        finally:
            self._running = False
            self._stopped.set()

    async def _run_shielded(self, task_status: anyio.abc.TaskStatus[None]) -> None:
        async with anyio.create_task_group() as background:
            self._task_group = background
            # Cancelled only after every execution has ended (below), so no execution waits on
            # a batch or a watchdog that is no longer served.
            background.start_soon(self.deadlines.run, name="dogs lock watchdogs")
            background.start_soon(self.completions.run, name="dogs completion writer")
            background.start_soon(self.history.run, name="dogs history writer")
            task_status.started()
            with anyio.CancelScope() as startup:
                self._startup_scope = startup
                try:
                    await self._start_up(background)
                except Exception:
                    logger.exception("job scheduler stopped after an unexpected startup error")
                    self._request_stop(0.0)
                    raise
            self._startup_scope = None
            if not startup.cancelled_caught:
                await self._serve_until_stopped()
            background.cancel_scope.cancel()

    async def _start_up(self, background: anyio.abc.TaskGroup) -> None:
        # A database that is down at startup is waited for (with logged, backed-off retries),
        # not fatal: the workers start claiming as soon as it answers, or stop() ends the wait.
        await retry_transient(self.store.setup, what="store setup", attempts=None)
        self._capabilities = await retry_transient(
            self.store.capabilities, what="capability detection", attempts=None
        )
        logger.info(
            "workers starting: %d job(s), workers_count=%d, n_partitions=%d, claim path %s",
            len(self._names),
            self.settings.workers_count,
            self.settings.n_partitions,
            self._capabilities.claim_path,
        )
        if self.settings.probe_enabled and self._capabilities.supports_probe:
            background.start_soon(self._probe_loop)
        if self.settings.reconcile_enabled:
            background.start_soon(self._reconcile_loop)
        background.start_soon(self._backfill_retention)
        await self._ensure_recurrent_records()

    async def _serve_until_stopped(self) -> None:
        async with anyio.create_task_group() as executions:
            self._executions_group = executions
            async with anyio.create_task_group() as lanes:
                for _ in range(self.settings.claim_concurrency):
                    lanes.start_soon(self._claim_lane)
            await self._drain()
            # Executions that released their slot may still be writing their history row.
            with anyio.move_on_after(_HISTORY_WRITE_TIMEOUT):
                while self._finishing:
                    await self._forgotten.wait()
            # Detached stale executions (cancel_stale=False) do not hold up the stop.
            executions.cancel_scope.cancel()

    async def _drain(self) -> None:
        grace = math.inf if self._grace is None else self._grace
        with anyio.move_on_after(grace):
            while self._active:
                await self._capacity.wait()
        if self._active:
            logger.warning(
                "stop: grace period over, cancelling %d execution(s) and releasing their locks",
                len(self._active),
            )
            for execution in list(self._active.values()):
                execution.cancel_for_shutdown()
            while self._active:
                await self._capacity.wait()

    # -- claiming -------------------------------------------------------------------------------

    async def _claim_lane(self) -> None:
        while not self._stop_requested.is_set():
            idle_until = self._idle_until
            if idle_until is not None:
                remaining = idle_until - anyio.current_time()
                if remaining > 0:
                    await self._wake.wait(remaining)
                    continue
                self._idle_until = None
            if not self._hot and self._claims_in_flight >= self._sweep_remaining():
                # Nothing found lately: keep at most one claim in flight per partition not yet
                # tried in this sweep, so that an idle scheduler sends one sweep per poll
                # interval however many lanes it has. A hit lets every lane claim again.
                await self._capacity.wait()
                continue
            reservations = self._reserve_batch()
            if not reservations:
                # Full, or every name is at its cap: wait for an execution to release capacity.
                await self._capacity.wait()
                continue
            await self._claim(reservations)

    def _reserve_batch(self) -> list[Reservation]:
        """Capacity for one claim call: up to ``claim_batch_size`` slots offering the same
        names (a name whose cap allows fewer claims ends the batch there)."""
        first = self._ledger.reserve()
        if first is None:
            return []
        reservations = [first]
        while len(reservations) < self.settings.claim_batch_size:
            more = self._ledger.reserve(first.names)
            if more is None:
                break
            if more.names != first.names:
                self._ledger.settle(more, None)
                break
            reservations.append(more)
        return reservations

    async def _claim(self, reservations: list[Reservation]) -> None:
        first = reservations[0]
        hint = str(claim_hint(self._hints.current, first.names_filtered))
        partition = self._rotation.next_partition()
        batch = len(reservations) > 1
        if batch:
            # Two batch claims of one partition read the same candidates and race for them:
            # a batch claim takes a partition no other batch claim of this instance is reading.
            for _ in range(self._rotation.n_partitions - 1):
                if partition not in self._batches_in_flight:
                    break
                partition = self._rotation.next_partition()
            if partition in self._batches_in_flight:
                for reservation in reservations:
                    self._ledger.settle(reservation, None)
                await self._capacity.wait()  # the next claim reply frees a partition
                return
        now = self.clock.now()
        locked_until = now + self.settings.default_lock_time
        requested_at = anyio.current_time()  # the lock runs from here, not from the reply
        requests = [
            ClaimRequest(
                job_names=first.names,
                partition=partition,
                hint=hint,
                now=now,
                locked_until=locked_until,
                lock_id=new_execution_id(),
            )
            for _ in reservations
        ]
        generation = self._wake_generation
        self.claims_attempted += 1
        self._claims_in_flight += 1
        if batch:
            self._batches_in_flight.add(partition)
        try:
            if not batch:
                job = await self.store.claim(requests[0])
                jobs = [] if job is None else [job]
            else:
                jobs = await self.store.claim_many(requests)
        except Exception:
            for reservation in reservations:
                self._ledger.settle(reservation, None)
            self._hot = False
            self._capacity.notify()
            logger.exception("claim failed; retrying after the poll interval")
            self._rotation.reset_misses()
            self._go_idle()
            return
        finally:
            self._claims_in_flight -= 1
            if batch:
                self._batches_in_flight.discard(partition)
        for reservation in reservations[len(jobs) :]:
            self._ledger.settle(reservation, None)
        if not jobs:
            self._hot = False
            self._capacity.notify()
            # A miss of a claim sent before the last wake() says nothing about the job that
            # wake() announced: only misses sent since then may put the lanes to sleep.
            if generation == self._wake_generation and self._rotation.record_miss(partition):
                self._go_idle()
            return
        self._rotation.record_hit()
        self._hot = True
        for reservation, job in zip(reservations, jobs, strict=False):
            self._ledger.settle(reservation, job.job_name)
        self._capacity.notify()
        self.claims_succeeded += len(jobs)
        for job in jobs:
            self._start_execution(job, requested_at)

    def _sweep_remaining(self) -> int:
        """Partitions the current sweep has not reported a miss for yet (at least one)."""
        return max(1, self._rotation.n_partitions - self._rotation.consecutive_misses)

    def _go_idle(self) -> None:
        if self._idle_until is None:
            self._idle_until = anyio.current_time() + self.settings.poll_interval.total_seconds()

    def _start_execution(self, job: ClaimedJob, requested_at: float) -> None:
        definition = self._definitions[job.job_name]
        if job.was_stale:
            logger.info(
                "running job %s (%s) that was stale; try %d", job.job_name, job.job_id, job.tries
            )
        execution = Execution(self, job, definition, lock_from=requested_at)
        self._active[job.execution_id] = execution
        if self._idle_runners:
            self._idle_runners.pop().hand_over(execution)
            return
        assert self._executions_group is not None
        self._executions_group.start_soon(self._runner, execution, name="dogs job runner")

    async def _runner(self, execution: Execution) -> None:
        """Run executions one after another: a finished runner waits for the next job instead
        of ending, so starting a job costs a wake-up, not a task spawn. Runners beyond
        ``workers_count`` idle ones end (a stale execution left running holds its runner).

        Each execution gets its own copy of the runner's starting context, as a task of its own
        would: context variables a handler sets do not leak into the next job."""
        fresh = contextvars.copy_context()
        while True:
            await run_in_context(execution.run(), fresh.copy())
            if len(self._idle_runners) >= self.settings.workers_count:
                return
            handoff = _Handoff()
            self._idle_runners.append(handoff)
            execution = await handoff.wait()

    # -- callbacks from executions ------------------------------------------------------------

    def release_capacity(self, execution: Execution, *, stale: bool) -> None:
        """An execution finished or went stale: free its slot (called once per execution)."""
        if self._active.pop(execution.job.execution_id, None) is None:
            return
        name = execution.job.job_name
        self._ledger.release(name)
        if stale:
            self._zombies[execution.job.execution_id] = execution
        else:
            self._finishing.add(execution.job.execution_id)
        if self._ledger.caps.get(name) is not None:
            # A capped name may have been left out of the sweep that put the lanes to sleep:
            # it is claimable again, so look now instead of after the poll interval.
            self.wake()
        self._capacity.notify()

    def forget(self, execution: Execution) -> None:
        """An execution's task ended (after it finished, or a stale one finally settled)."""
        self._zombies.pop(execution.job.execution_id, None)
        self._finishing.discard(execution.job.execution_id)
        self._forgotten.notify()

    @property
    def thread_limiter(self) -> anyio.CapacityLimiter:
        return self._thread_limiter

    def spawn_for_execution(self, func: Any) -> None:
        """Start a task of an execution (it ends before the workers stop, or is cancelled with
        the executions left over after the drain)."""
        group = self._executions_group
        if group is None:
            raise WorkersStateError("workers are not running")
        group.start_soon(func)

    async def _write_history_batch(self, records: list[HistoryRecord]) -> list[None]:
        await self.store.write_history_many(records)
        return [None] * len(records)

    def spawn(self, func: Any, *args: Any, name: str | None = None) -> None:
        """Run a fire-and-forget background task tied to the workers' lifetime."""
        group = self._task_group
        if group is None:
            raise WorkersStateError("workers are not running")
        group.start_soon(func, *args, name=name)

    # -- startup work -------------------------------------------------------------------------

    async def _ensure_recurrent_records(self) -> None:
        now = self.clock.now()
        for definition in self._definitions.values():
            if definition.type is not JobType.RECURRENT:
                continue
            partition = assign_partition(self.settings.n_partitions, self.rng)

            async def ensure(
                definition: JobDefinition = definition, partition: int = partition
            ) -> None:
                await self.store.ensure_recurrent(
                    definition.name, priority=definition.priority, partition=partition, now=now
                )

            await retry_transient(
                ensure, what=f"ensure recurrent record {definition.name}", attempts=None
            )

    async def _backfill_retention(self) -> None:
        try:
            modified = await retry_transient(
                lambda: self.store.backfill_retention(
                    retention=self.settings.max_tries_reached_retention, now=self.clock.now()
                ),
                what="retention backfill",
            )
            logger.debug("retention backfill updated %d terminal record(s)", modified)
        except Exception:
            logger.exception("retention backfill failed")

    # -- background loops ---------------------------------------------------------------------

    async def _reconcile_loop(self) -> None:
        while True:
            try:
                modified: int | None = await self.store.reconcile_partitions(
                    job_names=self._names,
                    n_partitions=self.settings.n_partitions,
                    now=self.clock.now(),
                    limit=BATCH_SIZE,
                    choose_partition=lambda: assign_partition(self.settings.n_partitions, self.rng),
                )
                if modified:
                    logger.info("partition reconciler moved %d record(s)", modified)
            except Exception:
                logger.warning("partition reconciler batch failed", exc_info=True)
                modified = None
            delay = next_reconcile_delay(modified, self.rng.random())
            await anyio.sleep(delay.total_seconds())

    async def _probe_loop(self) -> None:
        while True:
            await self._probe_once()
            await anyio.sleep(self.settings.probe_interval.total_seconds())

    async def _probe_once(self) -> None:
        plan = self._hints.next_plan(self.rng, self.settings.n_partitions)
        samples: dict[Hint, list[float]] = {hint: [] for hint in Hint}
        try:
            for step in plan:
                for hint in step.order:
                    elapsed = await self.store.probe(
                        hint=str(hint),
                        job_names=self._names,
                        partition=step.partition,
                        now=self.clock.now(),
                    )
                    samples[hint].append(elapsed)
        except Exception as error:
            decision = self._hints.on_probe_failed()
            logger.warning("hint probe failed, keeping %s: %s", decision.hint, error)
            return
        decision = self._hints.on_probe_result(samples)
        if decision.reason is DecisionReason.FAILED:
            logger.warning("hint probe gave unusable timings, keeping %s", decision.hint)
        elif decision.reason is DecisionReason.INITIAL or decision.changed:
            logger.info("acquisition hint %s selected (%s)", decision.hint, _medians(decision))
        else:
            logger.debug("keeping acquisition hint %s (%s)", decision.hint, _medians(decision))


class _Handoff:
    """An idle runner's mailbox: the lanes put one execution in it and wake the runner."""

    __slots__ = ("_event", "_execution")

    def __init__(self) -> None:
        self._event = anyio.Event()
        self._execution: Execution | None = None

    def hand_over(self, execution: Execution) -> None:
        self._execution = execution
        self._event.set()

    async def wait(self) -> Execution:
        await self._event.wait()
        assert self._execution is not None
        return self._execution


def _medians(decision: Any) -> str:
    medians = decision.medians or {}
    return ", ".join(f"{hint}: {value:g} ms" for hint, value in medians.items())
