"""Single-flight lock renewal and the stale watchdog of one execution.

The rules are those of docs/concepts.md#renewal-single-flight-coalescing-one-watchdog and
docs/concepts.md#stale-executions.

This module is sans-I/O, in the style of h11: :class:`RenewalMachine` holds the renewal state of
one execution, the runtime feeds it events (a pulse, a renewal write that succeeded, lost its
lock or failed, a watchdog timer that fired, the execution that was cleared, finished or found
stale elsewhere) and performs the :data:`Command` values it returns, **in order**. The machine
does no I/O, reads no clock and starts nothing; it is deterministic, so every interleaving can be
tested without a database or real time.

Units
-----
Every instant (``now``, deadlines) is a ``float`` number of seconds on **one monotonic clock**,
the one the runtime's timers use (``anyio.current_time()`` under anyio, virtual time in tests).
Every duration (``lock_time``, ``extra``, delays) is a ``float`` number of seconds. The runtime
converts ``timedelta`` or milliseconds at its edge. A ``now`` earlier than one seen before is
treated as the latest one seen (the machine's clock never runs backwards).

Rules (the 4.6.7 semantics of Dogs, plus the improvements noted below)
----------------------------------------------------------------------
* **Single flight.** At most one renewal write is in flight. Pulses that arrive while a write
  is in flight coalesce into one pending slot that keeps the *longest* requested duration, and
  produce at most one follow-up write, started as soon as the in-flight write succeeds. A burst
  of N pulses costs at most one extra write. Writes are serialized, so an older write can never
  overwrite a newer deadline.
* **Deadline from the write start.** A write started at ``t`` with ``extra`` sets
  ``lockedUntil = t + extra``; its ``deadline`` is computed before the DB call, so database
  latency eats into the lock instead of extending it past what the database holds.
* **One watchdog.** At most one watchdog timer is armed. Every arming carries a new
  ``generation``; a timer of an older generation that fires anyway is ignored. An armed watchdog
  is always preceded by a :class:`CancelWatchdog` of the previous one, so a runtime that follows
  the commands never holds two timers.
* **Watchdog placement** (stricter than Dogs, which disarms the watchdog for the duration of
  the write). While the execution is live, the watchdog is armed at ``confirmed_deadline``, the
  ``lockedUntil`` the last successful write (or the claim) set. A write in flight proves nothing
  until it answers: if the confirmed lock runs out first, the execution is reported stale even
  though the write may still land, because from that instant another worker may own the job.
  So a renewal write that hangs can never hide an expired lock, and no execution outlives the
  lock the database is known to hold. After a success the watchdog moves to ``write start +
  extra`` (a zero delay if the response came later), which may be *earlier* than before if the
  caller asked for a shorter extension. Renew well before the lock runs out (the heartbeat
  pulses at a third of the lock time).
* **Terminal states win.** Once the execution is finished, stale, or its watchdog cleared, no
  write starts, no watchdog is armed, and new pulses are refused with a :class:`RefusalReason`
  (the runtime logs a warning). Clearing is permanent. A pending (not yet started) follow-up is
  abandoned at that moment: its waiters are resolved with :attr:`RenewalOutcome.ABANDONED`. A
  write already in flight still completes and resolves its own waiters.
* **Stale exactly once** (:class:`ReportStale`): when the current watchdog fires, when a write
  finds the lock lost, when a write fails with a database error, or when the runtime calls
  :meth:`RenewalMachine.mark_stale` (a post-run fenced write matched nothing). A lost lock or a
  write error reported *after* :meth:`RenewalMachine.finish` is not turned into stale: once the
  handler has returned, the post-run fenced write decides ownership (it may have deleted the
  record, which also makes a racing renewal match nothing).
* **Waiters.** Each accepted pulse gets a ``ticket``: the id of the write that will carry it.
  A pulse that starts a write gets that write's id; a pulse that arrives while write ``k`` is in
  flight gets ``k + 1``, the follow-up, which carries a duration at least as long as its own.
  A pulse is never answered by a write that started before it. Each ticket is settled exactly
  once, by one :class:`ResolveWaiters` or :class:`FailWaiters`; at most two tickets are open at
  any time (the in-flight write's and the pending follow-up's).

How the runtime drives it
-------------------------
Create the machine when the execution starts (``RenewalMachine(now=t, lock_time=L)``) and
perform :meth:`RenewalMachine.start`'s commands (the initial watchdog at ``t + L``). Then feed
every event, from one task or under one lock (the machine is not thread-safe), and perform the
returned commands in order:

* :class:`StartWrite` — start a task that does the fenced update (``lockedUntil = now + extra``
  where ``_id`` and ``lockId`` match) and then calls exactly one of
  :meth:`~RenewalMachine.write_succeeded` (matched), :meth:`~RenewalMachine.write_lost_lock`
  (matched nothing) or :meth:`~RenewalMachine.write_failed` (raised; pass the exception) with
  the ``write_id``. Give the write a timeout if the store has none: a hung write keeps the
  single flight busy.
* :class:`ArmWatchdog` — start the one watchdog timer; after ``delay`` seconds call
  :meth:`~RenewalMachine.watchdog_fired` with its ``generation``.
* :class:`CancelWatchdog` — cancel the watchdog timer of that generation (a race where it fires
  anyway is harmless: the machine ignores an old generation).
* :class:`ReportStale` — run the stale handling (log, ``on_stale``, fenced
  priority demotion, release capacity, stale history, optional cancellation). Emitted at most
  once per execution.
* :class:`ResolveWaiters` — complete every caller waiting on ``ticket`` with ``outcome``.
* :class:`FailWaiters` — raise ``error`` (the object passed to ``write_failed``) in every caller
  waiting on ``ticket``.

For :meth:`~RenewalMachine.request`: on :class:`Accepted`, register the caller under
``ticket`` *before* performing ``commands``; on :class:`Refused`, log a warning and return. When
the handler returns or raises, call :meth:`~RenewalMachine.finish` before the post-run fenced
write, and :meth:`~RenewalMachine.mark_stale` if that write matched nothing.
``ExecutionContext.clear_stale_timeout()`` maps to :meth:`~RenewalMachine.clear`. An automatic
heartbeat pulses ``request(lock_time, now)`` every :func:`heartbeat_interval` seconds through the
same machine and stops at the first refusal.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import TypeAlias

from dogs_core.errors import InvalidOptionError, RenewalProtocolError

__all__ = [
    "Accepted",
    "ArmWatchdog",
    "CancelWatchdog",
    "Command",
    "Commands",
    "FailWaiters",
    "InFlightWrite",
    "RefusalReason",
    "Refused",
    "RenewalMachine",
    "RenewalOutcome",
    "RenewalProtocolError",
    "ReportStale",
    "RequestResult",
    "ResolveWaiters",
    "StaleReason",
    "StartWrite",
    "Watchdog",
    "heartbeat_interval",
]


class RenewalOutcome(enum.StrEnum):
    """How a ticket's waiters completed when they were not failed with an error."""

    RENEWED = "renewed"
    """The fenced write matched: ``lockedUntil`` is now the write's start plus its extra."""

    LOCK_LOST = "lock_lost"
    """The fenced write matched nothing (or the write the pulse was coalesced behind did):
    another execution owns the job, or the record is gone. No further write is made."""

    ABANDONED = "abandoned"
    """No write was made for this ticket: the execution finished, went stale or had its watchdog
    cleared before the follow-up write could start."""


