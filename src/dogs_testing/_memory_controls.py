"""The controls role of the in-memory store (:mod:`dogs_core.domain.controls`): pauses,
concurrency slots and rate windows (leases: ``dogs_testing._memory_leases``). Each call runs
under the state's one lock, so it is one atomic step, as each of the MongoDB store's
single-document writes is. See :mod:`dogs_testing.memory`.

What is kept:

* pauses: the paused names (``"*"`` is one of them when every name is paused); a pause or a
  resume that changed them is offered to the pause feed (``watch_pauses``), a no-op is not;
* slots: per ``(job_name, key)``, the held slots by index with their holder and ``until``; a
  released slot is forgotten (a missing slot is free), a lapsed one stays its holder's (its
  renewal and release still match) until another holder takes it over;
* rate windows: per ``(job_name, key)``, the count of each window by its start, in the order
  the windows were first used; a window is forgotten one day after its end, measured by the
  start of a later window of the same key (MongoDB's ``purgeAt``, without needing a clock);

Times are kept truncated to the millisecond (BSON dates), so every comparison is made in
milliseconds, as on MongoDB. Input is checked as the MongoDB store checks it (non-empty names,
holders and owners, a key of at most ``MAX_KEY_LENGTH`` characters, a limit and a token of at
least 1, an index of at least 0, a window that ends after it starts): ``InvalidOptionError``,
and nothing is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from dogs_core.domain import validation
from dogs_core.domain.controls import (
    check_limit_key,
    check_slot,
)
from dogs_core.domain.records import to_millis
from dogs_core.errors import InvalidOptionError
from dogs_core.ports import Clock
from dogs_testing._memory_state import MemoryState

__all__ = ["MemoryControls"]

#: How long a rate window is remembered after its end (MongoDB's ``purgeAt``).
_WINDOW_KEPT = timedelta(days=1)


@dataclass(slots=True)
class _Held:
    """A held (possibly lapsed) slot."""

    holder: str
    until: datetime


@dataclass(slots=True)
class _Window:
    end: datetime
    count: int


class MemoryControls(MemoryState):
    """The fleet controls' part of the port over :class:`MemoryState` (the store's sync face
    adds the rest)."""

    def __init__(self, *, clock: Clock | None = None) -> None:
        super().__init__(clock=clock)
        self._paused: dict[str, datetime] = {}  # job name (or "*") -> paused at
        self._slots: dict[tuple[str, str], dict[int, _Held]] = {}
        self._windows: dict[tuple[str, str], dict[datetime, _Window]] = {}

    # ------------------------------------------------------------------ pause

    def set_paused(self, job_name: str, paused: bool, *, now: datetime) -> bool:
        """Pause (or resume) ``job_name``; ``"*"`` is stored as a name like any other."""
        validation.text("job_name", job_name)
        validation.boolean("paused", paused)
        with self._state():
            if paused == (job_name in self._paused):
                return False  # nothing changes: nothing for the pause feed either
            if paused:
                self._paused[job_name] = to_millis(now)
            else:
                del self._paused[job_name]
            self._feeds.offer_pause(job_name)
            return True

    def paused_names(self) -> frozenset[str]:
        with self._state():
            return frozenset(self._paused)

    # ------------------------------------------------------------------ concurrency slots

    def acquire_slot(
        self,
        job_name: str,
        key: str,
        *,
        limit: int,
        holder: str,
        until: datetime,
        now: datetime,
    ) -> int | None:
        """The slot ``holder`` already holds among ``0 .. limit-1`` (held again until
        ``until``), else the lowest free one (never held, released, or lapsed at ``now``)."""
        check_limit_key(job_name, key)
        validation.positive_int("limit", limit)
        validation.text("holder", holder)
        at, until = to_millis(now), to_millis(until)
        with self._state():
            slots = self._slots.setdefault((job_name, key), {})
            index = _own_slot(slots, holder, limit)
            if index is None:
                index = _free_slot(slots, limit, at)
            if index is None:
                return None
            slots[index] = _Held(holder, until)
            return index

    def renew_slot(
        self, job_name: str, key: str, index: int, *, holder: str, until: datetime
    ) -> bool:
        """Fenced by ``holder`` only: a lapsed slot nobody took over is renewed too."""
        check_slot(job_name, key, index, holder)
        with self._state():
            held = self._slots.get((job_name, key), {}).get(index)
            if held is None or held.holder != holder:
                return False
            held.until = to_millis(until)
            return True

    def release_slot(self, job_name: str, key: str, index: int, *, holder: str) -> bool:
        check_slot(job_name, key, index, holder)
        with self._state():
            slots = self._slots.get((job_name, key))
            held = None if slots is None else slots.get(index)
            if slots is None or held is None or held.holder != holder:
                return False
            del slots[index]
            if not slots:
                del self._slots[(job_name, key)]
            return True

    def held_slots(self, *, now: datetime) -> dict[str, int]:
        """Names without a held slot are left out (as a MongoDB ``$group`` leaves them)."""
        at = to_millis(now)
        counts: dict[str, int] = {}
        with self._state():
            for (job_name, _), slots in self._slots.items():
                held = sum(1 for slot in slots.values() if slot.until > at)
                if held:
                    counts[job_name] = counts.get(job_name, 0) + held
        return counts

    def slot_holders(self, *, now: datetime) -> dict[tuple[str, str, int], str]:
        """Testing helper: the holder of every slot held at ``now``, by ``(job_name, key,
        index)``."""
        at = to_millis(now)
        with self._state():
            return {
                (job_name, key, index): slot.holder
                for (job_name, key), slots in self._slots.items()
                for index, slot in slots.items()
                if slot.until > at
            }

    # ------------------------------------------------------------------ rate windows

    def take_rate_token(
        self,
        job_name: str,
        key: str,
        *,
        limit: int,
        window_start: datetime,
        window_end: datetime,
    ) -> bool:
        check_limit_key(job_name, key)
        validation.positive_int("limit", limit)
        start, end = to_millis(window_start), to_millis(window_end)
        if end <= start:
            raise InvalidOptionError("window_end", window_end, "must be after window_start")
        with self._state():
            windows = self._windows.setdefault((job_name, key), {})
            _forget_windows(windows, start)
            window = windows.get(start)
            if window is None:
                window = windows[start] = _Window(end, 0)
            if window.count >= limit:
                return False
            window.count += 1
            return True


def _own_slot(slots: dict[int, _Held], holder: str, limit: int) -> int | None:
    """The lowest index below ``limit`` that ``holder`` holds (lapsed or not), or None."""
    own = [index for index, slot in slots.items() if slot.holder == holder and index < limit]
    return min(own) if own else None


def _free_slot(slots: dict[int, _Held], limit: int, now: datetime) -> int | None:
    """The lowest index below ``limit`` that nobody holds at ``now``, or None. Only the held
    slots are looked at: a free index is found within ``len(slots) + 1`` steps."""
    for index in range(min(limit, len(slots) + 1)):
        slot = slots.get(index)
        if slot is None or slot.until <= now:
            return index
    return None


def _forget_windows(windows: dict[datetime, _Window], start: datetime) -> None:
    """Drop, oldest first, the windows that ended a day before ``start`` (they are kept in the
    order they were first used, which is their order unless clocks disagree)."""
    while windows:
        oldest = next(iter(windows))
        if windows[oldest].end + _WINDOW_KEPT > start:
            return
        del windows[oldest]
