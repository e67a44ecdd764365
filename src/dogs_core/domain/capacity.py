"""Capacity accounting of one scheduler: worker slots and per-job-name caps
(docs/concepts.md#per-instance-caps-timeouts-and-shutdown).

One scheduler runs at most ``workers_count`` executions at a time, and at most ``cap`` of each
capped job name (``maxParallelExecutionsPerServer``; event jobs only, recurrent jobs pass
``None``). Names at their cap are left out of the claim's ``$in`` list, so the database never
hands this scheduler a job it may not start.

Dogs claims one job at a time. This runtime keeps several claims in flight, so a slot has to be
*reserved* before a claim is sent, not counted when the job starts; otherwise two concurrent
claims could both see a name one below its cap and both claim it. :class:`CapacityLedger` is
that bookkeeping, pure and synchronous: the runtime calls :meth:`~CapacityLedger.reserve`
before a claim, :meth:`~CapacityLedger.settle` with the claim's result, and
:meth:`~CapacityLedger.release` when an execution finishes or goes stale.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from dogs_core.domain.definitions import JobDefinition
from dogs_core.errors import InvalidOptionError, UnknownJobError, WorkersStateError

__all__ = ["CapacityLedger", "Claimable", "Reservation"]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class Claimable:
    """A snapshot of what this scheduler may claim now."""

    names: tuple[str, ...]
    """Configured names below their cap (active plus reserved), in configuration order."""
    names_filtered: bool
    """Whether any configured name is left out; the claim must then use the byJobName hint."""
    free_slots: int
    """Worker slots neither running an execution nor held by a claim in flight."""

    @property
    def can_claim(self) -> bool:
        """Whether a claim may be sent: a free slot and at least one name to ask for."""
        return self.free_slots > 0 and bool(self.names)


@dataclass(frozen=True, slots=True, eq=False)
class Reservation:
    """The capacity held by one claim in flight. Identity-compared: it is a one-shot token.

    Send the claim for exactly :attr:`names`, with ``claim_hint(selected, names_filtered)``.
    """

    names: tuple[str, ...]
    """The names this claim may ask for (its ``$in`` list)."""
    names_filtered: bool
    """Whether any configured name is missing from :attr:`names`."""
    held: tuple[str, ...]
    """The capped names in :attr:`names`; the claim holds one tentative slot in each."""


class CapacityLedger:
    """Active executions and in-flight claim reservations of one scheduler.

    A reservation holds one global slot and one *tentative* slot in every capped name it
    offers; unlimited names need no per-name slot. When the claim returns, :meth:`settle`
    turns the reservation into one active execution of the claimed name (its tentative slot
    becomes the real one) and gives back everything else, or gives it all back on a miss.

    Invariants, for every sequence of calls (each public method checks its input before it
    changes anything, so a rejected call changes nothing):

    - ``active + reserved <= workers_count``: :meth:`reserve` needs a free slot, and
      :meth:`settle` replaces one reserved slot by at most one active one.
    - for each capped name, ``active[name] + reserved[name] <= cap``: a reservation offers a
      name only while that sum is below the cap, and settling a claim of that name moves one
      unit from reserved to active. Hence no name ever exceeds its cap, however many claims
      are in flight.

    Trade-off: a name with cap ``c`` and ``a`` active executions can be offered to at most
    ``c - a`` claims in flight at once; further concurrent claims leave it out (and use the
    byJobName hint) until one of those claims settles. A claim that offered the name but got
    another job holds that tentative slot for one round trip. The cap is never exceeded at the
    price of some throughput for heavily capped names, which is the right way round.
    """

    __slots__ = (
        "_active",
        "_active_by_name",
        "_blocked",
        "_caps",
        "_dynamic",
        "_extra",
        "_outstanding",
        "_reserved_by_name",
        "_workers_count",
    )

    def __init__(self, workers_count: int, caps: Mapping[str, int | None]) -> None:
        if not _is_int(workers_count) or workers_count < 1:
            raise InvalidOptionError("workers_count", workers_count, "must be an int >= 1")
        for name, cap in caps.items():
            if not isinstance(name, str) or not name:
                raise InvalidOptionError("job name", name, "must be a non-empty str")
            if cap is not None and (not _is_int(cap) or cap < 0):
                raise InvalidOptionError(
                    "max_parallel_executions_per_server",
                    cap,
                    f"job {name!r}: must be None (unlimited) or an int >= 0",
                )
        self._workers_count = workers_count
        self._caps: Mapping[str, int | None] = MappingProxyType(dict(caps))
        self._active = 0
        self._active_by_name = dict.fromkeys(self._caps, 0)
        self._reserved_by_name = dict.fromkeys(self._caps, 0)
        self._outstanding: set[Reservation] = set()
        self._blocked: frozenset[str] = frozenset()
        self._extra = 0
        self._dynamic: tuple[str, ...] = ()

    # -- queries -------------------------------------------------------------------------

    @property
    def workers_count(self) -> int:
        """The maximum number of executions (plus claims in flight) of this scheduler."""
        return self._workers_count

    @property
    def caps(self) -> Mapping[str, int | None]:
        """The configured names and their caps (``None``: unlimited), read-only."""
        return self._caps

    @property
    def active(self) -> int:
        """Executions holding capacity (started and neither finished nor stale)."""
        return self._active

    @property
    def reserved(self) -> int:
        """Claims in flight, each holding one global slot."""
        return len(self._outstanding)

    @property
    def active_by_name(self) -> Mapping[str, int]:
        """Active executions per configured name (a copy)."""
        return dict(self._active_by_name)

    @property
    def reserved_by_name(self) -> Mapping[str, int]:
        """Tentative slots held by claims in flight, per configured name (a copy)."""
        return dict(self._reserved_by_name)

    @property
    def extra_slots(self) -> int:
        """Slots claimed ahead, beyond ``workers_count`` (see :mod:`dogs_core.domain.lookahead`):
        their jobs count as active and wait for a free worker slot."""
        return self._extra

    @property
    def free_slots(self) -> int:
        """Worker slots (and slots claimed ahead) neither running nor reserved."""
        return self._workers_count + self._extra - self._active - len(self._outstanding)

    @property
    def is_full(self) -> bool:
        """Every slot is running or reserved: wait for a release or a settle."""
        return self.free_slots <= 0

    @property
    def all_capped(self) -> bool:
        """No name can be offered, but held capacity will come back.

        True when every configured name is at its cap while some execution is active or some
        claim is in flight: the loop then waits for capacity to be released (a finish, a stale
        execution, or a settled claim) instead of polling. When nothing is held (no names, or
        only caps of 0) waiting for a release would wait forever, so this is false.
        """
        return not self._open_names() and (self._active > 0 or bool(self._outstanding))

    def claimable(self) -> Claimable:
        """What a claim sent now may ask for."""
        names = self._open_names()
        return Claimable(names, len(names) < self._offered, self.free_slots)

    @property
    def dynamic(self) -> tuple[str, ...]:
        """The names offered besides the configured ones (:meth:`set_dynamic`)."""
        return self._dynamic

    @property
    def blocked(self) -> frozenset[str]:
        """Names left out of every claim whatever their capacity (paused, held back)."""
        return self._blocked

    # -- commands ------------------------------------------------------------------------

    def set_extra_slots(self, extra: int) -> None:
        """Hold up to ``extra`` slots beyond ``workers_count`` from now on (0: none). Fewer than
        before only stops new reservations until enough slots are released."""
        if not _is_int(extra) or extra < 0:
            raise InvalidOptionError("extra_slots", extra, "must be an int >= 0")
        self._extra = extra

    def set_dynamic(self, names: Iterable[str]) -> bool:
        """Offer ``names`` too from now on, uncapped, in place of the previous ones (the runtime
        schedules due soon: :mod:`dogs_core.runtime.worker.schedule_book`); configured names among
        them
        are ignored. A name no longer offered keeps its active executions until they are
        released. ``True`` when a name was added (a claim may find work now)."""
        if isinstance(names, str):
            raise InvalidOptionError("names", names, "must be an iterable of names, not a str")
        fresh = tuple(dict.fromkeys(n for n in names if n not in self._caps))
        for name in fresh:
            if not isinstance(name, str) or not name:
                raise InvalidOptionError("job name", name, "must be a non-empty str")
        added = bool(set(fresh) - set(self._dynamic))
        self._dynamic = fresh
        return added

    def set_blocked(self, names: Iterable[str]) -> bool:
        """Leave ``names`` out of claims from now on (unknown names are ignored); ``True`` when
        a name became claimable again. Reservations already made keep what they offered."""
        blocked = frozenset(name for name in names if name in self._caps)
        reopened = bool(self._blocked - blocked)
        self._blocked = blocked
        return reopened

    def reserve(self, names: Iterable[str] | None = None) -> Reservation | None:
        """Hold capacity for one claim, or return ``None`` when no claim can be sent.

        ``names`` defaults to every claimable name. Given names must be configured; those at
        their cap are left out. The claim must ask for exactly ``reservation.names``.
        Returns ``None`` when no slot is free or no requested name is below its cap.
        """
        if names is None:
            wanted = self._open_names()
        else:
            if isinstance(names, str):
                raise InvalidOptionError("names", names, "must be an iterable of names, not a str")
            requested = tuple(dict.fromkeys(names))
            for name in requested:
                self._check_known(name)
            wanted = tuple(name for name in requested if self._below_cap(name))
        if self.free_slots <= 0 or not wanted:
            return None
        held = tuple(name for name in wanted if self._caps.get(name) is not None)
        reservation = Reservation(wanted, len(wanted) < self._offered, held)
        for name in held:
            self._reserved_by_name[name] += 1
        self._outstanding.add(reservation)
        return reservation

    def reserve_batch(self, size: int) -> list[Reservation]:
        """Up to ``size`` reservations for one batch claim, all offering the same names.

        The same as :meth:`reserve` called again and again with the first reservation's names
        for as long as it offers exactly those (a capped name reaching its cap ends the
        batch, as does the last free slot), in one step. Empty when no claim can be sent.
        """
        if not _is_int(size) or size < 1:
            raise InvalidOptionError("size", size, "must be an int >= 1")
        first = self.reserve()
        if first is None:
            return []
        more = min(size - 1, self.free_slots)
        for name in first.held:
            cap = self._caps[name]
            assert cap is not None  # held names are the capped ones
            more = min(more, cap - self._active_by_name[name] - self._reserved_by_name[name])
        if more <= 0:
            return [first]
        batch = [first]
        batch.extend(
            Reservation(first.names, first.names_filtered, first.held) for _ in range(more)
        )
        for name in first.held:
            self._reserved_by_name[name] += more
        self._outstanding.update(batch[1:])
        return batch

    def settle(self, reservation: Reservation, claimed_name: str | None) -> None:
        """Apply a claim's result: start one execution of ``claimed_name``, or release all.

        Pass ``None`` when the claim found nothing, failed, or was ambiguous. A claimed name
        must be one the reservation offered.
        """
        if reservation not in self._outstanding:
            raise WorkersStateError(
                "this reservation is not outstanding in this ledger (settled twice?)"
            )
        if claimed_name is not None and claimed_name not in reservation.names:
            raise InvalidOptionError(
                "claimed_name", claimed_name, f"was not offered by the claim {reservation.names!r}"
            )
        self._outstanding.remove(reservation)
        for name in reservation.held:
            self._reserved_by_name[name] -= 1
        if claimed_name is not None:
            self._active += 1
            self._active_by_name[claimed_name] = self._active_by_name.get(claimed_name, 0) + 1

    def release(self, name: str) -> None:
        """An execution of ``name`` finished or went stale: give its slot back.

        Call it exactly once per execution. A stale execution releases early while its coroutine
        may still run; that is intended, its lock is already lost
        (docs/concepts.md#stale-executions).
        """
        if name not in self._active_by_name:
            self._check_known(name)
        if self._active_by_name.get(name, 0) <= 0:
            raise WorkersStateError(f"no active execution of job {name!r} to release")
        self._active -= 1
        self._active_by_name[name] -= 1
        if name not in self._caps and not self._active_by_name[name]:
            del self._active_by_name[name]  # a dynamic name: forgotten when idle

    # -- internals -----------------------------------------------------------------------

    def _below_cap(self, name: str) -> bool:
        if name in self._blocked:
            return False
        cap = self._caps.get(name)
        return cap is None or self._active_by_name[name] + self._reserved_by_name[name] < cap

    def _open_names(self) -> tuple[str, ...]:
        names = tuple(name for name in self._caps if self._below_cap(name))
        if not self._dynamic:
            return names
        return names + tuple(name for name in self._dynamic if name not in self._blocked)

    @property
    def _offered(self) -> int:
        return len(self._caps) + len(self._dynamic)

    def _check_known(self, name: object) -> None:
        if not isinstance(name, str) or (name not in self._caps and name not in self._dynamic):
            raise UnknownJobError(name, list(self._caps))


def caps_of(definitions: Iterable[JobDefinition]) -> dict[str, int | None]:
    """Per-server caps by job name (recurrent jobs have none: one record runs at a time)."""
    return {d.name: getattr(d, "max_parallel_executions_per_server", None) for d in definitions}
