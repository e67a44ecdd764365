"""What the async and the sync scheduling clients share: validation and record building.

Nothing here does I/O. :class:`ClientBase` turns the arguments of ``schedule`` and
``schedule_many`` into :class:`~dogs_core.domain.records.NewJob` values (validated, each with its
id and partition); :class:`~dogs_core.runtime.client._async.client.DogsClient`
(``_async/client.py``)
and the generated :class:`~dogs_core.runtime.client._sync.client.SyncDogsClient`
(``_sync/client.py``)
write them.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

from dogs_core.domain import validation
from dogs_core.domain.clock_offset import DEFAULT_CLOCK_SYNC_INTERVAL
from dogs_core.domain.definitions import (
    EventJobDefinition,
    JobDefinition,
    RecurrentJobDefinition,
    validate_params,
)
from dogs_core.domain.partitions import assign_partition, validate_n_partitions
from dogs_core.domain.records import (
    BulkScheduleResult,
    Duplicate,
    HistoryRecord,
    HistoryStatus,
    ItemError,
    JobRecord,
    JobStatus,
    JobType,
    NewJob,
    Scheduled,
    ScheduleOutcome,
)
from dogs_core.domain.schedules import event_run_at, parse_duration
from dogs_core.domain.uniqueness import Unique, UniqueError
from dogs_core.errors import (
    AmbiguousBulkInsert,
    DogsError,
    InvalidOptionError,
    InvalidScheduleError,
    JobNotRegisteredError,
)
from dogs_core.ids import new_record_id, parse_id
from dogs_core.jobs import Jobs
from dogs_core.ports import Clock
from dogs_core.runtime.client.shaping import check_unique, shape
from dogs_core.runtime.plumbing.clock import ServerClock

__all__ = [
    "HISTORY_GRACE",
    "HISTORY_LOOKBACK",
    "UNKNOWN_JOB_GRACE",
    "AmbiguousBulkInsert",
    "ClientBase",
    "PreparedBatch",
    "ScheduleItem",
    "bulk_result",
    "ended_execution",
    "in_transaction",
    "job_name",
    "unique_identifier_for",
    "validate_job_id",
    "validate_page",
    "validate_session",
    "validate_statuses",
    "validate_wait",
]

_MAX_UNIQUE_KEY_LENGTH = 1024
#: How many recent executions of a job name are searched for a record whose insert reply was
#: lost and that may already have run.
HISTORY_LOOKBACK = 1000
#: Seconds a job may be without a record and without a history row before ``wait_for`` says
#: it keeps no history: its row is written right after its record is deleted.
HISTORY_GRACE = 30.0
#: Seconds ``wait_for`` reads again a job it has never seen (no record, no row) before it says
#: the job does not exist: only an operator's cancel writes a row after deleting the record.
UNKNOWN_JOB_GRACE = 3.0


@dataclass(frozen=True, slots=True)
class ScheduleItem:
    """One job of a ``schedule_many`` call; the same options as ``schedule`` (``unique`` only
    when it needs nothing but Dogs' unique index: ``Unique(key=...)`` or ``Unique(by=...)``
    with the default states, no period, ``on_conflict="skip"``)."""

    params: object = None
    run_in: timedelta | int | float | str | None = None
    run_at: datetime | None = None
    priority: int | None = None
    unique_key: str | None = None
    unique: Unique | None = None
    start_before: timedelta | int | float | str | datetime | None = None
    tags: Sequence[str] | None = None


@dataclass(slots=True)
class PreparedBatch:
    """The items of a ``schedule_many`` call: the valid ones as records, the others as errors."""

    items: list[ScheduleItem | Mapping[str, Any]]
    jobs: list[NewJob] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    errors: list[ItemError] = field(default_factory=list)

    def result(self, written: BulkScheduleResult | None = None) -> BulkScheduleResult:
        """The caller's result: the store's ``written`` result (of :attr:`jobs`, ``None`` when
        nothing was valid) mapped back to the positions of :attr:`items`."""
        errors = list(self.errors)
        outcomes: list[ScheduleOutcome | None] = [None] * len(self.items)
        if written is None:
            return BulkScheduleResult(0, 0, tuple(errors), tuple(outcomes))
        for failed in written.errors:
            original = self.positions[failed.index]
            errors.append(ItemError(index=original, error=failed.error, job=self.items[original]))
        for local_index, outcome in enumerate(written.outcomes):
            if local_index < len(self.positions):
                outcomes[self.positions[local_index]] = outcome
        errors.sort(key=lambda item_error: item_error.index)
        return BulkScheduleResult(
            scheduled_count=written.scheduled_count,
            skipped_count=written.skipped_count,
            errors=tuple(errors),
            outcomes=tuple(outcomes),
        )


def bulk_result(
    outcomes: Sequence[ScheduleOutcome | None], errors: Sequence[ItemError]
) -> BulkScheduleResult:
    """The result of a bulk insert settled one job at a time."""
    return BulkScheduleResult(
        scheduled_count=sum(isinstance(o, Scheduled) for o in outcomes),
        skipped_count=sum(isinstance(o, Duplicate) for o in outcomes),
        errors=tuple(errors),
        outcomes=tuple(outcomes),
    )


class ClientBase:
    """The I/O-free half of a scheduling client: its registry, partitions, clock and the
    validation that happens before anything is written.

    ``clock_sync_interval``: how often the client measures its clock's offset to the store's
    before a call that computes times (``None``: trust this machine's clock)."""

    def __init__(
        self,
        jobs: Jobs | None = None,
        *,
        n_partitions: int = 1,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        clock_sync_interval: timedelta | int | float | str | None = DEFAULT_CLOCK_SYNC_INTERVAL,
    ) -> None:
        self.jobs = jobs
        self.n_partitions = validate_n_partitions(n_partitions)
        interval = validation.optional(validation.positive_duration)(
            "clock_sync_interval", clock_sync_interval
        )
        #: The store's clock as this client sees it (see :class:`ServerClock`).
        self.clock = ServerClock.over(clock, interval)
        self._rng = rng or random.Random()

    def _event_definition(
        self, job: EventJobDefinition | str, *, unique: Unique | None = None
    ) -> EventJobDefinition:
        if isinstance(job, str):
            if self.jobs is None:
                raise InvalidOptionError(
                    "job", job, "a job name needs a client created with a Jobs registry"
                )
            definition: JobDefinition = self.jobs.get(job)
        elif isinstance(job, EventJobDefinition | RecurrentJobDefinition):
            definition = job
            if self.jobs is not None and (
                definition.name not in self.jobs or self.jobs.get(definition.name) is not definition
            ):
                raise JobNotRegisteredError(definition.name)
        else:
            raise InvalidOptionError(
                "job", job, "must be a job definition (from @jobs.event) or a job name"
            )
        if not isinstance(definition, EventJobDefinition) and unique is not None:
            raise UniqueError(
                "unique.on_conflict",
                unique.on_conflict,
                f"job {definition.name!r} is recurrent: it has one record and schedules "
                "itself, so it cannot be deduplicated, replaced, debounced or throttled",
            )
        if not isinstance(definition, EventJobDefinition):
            raise InvalidOptionError(
                "job",
                getattr(definition, "name", definition),
                "only event jobs can be scheduled; recurrent jobs schedule themselves",
            )
        return definition

    def _new_job(self, definition: EventJobDefinition, item: ScheduleItem) -> NewJob:
        now = self.clock.now()
        run_in = None if item.run_in is None else parse_duration(item.run_in, field="run_in")
        if item.run_at is not None and not isinstance(item.run_at, datetime):
            raise InvalidScheduleError("run_at", item.run_at, "must be a datetime")
        next_run_at = event_run_at(now, run_in, item.run_at)
        priority = (
            definition.priority
            if item.priority is None
            else validation.priority("priority", item.priority)
        )
        params = validate_params(definition, item.params)
        unique = check_unique(item.unique, item.unique_key)
        shaped = shape(
            definition,
            now=now,
            run_at=next_run_at,
            explicit_time=run_in is not None or item.run_at is not None,
            params=params,
            unique=unique,
            start_before=item.start_before,
            tags=item.tags,
        )
        identifier = shaped.unique_identifier
        if unique is None:
            identifier = _unique_identifier(definition, item.unique_key)
        return NewJob(
            id=new_record_id(),
            job_name=definition.name,
            params=params,
            next_run_at=shaped.next_run_at,
            priority=priority,
            partition=assign_partition(self.n_partitions, self._rng),
            unique_identifier=identifier,
            tags=shaped.tags,
            start_before=shaped.start_before,
            unique_window=shaped.unique_window,
            debounce_until=shaped.debounce_until,
        )

    def _prepare_many(
        self, definition: EventJobDefinition, items: Iterable[ScheduleItem | Mapping[str, Any]]
    ) -> PreparedBatch:
        """Validate each item; an invalid one becomes an error and the others are kept."""
        batch = PreparedBatch(list(items))
        for index, raw in enumerate(batch.items):
            try:
                item = _as_item(raw, index)
                if item.unique is not None and not item.unique.plain:
                    raise UniqueError(
                        f"items[{index}].unique",
                        item.unique,
                        "schedule_many takes only Unique(key= or by=) with the default states, "
                        "no period and on_conflict='skip'; use schedule() for the others",
                    )
                batch.jobs.append(self._new_job(definition, item))
                batch.positions.append(index)
            except DogsError as error:
                batch.errors.append(ItemError(index=index, error=error, job=raw))
        return batch


def ended_execution(
    record: JobRecord | None, newest: HistoryRecord | None, *, since: datetime
) -> HistoryRecord | None:
    """The execution that ended a job, from its record and its newest history row; ``None``
    while it may still run. An event job has ended once its record is gone (it succeeded or was
    discarded) or is terminal (its attempt limit); a recurrent job never ends, so its "end" is
    its first execution that finished at or after ``since`` (a ``superseded`` one does not
    count: the execution that took its lock over ends that run)."""
    if newest is None:
        return None
    if record is None:
        return newest
    if record.type is JobType.RECURRENT:
        counts = newest.status is not HistoryStatus.SUPERSEDED
        return newest if counts and newest.ended_at >= since else None
    if record.status is JobStatus.MAX_TRIES_REACHED:
        return newest
    return None


def validate_wait(timeout: object, poll_interval: object) -> tuple[float | None, float]:
    """``wait_for``'s ``timeout`` (``None``: as long as it takes) and ``poll_interval`` in
    seconds."""
    seconds = None if timeout is None else validation.duration("timeout", timeout)
    pause = validation.positive_duration("poll_interval", poll_interval)
    return (None if seconds is None else seconds.total_seconds()), pause.total_seconds()


def validate_statuses(statuses: object) -> frozenset[HistoryStatus] | None:
    """``watch``'s status filter: ``None`` (every status) or history statuses (or their names)."""
    if statuses is None:
        return None
    given = [statuses] if isinstance(statuses, str) else statuses
    try:
        if not isinstance(given, Iterable):
            raise TypeError(given)
        return frozenset(HistoryStatus(str(status)) for status in given)
    except (TypeError, ValueError):
        choices = ", ".join(status.value for status in HistoryStatus)
        raise InvalidOptionError("statuses", statuses, f"expected some of {choices}") from None


def job_name(job: JobDefinition | str) -> str:
    return job if isinstance(job, str) else job.name


def validate_page(limit: object, skip: object) -> None:
    """The same check, and message, as the stores give a bad ``limit`` or ``skip``."""
    validation.integer("limit", limit, minimum=0)
    validation.integer("skip", skip, minimum=0)


def validate_job_id(job_id: object, *, field: str = "job_id") -> str:
    """``job_id`` as stored (:func:`dogs_core.ids.parse_id`), else :class:`InvalidIdError`."""
    return parse_id(job_id, field=field)


def unique_identifier_for(jobs: Jobs | None, job: JobDefinition | str | None, key: object) -> str:
    """The stored unique identifier of ``key``: scoped by the job's name when ``job`` is (or
    names, in ``jobs``) an event job with ``unique_scope="job"``, as ``schedule`` stores it."""
    definition: JobDefinition | None = None
    if isinstance(job, EventJobDefinition | RecurrentJobDefinition):
        definition = job
    elif isinstance(job, str) and jobs is not None and job in jobs:
        definition = jobs.get(job)
    event = definition if isinstance(definition, EventJobDefinition) else None
    identifier = _unique_identifier(event, key)
    if identifier is None:
        raise InvalidOptionError("unique_key", key, "must be a non-empty string")
    return identifier


def validate_session(session: object) -> None:
    """``session`` of ``schedule`` and ``schedule_many``: ``None``, or a database session of the
    store's driver (for MongoDB a PyMongo ``ClientSession`` or ``AsyncClientSession``). Only its
    shape is checked here (its ``in_transaction`` is a bool: a ``MongoClient`` or a
    ``Database``, which answer any attribute, are refused); the store joins it or refuses it."""
    if session is not None and not isinstance(getattr(session, "in_transaction", None), bool):
        raise InvalidOptionError(
            "session",
            session,
            "must be None or a database session (a PyMongo ClientSession or AsyncClientSession)",
        )


def in_transaction(session: object) -> bool:
    """Whether a write joining ``session`` is part of the caller's transaction. Then the caller
    (PyMongo's ``with_transaction``) owns the retries: the client neither retries nor reads
    back, since a retry or a read inside an aborted transaction would fail or mislead."""
    return session is not None and getattr(session, "in_transaction", None) is True


def _unique_identifier(definition: EventJobDefinition | None, key: object) -> str | None:
    if key is None:
        return None
    if not isinstance(key, str) or not key:
        raise InvalidOptionError("unique_key", key, "must be a non-empty string")
    if len(key) > _MAX_UNIQUE_KEY_LENGTH:
        raise InvalidOptionError(
            "unique_key", key, f"must be at most {_MAX_UNIQUE_KEY_LENGTH} characters"
        )
    if definition is not None and definition.unique_scope == "job":
        return f"{definition.name}:{key}"
    return key


_ITEM_FIELDS: Final = frozenset(
    ("params", "run_in", "run_at", "priority", "unique_key", "unique", "start_before", "tags")
)


def _as_item(raw: ScheduleItem | Mapping[str, Any], index: int) -> ScheduleItem:
    if isinstance(raw, ScheduleItem):
        return raw
    if isinstance(raw, Mapping):
        unknown = set(raw) - _ITEM_FIELDS
        if unknown:
            raise InvalidOptionError(f"items[{index}]", sorted(unknown), "unknown schedule options")
        return ScheduleItem(**raw)
    raise InvalidOptionError(
        f"items[{index}]", raw, "must be a ScheduleItem or a mapping of schedule options"
    )
