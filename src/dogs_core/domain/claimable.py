"""Which stored records a claim may take: the claimable rule, written once.

A claim of one ``partition`` and some ``job_names`` at ``now`` (a :class:`ClaimScope`) may take
a record when every clause of :data:`CLAIMABLE` holds, in this order:

1. :data:`IN_PARTITION`: its ``partition`` is the claim's;
2. :data:`NAME_REQUESTED`: its ``job_name`` is one of the claim's names;
3. :data:`DUE`: ``next_run_at <= now``;
4. :data:`LOCK_FREE`: ``locked_until`` is missing or ``<= now`` (an expired lock is taken over,
   whether it was released or left by a worker that died);
5. :data:`NOT_FAILED`: it is not an event record in status ``maxTriesReached``
   (:data:`FAILED`: such a record is never claimed again).

The clauses are data rather than code so that each store's form of the rule comes from this
one: :func:`is_claimable` evaluates them on a :class:`~dogs_core.domain.records.JobRecord`, and
the MongoDB adapter translates them, clause by clause, into the selector every claim sends
(``dogs_mongo.queries.claims.eligible_filter``: key for key the selector of Node Dogs, which the
claim indexes serve). The in-memory store keeps its claim index along the same clauses: one
sorted list per ``(partition, job_name)`` (1 and 2), failed records never in it
(:func:`is_failed`, 5), its walk checking 3 and 4 entry by entry. Property tests hold both
stores to :func:`is_claimable` on random records and clocks.

In terms of :meth:`JobRecord.state <dogs_core.domain.records.JobRecord.state>`: a record in
the claim's partition and names is claimable exactly when its state is one of
:data:`CLAIMABLE_STATES` and it is due. A retrying or stale record may wait for a later
``next_run_at`` (a retry's backoff); a scheduled one is not due yet, a running one holds a live
lock and a failed one is never claimed again.
"""

from __future__ import annotations

import enum
import operator
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from dogs_core.domain.records import JobRecord, JobState, JobStatus, JobType
from dogs_core.domain.values import value

__all__ = [
    "CLAIMABLE",
    "CLAIMABLE_STATES",
    "DUE",
    "FAILED",
    "IN_PARTITION",
    "LOCK_FREE",
    "NAME_REQUESTED",
    "NOT_FAILED",
    "ClaimInput",
    "ClaimScope",
    "Clause",
    "Equals",
    "HasValue",
    "NotAfter",
    "NotAll",
    "OneOf",
    "is_claimable",
    "is_failed",
]


class ClaimInput(enum.StrEnum):
    """What a claim brings to the rule (the rest is read from the record): the name of a
    :class:`ClaimScope` attribute."""

    PARTITION = "partition"
    JOB_NAMES = "job_names"
    NOW = "now"


@value
class ClaimScope:
    """The claim a record is judged for: the partition it sweeps, the job names it asks for
    and the moment it is made (on the store's clock). A ``partition`` of ``None`` asks about
    the records without one: no claim of the runtime takes them before the partition reconciler
    gives them one, but the test harness asks whether they are due."""

    partition: int | None
    job_names: Collection[str]
    now: datetime


# Each clause names the JobRecord attribute it reads (``field``); a store translates that name
# into its own (MongoDB: Dogs' camelCase field names).


@dataclass(frozen=True, slots=True)
class Equals:
    """The record's ``field`` equals the claim's ``given``."""

    field: str
    given: ClaimInput

    def holds(self, record: JobRecord, scope: ClaimScope) -> bool:
        return bool(getattr(record, self.field) == getattr(scope, self.given))


@dataclass(frozen=True, slots=True)
class OneOf:
    """The record's ``field`` is one of the claim's ``given`` (a collection)."""

    field: str
    given: ClaimInput

    def holds(self, record: JobRecord, scope: ClaimScope) -> bool:
        return getattr(record, self.field) in getattr(scope, self.given)


@dataclass(frozen=True, slots=True)
class NotAfter:
    """The record's ``field`` (a moment) is not after the claim's ``given``; with
    ``or_missing``, a record without the field passes too."""

    field: str
    given: ClaimInput
    or_missing: bool = False

    def holds(self, record: JobRecord, scope: ClaimScope) -> bool:
        moment: datetime | None = getattr(record, self.field)
        if moment is None:
            return self.or_missing
        return bool(moment <= getattr(scope, self.given))


@dataclass(frozen=True, slots=True)
class HasValue:
    """The record's ``field`` holds ``value``, whatever the claim."""

    field: str
    value: enum.Enum

    def holds(self, record: JobRecord, scope: ClaimScope | None = None) -> bool:
        return bool(getattr(record, self.field) == self.value)


@dataclass(frozen=True, slots=True)
class NotAll:
    """Not every one of ``clauses`` holds (whatever the claim)."""

    clauses: tuple[HasValue, ...]

    def holds(self, record: JobRecord, scope: ClaimScope | None = None) -> bool:
        return not all(clause.holds(record) for clause in self.clauses)


Clause = Equals | OneOf | NotAfter | NotAll
"""One clause of :data:`CLAIMABLE`. A store translating the rule handles each kind."""

FAILED: Final[tuple[HasValue, ...]] = (
    HasValue("type", JobType.EVENT),
    HasValue("status", JobStatus.MAX_TRIES_REACHED),
)
"""An event record at its attempt limit (all of these hold): :attr:`JobState.FAILED`. A
recurrent record is never failed, whatever its ``status`` (a legacy one is cleared at
startup)."""

IN_PARTITION: Final = Equals("partition", ClaimInput.PARTITION)
NAME_REQUESTED: Final = OneOf("job_name", ClaimInput.JOB_NAMES)
DUE: Final = NotAfter("next_run_at", ClaimInput.NOW)
LOCK_FREE: Final = NotAfter("locked_until", ClaimInput.NOW, or_missing=True)
NOT_FAILED: Final = NotAll(FAILED)

CLAIMABLE: Final[tuple[Clause, ...]] = (IN_PARTITION, NAME_REQUESTED, DUE, LOCK_FREE, NOT_FAILED)
"""The claimable rule: a claim may take a record when all of these hold (see the module)."""

CLAIMABLE_STATES: Final = frozenset({JobState.DUE, JobState.RETRYING, JobState.STALE})
"""The states of the records a claim may take, once they are due (:data:`DUE`)."""


def is_claimable(record: JobRecord, scope: ClaimScope) -> bool:
    """Whether a claim of ``scope`` may take ``record``: every clause of :data:`CLAIMABLE`."""
    return all(clause.holds(record, scope) for clause in CLAIMABLE)


# The in-memory store asks this at every write of a record (its claim index leaves failed
# records out): one attrgetter and one tuple comparison cost less than half the clauses' calls.
# (An attrgetter of two names or more returns a tuple, as FAILED has.)
_FAILED_FIELDS: Final = operator.attrgetter(*(clause.field for clause in FAILED))
_FAILED_VALUES: Final = tuple(clause.value for clause in FAILED)


def is_failed(record: JobRecord) -> bool:
    """Whether ``record`` is failed (every clause of :data:`FAILED`): no claim takes it again."""
    return bool(_FAILED_FIELDS(record) == _FAILED_VALUES)
