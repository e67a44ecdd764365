"""The claim pacer: when an instance claims, how much, in which partition, and when it idles.

Sans-I/O: the claim lanes of :class:`~dogs_core.runtime.workers.Workers` ask :meth:`ClaimPacer.next`
what to do, perform it (sleep, wait for capacity, or send a claim) and report the claim's
result back. Times are loop seconds supplied by the caller.

The rules:

- **Capacity.** A claim reserves up to ``batch_size`` slots of the :class:`CapacityLedger`, all
  offering the same names (a name whose cap allows fewer claims ends the batch there).
- **Hot and cold.** While claims find jobs (hot), every lane may claim. After a miss, a failure
  and at startup (cold), at most one claim per partition not yet tried in the current sweep is
  in flight, so an idle instance sends one sweep per poll interval however many lanes it has.
- **Batches and partitions.** Two batch claims of one partition would read the same candidates
  and race for them, so a batch claim takes a partition no other batch claim of this instance
  is reading; when every partition has one, the lane waits for a reply.
- **Idle.** A sweep in which every partition missed since the last hit puts every lane to sleep
  until ``poll_interval`` later; so does a failed claim (the sweep is abandoned).
- **Wake.** :meth:`ClaimPacer.wake` ends the sleep and starts a new sweep. A miss of a claim sent
  before the wake says nothing about the job the wake announced (wake generations), so it cannot
  put the lanes back to sleep.
- **Capped names.** When an execution of a capped name ends, the name may have been left out of
  the sweep that put the lanes to sleep: that release wakes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

from dogs_core.domain.capacity import CapacityLedger, Reservation
from dogs_core.domain.partitions import PartitionRotation
from dogs_core.errors import InvalidOptionError, WorkersStateError

__all__ = ["Claim", "ClaimPacer", "PacerStep", "Sleep", "WaitForCapacity"]


@dataclass(frozen=True, slots=True)
class Sleep:
    """Wait until loop time ``until`` or a wake, whichever comes first, then ask again."""

    until: float


@dataclass(frozen=True, slots=True)
class WaitForCapacity:
    """Wait until an execution frees a slot or a claim reply arrives, then ask again."""


@dataclass(frozen=True, slots=True, eq=False)
class Claim:
    """Send one claim call for ``len(reservations)`` jobs of ``partition`` asking for ``names``
    (one job with a single claim, several with a batch claim); report it with
    :meth:`ClaimPacer.claimed` or :meth:`ClaimPacer.failed`, exactly once."""

    partition: int
    reservations: tuple[Reservation, ...]
    generation: int

    @property
    def names(self) -> tuple[str, ...]:
        return self.reservations[0].names

    @property
    def names_filtered(self) -> bool:
        """Whether some configured name is left out (the claim must then hint byJobName)."""
        return self.reservations[0].names_filtered

    @property
    def batch(self) -> bool:
        return len(self.reservations) > 1


PacerStep: TypeAlias = Sleep | WaitForCapacity | Claim


class ClaimPacer:
    """The claim pacing state of one instance (see the module docstring)."""

    __slots__ = (
        "_batch_size",
        "_batches_in_flight",
        "_first",
        "_generation",
        "_hot",
        "_idle_until",
        "_in_flight",
        "_ledger",
        "_poll_interval",
        "_rotation",
    )

    def __init__(
        self,
        ledger: CapacityLedger,
        rotation: PartitionRotation,
        *,
        batch_size: int,
        poll_interval: float,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidOptionError("claim_batch_size", batch_size, "must be an int >= 1")
        if (
            isinstance(poll_interval, bool)
            or not isinstance(poll_interval, int | float)
            or not poll_interval > 0
        ):
            raise InvalidOptionError("poll_interval", poll_interval, "must be a positive number")
        self._ledger = ledger
        self._rotation = rotation
        self._batch_size = batch_size
        self._poll_interval = float(poll_interval)
        self._hot = False
        self._idle_until: float | None = None
        self._in_flight: set[Claim] = set()
        self._batches_in_flight: set[int] = set()
        self._first: list[int] = []  # partitions a wake asked to look at first
        self._generation = 0

    # -- state ------------------------------------------------------------------------------

    @property
    def ledger(self) -> CapacityLedger:
        return self._ledger

    @property
    def hot(self) -> bool:
        """Whether the last claim reply found a job."""
        return self._hot

    @property
    def idle_until(self) -> float | None:
        """Loop time until which the lanes sleep (``None``: not idle)."""
        return self._idle_until

    @property
    def claims_in_flight(self) -> int:
        return len(self._in_flight)

    @property
    def generation(self) -> int:
        """Bumped by every wake; claims sent before it carry an older one."""
        return self._generation

    def sweep_remaining(self) -> int:
        """Partitions the current sweep has not reported a miss for yet (at least one)."""
        return max(1, self._rotation.n_partitions - self._rotation.consecutive_misses)

    # -- events -----------------------------------------------------------------------------

    def next(self, now: float) -> PacerStep:
        """What a lane should do at loop time ``now``."""
        if self._idle_until is not None:
            if now < self._idle_until:
                return Sleep(self._idle_until)
            self._idle_until = None
        if not self._hot and len(self._in_flight) >= self.sweep_remaining():
            return WaitForCapacity()
        reservations = self._reserve_batch()
        if not reservations:
            return WaitForCapacity()  # full, or every name is at its cap
        partition = self._choose_partition(batch=len(reservations) > 1)
        if partition is None:
            for reservation in reservations:
                self._ledger.settle(reservation, None)
            return WaitForCapacity()  # the next claim reply frees a partition
        claim = Claim(partition, tuple(reservations), self._generation)
        self._in_flight.add(claim)
        if claim.batch:
            self._batches_in_flight.add(partition)
        return claim

    def claimed(self, claim: Claim, job_names: Sequence[str], now: float) -> None:
        """The claim came back with jobs of ``job_names``, best first (empty: a miss)."""
        if len(job_names) > len(claim.reservations):
            raise InvalidOptionError(
                "job_names", list(job_names), f"more jobs than the {len(claim.reservations)} asked"
            )
        for name in job_names:
            if name not in claim.names:
                raise InvalidOptionError(
                    "job_names", list(job_names), f"{name!r} was not asked for"
                )
        self._land(claim)
        for index, reservation in enumerate(claim.reservations):
            self._ledger.settle(reservation, job_names[index] if index < len(job_names) else None)
        if job_names:
            # Jobs were found: a sleep begun by claims that missed meanwhile is over.
            self._rotation.record_hit()
            self._hot = True
            self._idle_until = None
            return
        self._hot = False
        # Only misses of claims sent since the last wake may put the lanes to sleep.
        if claim.generation == self._generation and self._rotation.record_miss(claim.partition):
            self._go_idle(now)

    def failed(self, claim: Claim, now: float) -> None:
        """The claim raised: nothing was claimed, the sweep is abandoned, lanes idle."""
        self._land(claim)
        for reservation in claim.reservations:
            self._ledger.settle(reservation, None)
        self._hot = False
        self._rotation.reset_misses()
        self._go_idle(now)

    def wake(self, partitions: Sequence[int] = ()) -> None:
        """A job may be claimable now: end the sleep and look at every partition again, at
        ``partitions`` first (where the change feed said the jobs are)."""
        self._idle_until = None
        self._generation += 1
        self._rotation.reset_misses()
        n = self._rotation.n_partitions
        for partition in partitions:
            if not isinstance(partition, int) or not 0 <= partition < n:
                continue  # a record of another partitioning: the sweep finds it
            if partition not in self._first:
                self._first.append(partition)

    def released(self, name: str) -> bool:
        """An execution of ``name`` freed its slot. True when that woke the lanes (a capped
        name that may have been left out of the last sweep)."""
        self._ledger.release(name)
        if self._ledger.caps.get(name) is None:
            return False
        self.wake()
        return True

    # -- internals --------------------------------------------------------------------------

    def _reserve_batch(self) -> list[Reservation]:
        first = self._ledger.reserve()
        if first is None:
            return []
        reservations = [first]
        while len(reservations) < self._batch_size:
            more = self._ledger.reserve(first.names)
            if more is None:
                break
            if more.names != first.names:
                self._ledger.settle(more, None)
                break
            reservations.append(more)
        return reservations

    def _choose_partition(self, *, batch: bool) -> int | None:
        for index, first in enumerate(self._first):
            if not batch or first not in self._batches_in_flight:
                del self._first[index]
                return first
        partition = self._rotation.next_partition()
        if not batch or partition not in self._batches_in_flight:
            return partition
        n = self._rotation.n_partitions
        if len(self._batches_in_flight) >= n:
            return None
        # A free partition exists. n steps of the rotation may cross a reshuffle and miss it,
        # but 2n - 1 steps always contain one whole pass, which visits every partition.
        for _ in range(2 * n - 1):
            partition = self._rotation.next_partition()
            if partition not in self._batches_in_flight:
                return partition
        raise AssertionError("unreachable: a pass visits every partition")  # pragma: no cover

    def _land(self, claim: Claim) -> None:
        if claim not in self._in_flight:
            raise WorkersStateError("this claim is not in flight (reported twice?)")
        self._in_flight.remove(claim)
        if claim.batch:
            self._batches_in_flight.discard(claim.partition)

    def _go_idle(self, now: float) -> None:
        if self._idle_until is None:
            self._idle_until = now + self._poll_interval
