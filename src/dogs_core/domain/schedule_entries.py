"""One line of the schedules list (pure): a runtime schedule, or a code-defined recurrent job
shown beside them, as ``client.schedules.list()``/``get()``, ``dogs schedules`` and the
dashboard show it. See :mod:`dogs_core.domain.runtime_schedules`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from dogs_core.domain.records import JobRecord
from dogs_core.domain.runtime_schedules import ScheduleSpec
from dogs_core.domain.uniqueness import PARKED_AT

__all__ = ["RuntimeSchedule", "ScheduleUpserted", "entry_of"]


@dataclass(frozen=True, slots=True)
class RuntimeSchedule:
    """A recurring schedule as stored.

    ``id``: the schedule's id (its record's ``jobName``). ``source``: ``"runtime"`` (managed
    with ``client.schedules``) or ``"code"`` (a ``@jobs.recurrent`` job, shown in the same
    list; it is changed in code, not here). ``job``: the event job a runtime schedule runs (a
    code job's own name). ``rule``: ``cron 0 3 * * * (Europe/Paris)`` or ``every 0:05:00``
    (``None`` for a code job this client's registry does not know). ``next_run_at`` is
    ``None`` while paused; ``running`` says whether a run holds its lock at the time read.
    """

    id: str
    source: Literal["runtime", "code"]
    job: str
    rule: str | None
    params: Mapping[str, Any] | None
    priority: int
    paused: bool
    next_run_at: datetime | None
    last_run_at: datetime | None
    running: bool
    record_id: str
    spec: ScheduleSpec | None = None
    updated_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ScheduleUpserted:
    """What ``client.schedules.upsert`` did: ``change`` is ``"created"``, ``"updated"`` or
    ``"unchanged"`` (an upsert is idempotent: the same call twice writes once)."""

    schedule: RuntimeSchedule
    change: Literal["created", "updated", "unchanged"]


def entry_of(record: JobRecord, now: datetime, code_rule: str | None = None) -> RuntimeSchedule:
    """The list entry of a recurrent ``record`` at ``now`` (``code_rule``: how a code job's
    rule reads, from the registry, when known)."""
    spec = record.schedule
    paused = spec is not None and spec.paused
    parked = record.next_run_at >= PARKED_AT.replace(year=9000)
    return RuntimeSchedule(
        id=record.job_name,
        source="runtime" if spec is not None else "code",
        job=spec.job if spec is not None else record.job_name,
        rule=spec.describe() if spec is not None else code_rule,
        params=record.params if spec is not None else None,
        priority=record.priority,
        paused=paused,
        next_run_at=None if paused and parked else record.next_run_at,
        last_run_at=record.last_run_at,
        running=record.locked_until is not None and record.locked_until > now,
        record_id=record.id,
        spec=spec,
        updated_at=None if spec is None else spec.updated_at,
    )