class RefusalReason(enum.StrEnum):
    """Why a pulse was refused (checked in this order)."""

    STALE = "stale"
    """Staleness was reported for the execution."""

    FINISHED = "finished"
    """The handler has returned or raised."""

    CLEARED = "cleared"
    """``clear_stale_timeout()`` was called: renewal is disabled for good."""


class StaleReason(enum.StrEnum):
    """What made the execution stale."""

    WATCHDOG_EXPIRED = "watchdog_expired"
    """The watchdog fired: the lock has expired on the local clock."""

    LOCK_LOST = "lock_lost"
    """A renewal write matched nothing: the lock belongs to someone else."""

    WRITE_FAILED = "write_failed"
    """A renewal write raised: ownership can no longer be vouched for."""

    EXTERNAL = "external"
    """The runtime said so (:meth:`RenewalMachine.mark_stale`), e.g. a post-run fenced write
    matched nothing."""


@dataclass(frozen=True, slots=True)
class StartWrite:
    """Perform fenced write ``write_id``: ``lockedUntil = now + extra`` where ``_id`` and
    ``lockId`` match, then report its result with the same ``write_id``.

    ``deadline`` is the write's start time plus ``extra`` on the machine's clock: the watchdog
    deadline that a success confirms.
    """

    write_id: int
    extra: float
    deadline: float


