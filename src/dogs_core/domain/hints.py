"""Acquisition index hints and the adaptive hint-selection policy
(docs/concepts.md#the-adaptive-index-hint).

A claim names its index explicitly. Two indexes can serve it and which one is faster depends on
the data: ``byJobName`` (partition, jobName, priority, nextRunAt) is best when few names are
ready or when the name list is filtered; ``globalPriority`` (partition, priority, nextRunAt)
is best when many names are ready and the sort dominates. Each scheduler measures both every
30 minutes (``explain`` with ``executionStats``) and picks one, in memory, without coordination.

This module is sans-I/O: the runtime runs the plan from :func:`probe_plan`, feeds the timings
into :class:`HintSelector`, and applies the returned :class:`HintDecision`.
"""

from __future__ import annotations

import enum
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType

from dogs_core.domain.partitions import assign_partition, validate_n_partitions
from dogs_core.errors import InvalidOptionError

__all__ = [
    "HINT_INDEXES",
    "INITIAL_HINT",
    "PROBE_INTERVAL",
    "PROBE_MAX_TIME_MS",
    "PROBE_SAMPLES",
    "WINS_TO_SWITCH",
    "DecisionReason",
    "Hint",
    "HintDecision",
    "HintSelector",
    "IndexSpec",
    "ProbeStep",
    "claim_hint",
    "median",
    "probe_order",
    "probe_plan",
]

PROBE_INTERVAL = timedelta(minutes=30)
"""Wait after a probe finishes before the next one starts (no jitter, never overlapping)."""

PROBE_MAX_TIME_MS = 1000
"""``maxTimeMS`` of each explain; a slower one fails the probe instead of hurting the server."""

PROBE_SAMPLES = 3
"""Samples per hint and probe; the decision uses their median so one outlier cannot decide."""

WINS_TO_SWITCH = 2
"""Consecutive challenger wins needed to switch after the first probe: avoids flapping."""


class Hint(enum.StrEnum):
    """The two acquisition indexes, by the names Dogs uses for them."""

    BY_JOB_NAME = "byJobName"
    GLOBAL_PRIORITY = "globalPriority"

    @property
    def other(self) -> Hint:
        """The competing hint (the challenger when this one is current)."""
        return Hint.GLOBAL_PRIORITY if self is Hint.BY_JOB_NAME else Hint.BY_JOB_NAME


INITIAL_HINT = Hint.BY_JOB_NAME
"""The hint used before any probe completes; it is also correct while names are filtered."""


@dataclass(frozen=True, slots=True)
class IndexSpec:
    """An index as data: its name and ordered key spec, shared by the adapters and the probe."""

    name: str
    keys: tuple[tuple[str, int], ...]


HINT_INDEXES: Mapping[Hint, IndexSpec] = MappingProxyType(
    {
        Hint.BY_JOB_NAME: IndexSpec(
            name="jobs_dogs_records_partition_job_name_priority_next_run",
            keys=(("partition", 1), ("jobName", 1), ("priority", -1), ("nextRunAt", 1)),
        ),
        Hint.GLOBAL_PRIORITY: IndexSpec(
            name="jobs_dogs_records_partition_priority_next_run",
            keys=(("partition", 1), ("priority", -1), ("nextRunAt", 1)),
        ),
    }
)
"""Index names and key specs, identical to @orion-js/dogs >= 4.6.5 for a shared database."""


def claim_hint(selected: Hint, names_filtered: bool) -> Hint:
    """The hint one claim uses.

    While capacity filters any configured name out of the ``$in`` list, the job-name-leading
    index is forced: the priority-leading index would walk the ready records of the filtered
    names only to skip them. This override applies to the claim only and never changes the
    selected hint (Dogs >= 4.6.4).
    """
    return Hint.BY_JOB_NAME if names_filtered else selected


def probe_order(cycle: int) -> tuple[Hint, Hint]:
    """The order both hints are measured in during probe ``cycle``.

    Alternating by cycle parity (even cycles start with the initial hint) cancels the bias of
    whichever explain runs first warming the cache for the second.
    """
    if isinstance(cycle, bool) or not isinstance(cycle, int) or cycle < 0:
        raise InvalidOptionError("cycle", cycle, "must be an int >= 0")
    first = INITIAL_HINT if cycle % 2 == 0 else INITIAL_HINT.other
    return (first, first.other)


@dataclass(frozen=True, slots=True)
class ProbeStep:
    """One sample of a probe: measure both hints, in ``order``, against one ``partition``.

    Both hints of a sample use the same partition so that they are compared on the same data.
    """

    partition: int
    order: tuple[Hint, Hint]


def probe_plan(
    cycle: int, rng: random.Random, n_partitions: int, samples: int = PROBE_SAMPLES
) -> list[ProbeStep]:
    """The measurements of probe ``cycle``: ``samples`` steps, each on one random partition."""
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise InvalidOptionError("samples", samples, "must be an int >= 1")
    n = validate_n_partitions(n_partitions)
    order = probe_order(cycle)
    return [ProbeStep(partition=assign_partition(n, rng), order=order) for _ in range(samples)]


