"""The progress of a running execution: what a handler reports, checked, and when it is written.

A handler reports ``ctx.progress(fraction, message, data=...)`` as often as it likes (every item
of a 10,000-item loop). :func:`check_progress` refuses what cannot be kept, naming the field:

* ``fraction``: ``None`` (unknown) or a real number from 0 to 1 (not a bool, NaN or infinite);
* ``message``: ``None`` or a string of at most :data:`MAX_PROGRESS_MESSAGE` characters, no NUL;
* ``data``: ``None`` or a mapping MongoDB can store (the rules of params:
  :func:`~dogs_core.domain.params.to_bson_storable`) of at most :data:`MAX_PROGRESS_DATA_BYTES`
  as BSON; it is copied, so the handler may change its own dict afterwards;
* at least one of the three.

What is written, and when, is :class:`ProgressPacer`'s rule (sans-I/O, like
:mod:`dogs_core.domain.renewal`, whose single-flight writes carry the progress):

* **Latest wins.** A report replaces the one staged before it; only the latest staged one is
  ever written.
* **Riding the renewal.** A progress write *is* a lock renewal (the fenced write sets
  ``lockedUntil`` and ``progress`` together), so any renewal that starts while a report is staged
  carries it for free: a heartbeat, an ``extend_lock_time``.
* **At most one write of its own per interval.** A renewal is asked for a report (a pulse) only
  ``interval`` seconds after the last write that carried one started
  (:data:`DEFAULT_PROGRESS_INTERVAL`, the ``progress_interval`` worker option); a report staged
  sooner waits for that (a flush) unless a renewal made anyway carries it first. So with a
  report on every item, a job of ``T`` seconds makes at most ``T / interval + 1`` writes because
  of its progress, whatever its item count, besides the renewals it makes anyway.
* **Single flight.** At most one write carrying progress is in flight; a report staged during it
  is written after it (at the interval's end).
* **Nothing forgotten.** While a report is staged, a write carrying it is started, outstanding or
  in flight, or a flush is armed (:meth:`ProgressPacer.pending`).

The runtime drives the pacer from the event loop: :meth:`~ProgressPacer.staged` when a report
arrives, :meth:`~ProgressPacer.write_started` when a renewal write starts (does it carry the
staged report?), :meth:`~ProgressPacer.write_ended` when a write that carried one ended,
:meth:`~ProgressPacer.flush_due` when an armed flush fires, :meth:`~ProgressPacer.pulse_lost`
when a pulse it asked for will start no write. Each returns what to do next: :class:`WriteNow`
(pulse a renewal), :class:`FlushAt` (arm the one flush timer) or ``None``.

Times are ``float`` seconds on the runtime's monotonic clock; durations are seconds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, TypeAlias

from dogs_core.domain.params import bson_document_size, to_bson_storable
from dogs_core.domain.values import value
from dogs_core.errors import InvalidOptionError, InvalidParamsError, InvalidProgressError

__all__ = [
    "DEFAULT_PROGRESS_INTERVAL",
    "MAX_PROGRESS_DATA_BYTES",
    "MAX_PROGRESS_MESSAGE",
    "FlushAt",
    "Progress",
    "ProgressPacer",
    "ProgressStep",
    "WriteNow",
    "check_progress",
    "progress_interval",
]

#: The longest progress message kept, in characters.
MAX_PROGRESS_MESSAGE: Final = 1_000
#: The largest progress ``data`` kept, as a BSON document (16 KiB).
MAX_PROGRESS_DATA_BYTES: Final = 16 * 1024
#: Seconds between two writes that carry progress, unless the workers say otherwise.
DEFAULT_PROGRESS_INTERVAL: Final = 1.0


@value
class Progress:
    """How far one execution is, as its handler last reported it.

    ``fraction`` from 0 to 1 (``None``: not known), ``message`` and ``data`` as given,
    ``updated_at`` when it was reported (the store's clock), ``execution_id`` the execution that
    reported it. Stored on the record while the execution runs (additive ``progress``) and
    copied to its history row at the end.
    """

    fraction: float | None
    message: str | None
    data: Mapping[str, Any] | None
    updated_at: datetime
    execution_id: str

    @property
    def percent(self) -> float | None:
        """``fraction`` as a percentage (``None`` when not known)."""
        return None if self.fraction is None else self.fraction * 100.0


def check_progress(
    fraction: object, message: object, data: object, *, job: str | None = None
) -> tuple[float | None, str | None, dict[str, Any] | None]:
    """The report checked and normalized (``fraction`` a float, ``data`` a plain copy), or
    :class:`~dogs_core.errors.InvalidProgressError` naming the field and the value."""
    if fraction is None and message is None and data is None:
        raise InvalidProgressError(
            "fraction", None, "give a fraction, a message or data (all three are None)"
        )
    return _fraction(fraction), _message(message), _data(data, job)


def _fraction(fraction: object) -> float | None:
    if fraction is None:
        return None
    if isinstance(fraction, bool) or not isinstance(fraction, int | float):
        raise InvalidProgressError("fraction", fraction, "must be a number from 0 to 1, or None")
    if not math.isfinite(fraction) or not 0 <= fraction <= 1:
        raise InvalidProgressError("fraction", fraction, "must be a finite number from 0 to 1")
    return float(fraction)


def _message(message: object) -> str | None:
    if message is None:
        return None
    if not isinstance(message, str):
        raise InvalidProgressError("message", message, "must be a string or None")
    if len(message) > MAX_PROGRESS_MESSAGE:
        raise InvalidProgressError(
            "message",
            message,
            f"is {len(message)} characters long; at most {MAX_PROGRESS_MESSAGE} are kept",
        )
    if "\x00" in message:
        raise InvalidProgressError("message", message, "must not contain a NUL character")
    return message


def _data(data: object, job: str | None) -> dict[str, Any] | None:
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise InvalidProgressError("data", data, "must be a mapping (a dict) or None")
    try:
        stored: dict[str, Any] = to_bson_storable(data, path="data", job=job)
    except InvalidParamsError as error:
        raise InvalidProgressError(error.field, error.value, error.reason) from None
    size = bson_document_size(stored)
    if size > MAX_PROGRESS_DATA_BYTES:
        raise InvalidProgressError(
            "data", data, f"is {size} bytes as BSON; at most {MAX_PROGRESS_DATA_BYTES} are kept"
        )
    return stored


def progress_interval(field: str, value: object) -> float:
    """A minimum interval between progress writes, in seconds: a finite number > 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidOptionError(field, value, "must be a number of seconds > 0")
    if not math.isfinite(value) or value <= 0:
        raise InvalidOptionError(field, value, "must be a finite number of seconds > 0")
    return float(value)


# -- the pacer ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WriteNow:
    """Pulse a lock renewal now: the write it starts carries the staged report."""


@dataclass(frozen=True, slots=True)
class FlushAt:
    """Arm the one flush timer at ``at``; call :meth:`ProgressPacer.flush_due` then."""

    at: float


ProgressStep: TypeAlias = WriteNow | FlushAt | None
"""What to do after an event: pulse, arm the flush, or nothing."""

_WRITE_NOW: Final = WriteNow()


class ProgressPacer:
    """When the progress of one execution is written (see the module documentation)."""

    __slots__ = ("_flush_at", "_interval", "_next_allowed", "_pulsed", "_staged", "_writing")

    def __init__(self, interval: float = DEFAULT_PROGRESS_INTERVAL) -> None:
        self._interval = progress_interval("progress_interval", interval)
        self._staged = False  # a report waits for a write
        self._pulsed = False  # a renewal was pulsed for it; its write has not started
        self._writing = False  # a write carrying a report is in flight
        self._flush_at: float | None = None  # the armed flush
        self._next_allowed = -math.inf  # when the next write carrying progress may start

    @property
    def interval(self) -> float:
        return self._interval

    @property
    def pending(self) -> bool:
        """Whether a staged report is on its way: pulsed, in flight or under a flush."""
        return self._pulsed or self._writing or self._flush_at is not None

    @property
    def has_staged(self) -> bool:
        return self._staged

    @property
    def writing(self) -> bool:
        return self._writing

    @property
    def flush_at(self) -> float | None:
        return self._flush_at

    def staged(self, now: float) -> ProgressStep:
        """A report was staged at ``now`` (replacing any staged before it)."""
        self._staged = True
        return self._next(now)

    def write_started(self, now: float) -> bool:
        """A renewal write starts at ``now``: ``True`` when it carries the staged report (then
        call :meth:`write_ended` when it ends)."""
        self._pulsed = False
        if not self._staged or self._writing:
            return False
        self._staged = False
        self._writing = True
        self._next_allowed = now + self._interval
        return True

    def write_ended(self, now: float) -> ProgressStep:
        """The write that carried a report ended (landed, matched nothing or failed)."""
        self._writing = False
        return self._next(now)

    def flush_due(self, now: float) -> ProgressStep:
        """The armed flush fired."""
        self._flush_at = None
        return self._next(now)

    def pulse_lost(self, now: float) -> ProgressStep:
        """A pulse asked for (:class:`WriteNow`) will start no write (it was refused, or
        coalesced behind a write that was abandoned)."""
        self._pulsed = False
        return self._next(now)

    def _next(self, now: float) -> ProgressStep:
        if not self._staged or self.pending:
            return None
        if now >= self._next_allowed:
            self._pulsed = True
            return _WRITE_NOW
        self._flush_at = self._next_allowed
        return FlushAt(self._next_allowed)