@dataclass(frozen=True, slots=True)
class ArmWatchdog:
    """Arm the one watchdog timer: call ``watchdog_fired(generation, now)`` after ``delay``
    seconds, i.e. at ``deadline`` (``delay = max(0, deadline - now)``). No other watchdog is armed
    when this is emitted."""

    generation: int
    deadline: float
    delay: float


@dataclass(frozen=True, slots=True)
class CancelWatchdog:
    """Cancel the armed watchdog timer, whose generation is ``generation``."""

    generation: int


@dataclass(frozen=True, slots=True)
class ReportStale:
    """Run the stale handling of the execution (docs/concepts.md#stale-executions). Emitted
    at most once."""

    reason: StaleReason


@dataclass(frozen=True, slots=True)
class ResolveWaiters:
    """Complete every caller waiting on ``ticket`` with ``outcome``."""

    ticket: int
    outcome: RenewalOutcome


@dataclass(frozen=True, slots=True)
class FailWaiters:
    """Raise ``error`` (passed through untouched from ``write_failed``) in every caller waiting on
    ``ticket``."""

    ticket: int
    error: object


Command: TypeAlias = (
    StartWrite | ArmWatchdog | CancelWatchdog | ReportStale | ResolveWaiters | FailWaiters
)
"""One thing the runtime must do; see the module docstring for each."""

Commands: TypeAlias = tuple[Command, ...]
"""Commands to perform in order."""


@dataclass(frozen=True, slots=True)
class Accepted:
    """The pulse was accepted; its caller waits on ``ticket`` (register it, then perform
    ``commands``)."""

    ticket: int
    commands: Commands


@dataclass(frozen=True, slots=True)
class Refused:
    """The pulse was refused and nothing happens (log a warning); ``commands`` is always empty."""

    reason: RefusalReason
    commands: Commands = ()


RequestResult: TypeAlias = Accepted | Refused
"""The answer to :meth:`RenewalMachine.request`."""


@dataclass(frozen=True, slots=True)
class InFlightWrite:
    """The renewal write currently in flight."""

    write_id: int
    extra: float
    started_at: float
    deadline: float


@dataclass(frozen=True, slots=True)
class Watchdog:
    """The armed watchdog timer."""

    generation: int
    deadline: float


def _validate_duration(field: str, value: float) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise InvalidOptionError(field, value, "must be a number of seconds")
    if not math.isfinite(value) or value <= 0:
        raise InvalidOptionError(field, value, "must be a finite number of seconds > 0")
    return float(value)


def heartbeat_interval(lock_time_s: float, fraction: float = 1 / 3) -> float:
    """Seconds between automatic heartbeat pulses: ``lock_time_s * fraction``.

    A heartbeat renews the lock for ``lock_time_s`` every interval, so with the default third a
    renewal can fail or be slow twice before the lock expires. ``lock_time_s`` must be finite and
    positive, ``fraction`` strictly between 0 and 1; :class:`InvalidOptionError` otherwise.
    """
    lock_time = _validate_duration("lock_time", lock_time_s)
    if (
        not isinstance(fraction, int | float)
        or isinstance(fraction, bool)
        or not 0 < fraction < 1  # also rejects NaN
    ):
        raise InvalidOptionError(
            "heartbeat_fraction", fraction, "must be a number strictly between 0 and 1"
        )
    return lock_time * fraction


