"""The outcome decisions: from what happened to a claimed job to the one fenced write that follows.

The expected behaviour is written down here a second time, as an independent reference table
keyed by (job type, what happened, verdict, explicit retry time, attempt limit reached); a
property test checks :func:`decide` against it for arbitrary definitions, records, policies,
times and jitter, and example tests walk every row of the module's docstring table.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypeAlias

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dogs_core.domain.definitions import (
    Discard,
    EventJobDefinition,
    JobDefinition,
    RecurrentJobDefinition,
    Retry,
    retry_run_at,
)
from dogs_core.domain.outcome import (
    Cancelled,
    Command,
    Defer,
    Delete,
    DemoteStale,
    Failed,
    Happened,
    MarkTerminal,
    OutcomePolicy,
    Release,
    Reschedule,
    Snoozed,
    Stale,
    Succeeded,
    decide,
    decide_before_run,
)
from dogs_core.domain.records import ClaimedJob, HistoryStatus, JobType
from dogs_core.domain.schedules import (
    CronSchedule,
    CustomSchedule,
    RetryPolicy,
    RunEvery,
    ScheduleRule,
    next_run_after,
)
from dogs_core.jobs import Jobs

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
LOCK = timedelta(minutes=10)
POLICY = OutcomePolicy(default_lock_time=LOCK, max_tries=3, max_tries_reached_retention=None)
RAND = 0.5


def event_handler(params: Any, ctx: Any) -> None:
    return None


def recurrent_handler(ctx: Any) -> None:
    return None


def one_hour_later(now: datetime) -> datetime:
    return now + timedelta(hours=1)


# -- the reference table --------------------------------------------------------------------------

Kind: TypeAlias = Literal["event", "recurrent"]
What: TypeAlias = Literal["succeeded", "failed", "cancelled", "snoozed", "stale"]
Verdict: TypeAlias = Literal["retry", "discard"] | None
Priority: TypeAlias = Literal["unchanged", "definition"] | None
When: TypeAlias = Literal["regular", "retry", "snooze"] | None


@dataclass(frozen=True)
class Expected:
    """What the reference table says follows: the command class; for a Reschedule, whose
    priority it sets, whether it resets tries and which rule gives its time; the history row."""

    command: type[Command]
    history: HistoryStatus | None
    priority: Priority = None
    reset_tries: bool | None = None
    when: When = None


# (kind, what, verdict, explicit retry time, attempt limit reached) -> expected. A row that does
# not depend on a dimension is entered for each of its values.
_ROWS: dict[tuple[Kind, What, Verdict, bool, bool], Expected] = {}


def _row(
    kind: Kind,
    what: What,
    verdict: Verdict,
    expected: Expected,
    *,
    explicit: tuple[bool, ...] = (False,),
    reached: tuple[bool, ...] = (False, True),
) -> None:
    for e in explicit:
        for r in reached:
            key = (kind, what, verdict, e, r)
            assert key not in _ROWS, f"row {key} given twice"
            _ROWS[key] = expected


KINDS: tuple[Kind, ...] = ("event", "recurrent")
for _kind in KINDS:
    # cancelled (shutdown): release at once; went stale: demote, lock left to expire; snoozed:
    # run again at the snooze time, the try given back.
    _row(_kind, "cancelled", None, Expected(Release, HistoryStatus.CANCELLED))
    _row(
        _kind,
        "snoozed",
        None,
        Expected(Reschedule, HistoryStatus.SNOOZED, "unchanged", False, "snooze"),
    )
    _row(_kind, "stale", None, Expected(DemoteStale, HistoryStatus.STALE))

_row("event", "succeeded", None, Expected(Delete, HistoryStatus.SUCCESS))
_row("event", "failed", "discard", Expected(Delete, HistoryStatus.ERROR))
_row(
    "event",
    "failed",
    "retry",
    Expected(Reschedule, HistoryStatus.ERROR, "unchanged", False, "retry"),
    explicit=(True,),
)
_row(
    "event",
    "failed",
    "retry",
    Expected(Reschedule, HistoryStatus.ERROR, "unchanged", False, "retry"),
    reached=(False,),
)
_row("event", "failed", "retry", Expected(MarkTerminal, HistoryStatus.ERROR), reached=(True,))

_row(
    "recurrent",
    "succeeded",
    None,
    Expected(Reschedule, HistoryStatus.SUCCESS, "definition", True, "regular"),
)
_row(
    "recurrent",
    "failed",
    "discard",
    Expected(Reschedule, HistoryStatus.ERROR, "definition", True, "regular"),
)
_row(
    "recurrent",
    "failed",
    "retry",
    Expected(Reschedule, HistoryStatus.ERROR, "definition", False, "retry"),
    explicit=(True,),
)
_row(
    "recurrent",
    "failed",
    "retry",
    Expected(Reschedule, HistoryStatus.ERROR, "definition", True, "regular"),
)


def reference(kind: Kind, what: What, verdict: Verdict, explicit: bool, reached: bool) -> Expected:
    return _ROWS[(kind, what, verdict, explicit, reached)]


def test_the_reference_table_is_complete() -> None:
    # Per kind: succeeded, discard, cancelled, snoozed, stale x 2 limit states, and retry x 2
    # explicit x 2 limit states: 14 rows, each given once (_row checks).
    assert len(_ROWS) == 28


# -- strategies -----------------------------------------------------------------------------------

moments = st.datetimes(
    min_value=datetime(2020, 1, 1), max_value=datetime(2040, 1, 1), timezones=st.just(UTC)
)
durations = st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=30))
positive_durations = st.timedeltas(min_value=timedelta(seconds=1), max_value=timedelta(days=30))
max_tries = st.one_of(st.none(), st.integers(1, 10))
priorities = st.integers(0, 1_000)
retry_policies = st.builds(
    RetryPolicy,
    base=st.timedeltas(min_value=timedelta(0), max_value=timedelta(seconds=30)),
    factor=st.floats(1, 3),
    max_delay=st.just(timedelta(hours=2)),
    jitter=st.floats(0, 1),
)
schedules: st.SearchStrategy[ScheduleRule] = st.one_of(
    st.builds(RunEvery, positive_durations, st.sampled_from(["completion", "slot"])),
    st.just(CronSchedule("*/5 * * * *", "Europe/Paris")),
    st.just(CustomSchedule(one_hour_later)),
)
event_definitions = st.builds(
    EventJobDefinition,
    st.just("send"),
    st.just(event_handler),
    priority=priorities,
    max_tries=max_tries,
    retry=retry_policies,
)
recurrent_definitions = st.builds(
    RecurrentJobDefinition,
    st.just("tick"),
    st.just(recurrent_handler),
    schedule=schedules,
    priority=priorities,
    retry=retry_policies,
)
definitions: st.SearchStrategy[JobDefinition] = st.one_of(event_definitions, recurrent_definitions)
policies = st.builds(
    OutcomePolicy,
    default_lock_time=positive_durations,
    max_tries=max_tries,
    max_tries_reached_retention=st.one_of(st.none(), durations),
)
# Each kind of happening is a separate case of the property test, so that every row of the
# table gets its share of examples (a single one_of would leave the rare rows to luck).
HAPPENINGS: dict[str, st.SearchStrategy[Happened]] = {
    "succeeded": st.just(Succeeded()),
    "retry": st.just(Failed(Retry())),
    "retry_in": st.builds(lambda d: Failed(Retry(run_in=d)), durations),
    "retry_at": st.builds(lambda t: Failed(Retry(run_at=t)), moments),
    "discard": st.just(Failed(Discard())),
    "cancelled": st.just(Cancelled()),
    "snoozed": st.builds(Snoozed, moments),
    "stale": st.just(Stale()),
}
DEFINITIONS: dict[str, st.SearchStrategy[JobDefinition]] = {
    "event": event_definitions,
    "recurrent": recurrent_definitions,
}
rands = st.floats(0, 1, exclude_max=True)


def claimed(
    definition: JobDefinition,
    *,
    tries: int = 1,
    next_run_at: datetime | None = None,
    type: JobType | None = None,
    priority: int = 100,
) -> ClaimedJob:
    return ClaimedJob(
        job_id="j1",
        execution_id="x1",
        job_name=definition.name,
        type=definition.type if type is None else type,
        params=None,
        tries=tries,
        priority=priority,
        locked_until=NOW + LOCK,
        next_run_at=next_run_at,
    )


@st.composite
def claimed_jobs(draw: st.DrawFn, definition: JobDefinition) -> ClaimedJob:
    return claimed(
        definition,
        tries=draw(st.integers(1, 12)),
        next_run_at=draw(st.one_of(st.none(), moments)),
        priority=draw(priorities),
    )


# -- the property ---------------------------------------------------------------------------------


def _classify(happened: Happened) -> tuple[What, Verdict, bool]:
    if isinstance(happened, Succeeded):
        return "succeeded", None, False
    if isinstance(happened, Cancelled):
        return "cancelled", None, False
    if isinstance(happened, Snoozed):
        return "snoozed", None, False
    if isinstance(happened, Stale):
        return "stale", None, False
    verdict = happened.verdict
    if isinstance(verdict, Discard):
        return "failed", "discard", False
    return "failed", "retry", verdict.run_in is not None or verdict.run_at is not None


def _limit(definition: JobDefinition, policy: OutcomePolicy) -> int | None:
    if isinstance(definition, EventJobDefinition) and definition.max_tries is not None:
        return definition.max_tries
    return policy.max_tries


@pytest.mark.parametrize("happening", list(HAPPENINGS))
@pytest.mark.parametrize("kind", list(DEFINITIONS))
@settings(max_examples=60, deadline=None, derandomize=True)
@given(data=st.data(), policy=policies, now=moments, rand=rands)
def test_decide_follows_the_reference_table(
    kind: str,
    happening: str,
    data: st.DataObject,
    policy: OutcomePolicy,
    now: datetime,
    rand: float,
) -> None:
    definition = data.draw(DEFINITIONS[kind], label="definition")
    happened = data.draw(HAPPENINGS[happening], label="happened")
    job = data.draw(claimed_jobs(definition), label="job")
    what, verdict, explicit = _classify(happened)
    limit = _limit(definition, policy)
    reached = limit is not None and job.tries >= limit
    job_kind: Kind = "event" if definition.type is JobType.EVENT else "recurrent"
    expected = reference(job_kind, what, verdict, explicit, reached)

    command = decide(definition, job, happened, policy, now, rand)

    assert type(command) is expected.command
    assert command.history == expected.history
    if isinstance(command, Reschedule):
        wanted_priority = definition.priority if expected.priority == "definition" else None
        assert command.priority == wanted_priority
        assert command.reset_tries is expected.reset_tries
        if expected.when == "snooze":
            assert isinstance(happened, Snoozed)
            assert command.next_run_at == happened.run_at
            assert command.tries == max(job.tries - 1, 0)
        elif expected.when == "regular":
            assert isinstance(definition, RecurrentJobDefinition)
            assert command.next_run_at == next_run_after(
                definition.schedule, now, scheduled_at=job.next_run_at
            )
        else:
            assert isinstance(happened, Failed)
            assert isinstance(happened.verdict, Retry)
            assert command.next_run_at == retry_run_at(
                definition, happened.verdict, now, job.tries, rand
            )
    elif isinstance(command, MarkTerminal):
        assert command.now == now
        retention = policy.max_tries_reached_retention
        assert command.expires_at == (None if retention is None else now + retention)
    elif isinstance(command, Release):
        assert command.now == now


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    definition=definitions,
    tries=st.integers(1, 12),
    type=st.sampled_from(JobType),
    policy=policies,
    now=moments,
)
def test_decide_before_run_defers_a_foreign_type_and_ends_an_exhausted_event(
    definition: JobDefinition, tries: int, type: JobType, policy: OutcomePolicy, now: datetime
) -> None:
    job = claimed(definition, tries=tries, type=type)
    instead = decide_before_run(definition, job, policy, now)
    limit = _limit(definition, policy)
    if type is not definition.type:
        assert instead == Defer(now + policy.default_lock_time)
    elif isinstance(definition, EventJobDefinition) and limit is not None and tries > limit:
        retention = policy.max_tries_reached_retention
        assert instead == MarkTerminal(now, None if retention is None else now + retention, None)
    else:
        assert instead is None


# -- decide_before_run, by example ----------------------------------------------------------------


def test_a_record_of_another_type_is_deferred_by_the_default_lock_time() -> None:
    jobs = Jobs()

    @jobs.event(name="report", lock_time="1h")
    def report(params: Any, ctx: Any) -> None:
        return None

    instead = decide_before_run(report, claimed(report, type=JobType.RECURRENT), POLICY, NOW)
    # The workers' default lock time, not the job's own: the record belongs to another deployment.
    assert instead == Defer(NOW + LOCK)
    assert instead.history is None

    @jobs.recurrent(name="tick", run_every="1m")
    def tick(ctx: Any) -> None:
        return None

    assert decide_before_run(tick, claimed(tick, type=JobType.EVENT), POLICY, NOW) == Defer(
        NOW + LOCK
    )


def test_an_event_past_its_limit_is_terminal_without_history() -> None:
    send = EventJobDefinition("send", event_handler)  # limit from the policy: 3
    assert decide_before_run(send, claimed(send, tries=3), POLICY, NOW) is None
    instead = decide_before_run(send, claimed(send, tries=4), POLICY, NOW)
    assert instead == MarkTerminal(NOW, None, history=None)


def test_terminal_before_run_keeps_the_record_for_the_retention() -> None:
    send = EventJobDefinition("send", event_handler)
    policy = OutcomePolicy(LOCK, max_tries=1, max_tries_reached_retention=timedelta(days=2))
    instead = decide_before_run(send, claimed(send, tries=2), policy, NOW)
    assert instead == MarkTerminal(NOW, NOW + timedelta(days=2), history=None)


def test_the_definitions_max_tries_overrides_the_policys() -> None:
    more = EventJobDefinition("more", event_handler, max_tries=5)
    fewer = EventJobDefinition("fewer", event_handler, max_tries=1)
    assert decide_before_run(more, claimed(more, tries=5), POLICY, NOW) is None
    assert isinstance(decide_before_run(more, claimed(more, tries=6), POLICY, NOW), MarkTerminal)
    assert isinstance(decide_before_run(fewer, claimed(fewer, tries=2), POLICY, NOW), MarkTerminal)
    unlimited_policy = OutcomePolicy(LOCK, max_tries=None, max_tries_reached_retention=None)
    assert decide_before_run(fewer, claimed(fewer, tries=2), unlimited_policy, NOW) is not None


def test_no_limit_at_all_always_runs() -> None:
    send = EventJobDefinition("send", event_handler)
    policy = OutcomePolicy(LOCK, max_tries=None, max_tries_reached_retention=None)
    assert decide_before_run(send, claimed(send, tries=1_000), policy, NOW) is None


def test_a_recurrent_job_has_no_attempt_limit() -> None:
    tick = RecurrentJobDefinition("tick", recurrent_handler, run_every="1m")
    assert decide_before_run(tick, claimed(tick, tries=1_000), POLICY, NOW) is None


# -- decide, one example per row of the docstring table -------------------------------------------

EVENT = EventJobDefinition("send", event_handler, priority=7)
RECURRENT = RecurrentJobDefinition("tick", recurrent_handler, run_every="5m", priority=9)
LATER = NOW + timedelta(hours=3)


def test_event_succeeded_is_deleted() -> None:
    assert decide(EVENT, claimed(EVENT), Succeeded(), POLICY, NOW, RAND) == Delete(
        HistoryStatus.SUCCESS
    )


def test_recurrent_succeeded_moves_to_its_next_regular_run_with_tries_reset() -> None:
    command = decide(RECURRENT, claimed(RECURRENT, tries=2), Succeeded(), POLICY, NOW, RAND)
    assert command == Reschedule(
        NOW + timedelta(minutes=5), priority=9, reset_tries=True, history=HistoryStatus.SUCCESS
    )


def test_a_fixed_rate_recurrent_job_counts_from_the_slot_it_was_due_at() -> None:
    rate = RecurrentJobDefinition(
        "rate", recurrent_handler, schedule=RunEvery(timedelta(minutes=5), anchor="slot")
    )
    due = NOW - timedelta(minutes=7)
    command = decide(rate, claimed(rate, next_run_at=due), Succeeded(), POLICY, NOW, RAND)
    assert isinstance(command, Reschedule)
    assert command.next_run_at == due + timedelta(minutes=10)


def test_event_discarded_is_deleted_with_an_error_row() -> None:
    command = decide(EVENT, claimed(EVENT), Failed(Discard()), POLICY, NOW, RAND)
    assert command == Delete(HistoryStatus.ERROR)


def test_event_discarded_on_its_last_try_is_still_deleted() -> None:
    command = decide(EVENT, claimed(EVENT, tries=3), Failed(Discard()), POLICY, NOW, RAND)
    assert command == Delete(HistoryStatus.ERROR)


def test_recurrent_discarded_moves_to_its_next_regular_run() -> None:
    command = decide(RECURRENT, claimed(RECURRENT), Failed(Discard()), POLICY, NOW, RAND)
    assert command == Reschedule(
        NOW + timedelta(minutes=5), priority=9, reset_tries=True, history=HistoryStatus.ERROR
    )


@pytest.mark.parametrize(
    ("verdict", "when"),
    [
        (Retry(run_in=timedelta(minutes=2)), NOW + timedelta(minutes=2)),
        (Retry(run_at=LATER), LATER),
    ],
)
def test_event_explicit_retry_runs_then_with_tries_kept(verdict: Retry, when: datetime) -> None:
    command = decide(EVENT, claimed(EVENT, tries=1), Failed(verdict), POLICY, NOW, RAND)
    assert command == Reschedule(
        when, priority=None, reset_tries=False, history=HistoryStatus.ERROR
    )


def test_an_explicit_retry_ignores_the_attempt_limit() -> None:
    command = decide(EVENT, claimed(EVENT, tries=3), Failed(Retry(run_at=LATER)), POLICY, NOW, RAND)
    assert command == Reschedule(
        LATER, priority=None, reset_tries=False, history=HistoryStatus.ERROR
    )


@pytest.mark.parametrize(
    ("verdict", "when"),
    [
        (Retry(run_in=timedelta(minutes=2)), NOW + timedelta(minutes=2)),
        (Retry(run_at=LATER), LATER),
    ],
)
def test_recurrent_explicit_retry_runs_then_with_tries_kept_and_its_priority_back(
    verdict: Retry, when: datetime
) -> None:
    job = claimed(RECURRENT, tries=2, priority=0)  # demoted by an earlier stale execution
    command = decide(RECURRENT, job, Failed(verdict), POLICY, NOW, RAND)
    assert command == Reschedule(when, priority=9, reset_tries=False, history=HistoryStatus.ERROR)


def test_event_retry_without_a_time_waits_for_the_backoff() -> None:
    policy = RetryPolicy(base=timedelta(seconds=10), factor=2, jitter=0)
    send = EventJobDefinition("send", event_handler, retry=policy)
    command = decide(send, claimed(send, tries=2), Failed(Retry()), POLICY, NOW, RAND)
    # Second failed attempt: base * factor = 20 s, no jitter.
    assert command == Reschedule(
        NOW + timedelta(seconds=20), priority=None, reset_tries=False, history=HistoryStatus.ERROR
    )


def test_event_retry_without_a_time_is_terminal_once_tries_reach_the_limit() -> None:
    command = decide(EVENT, claimed(EVENT, tries=3), Failed(Retry()), POLICY, NOW, RAND)
    assert command == MarkTerminal(NOW, None, history=HistoryStatus.ERROR)
    policy = OutcomePolicy(LOCK, max_tries=3, max_tries_reached_retention=timedelta(days=1))
    command = decide(EVENT, claimed(EVENT, tries=3), Failed(Retry()), policy, NOW, RAND)
    assert command == MarkTerminal(NOW, NOW + timedelta(days=1), history=HistoryStatus.ERROR)


def test_event_retry_without_a_limit_never_ends() -> None:
    policy = OutcomePolicy(LOCK, max_tries=None, max_tries_reached_retention=None)
    command = decide(EVENT, claimed(EVENT, tries=500), Failed(Retry()), policy, NOW, RAND)
    assert isinstance(command, Reschedule)
    assert command.reset_tries is False


def test_recurrent_retry_without_a_time_is_its_next_regular_run() -> None:
    command = decide(RECURRENT, claimed(RECURRENT, tries=50), Failed(Retry()), POLICY, NOW, RAND)
    assert command == Reschedule(
        NOW + timedelta(minutes=5), priority=9, reset_tries=True, history=HistoryStatus.ERROR
    )


@pytest.mark.parametrize("definition", [EVENT, RECURRENT], ids=["event", "recurrent"])
def test_cancelled_releases_the_lock_at_once(definition: JobDefinition) -> None:
    command = decide(definition, claimed(definition), Cancelled(), POLICY, NOW, RAND)
    assert command == Release(NOW)
    assert command.history is HistoryStatus.CANCELLED  # the interrupted attempt gets a row


@pytest.mark.parametrize("definition", [EVENT, RECURRENT], ids=["event", "recurrent"])
def test_stale_demotes_and_leaves_the_lock_to_expire(definition: JobDefinition) -> None:
    command = decide(definition, claimed(definition, tries=3), Stale(), POLICY, NOW, RAND)
    assert command == DemoteStale()
    assert command.history is HistoryStatus.STALE
