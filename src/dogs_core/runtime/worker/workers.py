"""The workers of one instance: claim lanes, their executions and background loops, all in one
anyio task group, so nothing outlives :meth:`Workers.stop`. ``claim_concurrency`` lanes
(:mod:`~dogs_core.runtime.worker.lanes`) claim and start an execution per job claimed, on reused
runner tasks (:mod:`dogs_core.runtime.worker.runners`); beside them run the probe and
reconciler (:mod:`dogs_core.runtime.worker.maintenance`), the lock watchdogs' timer, and the batch
writers of history rows and settlements. Executions get their collaborators as one
:class:`~dogs_core.runtime.execution.services.ExecutionServices` value and report back through its
host
(:meth:`Workers._on_milestone`). ``stop`` drains them, then cancels what is left after the grace
period and releases those locks for other workers.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import random
import socket
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, Self

import anyio
import anyio.abc

from dogs_core.domain.definitions import JobDefinition
from dogs_core.domain.hints import Hint, HintSelector
from dogs_core.domain.records import ClaimedJob, Owner
from dogs_core.domain.registry import WorkerAction, WorkerCommand, WorkerState
from dogs_core.domain.schedules import parse_duration
from dogs_core.errors import StartupTimeoutError, WorkersStateError
from dogs_core.ids import new_execution_id
from dogs_core.jobs import Jobs
from dogs_core.ports import AsyncJobStore, Clock, StoreCapabilities
from dogs_core.runtime.execution import HISTORY_WRITE_TIMEOUT, Execution, Milestone, build_services
from dogs_core.runtime.plumbing.clock import ServerClock
from dogs_core.runtime.plumbing.loop import Signal
from dogs_core.runtime.plumbing.settings import DurationLike, WorkerSettings, check_worker_arguments
from dogs_core.runtime.plumbing.telemetry import TELEMETRY, Telemetry
from dogs_core.runtime.plumbing.watching import ChangeWatcher
from dogs_core.runtime.plumbing.wrappers import observed
from dogs_core.runtime.plumbing.writers import shipper_for
from dogs_core.runtime.worker.ahead import ClaimedAhead, give_back
from dogs_core.runtime.worker.beacon import Presence, beacon_for
from dogs_core.runtime.worker.claiming import pacer_for
from dogs_core.runtime.worker.fleet import FleetHolds
from dogs_core.runtime.worker.host import WorkersHost
from dogs_core.runtime.worker.job_logs import JobLogLines
from dogs_core.runtime.worker.lanes import ClaimLanes
from dogs_core.runtime.worker.maintenance import (
    ensure_recurrent_records,
    prepare_store,
    start_maintenance,
)
from dogs_core.runtime.worker.runners import RunnerPool
from dogs_core.runtime.worker.schedule_book import ScheduleBook, definition_of

__all__ = ["Workers"]

logger = logging.getLogger("dogs.workers")


class Workers:
    """Runs the jobs of a :class:`~dogs_core.jobs.Jobs` registry against a store.

    Use it as an async context manager (workers start on entry and drain on exit)::

        async with Workers(store, jobs, workers_count=8) as workers:
            await workers.serve()          # until stop() or cancellation

    or call :meth:`run` to start and serve in one call. ``on_execution_ended`` is called with
    each claimed job once its execution has fully ended (history row written, tasks done).
    """

    def __init__(
        self,
        store: AsyncJobStore,
        jobs: Jobs,
        settings: WorkerSettings | None = None,
        *,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        on_execution_ended: Callable[[ClaimedJob], None] | None = None,
        telemetry: Telemetry | None = None,
        **options: Any,
    ) -> None:
        check_worker_arguments(jobs, settings, options)
        self.settings = settings if settings is not None else WorkerSettings(**options)
        self.telemetry = TELEMETRY if telemetry is None else telemetry
        """Where this instance's telemetry events go (the process-wide hub by default)."""
        self.store = store = observed(store, self.telemetry)
        self.jobs = jobs
        self.clock = ServerClock.over(clock, self.settings.clock_sync_interval)
        #: Written on every record this instance claims (``lockOwner``) and on its history.
        self.owner = Owner(socket.gethostname(), os.getpid(), new_execution_id())
        self.rng = rng or random.Random()
        self._definitions: dict[str, JobDefinition] = {d.name: d for d in jobs}
        self._names = tuple(self._definitions)
        self._on_execution_ended = on_execution_ended
        self._pacer = pacer_for(self.settings, jobs, self.rng)
        self._ahead = ClaimedAhead.of(self.settings, self._pacer.ledger, self._start_execution)
        self._hints = HintSelector()
        self._build_services(store)
        every = self.settings.poll_interval.total_seconds()  # runtime schedules (issue 27):
        self._book = ScheduleBook.of(store, self._definitions, self._pacer.ledger, every, self)
        self._active: dict[str, Execution] = {}
        self._finishing: set[str] = set()  # freed their slot, still writing history
        self._forgotten = Signal()
        self._started = self._running = False
        self._stop_requested = anyio.Event()
        self._stopped = anyio.Event()
        self._grace: float | None = None
        self._exit_stack: contextlib.AsyncExitStack | None = None
        self._startup_scope: anyio.CancelScope | None = None
        self._runners: RunnerPool | None = None
        self._capabilities: StoreCapabilities | None = None
        self._lanes = ClaimLanes(
            store,
            pacer=self._pacer,
            hints=self._hints,
            ahead=self._ahead,
            host=self._host,
            clock=self.clock,
            owner=self.owner,
            telemetry=self.telemetry,
            lock_time=self.settings.default_lock_time,
            stopping=self._stop_requested,
        )
        self.beacon = beacon_for(store, self, presence=self._presence, obey=self._obey)
        """This instance in the store's workers' registry (``None``: not registered)."""

    def _build_services(self, store: AsyncJobStore) -> None:
        """The fleet holds, the executions' services and host, and the change watcher."""
        self._holds = FleetHolds(
            store,
            self._pacer.ledger,
            self._names,
            refresh_interval=self.settings.poll_interval.total_seconds(),
            on_reopen=self._reopened,
            watch=self.settings.watch_changes,
        )
        self._host = host = WorkersHost(
            report=self._on_milestone,
            hold_back=self._holds.hold_back,
            may_free_early=self._may_free_early,
        )
        self._services = build_services(
            store,
            self.settings,
            clock=self.clock,
            rng=self.rng,
            host=host,
            telemetry=self.telemetry,
            logs=shipper_for(store, self._definitions.values()),
        )
        self._watcher: ChangeWatcher | None = None
        if self.settings.watch_changes:
            self._watcher = ChangeWatcher(
                store,
                self._names,
                clock=self.clock,
                deadlines=self._services.deadlines,
                horizon=self.settings.poll_interval,
                wake=self.wake,
            )

    # -- public state ---------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """True from start until a stop was requested."""
        return self._running

    @property
    def claims_succeeded(self) -> int:
        """Jobs claimed so far (each starts one execution)."""
        return self._lanes.claims_succeeded

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

    @property
    def watching(self) -> bool:
        """Whether the change feed is open: a job scheduled anywhere from now on wakes these
        workers at once (``False`` with ``watch_changes`` off, or where the store cannot watch:
        they then wake by polling alone)."""
        return self._watcher is not None and self._watcher.watching

    def quiet(self) -> None:
        """Claim nothing more; what runs finishes (``stop`` still drains). Idempotent."""
        if self._holds.go_quiet():
            logger.warning("quiet: claiming nothing more; %d job(s) running", len(self._active))

    def _presence(self) -> Presence:
        state = WorkerState.QUIET if self._holds.quiet else WorkerState.RUNNING
        state = WorkerState.STOPPING if self._stop_requested.is_set() else state
        running = [(execution.job, execution.began) for execution in self._active.values()]
        return Presence(state, len(running), running)

    def _obey(self, command: WorkerCommand) -> None:
        if command.action is WorkerAction.QUIET:
            self.quiet()
        else:
            self._request_stop(None if command.grace is None else command.grace.total_seconds())

    def wake(self, partitions: Sequence[int] = ()) -> None:
        """Cut an idle wait short: a job was scheduled that these workers may run now (in
        ``partitions``, when known: they are claimed in first)."""
        self._pacer.wake(partitions)
        self._lanes.wake.notify()

    def _reopened(self) -> None:
        """A paused or held-back name is claimable again: lanes waiting for capacity look too."""
        self.wake()
        self._lanes.capacity.notify()

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
            self._lanes.wake.notify()
            self._lanes.capacity.notify()

    # -- the main task ------------------------------------------------------------------------

    async def _run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        self._started = True
        self._running = True
        logs = self.settings.log_jobs and JobLogLines.subscribe(self.telemetry, self.owner)
        try:
            # Shielded: cancelling the caller's scope must not cancel executions before they
            # release their locks; __aexit__ turns that cancellation into stop(grace=0).
            with anyio.CancelScope(shield=True):
                await self._run_shielded(task_status)
        finally:
            self._running = False
            if logs:
                logs()
            self._stopped.set()

    async def _run_shielded(self, task_status: anyio.abc.TaskStatus[None]) -> None:
        self._host.bind_to_loop()
        async with anyio.create_task_group() as background:
            self._host.background = background
            # Cancelled only after every execution has ended (below), so no execution waits on
            # a batch or a watchdog that is no longer served.
            services = self._services
            background.start_soon(services.deadlines.run, name="dogs lock watchdogs")
            background.start_soon(services.settler.run, name="dogs settle writer")
            background.start_soon(services.history.run, name="dogs history writer")
            if services.logs is not None:
                background.start_soon(services.logs.run, name="dogs log lines writer")
            task_status.started()
            with anyio.CancelScope() as startup:
                self._startup_scope = startup
                try:
                    await self._start_up(background)
                except StartupTimeoutError as error:
                    logger.error("workers stopped before claiming anything: %s", error)
                    self._request_stop(0.0)
                    raise
                except Exception:
                    logger.exception("job scheduler stopped after an unexpected startup error")
                    self._request_stop(0.0)
                    raise
            self._startup_scope = None
            if not startup.cancelled_caught:
                await self._serve_until_stopped()
                if self.beacon is not None:
                    await self.beacon.stopped()
            background.cancel_scope.cancel()

    async def _start_up(self, background: anyio.abc.TaskGroup) -> None:
        # A database that is down at startup is waited for (with logged, backed-off retries),
        # not fatal: the workers start claiming as soon as it answers, or stop() ends the wait.
        store = self.store
        self._capabilities = await prepare_store(
            store, self.clock, startup_timeout=self.settings.startup_timeout
        )
        settings, clock, rng = self.settings, self.clock, self.rng
        what = (len(self._names), settings.workers_count, settings.n_partitions)
        text = "workers starting: %d job(s), workers_count=%d, n_partitions=%d, claim path %s"
        logger.info(text, *what, self._capabilities.claim_path)
        if self._watcher is not None:
            background.start_soon(self._watcher.run, name="dogs change feed")
        background.start_soon(self._holds.run, name="dogs fleet holds")
        if self._book is not None:
            background.start_soon(self._book.run, name="dogs runtime schedules")
        if self.beacon is not None:
            background.start_soon(self.beacon.run, name="dogs registry beat")
        start_maintenance(
            background,
            store,
            self._names,
            self._hints,
            settings=settings,
            clock=clock,
            rng=rng,
            probe=self._capabilities.supports_probe,
            telemetry=self.telemetry,
            settler=self._services.settler,
            wake=self.wake,
            instance_id=self.owner.instance_id,
        )
        definitions = list(self._definitions.values())
        await ensure_recurrent_records(
            store, definitions, n_partitions=settings.n_partitions, clock=clock, rng=rng
        )
        with contextlib.suppress(Exception):  # else the holds' loop reads them in a moment
            await self._holds.refresh()  # no paused name is claimed at startup

    async def _serve_until_stopped(self) -> None:
        async with anyio.create_task_group() as executions:
            self._host.executions = executions
            self._runners = RunnerPool(executions, keep_idle=self.settings.workers_count)
            async with anyio.create_task_group() as lanes:
                for _ in range(self.settings.claim_concurrency):
                    lanes.start_soon(self._lanes.run_lane)
            await self._drain()
            # Executions that released their slot may still be writing their history row.
            with anyio.move_on_after(HISTORY_WRITE_TIMEOUT):
                while self._finishing:
                    await self._forgotten.wait()
            # Detached stale executions (cancel_stale=False) do not hold up the stop.
            executions.cancel_scope.cancel()

    async def _drain(self) -> None:
        grace = math.inf if self._grace is None else self._grace
        with anyio.move_on_after(grace):
            while self._active or self._ahead:
                await self._lanes.capacity.wait()
        await give_back(self._services.settler, self.clock, self._ahead.close())
        if self._active:
            logger.warning(
                "stop: grace period over, cancelling %d execution(s) and releasing their locks",
                len(self._active),
            )
            for execution in list(self._active.values()):
                execution.cancel_for_shutdown()
            while self._active:
                await self._lanes.capacity.wait()

    def _start_execution(self, job: ClaimedJob, requested_at: float) -> None:
        if job.was_stale:
            what = (job.job_name, job.job_id, job.tries)
            logger.info("running job %s (%s) that was stale; try %d", *what)
        definition = self._definitions.get(job.job_name) or definition_of(self._book, job)
        execution = Execution(self._services, job, definition, lock_from=requested_at)
        execution.began = self._host.loop_time()
        self._active[job.execution_id] = execution
        assert self._runners is not None
        self._runners.run(execution.run)

    # -- what executions report -------------------------------------------------------------------

    def _on_milestone(self, job: ClaimedJob, milestone: Milestone) -> None:
        key = job.execution_id
        if milestone is Milestone.ENDED:
            self._finishing.discard(key)
            self._forgotten.notify()
            if self._on_execution_ended is not None:
                self._on_execution_ended(job)
            return
        execution = self._active.pop(key)  # each execution frees its slot exactly once
        if milestone is Milestone.FREED:
            self._finishing.add(key)
        self._holds.slot_freed(job.job_name)
        if self._pacer.released(job.job_name):
            self._lanes.wake.notify()  # a capped name is claimable again: look now
        ran_for = execution.ran_for
        if ran_for is None:  # freed before its handler ended (stale) or without running it
            ran_for = self._host.loop_time() - execution.began
        self._ahead.freed(ran_for)  # and the next job waiting starts
        self._lanes.capacity.notify()

    def _may_free_early(self) -> bool:
        """An execution whose settlement is on its way frees its slot at once while fewer than
        ``completions_in_flight`` others have (their records are still locked by us)."""
        return len(self._finishing) < self.settings.completions_in_flight