class RenewalMachine:
    """The renewal state of one execution. Constant size: a few flags and numbers, the in-flight
    write, the armed watchdog and one pending-duration slot; never a queue.

    See the module docstring for the rules and for what the runtime does with each command.
    """

    __slots__ = (
        "_cleared",
        "_confirmed_deadline",
        "_finished",
        "_generation",
        "_in_flight",
        "_lock_time",
        "_now",
        "_pending_extra",
        "_stale_reason",
        "_started",
        "_watchdog",
        "_writes_started",
    )

    def __init__(self, *, now: float, lock_time: float) -> None:
        """Start tracking an execution that holds its lock until ``now + lock_time`` (its
        effective lock time, in seconds). The initial watchdog is armed in the state; perform
        the command that :meth:`start` returns to arm the real timer."""
        self._lock_time = _validate_duration("lock_time", lock_time)
        self._now = _finite_time(now)
        self._confirmed_deadline = self._now + self._lock_time
        self._generation = 1
        self._watchdog: Watchdog | None = Watchdog(1, self._confirmed_deadline)
        self._in_flight: InFlightWrite | None = None
        self._pending_extra: float | None = None
        self._writes_started = 0
        self._started = False
        self._cleared = False
        self._finished = False
        self._stale_reason: StaleReason | None = None

    def __repr__(self) -> str:
        return (
            f"RenewalMachine(refusal_reason={self.refusal_reason}, "
            f"confirmed_deadline={self._confirmed_deadline}, watchdog={self._watchdog}, "
            f"in_flight={self._in_flight}, pending_extra={self._pending_extra})"
        )

    # ----------------------------------------------------------------------------- inspection

    @property
    def lock_time(self) -> float:
        """The effective lock time the execution started with, in seconds."""
        return self._lock_time

    @property
    def live(self) -> bool:
        """True while pulses are accepted: not stale, not finished, not cleared."""
        return self.refusal_reason is None

    @property
    def refusal_reason(self) -> RefusalReason | None:
        """Why a pulse would be refused now, or None while the execution is live."""
        if self._stale_reason is not None:
            return RefusalReason.STALE
        if self._finished:
            return RefusalReason.FINISHED
        if self._cleared:
            return RefusalReason.CLEARED
        return None

    @property
    def stale_reported(self) -> bool:
        """True once :class:`ReportStale` has been emitted."""
        return self._stale_reason is not None

    @property
    def stale_reason(self) -> StaleReason | None:
        """The reason given in the one :class:`ReportStale`, if any."""
        return self._stale_reason

    @property
    def cleared(self) -> bool:
        """True once :meth:`clear` was called (permanent)."""
        return self._cleared

    @property
    def finished(self) -> bool:
        """True once :meth:`finish` was called."""
        return self._finished

    @property
    def in_flight(self) -> InFlightWrite | None:
        """The renewal write in flight, if any."""
        return self._in_flight

    @property
    def pending_extra(self) -> float | None:
        """The longest duration requested since the in-flight write started, if any."""
        return self._pending_extra

    @property
    def pending_ticket(self) -> int | None:
        """The ticket of the pending follow-up write, if a pulse is pending."""
        if self._pending_extra is None or self._in_flight is None:
            return None
        return self._in_flight.write_id + 1

    @property
    def confirmed_deadline(self) -> float:
        """The ``lockedUntil`` known to be in the database: the start plus the lock time, then
        each successful write's start plus its extra."""
        return self._confirmed_deadline

    @property
    def watchdog(self) -> Watchdog | None:
        """The armed watchdog (armed exactly while the execution is live)."""
        return self._watchdog

    @property
    def watchdog_deadline(self) -> float | None:
        """When the armed watchdog fires, if one is armed."""
        return None if self._watchdog is None else self._watchdog.deadline

    @property
    def writes_started(self) -> int:
        """How many renewal writes were started; also the id of the latest one."""
        return self._writes_started

    # --------------------------------------------------------------------------------- events

    def start(self) -> Commands:
        """The commands that begin the execution: arm the initial watchdog at
        ``now + lock_time``. Call it once, before any other event."""
        if self._started:
            raise RenewalProtocolError("RenewalMachine.start() was already called")
        self._started = True
        assert self._watchdog is not None
        return (ArmWatchdog(self._watchdog.generation, self._watchdog.deadline, self._lock_time),)

    def request(self, extra: float, now: float) -> RequestResult:
        """A pulse (``extend_lock_time(extra)`` or a heartbeat) at ``now``.

        Refused while not :attr:`live`. Otherwise accepted: with no write in flight it starts
        one (``lockedUntil = now + extra``); with a write in flight it is coalesced into the
        pending follow-up, whose duration becomes the longest pending one.
        """
        extra = _validate_duration("extra", extra)
        t = self._advance(now)
        reason = self.refusal_reason
        if reason is not None:
            return Refused(reason)
        if self._in_flight is not None:
            pending = self._pending_extra
            self._pending_extra = extra if pending is None else max(pending, extra)
            return Accepted(self._in_flight.write_id + 1, ())
        write = self._begin_write(extra, t)
        return Accepted(write.write_id, (write,))

    def write_succeeded(self, write_id: int, now: float) -> Commands:
        """Write ``write_id`` matched: the lock is held until its deadline.

        Resolves its ticket with :attr:`RenewalOutcome.RENEWED`. While live, moves the watchdog
        to the confirmed deadline and starts the pending follow-up, if any.
        """
        t = self._advance(now)
        write = self._complete(write_id)
        self._confirmed_deadline = write.deadline
        commands: list[Command] = []
        follow_up: StartWrite | None = None
        if self.live:
            pending = self._pending_extra
            if pending is not None:
                self._pending_extra = None
                follow_up = self._begin_write(pending, t)
            self._retarget(write.deadline, t, commands)
        commands.append(ResolveWaiters(write.write_id, RenewalOutcome.RENEWED))
        if follow_up is not None:
            commands.append(follow_up)
        return tuple(commands)

    def write_lost_lock(self, write_id: int, now: float) -> Commands:
        """Write ``write_id`` matched nothing: the lock is lost.

        Reports stale (unless already reported or finished), makes no further write, and
        resolves its ticket and the pending one with :attr:`RenewalOutcome.LOCK_LOST`.
        """
        self._advance(now)
        write = self._complete(write_id)
        commands: list[Command] = []
        if not self._finished and self._stale_reason is None:
            self._become_stale(StaleReason.LOCK_LOST, commands)
        commands.append(ResolveWaiters(write.write_id, RenewalOutcome.LOCK_LOST))
        if self._pending_extra is not None:
            self._pending_extra = None
            commands.append(ResolveWaiters(write.write_id + 1, RenewalOutcome.LOCK_LOST))
        return tuple(commands)

    def write_failed(self, write_id: int, error: object, now: float) -> Commands:
        """Write ``write_id`` raised ``error``.

        Reports stale (unless already reported or finished), makes no further write, and fails
        its ticket and the pending one with ``error``, passed through untouched.
        """
        self._advance(now)
        write = self._complete(write_id)
        commands: list[Command] = []
        if not self._finished and self._stale_reason is None:
            self._become_stale(StaleReason.WRITE_FAILED, commands)
        commands.append(FailWaiters(write.write_id, error))
        if self._pending_extra is not None:
            self._pending_extra = None
            commands.append(FailWaiters(write.write_id + 1, error))
        return tuple(commands)

    def watchdog_fired(self, generation: int, now: float) -> Commands:
        """The watchdog timer of ``generation`` fired at ``now``.

        Ignored unless it is the armed generation. Reports stale and abandons the pending
        follow-up; a write in flight still completes. A timer that fires before its deadline on
        the machine's clock is re-armed for the rest.
        """
        t = self._advance(now)
        watchdog = self._watchdog
        if watchdog is None or watchdog.generation != generation:
            return ()
        if t < watchdog.deadline:
            self._generation += 1
            self._watchdog = Watchdog(self._generation, watchdog.deadline)
            return (ArmWatchdog(self._generation, watchdog.deadline, watchdog.deadline - t),)
        self._watchdog = None
        commands: list[Command] = []
        self._become_stale(StaleReason.WATCHDOG_EXPIRED, commands)
        self._abandon_pending(commands)
        return tuple(commands)

    def clear(self) -> Commands:
        """``clear_stale_timeout()``: disarm the watchdog for good; later pulses are refused.

        A write in flight still completes (it arms nothing); the pending follow-up is abandoned.
        Idempotent.
        """
        self._require_started()
        self._cleared = True
        commands: list[Command] = []
        self._disarm(commands)
        self._abandon_pending(commands)
        return tuple(commands)

    def finish(self) -> Commands:
        """The handler returned or raised: disarm the watchdog; later pulses are refused.

        A write in flight still completes, but its lost lock or error no longer reports stale
        (the post-run fenced write decides; call :meth:`mark_stale` if it matched nothing). The
        pending follow-up is abandoned. Idempotent.
        """
        self._require_started()
        self._finished = True
        commands: list[Command] = []
        self._disarm(commands)
        self._abandon_pending(commands)
        return tuple(commands)

    def mark_stale(self) -> Commands:
        """The runtime found the execution stale by other means (a post-run fenced write matched
        nothing). Reports stale unless it was already reported; disarms the watchdog and
        abandons the pending follow-up."""
        self._require_started()
        if self._stale_reason is not None:
            return ()
        commands: list[Command] = []
        self._become_stale(StaleReason.EXTERNAL, commands)
        self._abandon_pending(commands)
        return tuple(commands)

    # -------------------------------------------------------------------------------- helpers

    def _require_started(self) -> None:
        if not self._started:
            raise RenewalProtocolError("call RenewalMachine.start() before feeding events")

    def _advance(self, now: float) -> float:
        self._require_started()
        self._now = max(self._now, _finite_time(now))
        return self._now

    def _begin_write(self, extra: float, t: float) -> StartWrite:
        self._writes_started += 1
        write = InFlightWrite(self._writes_started, extra, t, t + extra)
        self._in_flight = write
        return StartWrite(write.write_id, write.extra, write.deadline)

    def _complete(self, write_id: int) -> InFlightWrite:
        write = self._in_flight
        if write is None or write.write_id != write_id:
            raise RenewalProtocolError(
                f"renewal write {write_id!r} is not in flight (in flight: {write})"
            )
        self._in_flight = None
        return write

    def _retarget(self, deadline: float, t: float, commands: list[Command]) -> None:
        # Only called while live, when a watchdog is always armed.
        current = self._watchdog
        assert current is not None
        if current.deadline == deadline:
            return
        commands.append(CancelWatchdog(current.generation))
        self._generation += 1
        self._watchdog = Watchdog(self._generation, deadline)
        commands.append(ArmWatchdog(self._generation, deadline, max(0.0, deadline - t)))

    def _disarm(self, commands: list[Command]) -> None:
        if self._watchdog is not None:
            commands.append(CancelWatchdog(self._watchdog.generation))
            self._watchdog = None

    def _become_stale(self, reason: StaleReason, commands: list[Command]) -> None:
        self._stale_reason = reason
        self._disarm(commands)
        commands.append(ReportStale(reason))

    def _abandon_pending(self, commands: list[Command]) -> None:
        if self._pending_extra is not None and self._in_flight is not None:
            self._pending_extra = None
            commands.append(ResolveWaiters(self._in_flight.write_id + 1, RenewalOutcome.ABANDONED))


def _finite_time(now: float) -> float:
    if not isinstance(now, int | float) or isinstance(now, bool) or not math.isfinite(now):
        raise RenewalProtocolError(f"now={now!r} is not a finite number of seconds")
    return float(now)
