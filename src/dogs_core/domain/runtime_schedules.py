"""Recurring schedules managed at run time (pure): what one is, its checks, and its runs' times.

A runtime schedule is stored as a **recurrent record**, like a code-defined recurrent job: one
record per schedule, its ``jobName`` the schedule's id (Dogs' partial unique index on
``jobName`` for recurrent records keeps ids unique, and apart from code-defined recurrent jobs),
its ``params`` the params its runs get, and an additive ``schedule`` field, the
:class:`ScheduleSpec`: the **event job** it runs, its rule (``cron`` + ``timezone``, or
``every``), its misfire policy, and whether it is paused. One record means Dogs' guarantee
against overlapping runs (a run holds the record's lock) and the misfire policy of
:mod:`dogs_core.domain.misfire` apply unchanged.

A worker runs a schedule's record when it knows the event job the schedule names (no code
change to add a tenant's schedule): see :mod:`dogs_core.runtime.worker.schedule_book`. A paused
schedule's record is due at :data:`~dogs_core.domain.uniqueness.PARKED_AT` (no claim, Python or
Node, takes it); a run already under way when it was paused finishes, and a worker that claims
a paused record moves it back there without running it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

from dogs_core.domain import validation
from dogs_core.domain.misfire import MISFIRE_MODES, MisfireMode, MisfirePolicy
from dogs_core.domain.schedules import (
    CronSchedule,
    RunEvery,
    ScheduleRule,
    next_run_after,
    schedule_rule,
)
from dogs_core.errors import InvalidOptionError, InvalidScheduleError

__all__ = [
    "MAX_SCHEDULE_ID_LENGTH",
    "ScheduleSpec",
    "first_run_at",
    "schedule_spec",
    "validate_schedule_id",
]

#: The longest schedule id: a job name's limit (it is stored as the record's ``jobName``).
MAX_SCHEDULE_ID_LENGTH: Final = 200


@dataclass(frozen=True, slots=True)
class ScheduleSpec:
    """What a runtime schedule runs and when (stored as the record's ``schedule`` field).

    ``job``: the event job each run calls with the record's params. Exactly one of ``cron``
    (with its IANA ``timezone``) and ``every`` (a positive duration: each run that long after
    the previous one ended). ``misfire``, ``misfire_grace`` and ``max_catch_up`` as for a
    code-defined recurrent job (:class:`~dogs_core.domain.misfire.MisfirePolicy`). ``paused``:
    no run starts. ``updated_at``: the last upsert, pause or resume (not part of equality).
    """

    job: str
    cron: str | None = None
    timezone: str | None = None
    every: timedelta | None = None
    misfire: MisfireMode = "run_once"
    misfire_grace: timedelta | None = None
    max_catch_up: int | None = None
    paused: bool = False
    updated_at: datetime | None = field(default=None, compare=False)

    @property
    def rule(self) -> ScheduleRule:
        """The next-run rule (built from the stored fields, which were checked when written)."""
        if self.every is not None:
            return RunEvery(self.every)
        assert self.cron is not None
        assert self.timezone is not None
        return CronSchedule(self.cron, self.timezone)

    @property
    def policy(self) -> MisfirePolicy:
        """The misfire policy."""
        return MisfirePolicy.of(
            self.misfire, self.misfire_grace, self.max_catch_up, schedule=self.rule
        )

    def same_timing(self, other: ScheduleSpec) -> bool:
        """Whether ``other`` gives the same run times (rule and timezone): an upsert that
        changes them recomputes the next run, one that does not keeps it."""
        return (self.cron, self.timezone, self.every) == (other.cron, other.timezone, other.every)

    def describe(self) -> str:
        """The rule in a few words: ``cron 0 3 * * * (Europe/Paris)`` or ``every 0:05:00``."""
        if self.every is not None:
            return f"every {self.every}"
        return f"cron {self.cron} ({self.timezone})"


def validate_schedule_id(schedule_id: object) -> str:
    """A schedule id: a non-empty string of at most :data:`MAX_SCHEDULE_ID_LENGTH` characters,
    without NUL (it is the record's ``jobName``); :class:`InvalidOptionError` otherwise."""
    if not isinstance(schedule_id, str) or not schedule_id.strip():
        raise InvalidOptionError("schedule_id", schedule_id, "must be a non-empty string")
    if len(schedule_id) > MAX_SCHEDULE_ID_LENGTH:
        raise InvalidOptionError(
            "schedule_id",
            schedule_id,
            f"must be at most {MAX_SCHEDULE_ID_LENGTH} characters (it is stored as a job name)",
        )
    if "\x00" in schedule_id:
        raise InvalidOptionError("schedule_id", schedule_id, "cannot contain a NUL character")
    return schedule_id


def schedule_spec(
    job: str,
    *,
    cron: str | None = None,
    timezone: str | None = None,
    every: validation.DurationLike | None = None,
    misfire: object = "run_once",
    misfire_grace: object = None,
    max_catch_up: object = None,
    paused: bool = False,
    updated_at: datetime | None = None,
) -> ScheduleSpec:
    """A checked :class:`ScheduleSpec`: exactly one of ``cron`` (+ ``timezone``) and
    ``every``; a cron expression or timezone that does not parse, or a non-positive ``every``,
    raises :class:`InvalidScheduleError`; a bad misfire option :class:`InvalidOptionError`."""
    if cron is None and every is None:
        raise InvalidScheduleError(
            "cron", None, "a schedule needs cron= (with timezone=) or every="
        )
    if not isinstance(cron, str | None):
        raise InvalidScheduleError("cron", cron, "must be a cron expression (a string)")
    if not isinstance(timezone, str | None):
        raise InvalidScheduleError("timezone", timezone, "must be an IANA timezone name")
    rule = schedule_rule(run_every=every, cron=cron, timezone=timezone)
    if misfire not in MISFIRE_MODES:
        raise InvalidOptionError("misfire", misfire, "must be 'run_once', 'skip' or 'run_all'")
    policy = MisfirePolicy.of(misfire, misfire_grace, max_catch_up, schedule=rule)
    if not isinstance(paused, bool):
        raise InvalidOptionError("paused", paused, "must be True or False")
    return ScheduleSpec(
        job=validation.text("job", job),
        cron=rule.expression if isinstance(rule, CronSchedule) else None,
        timezone=rule.timezone if isinstance(rule, CronSchedule) else None,
        every=rule.interval if isinstance(rule, RunEvery) else None,
        misfire=policy.mode,
        misfire_grace=None if misfire_grace is None else policy.grace,
        max_catch_up=None if max_catch_up is None else policy.max_catch_up,
        paused=paused,
        updated_at=updated_at,
    )


def first_run_at(spec: ScheduleSpec, now: datetime) -> datetime:
    """When a new (or resumed, or re-timed) schedule first runs: its rule's next time after
    ``now`` (the next cron occurrence; ``every`` from now)."""
    return next_run_after(spec.rule, now)
