"""Drives the sans-I/O :class:`~dogs_core.domain.renewal.RenewalMachine` of one lock.

The machine decides; this class performs its commands: the fenced renewal writes (a job's
``extend_lock``, and its concurrency slot's renewal; or a lease's ``renew_lease``), the one
watchdog timer, waking the callers of ``extend_lock_time`` and reporting staleness.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol, cast

import anyio

from dogs_core.domain.renewal import (
    Accepted,
    ArmWatchdog,
    CancelWatchdog,
    Command,
    FailWaiters,
    RefusalReason,
    RenewalMachine,
    RenewalOutcome,
    ReportStale,
    ResolveWaiters,
    StaleReason,
    StartWrite,
)
from dogs_core.runtime.plumbing.loop import new_event

if TYPE_CHECKING:
    from dogs_core.domain.progress import Progress
    from dogs_core.domain.records import ClaimedJob
    from dogs_core.ports import AsyncFollowingStore, AsyncJobStore, Clock
    from dogs_core.runtime.plumbing.deadlines import Deadline, Deadlines

Spawn = Callable[..., None]
"""Starts ``func(*args)`` as a task tied to the execution: ``spawn(func, *args)``."""

RenewWrite = Callable[[datetime], Awaitable[bool]]
"""One fenced renewal write to ``until``: ``True`` when it matched, ``False`` when the lock was
lost; it raises on a store error."""

__all__ = ["LockKeeper", "ProgressRider", "RenewWrite", "job_lock_write"]

logger = logging.getLogger("dogs.lock")


class ProgressRider(Protocol):
    """What a job's renewal write carries besides the lock: the handler's latest progress
    (:mod:`dogs_core.runtime.execution.progress`)."""

    def take_progress(self) -> Progress | None:
        """The progress this write carries (``None``: none, a plain renewal); a write that
        took one calls :meth:`progress_written` when it ends."""
        ...

    def progress_written(self) -> None:
        """The write that took a progress ended (landed, matched nothing or raised)."""
        ...


class _Ticket:
    """The callers waiting for one renewal write."""

    __slots__ = ("done", "error", "outcome")

    def __init__(self) -> None:
        self.done = new_event()
        self.outcome: RenewalOutcome | None = None
        self.error: BaseException | None = None


class LockKeeper:
    """Renews one execution's lock and watches its deadline.

    Renewal writes run as tasks started by ``spawn`` (the execution's); the watchdog is an
    entry in the workers' shared ``deadlines`` heap, not a task of its own.
    """

    def __init__(
        self,
        *,
        job: ClaimedJob | None = None,
        store: AsyncJobStore | None = None,
        clock: Clock,
        lock_time: timedelta,
        deadlines: Deadlines,
        spawn: Spawn,
        on_stale: Callable[[StaleReason], None],
        locked_at: float | None = None,
        write: RenewWrite | None = None,
        label: str | None = None,
        rider: ProgressRider | None = None,
    ) -> None:
        """``locked_at`` is the loop time at which the current ``lockedUntil`` was computed
        (before the write that stored it); the initial watchdog fires ``lock_time`` after it.
        ``write`` performs one renewal (default: ``store.extend_lock`` of ``job``); ``label``
        names the lock in logs (default: the job's name and id); ``rider``, what the default
        write carries besides the lock (a job's progress)."""
        if write is None:
            if job is None or store is None:
                raise TypeError("LockKeeper needs a job and its store, or a write")
            write = job_lock_write(job, store, rider)
        if label is None:
            label = "a lock" if job is None else f"{job.job_name} ({job.job_id})"
        self._renew = write
        self._label = label
        self._clock = clock
        self._deadlines = deadlines
        self._spawn = spawn
        self._on_stale = on_stale
        self._machine = RenewalMachine(
            now=anyio.current_time() if locked_at is None else locked_at,
            lock_time=lock_time.total_seconds(),
        )
        self._watchdog_entry: Deadline | None = None
        self._watchdog_generation: int | None = None
        self._tickets: dict[int, _Ticket] = {}
        self._write_timeout = max(lock_time.total_seconds(), 1.0)

    @property
    def machine(self) -> RenewalMachine:
        return self._machine

    def start(self) -> None:
        self._perform(self._machine.start())

    async def extend(self, seconds: float) -> bool:
        """Ask for ``lockedUntil = now + seconds``; True once a write carrying it succeeded."""
        now = anyio.current_time()
        self._fire_if_due(now)
        result = self._machine.request(seconds, now)
        if not isinstance(result, Accepted):
            logger.warning("extend_lock_time ignored for %s: %s", self._label, result.reason)
            return False
        ticket = self._tickets.get(result.ticket)
        if ticket is None:
            ticket = self._tickets[result.ticket] = _Ticket()
        self._perform(result.commands)
        await ticket.done.wait()
        if ticket.error is not None:
            raise ticket.error
        return ticket.outcome is RenewalOutcome.RENEWED

    def pulse(self, seconds: float) -> RefusalReason | None:
        """Ask for ``lockedUntil = now + seconds`` without waiting for the write (a progress
        report's renewal); why it was refused, or ``None``."""
        now = anyio.current_time()
        self._fire_if_due(now)
        result = self._machine.request(seconds, now)
        if not isinstance(result, Accepted):
            return result.reason
        self._perform(result.commands)
        return None

    def clear(self) -> None:
        self._fire_if_due(anyio.current_time())
        self._perform(self._machine.clear())

    def finish(self) -> None:
        self._perform(self._machine.finish())

    def check_deadline(self) -> bool:
        """Report stale now if the lock has already run out; True while the lock still holds.

        Called before the handler starts: a claim whose reply arrived after its own lock time
        (a paused process, a very slow network) must not run the job."""
        self._fire_if_due(anyio.current_time())
        return self._machine.live

    def mark_stale(self) -> None:
        self._perform(self._machine.mark_stale())

    def _fire_if_due(self, now: float) -> None:
        """Deliver a watchdog that is due but whose timer task has not run yet (same instant, or
        a stalled loop): a pulse or a clear must not outrun it and revive an expired lock."""
        watchdog = self._machine.watchdog
        if watchdog is None or now < watchdog.deadline:
            return
        self._disarm()
        self._perform(self._machine.watchdog_fired(watchdog.generation, now))

    # -- performing commands ------------------------------------------------------------------

    def _perform(self, commands: tuple[Command, ...]) -> None:
        for command in commands:
            # Most frequent first: every execution arms its watchdog and cancels it at the end.
            if isinstance(command, ArmWatchdog):
                self._arm(command)
            elif isinstance(command, CancelWatchdog):
                if self._watchdog_generation == command.generation:
                    self._disarm()
            elif isinstance(command, StartWrite):
                self._spawn(self._write, command)
            elif isinstance(command, ReportStale):
                self._on_stale(command.reason)
            elif isinstance(command, ResolveWaiters):
                ticket = self._tickets.pop(command.ticket, None)
                if ticket is not None:
                    ticket.outcome = command.outcome
                    ticket.done.set()
            elif isinstance(command, FailWaiters):
                ticket = self._tickets.pop(command.ticket, None)
                if ticket is not None:
                    error = command.error
                    ticket.error = (
                        error if isinstance(error, BaseException) else RuntimeError(str(error))
                    )
                    ticket.done.set()

    def _arm(self, command: ArmWatchdog) -> None:
        # Armed at the absolute deadline rather than ``command.delay`` from now: the initial
        # watchdog's delay is counted from ``locked_at``, which may be in the past, and the
        # timer task may run late (a stalled loop); neither may push it past the lock.
        self._disarm()
        generation = command.generation

        def fired(now: float) -> None:
            if self._watchdog_generation == generation:
                self._watchdog_entry = None
                self._watchdog_generation = None
            self._perform(self._machine.watchdog_fired(generation, now))

        self._watchdog_entry = self._deadlines.arm(command.deadline, fired)
        self._watchdog_generation = generation

    def _disarm(self) -> None:
        entry = self._watchdog_entry
        if entry is not None:
            self._deadlines.cancel(entry)
        self._watchdog_entry = None
        self._watchdog_generation = None

    async def _write(self, command: StartWrite) -> None:
        locked_until = self._clock.now() + timedelta(seconds=command.extra)
        try:
            with anyio.fail_after(self._write_timeout):
                matched = await self._renew(locked_until)
        except Exception as error:
            logger.warning("lock renewal of %s failed: %r", self._label, error)
            self._perform(self._machine.write_failed(command.write_id, error, anyio.current_time()))
            return
        now = anyio.current_time()
        if matched:
            self._perform(self._machine.write_succeeded(command.write_id, now))
        else:
            self._perform(self._machine.write_lost_lock(command.write_id, now))


def job_lock_write(
    job: ClaimedJob, store: AsyncJobStore, rider: ProgressRider | None = None
) -> RenewWrite:
    """The renewal write of a job's own lock: ``store.extend_lock`` fenced by its lock id, or,
    when ``rider`` has a progress for it, the following role's ``write_progress`` with the lock
    (one fenced write: the progress rides the renewal)."""
    if rider is None:

        async def write(until: datetime) -> bool:
            return await store.extend_lock(job.job_id, job.lock_id, until)

        return write

    async def write_with_progress(until: datetime) -> bool:
        progress = rider.take_progress()
        if progress is None:
            return await store.extend_lock(job.job_id, job.lock_id, until)
        following = cast("AsyncFollowingStore", store)
        try:
            return await following.write_progress(
                job.job_id, job.lock_id, progress, locked_until=until
            )
        finally:
            rider.progress_written()

    return write_with_progress
