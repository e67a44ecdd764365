"""An execution's progress: the handler's reports staged, and written by its lock's renewals.

``ctx.progress(fraction, message, data=...)`` raises :class:`~dogs_core.errors.LockLostError`
once the execution is stale (its context knows); :func:`report_progress` checks the report and
stages it with
the execution's :class:`ProgressRelay` (made at the first report, which also checks that the
store has the following role). Staging takes a lock and, at most once per batch of reports,
hands the loop a wake-up (from a worker thread without blocking it); it never waits for a write.

On the loop, the relay performs :class:`~dogs_core.domain.progress.ProgressPacer`'s steps: a
``WriteNow`` pulses the lock keeper (a renewal for the lock time that does not wait), a
``FlushAt`` arms one timer in the workers' deadline heap. The renewal write, when it starts,
:meth:`~ProgressRelay.take`\\ s the staged report
(:func:`~dogs_core.runtime.plumbing.lock.job_lock_write`:
one fenced ``write_progress`` with the lock) and reports its end (:meth:`~ProgressRelay.written`).
A handler that cleared its watchdog has no renewals: its reports are written alone (fenced,
without the lock), single flight, at the same pace. The latest report, written or not, goes to
the execution's history row (:attr:`ProgressRelay.latest`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol, cast

import anyio
import anyio.from_thread
import anyio.lowlevel

from dogs_core.domain.events import ProgressWritten
from dogs_core.domain.progress import FlushAt, Progress, ProgressPacer, ProgressStep, WriteNow
from dogs_core.domain.progress import check_progress as _check
from dogs_core.domain.records import ClaimedJob
from dogs_core.domain.renewal import RefusalReason
from dogs_core.errors import MissingRoleError
from dogs_core.ports import AsyncFollowingStore, Role, has_role
from dogs_core.runtime.execution.services import ExecutionServices
from dogs_core.runtime.plumbing.clock import now_in_any_thread

if TYPE_CHECKING:
    from dogs_core.runtime.plumbing.deadlines import Deadline

__all__ = ["HeldLock", "ProgressRelay", "report_progress"]

logger = logging.getLogger("dogs.execution")


class HeldLock(Protocol):
    """What a relay uses of its execution's lock
    (:class:`~dogs_core.runtime.execution.holding.JobLock`)."""

    progress: ProgressRelay | None

    def pulse(self) -> RefusalReason | None: ...

    def spawn(self, func: Callable[[], Awaitable[None]]) -> None: ...

    def lost(self) -> None: ...


def report_progress(
    services: ExecutionServices,
    job: ClaimedJob,
    lock: HeldLock,
    report: tuple[object, object, object],
    *,
    running: bool,
) -> None:
    """Stage one report of ``job``'s handler (from its task or its thread): see the module.
    (A stale execution's reports never get here: its context raises ``LockLostError``.)"""
    fraction, message, data = _check(*report, job=job.job_name)
    if not running:
        logger.warning(
            "progress of %s (%s) reported while its handler is not running; ignored",
            job.job_name,
            job.job_id,
        )
        return
    relay = lock.progress
    if relay is None:
        relay = _relay_of(services, job, lock)
    at = now_in_any_thread(services.clock)
    relay.report(Progress(fraction, message, data, at, job.execution_id))


def _relay_of(services: ExecutionServices, job: ClaimedJob, lock: HeldLock) -> ProgressRelay:
    """The execution's relay, made on the loop (from a worker thread: one hop, the first time)."""
    if not has_role(services.store, Role.FOLLOWING):
        raise MissingRoleError(Role.FOLLOWING.value, "ctx.progress", services.store)
    try:
        anyio.lowlevel.current_token()
    except RuntimeError:  # a sync handler's thread
        return anyio.from_thread.run_sync(_relay_of, services, job, lock)
    if lock.progress is None:
        lock.progress = ProgressRelay(services, job, lock)
    return lock.progress


class ProgressRelay:
    """The progress of one execution, between its handler and its lock's renewal writes."""

    __slots__ = (
        "_flush",
        "_guard",
        "_job",
        "_kicked",
        "_lock",
        "_loop_thread",
        "_pacer",
        "_services",
        "_staged",
        "_token",
        "_writing_alone",
        "ended",
        "latest",
    )

    def __init__(self, services: ExecutionServices, job: ClaimedJob, lock: HeldLock) -> None:
        """Made on the event loop's thread (its token is what a worker thread wakes it by)."""
        self._services = services
        self._job = job
        self._lock = lock
        self._pacer = ProgressPacer(services.settings.progress_interval.total_seconds())
        self._guard = threading.Lock()
        self._staged: Progress | None = None
        self._kicked = False
        self._loop_thread = threading.get_ident()
        self._token = anyio.lowlevel.current_token()
        self._flush: Deadline | None = None
        self._writing_alone = False
        self.ended = False
        self.latest: Progress | None = None
        """The latest report, written or not (the history row keeps it)."""

    # -- the handler's side (any thread) ------------------------------------------------------

    def report(self, progress: Progress) -> None:
        """Stage ``progress`` (the latest wins) and make sure the loop looks at it."""
        with self._guard:
            self._staged = self.latest = progress
            if self._kicked:
                return
            self._kicked = True
        if threading.get_ident() == self._loop_thread:
            self._kick()
            return
        token = self._token
        with contextlib.suppress(Exception):  # the loop has ended: nobody writes any more
            token.backend_class.run_sync_soon(self._kick, (), token.native_token)

    # -- the loop's side ----------------------------------------------------------------------

    def _kick(self) -> None:
        with self._guard:
            self._kicked = False
        if not self.ended:
            self._perform(self._pacer.staged(anyio.current_time()))

    def take(self) -> Progress | None:
        """The staged report, for a renewal write that starts now (``None``: the pacer keeps
        it for a later write, or there is none)."""
        if self.ended or not self._pacer.write_started(anyio.current_time()):
            return None
        with self._guard:
            progress, self._staged = self._staged, None
        if progress is None:  # staged flag without a value: nothing to carry after all
            self.written()
            return None
        telemetry = self._services.telemetry
        if telemetry.active:
            telemetry.emit(ProgressWritten(self._job, progress))
        return progress

    def written(self) -> None:
        """The write that took a report ended."""
        step = self._pacer.write_ended(anyio.current_time())
        if not self.ended:
            self._perform(step)

    def end(self) -> None:
        """The handler ended: no more writes (a write in flight still lands)."""
        self.ended = True
        flush, self._flush = self._flush, None
        if flush is not None:
            self._services.deadlines.cancel(flush)

    def _perform(self, step: ProgressStep) -> None:
        if isinstance(step, WriteNow):
            self._pulse()
        elif isinstance(step, FlushAt):
            self._flush = self._services.deadlines.arm(step.at, self._flush_due)

    def _flush_due(self, now: float) -> None:
        self._flush = None
        if not self.ended:
            self._perform(self._pacer.flush_due(now))

    def _pulse(self) -> None:
        refused = self._lock.pulse()
        if refused is None:
            return
        if refused is RefusalReason.CLEARED:
            if not self._writing_alone:
                self._writing_alone = True
                self._lock.spawn(self._write_alone)
            return
        # Stale or finished: this execution writes nothing more (the latest report still goes
        # to its history row).
        self._pacer.pulse_lost(anyio.current_time())
        self.end()

    async def _write_alone(self) -> None:
        """One fenced progress write without the lock (the watchdog was cleared)."""
        job = self._job
        try:
            progress = self.take()
            if progress is None:
                return
            try:
                store = cast(AsyncFollowingStore, self._services.store)
                owned = await store.write_progress(
                    job.job_id, job.lock_id, progress, locked_until=None
                )
            except Exception as error:
                what = (job.job_name, job.job_id, error)
                logger.warning("progress of %s (%s) not written: %r", *what)
                owned = True
            finally:
                self.written()
            if not owned:
                self._lock.lost()
        finally:
            self._writing_alone = False
