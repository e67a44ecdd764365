"""The misfire policy of recurrent jobs: which late runs run, which slots are skipped, and where
the record goes (pure decisions; the runtime side is tests/runtime/test_misfire.py).

The property tests replay a worker that comes back at ``now`` with the record due at an older
slot: claims that skip move the record, claims that run record the slot, until the record is due
after ``now``. An independent oracle lists the slots one by one (``slot + k * interval``, or the
cron occurrences found by walking forward) and says which of them each policy runs.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dogs_core.domain.definitions import RecurrentJobDefinition
from dogs_core.domain.misfire import (
    DEFAULT_MAX_CATCH_UP,
    DEFAULT_SKIP_GRACE,
    MisfirePolicy,
    MissedSlots,
    misfire_before_run,
    next_run_after_run,
    slots_between,
)
from dogs_core.domain.outcome import (
    Defer,
    OutcomePolicy,
    Reschedule,
    Succeeded,
    decide,
    decide_before_run,
)
from dogs_core.domain.records import ClaimedJob, JobType
from dogs_core.domain.schedules import (
    CronSchedule,
    CustomSchedule,
    RunEvery,
    ScheduleRule,
    next_run_after,
)
from dogs_core.errors import InvalidOptionError

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
POLICY = OutcomePolicy(
    default_lock_time=timedelta(minutes=1), max_tries=3, max_tries_reached_retention=None
)

# DST-free zones only: a wall time that repeats or vanishes has no single slot to count.
CRONS = ("*/5 * * * *", "0 * * * *", "15,45 * * * *", "*/7 * * * *", "30 9 * * 1-5")
ZONES = ("UTC", "Asia/Tokyo", "Asia/Kolkata")


def handler(ctx: Any) -> None:
    return None


rules = st.one_of(
    st.builds(
        RunEvery,
        st.integers(30, 7200).map(lambda s: timedelta(seconds=s)),
        st.sampled_from(("completion", "slot")),
    ),
    st.builds(CronSchedule, st.sampled_from(CRONS), st.sampled_from(ZONES)),
)
graces = st.none() | st.integers(0, 6 * 3600).map(lambda s: timedelta(seconds=s))


def slot_of(rule: ScheduleRule, offset: int) -> datetime:
    """A slot of ``rule`` near ``T0 + offset`` seconds: any time for run_every, an occurrence
    for cron."""
    start = T0 + timedelta(seconds=offset)
    return start if isinstance(rule, RunEvery) else next_run_after(rule, start)


def oracle_slots(rule: ScheduleRule, slot: datetime, until: datetime) -> list[datetime]:
    """Every slot of the sequence from ``slot`` up to ``until`` (inclusive), one by one."""
    found = [slot]
    while True:
        if isinstance(rule, RunEvery):
            following = found[-1] + rule.interval
        else:
            following = next_run_after(rule, found[-1])
        if following > until:
            return found
        found.append(following)


def replay(
    rule: ScheduleRule, policy: MisfirePolicy, slot: datetime, now: datetime
) -> tuple[list[datetime], list[MissedSlots], datetime]:
    """Claims at ``now`` (runs take no time) until the record is due after ``now``."""
    runs: list[datetime] = []
    skips: list[MissedSlots] = []
    for _ in range(10_000):
        if slot > now:
            return runs, skips, slot
        missed = misfire_before_run(rule, policy, slot, now)
        if missed is None:
            runs.append(slot)
            slot = next_run_after_run(rule, policy, slot, now)
        else:
            assert missed.next_run_at > slot, "a skip always moves the record forward"
            skips.append(missed)
            slot = missed.next_run_at
    raise AssertionError("the replay did not converge")


def first_after(rule: ScheduleRule, slot: datetime, now: datetime) -> datetime:
    last = oracle_slots(rule, slot, now)[-1]
    if isinstance(rule, RunEvery):
        return last + rule.interval
    return next_run_after(rule, last)


@settings(max_examples=300, deadline=None)
@given(
    rule=rules,
    offset=st.integers(0, 3600),
    late=st.integers(1, 24 * 3600),
    mode=st.sampled_from(("run_once", "skip", "run_all")),
    grace=graces,
    catch_up=st.integers(1, 12),
)
def test_a_late_claim_runs_what_its_policy_says(
    rule: ScheduleRule,
    offset: int,
    late: int,
    mode: str,
    grace: timedelta | None,
    catch_up: int,
) -> None:
    slot = slot_of(rule, offset)
    now = slot + timedelta(seconds=late)
    policy = MisfirePolicy.of(mode, grace, catch_up if mode == "run_all" else None)
    runs, skips, final = replay(rule, policy, slot, now)
    missed = oracle_slots(rule, slot, now)
    window = [s for s in missed if policy.grace is None or now - s <= policy.grace]
    if mode == "run_all":
        assert runs == window[-catch_up:], "the newest max_catch_up slots within the grace"
        assert final == first_after(rule, slot, now), "then on time: the first slot after now"
    elif policy.grace is None or now - slot <= policy.grace:
        assert runs == [slot], "one run for all the missed slots"
        assert not skips
    else:
        assert runs == []
        assert final == first_after(rule, slot, now) or not isinstance(rule, RunEvery)
    skipped = sum(s.count for s in skips)
    assert skipped == (len(missed) - len(runs) if skips else 0), "every missed slot is told"
    for skip in skips:
        assert not skip.capped
        count, last, _ = slots_between(rule, skip.first, skip.next_run_at)
        assert (skip.count, skip.last) == (count, last)


@settings(max_examples=200, deadline=None)
@given(rule=rules, offset=st.integers(0, 3600), early=st.integers(0, 3600), grace=graces)
def test_a_run_on_time_or_early_is_never_skipped(
    rule: ScheduleRule, offset: int, early: int, grace: timedelta | None
) -> None:
    slot = slot_of(rule, offset)
    for mode in ("run_once", "skip", "run_all"):
        policy = MisfirePolicy.of(mode, grace)
        assert misfire_before_run(rule, policy, slot, slot - timedelta(seconds=early)) is None


@settings(max_examples=200, deadline=None)
@given(rule=rules, offset=st.integers(0, 3600), late=st.integers(0, 24 * 3600))
def test_run_once_without_grace_never_skips_and_keeps_the_old_next_run(
    rule: ScheduleRule, offset: int, late: int
) -> None:
    slot = slot_of(rule, offset)
    now = slot + timedelta(seconds=late)
    policy = MisfirePolicy()
    assert misfire_before_run(rule, policy, slot, now) is None
    expected = next_run_after(rule, now, scheduled_at=slot)
    assert next_run_after_run(rule, policy, slot, now) == expected


@settings(max_examples=200, deadline=None)
@given(
    rule=rules,
    offset=st.integers(0, 3600),
    late=st.integers(0, 24 * 3600),
    took=st.integers(0, 3600),
)
def test_run_all_follows_the_slot_just_run_not_now(
    rule: ScheduleRule, offset: int, late: int, took: int
) -> None:
    slot = slot_of(rule, offset)
    ended = slot + timedelta(seconds=late + took)
    after = next_run_after_run(rule, MisfirePolicy.of("run_all"), slot, ended)
    assert after == first_after(rule, slot, slot)


def test_a_worker_stopped_for_five_hourly_slots() -> None:
    rule = CronSchedule("0 * * * *", "UTC")
    now = T0 + timedelta(hours=4, minutes=30)  # slots 10:00 ... 14:00 have passed
    hours = [T0 + timedelta(hours=h) for h in range(5)]
    once = replay(rule, MisfirePolicy.of("run_once"), T0, now)
    assert once[0] == [T0]
    assert once[2] == T0 + timedelta(hours=5)
    skip = replay(rule, MisfirePolicy.of("skip", timedelta(minutes=10)), T0, now)
    assert skip[0] == []
    assert [(s.count, s.first, s.last) for s in skip[1]] == [(5, T0, hours[-1])]
    assert skip[2] == T0 + timedelta(hours=5)
    run_all = replay(rule, MisfirePolicy.of("run_all", max_catch_up=3), T0, now)
    assert run_all[0] == hours[2:], "the 3 newest, oldest first"
    assert [(s.count, s.first, s.last, s.next_run_at) for s in run_all[1]] == [
        (2, T0, hours[1], hours[2])
    ]
    assert run_all[2] == T0 + timedelta(hours=5)


def test_run_all_with_a_grace_drops_the_slots_older_than_it() -> None:
    rule = RunEvery(timedelta(minutes=10), anchor="slot")
    now = T0 + timedelta(minutes=55)  # 6 slots: 10:00 ... 10:50
    policy = MisfirePolicy.of("run_all", timedelta(minutes=25), 10)
    runs, _, final = replay(rule, policy, T0, now)
    assert runs == [T0 + timedelta(minutes=m) for m in (30, 40, 50)]
    assert final == T0 + timedelta(minutes=60)
    everything_too_old = replay(rule, MisfirePolicy.of("run_all", timedelta(0), 10), T0, now)
    assert everything_too_old[0] == []
    assert everything_too_old[2] == T0 + timedelta(minutes=60)


def test_skip_moves_run_every_to_its_grid_and_cron_to_its_next_occurrence() -> None:
    grace = timedelta(seconds=30)
    now = T0 + timedelta(minutes=7)
    every = misfire_before_run(
        RunEvery(timedelta(minutes=5)), MisfirePolicy.of("skip", grace), T0, now
    )
    assert every == MissedSlots(T0 + timedelta(minutes=10), 2, T0, T0 + timedelta(minutes=5))
    cron = CronSchedule("*/3 * * * *", "UTC")
    missed = misfire_before_run(cron, MisfirePolicy.of("skip", grace), T0, now)
    assert missed == MissedSlots(T0 + timedelta(minutes=9), 3, T0, T0 + timedelta(minutes=6))


def test_a_custom_schedule_can_skip_but_not_run_all() -> None:
    custom = CustomSchedule(lambda at: at + timedelta(minutes=5))
    now = T0 + timedelta(hours=1)
    missed = misfire_before_run(custom, MisfirePolicy.of("skip", 60), T0, now)
    assert missed is not None
    assert missed.next_run_at == now + timedelta(minutes=5)
    assert missed.count == 13, "10:00, 10:05 ... 11:00"
    with pytest.raises(InvalidOptionError, match="misfire"):
        RecurrentJobDefinition("c", handler, next_run=custom.next_run, misfire="run_all")


def test_counting_many_cron_slots_stops_at_the_cap() -> None:
    rule = CronSchedule("* * * * *", "UTC")
    count, _, capped = slots_between(rule, T0, T0 + timedelta(days=30), cap=100)
    assert (count, capped) == (100, True)
    assert slots_between(rule, T0, T0 + timedelta(minutes=3)) == (
        3,
        T0 + timedelta(minutes=2),
        False,
    )


def test_defaults() -> None:
    assert MisfirePolicy.of() == MisfirePolicy("run_once", None, None)
    assert MisfirePolicy.of("skip") == MisfirePolicy("skip", DEFAULT_SKIP_GRACE, None)
    assert MisfirePolicy.of("run_all").max_catch_up == DEFAULT_MAX_CATCH_UP
    assert MisfirePolicy.of("run_once", "90s").grace == timedelta(seconds=90)
    definition = RecurrentJobDefinition("d", handler, run_every=60)
    assert definition.misfire == MisfirePolicy()


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"misfire": "never"}, "misfire"),
        ({"misfire": None}, "misfire"),
        ({"misfire_grace": -1}, "misfire_grace"),
        ({"misfire_grace": "soon"}, "misfire_grace"),
        ({"misfire_grace": True}, "misfire_grace"),
        ({"misfire": "run_all", "max_catch_up": 0}, "max_catch_up"),
        ({"misfire": "run_all", "max_catch_up": True}, "max_catch_up"),
        ({"misfire": "run_all", "max_catch_up": 2.5}, "max_catch_up"),
        ({"misfire": "skip", "max_catch_up": 3}, "max_catch_up"),
        ({"max_catch_up": 3}, "max_catch_up"),
    ],
)
def test_bad_options_name_the_field_and_value(options: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidOptionError) as caught:
        RecurrentJobDefinition("bad", handler, run_every=60, **options)
    assert caught.value.field == field
    assert repr(next(iter(options.values())) if len(options) == 1 else options[field]) in str(
        caught.value
    )


# -- through the outcome decisions -----------------------------------------------------------


def claimed(slot: datetime, *, tries: int = 1, was_stale: bool = False) -> ClaimedJob:
    return ClaimedJob(
        job_id="j",
        execution_id="e",
        job_name="hourly",
        type=JobType.RECURRENT,
        params=None,
        tries=tries,
        priority=1000,
        locked_until=slot + timedelta(days=1),
        was_stale=was_stale,
        next_run_at=slot,
    )


def test_decide_before_run_skips_a_first_attempt_with_its_try_given_back() -> None:
    definition = RecurrentJobDefinition(
        "hourly", handler, cron="0 * * * *", timezone="UTC", misfire="skip"
    )
    now = T0 + timedelta(hours=2, minutes=5)
    command = decide_before_run(definition, claimed(T0), POLICY, now)
    assert isinstance(command, Defer)
    assert command.next_run_at == T0 + timedelta(hours=3)
    assert command.tries == 0
    assert command.history is None
    assert command.missed == MissedSlots(T0 + timedelta(hours=3), 3, T0, T0 + timedelta(hours=2))


@pytest.mark.parametrize(("tries", "was_stale"), [(2, False), (1, True), (3, True)])
def test_a_retry_or_a_stale_rerun_is_not_judged(tries: int, was_stale: bool) -> None:
    definition = RecurrentJobDefinition(
        "hourly", handler, cron="0 * * * *", timezone="UTC", misfire="skip"
    )
    job = claimed(T0, tries=tries, was_stale=was_stale)
    assert decide_before_run(definition, job, POLICY, T0 + timedelta(hours=5)) is None


def test_decide_after_a_run_all_run_goes_to_the_next_slot() -> None:
    definition = RecurrentJobDefinition(
        "hourly", handler, cron="0 * * * *", timezone="UTC", misfire="run_all", max_catch_up=3
    )
    later = T0 + timedelta(hours=4, minutes=1)
    command = decide(definition, claimed(T0), Succeeded(), POLICY, later, 0.5)
    assert isinstance(command, Reschedule)
    assert command.next_run_at == T0 + timedelta(hours=1)
    assert command.priority == 1000
    assert command.reset_tries
