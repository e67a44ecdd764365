"""Partition assignment and the per-scheduler shuffled partition rotation
(docs/concepts.md#partitions-and-the-rotation).

Every record carries a ``partition`` in ``[0, n_partitions)`` and every claim queries exactly one
partition. Claimers that start at different places in the partition space touch different
regions of the claim index, which is what keeps claims fast when hundreds of them compete.
Priority is strict inside a partition and only approximate across partitions: that is the
deliberate trade-off.

Everything here is pure: randomness comes in as a :class:`random.Random` so that tests (and
simulations) are reproducible.
"""

from __future__ import annotations

import random
from typing import TypeGuard

from dogs_core.domain import validation
from dogs_core.errors import InvalidOptionError

__all__ = [
    "PartitionRotation",
    "assign_partition",
    "check_chosen_partition",
    "is_valid_partition",
    "validate_n_partitions",
]


def _is_int(value: object) -> TypeGuard[int]:
    """``bool`` is an ``int`` subclass in Python, but ``True`` partitions are a bug, not a value."""
    return isinstance(value, int) and not isinstance(value, bool)


def validate_n_partitions(n: object) -> int:
    """Return ``n`` if it is a usable partition count, else raise ``InvalidOptionError``.

    The count must be a positive ``int`` (``bool`` rejected): :func:`validation.positive_int
    <dogs_core.domain.validation.positive_int>`, so the message is the one every other
    ``n_partitions`` check gives (``must be at least 1``). Every instance sharing a database must
    use the same value; that cannot be checked here, only the range can.
    """
    return validation.positive_int("n_partitions", n)


def assign_partition(n_partitions: int, rng: random.Random) -> int:
    """Pick the partition of a new record: uniform in ``[0, n_partitions)``.

    Uniform assignment spreads records evenly, so every partition holds about the same share of
    the work and a rotation over partitions sees about the same amount in each.
    """
    n = validate_n_partitions(n_partitions)
    return rng.randrange(n)


def check_chosen_partition(partition: object, n_partitions: int) -> int:
    """``partition`` if it is one of ``[0, n_partitions)``: what a store checks of each value
    its reconciler's ``choose_partition()`` returns, before it writes any of them. Otherwise
    :class:`InvalidOptionError` on ``choose_partition``, saying what it returned."""
    if not _is_int(partition) or not 0 <= partition < n_partitions:
        raise InvalidOptionError(
            "choose_partition",
            partition,
            f"returned a partition outside [0, {n_partitions})",
            message=f"choose_partition() returned {partition!r}, outside [0, {n_partitions})",
        )
    return partition


def is_valid_partition(p: object, n: int) -> bool:
    """Whether a stored ``partition`` value is one that some claim can reach.

    The reconciler repairs exactly the records for which this is false: a missing (``None``),
    negative, too large or non-numeric partition. An integral ``float`` such as ``2.0`` counts as
    valid because MongoDB's equality match ``{partition: 2}`` (what a claim sends) matches it;
    a fractional, infinite or NaN float matches no claim and is invalid.
    """
    n = validate_n_partitions(n)
    if _is_int(p):
        return 0 <= p < n
    if isinstance(p, float) and p.is_integer():
        return 0 <= p < n
    return False


class PartitionRotation:
    """The order in which one scheduler visits partitions, and its idle detection.

    The scheduler keeps a Fisher–Yates shuffled permutation of ``0..n-1`` (``random.shuffle``
    is Fisher–Yates) and advances one step per claim attempt, hit or miss. After a full pass it
    reshuffles, so different schedulers, and one scheduler over time, spread over different
    index regions.

    Idle detection: after ``n`` consecutive misses :meth:`record_miss` returns ``True`` ("a full
    sweep came back empty") and the scheduler waits its poll interval. A naive reshuffle would
    make that claim false when a miss streak crosses the end of a pass: the streak could visit
    one partition twice and another not at all, delaying a ready job in the skipped partition
    by a whole extra poll interval. So when a pass ends in the middle of a miss streak of
    length ``m``, the next permutation starts with the ``n - m`` partitions that streak has not
    visited yet (shuffled among themselves), followed by the ``m`` it has (shuffled among
    themselves). Therefore, when each attempt's result is recorded before the next attempt is
    made (the Dogs loop), the ``n`` misses that report idle visited every partition exactly once.
    With several claims in flight, results arrive out of order and ``n`` consecutive misses may
    repeat a partition and skip another; a caller in that situation passes the partition to
    :meth:`record_miss`, and idle is then reported only once every partition has missed since
    the last hit (the reshuffle then also puts the partitions not yet missed first).

    State is the permutation plus a cursor, the miss counter and the set of missed partitions.
    """

    __slots__ = ("_cursor", "_missed", "_misses", "_n", "_order", "_rng")

    def __init__(self, n_partitions: int, rng: random.Random) -> None:
        self._n = validate_n_partitions(n_partitions)
        self._rng = rng
        self._order = list(range(self._n))
        self._rng.shuffle(self._order)
        self._cursor = 0
        self._misses = 0
        self._missed: set[int] = set()

    @property
    def n_partitions(self) -> int:
        """The number of partitions this rotation cycles through."""
        return self._n

    @property
    def consecutive_misses(self) -> int:
        """Misses recorded since the last hit, reset, or idle verdict."""
        return self._misses

    def next_partition(self) -> int:
        """Return the partition for the next claim attempt and advance one step.

        The reshuffle after a full pass happens lazily, on the first attempt of the next pass,
        so that the result of the pass's last attempt is already recorded when it runs.
        """
        if self._cursor == self._n:
            self._reshuffle()
        partition = self._order[self._cursor]
        self._cursor += 1
        return partition

    def record_hit(self) -> None:
        """A claim found a job: the partition space is not empty, restart the miss count."""
        self._misses = 0
        self._missed.clear()

    def record_miss(self, partition: int | None = None) -> bool:
        """A claim found nothing. Return ``True`` when that completes an empty sweep.

        Without ``partition``, ``n`` consecutive misses complete it (exact when each result is
        recorded before the next attempt). With ``partition``, it takes a miss in every one of
        the ``n`` partitions since the last hit (exact with several claims in flight). The
        streak is reset on ``True`` so that the next sweep again needs a full round of misses.
        """
        if partition is None:
            self._misses += 1
        else:
            if not _is_int(partition) or not 0 <= partition < self._n:
                raise InvalidOptionError(
                    "partition", partition, f"must be an int in [0, {self._n})"
                )
            self._missed.add(partition)
            self._misses = len(self._missed)
        if self._misses >= self._n:
            self.reset_misses()
            return True
        return False

    def reset_misses(self) -> None:
        """Forget the current miss streak (e.g. after a claim error, which ends the sweep)."""
        self._misses = 0
        self._missed.clear()

    def _reshuffle(self) -> None:
        """Start a new pass: a fresh permutation that still completes the current miss streak."""
        if self._missed:
            unvisited = [p for p in self._order if p not in self._missed]
            visited = [p for p in self._order if p in self._missed]
            self._rng.shuffle(unvisited)
            self._rng.shuffle(visited)
            self._order = unvisited + visited
            self._cursor = 0
            return
        missed = min(self._misses, self._n)
        unvisited = self._order[: self._n - missed]
        visited = self._order[self._n - missed :]
        self._rng.shuffle(unvisited)
        self._rng.shuffle(visited)
        self._order = unvisited + visited
        self._cursor = 0
