"""``client.schedules``: recurring schedules managed at run time (upsert, list, get, pause,
resume, delete), through the store's schedules role (:mod:`dogs_core.ports.schedules`).

A runtime schedule is a recurrent record keyed by the schedule's id
(:mod:`dogs_core.domain.runtime_schedules`): every change is a compare-and-set on the spec as
read (its ``updated_at``), so concurrent upserts, pauses and resumes each apply whole, and
an upsert that changes nothing writes nothing. A worker runs a schedule whose event job it
knows (:mod:`dogs_core.runtime.worker.schedule_book`); code-defined recurrent jobs show in the same
list, marked ``source="code"``, and are changed in code.

``_async/schedules.py`` is the source of truth; ``_sync/schedules.py`` is generated from it.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Protocol, cast

from dogs_core.domain import validation
from dogs_core.domain.audit import AuditAction
from dogs_core.domain.definitions import (
    DEFAULT_RECURRENT_PRIORITY,
    EventJobDefinition,
    RecurrentJobDefinition,
    to_bson_storable,
    validate_params,
)
from dogs_core.domain.partitions import assign_partition
from dogs_core.domain.records import JobRecord, JobType, NewJob
from dogs_core.domain.runtime_schedules import (
    ScheduleSpec,
    first_run_at,
    schedule_spec,
    validate_schedule_id,
)
from dogs_core.domain.schedule_entries import RuntimeSchedule, ScheduleUpserted, entry_of
from dogs_core.domain.uniqueness import PARKED_AT
from dogs_core.errors import (
    InvalidOptionError,
    MissingRoleError,
    ScheduleInCodeError,
    ScheduleNotFoundError,
)
from dogs_core.ids import new_record_id
from dogs_core.jobs import Jobs
from dogs_core.ports import AsyncJobStore, AsyncScheduleStore, Clock, Role, has_role
from dogs_core.runtime.client._async.audit import audited
from dogs_core.runtime.client.calls import (
    MAX_LIST_PAGE,
    SCHEDULE_ROUNDS,
    next_run_after_change,
    respec,
)
from dogs_core.runtime.plumbing._async.retry import retry_transient


class ScheduleOwner(Protocol):
    """What :class:`Schedules` uses of its client (``DogsClient``, without importing it)."""

    @property
    def store(self) -> AsyncJobStore: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def jobs(self) -> Jobs | None: ...
    @property
    def n_partitions(self) -> int: ...
    @property
    def operation_timeout(self) -> float | None: ...
    @property
    def _rng(self) -> random.Random: ...

    async def _ensure_setup(self) -> bool: ...


__all__ = ["ScheduleOwner", "Schedules"]

logger = logging.getLogger("dogs.schedules")


class Schedules:
    """Recurring schedules managed at run time, as ``client.schedules``."""

    def __init__(self, client: ScheduleOwner) -> None:
        self._client = client

    # What the audit trail records a change with (:func:`audited`): the client's.
    @property
    def store(self) -> AsyncJobStore:
        return self._client.store

    @property
    def clock(self) -> Clock:
        return self._client.clock

    @property
    def operation_timeout(self) -> float | None:
        return self._client.operation_timeout

    # -- reading ------------------------------------------------------------------------------

    async def list(self, *, after: str | None = None, limit: int = 100) -> list[RuntimeSchedule]:
        """The schedules by id, runtime ones and code-defined recurrent jobs (``source``),
        at most ``limit`` (1 to 1000), ids after ``after``."""
        size = validation.integer("limit", limit, minimum=1)
        if size > MAX_LIST_PAGE:
            raise InvalidOptionError("limit", limit, f"must be at most {MAX_LIST_PAGE}")
        if after is not None:
            validate_schedule_id(after)
        store = self._store()
        records = await retry_transient(
            lambda: store.find_schedule_records(after=after, limit=size),
            what="list schedules",
            deadline=self._client.operation_timeout,
        )
        now = self._client.clock.now()
        return [entry_of(record, now, self._code_rule(record)) for record in records]

    async def get(self, schedule_id: str) -> RuntimeSchedule | None:
        """One schedule by id (a runtime one, or a code-defined recurrent job), or ``None``."""
        record = await self._read(validate_schedule_id(schedule_id))
        if record is None:
            return None
        return entry_of(record, self._client.clock.now(), self._code_rule(record))

    # -- changing -----------------------------------------------------------------------------

    @audited(AuditAction.SCHEDULE_UPSERT)
    async def upsert(
        self,
        schedule_id: str,
        job: EventJobDefinition | str,
        *,
        cron: str | None = None,
        timezone: str | None = None,
        every: validation.DurationLike | None = None,
        params: object = None,
        misfire: str = "run_once",
        misfire_grace: validation.DurationLike | None = None,
        max_catch_up: int | None = None,
        priority: int | None = None,
        paused: bool | None = None,
    ) -> ScheduleUpserted:
        """Create schedule ``schedule_id``, or change it to this: run event ``job`` with
        ``params`` on ``cron`` (in ``timezone``) or ``every`` duration, with the misfire policy
        of a recurrent job. Idempotent: the same call again writes nothing. A changed rule
        recomputes the next run; a run under way finishes by the rule it started with.
        ``paused`` (``None``: as it is) pauses or resumes it too. Raises a
        :class:`~dogs_core.errors.ValidationError` before writing anything when an argument is
        bad, and :class:`~dogs_core.errors.ScheduleInCodeError` when the id is a recurrent job
        defined in code."""
        sid = validate_schedule_id(schedule_id)
        name, stored = self._job_and_params(sid, job, params)
        spec = schedule_spec(
            name,
            cron=cron,
            timezone=timezone,
            every=every,
            misfire=misfire,
            misfire_grace=misfire_grace,
            max_catch_up=max_catch_up,
        )
        level = DEFAULT_RECURRENT_PRIORITY if priority is None else priority
        level = validation.priority("priority", level)
        if paused is not None:
            validation.boolean("paused", paused)
        store = self._store()
        await self._client._ensure_setup()
        for _ in range(SCHEDULE_ROUNDS):
            now = self._client.clock.now()
            record = await self._read(sid)
            if record is None:
                created = await self._create(store, sid, spec, stored, level, paused, now)
                if created is not None:
                    return ScheduleUpserted(created, "created")
                continue  # created meanwhile: change it instead
            if record.schedule is None:
                raise ScheduleInCodeError(sid, "upsert")
            old = record.schedule
            target = respec(spec, paused=old.paused if paused is None else paused, now=now)
            if old == target and record.params == stored and record.priority == level:
                return ScheduleUpserted(entry_of(record, now), "unchanged")
            next_run = next_run_after_change(old, target, now)
            written = await self._update(store, record, target, stored, level, next_run)
            if written is not None:
                logger.info("schedule %s updated: %s", sid, target.describe())
                return ScheduleUpserted(entry_of(written, now), "updated")
        raise InvalidOptionError("schedule_id", sid, "kept changing under this upsert; try again")

    @audited(AuditAction.SCHEDULE_PAUSE)
    async def pause(self, schedule_id: str) -> RuntimeSchedule:
        """Pause it: no run starts until :meth:`resume` (a run under way finishes). Its record
        is moved to the year 9999, so no worker, Python or Node, claims it. Idempotent."""
        return await self._set_paused(validate_schedule_id(schedule_id), True)

    @audited(AuditAction.SCHEDULE_RESUME)
    async def resume(self, schedule_id: str) -> RuntimeSchedule:
        """Resume it: the next run is its rule's next time after now. Idempotent."""
        return await self._set_paused(validate_schedule_id(schedule_id), False)

    @audited(AuditAction.SCHEDULE_DELETE)
    async def delete(self, schedule_id: str) -> bool:
        """Delete it; ``False`` when there was none. A run under way is stopped as an
        operator's delete stops one (it loses its lock at its next write)."""
        sid = validate_schedule_id(schedule_id)
        store = self._store()
        deleted = await retry_transient(
            lambda: store.delete_schedule(sid),
            what=f"delete schedule {sid}",
            deadline=self._client.operation_timeout,
        )
        if deleted is None:
            record = await self._read(sid)
            if record is not None and record.schedule is None:
                raise ScheduleInCodeError(sid, "delete")
            return False
        logger.info("schedule %s deleted", sid)
        return True

    # -- the steps ----------------------------------------------------------------------------

    def _store(self) -> AsyncScheduleStore:
        store = self._client.store
        if not has_role(store, Role.SCHEDULES):
            raise MissingRoleError(Role.SCHEDULES.value, "client.schedules", store)
        return cast(AsyncScheduleStore, store)

    async def _read(self, sid: str) -> JobRecord | None:
        store = self._store()
        return await retry_transient(
            lambda: store.get_schedule_record(sid),
            what=f"read schedule {sid}",
            deadline=self._client.operation_timeout,
        )

    def _job_and_params(
        self, sid: str, job: EventJobDefinition | str, params: object
    ) -> tuple[str, Mapping[str, Any] | None]:
        """The event job's name and the params as stored (checked by its model when this
        client knows the job)."""
        jobs = self._client.jobs
        if jobs is not None and sid in jobs:
            if isinstance(jobs.get(sid), RecurrentJobDefinition):
                raise ScheduleInCodeError(sid, "upsert")
            reason = "is the name of an event job: give the schedule its own id"
            raise InvalidOptionError("schedule_id", sid, reason)
        definition: object = job
        if isinstance(job, str):
            validation.text("job", job)
            definition = jobs.get(job) if jobs is not None else None
        if isinstance(definition, RecurrentJobDefinition):
            raise InvalidOptionError(
                "job", definition.name, "a schedule runs an event job (recurrent jobs run alone)"
            )
        if isinstance(definition, EventJobDefinition):
            return definition.name, validate_params(definition, params)
        if definition is not None or not isinstance(job, str):
            raise InvalidOptionError("job", job, "must be an event job definition or its name")
        if params is not None and not isinstance(params, Mapping):
            raise InvalidOptionError("params", params, "must be a mapping (or None)")
        return job, None if params is None else to_bson_storable(params, job=job)

    async def _create(
        self,
        store: AsyncScheduleStore,
        sid: str,
        spec: ScheduleSpec,
        params: Mapping[str, Any] | None,
        priority: int,
        paused: bool | None,
        now: datetime,
    ) -> RuntimeSchedule | None:
        target = respec(spec, paused=bool(paused), now=now)
        new = NewJob(
            id=new_record_id(),
            job_name=sid,
            params=params,
            next_run_at=PARKED_AT if target.paused else first_run_at(target, now),
            priority=priority,
            partition=assign_partition(self._client.n_partitions, self._client._rng),
            type=JobType.RECURRENT,
            schedule=target,
        )
        inserted = await retry_transient(
            lambda: store.insert_schedule(new),
            what=f"create schedule {sid}",
            deadline=self._client.operation_timeout,
        )
        if not inserted:
            return None
        logger.info("schedule %s created: %s of %s", sid, target.describe(), target.job)
        record = await self._read(sid)
        return None if record is None else entry_of(record, now)

    async def _update(
        self,
        store: AsyncScheduleStore,
        record: JobRecord,
        spec: ScheduleSpec,
        params: Mapping[str, Any] | None,
        priority: int,
        next_run: datetime | None,
    ) -> JobRecord | None:
        old = record.schedule
        assert old is not None
        return await retry_transient(
            lambda: store.update_schedule(
                record.id,
                expected=old.updated_at,
                spec=spec,
                params=params,
                priority=priority,
                next_run_at=next_run,
            ),
            what=f"change schedule {record.job_name}",
            deadline=self._client.operation_timeout,
        )

    async def _set_paused(self, sid: str, paused: bool) -> RuntimeSchedule:
        store = self._store()
        for _ in range(SCHEDULE_ROUNDS):
            now = self._client.clock.now()
            record = await self._read(sid)
            if record is None:
                raise ScheduleNotFoundError(sid)
            old = record.schedule
            if old is None:
                raise ScheduleInCodeError(sid, "pause" if paused else "resume")
            if old.paused == paused:
                return entry_of(record, now)
            target = respec(old, paused=paused, now=now)
            written = await self._update(
                store,
                record,
                target,
                record.params,
                record.priority,
                next_run_after_change(old, target, now),
            )
            if written is not None:
                logger.info("schedule %s %s", sid, "paused" if paused else "resumed")
                return entry_of(written, now)
        raise InvalidOptionError("schedule_id", sid, "kept changing; try again")

    def _code_rule(self, record: JobRecord) -> str | None:
        """How a code job's rule reads, when this client's registry defines it."""
        jobs = self._client.jobs
        if record.schedule is not None or jobs is None or record.job_name not in jobs:
            return None
        definition = jobs.get(record.job_name)
        if not isinstance(definition, RecurrentJobDefinition):
            return None
        rule = definition.schedule
        text = getattr(rule, "expression", None)
        if text is not None:
            return f"cron {text} ({getattr(rule, 'timezone', '?')})"
        interval = getattr(rule, "interval", None)
        return f"every {interval}" if interval is not None else "a next_run function"
