"""The claim pacer: when an instance claims, how much, in which partition, and when it idles.

Sans-I/O: the claim lanes of :class:`~dogs_core.runtime.worker.workers.Workers` ask
:meth:`ClaimPacer.next`
what to do, perform it (sleep, wait for capacity, or send a claim) and report the claim's
result back. Times are loop seconds supplied by the caller.

The rules:

- **Capacity.** A claim reserves up to ``batch_size`` slots of the :class:`CapacityLedger`, all
  offering the same names (a name whose cap allows fewer claims ends the batch there).
- **Hot and cold.** While claims find jobs (hot), every lane may claim. After a miss, a failure
  and at startup (cold), at most one claim per partition not yet tried in the current sweep is
  in flight, so an idle instance sends one sweep per poll interval however many lanes it has.
  A cold claim asks for its share of the free slots split over the partitions a wake
  announced (the change feed's), or else over the partitions the sweep has still to try, so
  the sweep's claims go out together (one claim asking for every free slot would leave the
  others waiting for its reply, partition after partition).
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
- **Adaptive sizes.** A batch size or a claims-in-flight limit the user did not give adapts
  (:class:`ClaimSizing`). The batch starts at its ceiling, shrinks to what a claim found when
  one comes back partial and doubles back while claims come back full. The claims kept in
  flight while hot start at one, grow by one while claims come back full with a whole batch's
  worth of slots still free, shrink by one when a claim got fewer slots than the batch size
  (claims would split the slots into groups that free and are claimed apart), and fall back to
  one on a partial reply and when the lanes go to sleep. A miss changes neither: one partition
  ran dry, others may not have, and the cold rule binds meanwhile. Fewer, fuller claims cost
  the store less per job than many small ones sent as each slot frees; a claim that waits for
  the one in flight collects the slots freed meanwhile. A given value stays fixed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

from dogs_core.domain.capacity import CapacityLedger, Reservation
from dogs_core.domain.partitions import PartitionRotation
from dogs_core.errors import InvalidOptionError, WorkersStateError

__all__ = ["Claim", "ClaimPacer", "ClaimSizing", "PacerStep", "Sleep", "WaitForCapacity"]


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


def _check_count(field: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidOptionError(field, value, "must be an int >= 1")
    return value


class ClaimSizing:
    """How many jobs the next claim asks for and how many claims may be in flight while hot.

    ``batch_size`` and ``concurrency`` are fixed values, or with ``adapt_batch`` /
    ``adapt_concurrency`` the ceilings of the adaptive values (see the module docstring): the
    batch starts at its ceiling (one claim takes every free slot, so the slots run and free as
    one group, which the next claim takes again; batches grown from one job split the slots
    into groups that stay split) and the claims in flight at one claim.
    """

    __slots__ = (
        "_adapt_batch",
        "_adapt_concurrency",
        "_batch",
        "_batch_ceiling",
        "_concurrency",
        "_concurrency_ceiling",
    )

    def __init__(
        self,
        batch_size: int,
        concurrency: int,
        *,
        adapt_batch: bool = False,
        adapt_concurrency: bool = False,
    ) -> None:
        self._batch_ceiling = _check_count("claim_batch_size", batch_size)
        self._concurrency_ceiling = _check_count("claim_concurrency", concurrency)
        self._adapt_batch = bool(adapt_batch)
        self._adapt_concurrency = bool(adapt_concurrency)
        self._batch = batch_size
        self._concurrency = 1 if adapt_concurrency else concurrency

    @property
    def batch_size(self) -> int:
        """Most jobs the next claim asks for (never more than the free slots either)."""
        return self._batch

    @property
    def concurrency(self) -> int:
        """Most claims in flight while hot (cold, the sweep rule binds first)."""
        return self._concurrency

    @property
    def adaptive(self) -> bool:
        return self._adapt_batch or self._adapt_concurrency

    def replied(self, asked: int, found: int, free_slots: int) -> None:
        """A claim for ``asked`` jobs found ``found`` (at least one: a miss changes nothing);
        ``free_slots`` are free after it."""
        if found == 0:
            return
        full = found >= asked
        fragment = asked < self._batch  # the free slots, not the batch size, bound this claim
        if self._adapt_batch:
            if full:
                self._batch = min(self._batch_ceiling, max(self._batch, 2 * asked))
            else:
                self._batch = found
        if self._adapt_concurrency:
            if not full:
                self._concurrency = 1
            elif fragment:
                self._concurrency = max(1, self._concurrency - 1)
            elif free_slots >= self._batch:
                self._concurrency = min(self._concurrency_ceiling, self._concurrency + 1)

    def reset(self) -> None:
        """The lanes go to sleep (a sweep of misses, a failure): start again from one claim in
        flight (the batch size stays: what the last claims found)."""
        if self._adapt_concurrency:
            self._concurrency = 1


class ClaimPacer:
    """The claim pacing state of one instance (see the module docstring)."""

    __slots__ = (
        "_batches_in_flight",
        "_first",
        "_generation",
        "_hot",
        "_idle_until",
        "_in_flight",
        "_ledger",
        "_poll_interval",
        "_rotation",
        "_sizing",
    )

    def __init__(
        self,
        ledger: CapacityLedger,
        rotation: PartitionRotation,
        *,
        batch_size: int | None = None,
        poll_interval: float,
        sizing: ClaimSizing | None = None,
    ) -> None:
        if sizing is None:
            # A fixed batch size and no limit of its own on claims in flight (the lanes are).
            sizing = ClaimSizing(_check_count("claim_batch_size", batch_size), ledger.workers_count)
        elif batch_size is not None:
            raise InvalidOptionError(
                "batch_size", batch_size, "give sizing or batch_size, not both"
            )
        if (
            isinstance(poll_interval, bool)
            or not isinstance(poll_interval, int | float)
            or not poll_interval > 0
        ):
            raise InvalidOptionError("poll_interval", poll_interval, "must be a positive number")
        self._ledger = ledger
        self._rotation = rotation
        self._sizing = sizing
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
    def sizing(self) -> ClaimSizing:
        return self._sizing

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
        in_flight = len(self._in_flight)
        if in_flight >= (self._sizing.concurrency if self._hot else self.sweep_remaining()):
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
        self._sizing.replied(len(claim.reservations), len(job_names), self._ledger.free_slots)
        if job_names:
            # Jobs were found: a sleep begun by claims that missed meanwhile is over.
            self._rotation.record_hit()
            self._hot = True
            self._idle_until = None
            return
        self._hot = False
        # Only misses of claims sent since the last wake may put the lanes to sleep.
        if claim.generation == self._generation and self._rotation.record_miss(claim.partition):
            self._sizing.reset()
            self._go_idle(now)

    def failed(self, claim: Claim, now: float) -> None:
        """The claim raised: nothing was claimed, the sweep is abandoned, lanes idle."""
        self._land(claim)
        for reservation in claim.reservations:
            self._ledger.settle(reservation, None)
        self._sizing.reset()
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
        return self._ledger.reserve_batch(self._next_batch_size())

    def _next_batch_size(self) -> int:
        """The batch size; while cold, the free slots split over the partitions a wake
        announced, or else over those the sweep has still to send a claim to: most of these
        will miss, and a first claim holding every free slot would send the sweep out one
        partition at a time. (An announced partition likely holds the job: its claim goes
        first, and the rest of the sweep only if it misses.)"""
        size = self._sizing.batch_size
        if self._hot or size == 1:
            return size
        share = len(self._first) or self.sweep_remaining() - len(self._in_flight)
        if share <= 1:
            return size
        return max(1, min(size, self._ledger.free_slots // share))

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
