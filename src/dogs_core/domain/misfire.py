"""What a recurrent job does with the slots it missed: its misfire policy, as pure decisions.

A recurrent record is due at one *slot* (its ``nextRunAt``). When no worker ran it then (all
were stopped, or busy), it is claimed late, and the slots after it may have passed too. The
policy says what becomes of them, the way APScheduler 4's ``CoalescePolicy`` and
``misfire_grace_time`` do:

``run_once`` (the default, and Dogs' behaviour)
    The missed slots collapse into one run; the next run is the first slot after that run.
``skip``
    A run claimed more than ``misfire_grace`` after its slot does not run its handler: the record
    moves to the first slot after now.
``run_all``
    Each missed slot runs, oldest first, and the next run after a run is the slot right after the
    one just run (not the first one after now), until the job has caught up. At most the
    ``max_catch_up`` newest missed slots run: older ones are skipped at the claim. The count is
    kept in no stored field (a Node worker sharing the record would drop one), so the bound is on
    the backlog: when the job is claimed, it is never more than ``max_catch_up`` slots behind.

``misfire_grace`` bounds the lateness of any run, for every policy: a slot claimed more than
that after its time is skipped (``None``: no bound). Its default is ``None`` for ``run_once`` and
``run_all`` and :data:`DEFAULT_SKIP_GRACE` for ``skip``.

Only a slot's first attempt is judged: a retry (``tries > 1``, an explicit ``Retry(run_in=...)``)
or the rerun of a killed attempt (``was_stale``) runs as it would without a policy.

Slots are the schedule's own times: for ``cron``, its occurrences; for ``run_every``, the times
``slot + k * interval``; a ``next_run`` function has no countable slots, so ``run_all`` does not
accept it. A skip writes no history row (Dogs has no status for it): the runtime logs it and
emits a :class:`~dogs_core.domain.events.JobMisfired` event.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final, Literal, TypeAlias

from dogs_core.domain import validation
from dogs_core.domain.schedules import (
    CronSchedule,
    CustomSchedule,
    RunEvery,
    ScheduleRule,
    cron_occurrences_before,
    ensure_utc,
    next_run_after,
)
from dogs_core.errors import InvalidOptionError

__all__ = [
    "DEFAULT_MAX_CATCH_UP",
    "DEFAULT_SKIP_GRACE",
    "MISFIRE_MODES",
    "MisfireMode",
    "MisfirePolicy",
    "MissedSlots",
    "misfire_before_run",
    "next_run_after_run",
    "slots_between",
]

MisfireMode: TypeAlias = Literal["run_once", "skip", "run_all"]
MISFIRE_MODES: Final = ("run_once", "skip", "run_all")

DEFAULT_SKIP_GRACE: Final = timedelta(minutes=1)
"""``misfire="skip"`` without a grace: a run claimed more than a minute late is skipped (a claim
is always a little late: the poll interval, a busy instance)."""

DEFAULT_MAX_CATCH_UP: Final = 10
"""``misfire="run_all"`` without ``max_catch_up``: at most the 10 newest missed slots run."""

SLOT_COUNT_CAP: Final = 10_000
"""Slots are counted one by one up to this many (for the log line); past it the count says "at
least"."""


@dataclass(frozen=True, slots=True)
class MisfirePolicy:
    """A recurrent job's misfire policy (see the module docstring); checked at construction.

    ``grace`` and ``max_catch_up`` are the effective values: ``None`` means unlimited grace, and
    ``max_catch_up`` is ``None`` unless ``mode`` is ``run_all``.
    """

    mode: MisfireMode = "run_once"
    grace: timedelta | None = None
    max_catch_up: int | None = None

    @classmethod
    def of(
        cls,
        misfire: object = "run_once",
        misfire_grace: object = None,
        max_catch_up: object = None,
        *,
        schedule: ScheduleRule | None = None,
    ) -> MisfirePolicy:
        """The policy from a job's options, defaults filled in; each option is checked
        (:class:`InvalidOptionError` naming it and its value)."""
        if misfire not in MISFIRE_MODES:
            raise InvalidOptionError("misfire", misfire, "must be 'run_once', 'skip' or 'run_all'")
        mode: MisfireMode = misfire
        grace = None
        if misfire_grace is not None:
            grace = validation.duration("misfire_grace", misfire_grace)
        elif mode == "skip":
            grace = DEFAULT_SKIP_GRACE
        if max_catch_up is not None and mode != "run_all":
            raise InvalidOptionError(
                "max_catch_up", max_catch_up, f"only applies to misfire='run_all', not {mode!r}"
            )
        catch_up = None
        if mode == "run_all":
            catch_up = DEFAULT_MAX_CATCH_UP
            if max_catch_up is not None:
                catch_up = validation.integer("max_catch_up", max_catch_up, minimum=1)
            if isinstance(schedule, CustomSchedule):
                raise InvalidOptionError(
                    "misfire",
                    misfire,
                    "run_all needs run_every or cron: a next_run function has no slots to count",
                )
        return cls(mode, grace, catch_up)