def median(values: Sequence[float]) -> float:
    """The middle element of the sorted values.

    For an even count this is the lower of the two middle elements (``statistics.median_low``):
    the result is always an observed timing, never an interpolation. Only odd counts (3) are used
    by the probe, where every definition agrees.
    """
    if not values:
        raise InvalidOptionError("values", values, "median of no values")
    ordered = sorted(values)
    return ordered[(len(ordered) - 1) // 2]


class DecisionReason(enum.StrEnum):
    """Why a probe ended with the hint it did; the runtime logs on it."""

    INITIAL = "initial"
    """The first completed probe: its winner is adopted at once (info log)."""
    SWITCHED = "switched"
    """The challenger won the required consecutive probes and is now current (info log)."""
    KEPT = "kept"
    """The current hint won or tied; the challenger's streak is reset (debug log)."""
    CHALLENGER_LEADS = "challenger_leads"
    """The challenger won, but not yet often enough in a row to switch (debug log)."""
    FAILED = "failed"
    """The probe failed or timed out: keep the current hint, reset the streak (warn log)."""


@dataclass(frozen=True, slots=True)
class HintDecision:
    """The outcome of one probe, for the runtime to apply and log."""

    hint: Hint
    """The hint to use for claims from now on."""
    changed: bool
    """Whether ``hint`` differs from the hint in use before this probe."""
    reason: DecisionReason
    medians: Mapping[Hint, float] | None = field(default=None, hash=False)
    """The median timing (ms) per hint, when the probe produced usable samples."""
    challenger_streak: int = 0
    """Consecutive challenger wins after this probe (0 after a switch, tie, or failure)."""


def _usable(values: Sequence[float]) -> bool:
    """Whether one hint's samples can be trusted: enough of them, each a finite time >= 0."""
    if len(values) < PROBE_SAMPLES:
        return False
    return all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
        for v in values
    )


class HintSelector:
    """The hint-selection policy of one scheduler, as a sans-I/O state machine
    (docs/concepts.md#the-adaptive-index-hint).

    - It starts on :data:`INITIAL_HINT` (``byJobName``).
    - Per probe the median of each hint's samples is compared; the challenger (the hint not in
      use) wins only on a strictly lower median, so a tie keeps the current hint.
    - The first *completed* probe is adopted at once, so a fresh scheduler does not run on a
      bad hint for an hour. A failed probe does not complete, so the next successful one is
      still the first.
    - After that a switch needs :data:`WINS_TO_SWITCH` consecutive challenger wins: one noisy
      probe cannot flip the hint of a busy scheduler. A current-hint win, a tie, or a failure
      resets the streak.
    - :attr:`cycle` counts finished probes (successful or not) and drives the order of the next
      plan's measurements.
    """

    __slots__ = ("_current", "_cycle", "_probed", "_streak")

    def __init__(self) -> None:
        self._current = INITIAL_HINT
        self._probed = False
        self._streak = 0
        self._cycle = 0

    @property
    def current(self) -> Hint:
        """The selected hint; claims use it unless names are filtered (see :func:`claim_hint`)."""
        return self._current

    @property
    def cycle(self) -> int:
        """The number of probes finished so far, i.e. the cycle number of the next probe."""
        return self._cycle

    @property
    def probed(self) -> bool:
        """Whether a probe has completed, i.e. whether later switches need consecutive wins."""
        return self._probed

    @property
    def challenger_streak(self) -> int:
        """Consecutive probes the challenger has won since the last reset."""
        return self._streak

    def next_plan(self, rng: random.Random, n_partitions: int) -> list[ProbeStep]:
        """The plan of the next probe (its cycle is :attr:`cycle`)."""
        return probe_plan(self._cycle, rng, n_partitions)

    def on_probe_result(self, samples: Mapping[Hint, Sequence[float]]) -> HintDecision:
        """Decide on a finished probe's timings (milliseconds per hint, one per sample).

        Samples that are missing, fewer than :data:`PROBE_SAMPLES`, negative, non-finite or not
        numbers make the whole probe a failure (see :meth:`on_probe_failed`).
        """
        medians: dict[Hint, float] = {}
        for hint in Hint:
            values = samples.get(hint)
            if values is None or not _usable(values):
                return self.on_probe_failed()
            medians[hint] = median(values)
        self._cycle += 1
        previous = self._current
        challenger = previous.other
        challenger_wins = medians[challenger] < medians[previous]
        frozen = MappingProxyType(medians)

        if not self._probed:
            self._probed = True
            self._streak = 0
            self._current = challenger if challenger_wins else previous
            return HintDecision(
                self._current, self._current is not previous, DecisionReason.INITIAL, frozen
            )
        if not challenger_wins:
            self._streak = 0
            return HintDecision(previous, False, DecisionReason.KEPT, frozen)
        self._streak += 1
        if self._streak < WINS_TO_SWITCH:
            return HintDecision(
                previous, False, DecisionReason.CHALLENGER_LEADS, frozen, self._streak
            )
        self._streak = 0
        self._current = challenger
        return HintDecision(challenger, True, DecisionReason.SWITCHED, frozen)

    def on_probe_failed(self) -> HintDecision:
        """A probe failed or timed out: keep the current hint and reset the challenger streak.

        The probe is retried at the next interval; the cycle still advances so that the next
        probe measures in the other order.
        """
        self._cycle += 1
        self._streak = 0
        return HintDecision(self._current, False, DecisionReason.FAILED)