@dataclass(frozen=True, slots=True)
class MissedSlots:
    """Slots skipped without running the handler: ``count`` of them (at least, when
    ``capped``), from ``first`` (the record's slot) to ``last``; the record moves to
    ``next_run_at``."""

    next_run_at: datetime
    count: int
    first: datetime
    last: datetime
    capped: bool = False


def misfire_before_run(
    rule: ScheduleRule, policy: MisfirePolicy, slot: datetime | None, now: datetime
) -> MissedSlots | None:
    """``None`` when the claimed record due at ``slot`` runs now; else the slots skipped and
    where the record goes (pure: ``now`` is passed in)."""
    if slot is None:
        return None
    slot, now = ensure_utc(slot, field="slot"), ensure_utc(now, field="now")
    if slot >= now:
        return None
    late = policy.grace is not None and now - slot > policy.grace
    if policy.mode != "run_all":
        return _skipped(rule, slot, _first_slot_after(rule, slot, now)) if late else None
    assert policy.max_catch_up is not None
    lower = slot if policy.grace is None else max(slot, now - policy.grace)
    newest = _newest_slots(rule, slot, lower, now, policy.max_catch_up)
    if newest and newest[0] == slot:
        return None
    target = newest[0] if newest else _first_slot_after(rule, slot, now)
    return _skipped(rule, slot, target)


def next_run_after_run(
    rule: ScheduleRule, policy: MisfirePolicy, slot: datetime | None, now: datetime
) -> datetime:
    """The next run of a recurrent job whose run of ``slot`` ended at ``now``: with ``run_all``
    the slot after ``slot`` (it may have passed: the job catches up); otherwise the regular
    :func:`~dogs_core.domain.schedules.next_run_after`."""
    if policy.mode == "run_all" and slot is not None:
        return _slot_after(rule, ensure_utc(slot, field="slot"))
    return next_run_after(rule, now, scheduled_at=slot)


def slots_between(
    rule: ScheduleRule, slot: datetime, until: datetime, *, cap: int = SLOT_COUNT_CAP
) -> tuple[int, datetime, bool]:
    """How many slots of the sequence that starts at ``slot`` lie before ``until`` (``slot``
    itself always counts), the last of them, and whether the count stopped at ``cap``."""
    if isinstance(rule, RunEvery):
        count = max(1, -((slot - until) // rule.interval))  # ceil((until - slot) / interval)
        return count, slot + (count - 1) * rule.interval, False
    count, last, current = 1, slot, slot
    while count < cap:
        following = _slot_after(rule, current)
        if following >= until or following <= current:
            return count, last, False
        count, last, current = count + 1, following, following
    return count, last, True


def _skipped(rule: ScheduleRule, slot: datetime, target: datetime) -> MissedSlots:
    count, last, capped = slots_between(rule, slot, target)
    return MissedSlots(target, count, slot, last, capped)


def _slot_after(rule: ScheduleRule, slot: datetime) -> datetime:
    """The slot right after ``slot``."""
    if isinstance(rule, RunEvery):
        return slot + rule.interval
    return next_run_after(rule, slot, scheduled_at=slot)


def _first_slot_after(rule: ScheduleRule, slot: datetime, now: datetime) -> datetime:
    """The first slot strictly after ``now`` (``run_every``: on the grid from ``slot``)."""
    if isinstance(rule, RunEvery):
        return slot + ((now - slot) // rule.interval + 1) * rule.interval
    return next_run_after(rule, now, scheduled_at=slot)


def _newest_slots(
    rule: ScheduleRule, slot: datetime, lower: datetime, now: datetime, n: int
) -> list[datetime]:
    """The newest ``n`` slots of the sequence from ``slot`` within ``[lower, now]``, oldest
    first."""
    if isinstance(rule, RunEvery):
        last_k = (now - slot) // rule.interval
        first_k = max(0, -((slot - lower) // rule.interval), last_k - n + 1)
        return [slot + k * rule.interval for k in range(first_k, last_k + 1)]
    assert isinstance(rule, CronSchedule)
    found: list[datetime] = []
    for occurrence in cron_occurrences_before(rule, now):
        if occurrence <= slot or occurrence < lower or len(found) == n:
            break
        found.append(occurrence)
    if len(found) < n and slot >= lower:
        found.append(slot)
    found.reverse()
    return found
