"""Hints, index specs, the probe plan, the median, and the hint-selection policy."""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
from collections.abc import Mapping, Sequence
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dogs_core.domain.hints import (
    HINT_INDEXES,
    INITIAL_HINT,
    PROBE_INTERVAL,
    PROBE_MAX_TIME_MS,
    PROBE_SAMPLES,
    WINS_TO_SWITCH,
    DecisionReason,
    Hint,
    HintDecision,
    HintSelector,
    IndexSpec,
    ProbeStep,
    claim_hint,
    median,
    probe_order,
    probe_plan,
)
from dogs_core.errors import InvalidOptionError

hints = st.sampled_from(list(Hint))
seeds = st.integers(min_value=0, max_value=2**32)
timings = st.floats(min_value=0, max_value=1000, allow_nan=False)


# -- constants and index specs ---------------------------------------------------------------


def test_constants_match_the_spec() -> None:
    assert timedelta(minutes=30) == PROBE_INTERVAL
    assert PROBE_MAX_TIME_MS == 1000
    assert PROBE_SAMPLES == 3
    assert WINS_TO_SWITCH == 2
    assert INITIAL_HINT is Hint.BY_JOB_NAME


def test_hint_values_are_the_dogs_names() -> None:
    assert str(Hint.BY_JOB_NAME) == "byJobName"
    assert str(Hint.GLOBAL_PRIORITY) == "globalPriority"
    assert {"byJobName": 1}[Hint.BY_JOB_NAME] == 1  # usable wherever the plain str is
    assert Hint("globalPriority") is Hint.GLOBAL_PRIORITY
    assert Hint.BY_JOB_NAME.other is Hint.GLOBAL_PRIORITY
    assert Hint.GLOBAL_PRIORITY.other is Hint.BY_JOB_NAME


def test_index_specs_match_dogs_4_6_5() -> None:
    assert HINT_INDEXES[Hint.BY_JOB_NAME] == IndexSpec(
        name="jobs_dogs_records_partition_job_name_priority_next_run",
        keys=(("partition", 1), ("jobName", 1), ("priority", -1), ("nextRunAt", 1)),
    )
    assert HINT_INDEXES[Hint.GLOBAL_PRIORITY] == IndexSpec(
        name="jobs_dogs_records_partition_priority_next_run",
        keys=(("partition", 1), ("priority", -1), ("nextRunAt", 1)),
    )
    assert set(HINT_INDEXES) == set(Hint)


def test_index_specs_are_immutable() -> None:
    with pytest.raises(TypeError):
        HINT_INDEXES[Hint.BY_JOB_NAME] = IndexSpec("x", ())  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        HINT_INDEXES[Hint.BY_JOB_NAME].name = "x"  # type: ignore[misc]


# -- claim_hint ------------------------------------------------------------------------------


@given(hints, st.booleans())
def test_claim_hint_forces_by_job_name_only_while_names_are_filtered(
    selected: Hint, filtered: bool
) -> None:
    expected = Hint.BY_JOB_NAME if filtered else selected
    assert claim_hint(selected, filtered) is expected


def test_claim_hint_never_changes_the_selection() -> None:
    selector = HintSelector()
    selector.on_probe_result(
        {Hint.BY_JOB_NAME: [5.0, 5.0, 5.0], Hint.GLOBAL_PRIORITY: [1.0, 1.0, 1.0]}
    )
    assert claim_hint(selector.current, True) is Hint.BY_JOB_NAME
    assert selector.current is Hint.GLOBAL_PRIORITY


# -- probe plan ------------------------------------------------------------------------------


@given(st.integers(min_value=0, max_value=10**6))
def test_probe_order_alternates_by_cycle_parity(cycle: int) -> None:
    first, second = probe_order(cycle)
    assert first is (Hint.BY_JOB_NAME if cycle % 2 == 0 else Hint.GLOBAL_PRIORITY)
    assert {first, second} == set(Hint)
    assert probe_order(cycle + 1) == (second, first)


@given(
    st.integers(min_value=0, max_value=1000),
    seeds,
    st.integers(min_value=1, max_value=64),
    st.integers(min_value=1, max_value=7),
)
def test_probe_plan_uses_one_partition_per_sample_for_both_hints(
    cycle: int, seed: int, n: int, samples: int
) -> None:
    plan = probe_plan(cycle, random.Random(seed), n, samples)
    assert len(plan) == samples
    for step in plan:
        assert isinstance(step, ProbeStep)
        assert isinstance(step.partition, int)
        assert 0 <= step.partition < n
        assert step.order == probe_order(cycle)
    # deterministic given the rng: the same seed gives the same plan
    assert probe_plan(cycle, random.Random(seed), n, samples) == plan


def test_probe_plan_defaults_to_three_samples_and_spreads_partitions() -> None:
    rng = random.Random(11)
    assert len(probe_plan(0, rng, 4)) == PROBE_SAMPLES
    partitions = {step.partition for _ in range(50) for step in probe_plan(0, rng, 4)}
    assert partitions == {0, 1, 2, 3}


@pytest.mark.parametrize("cycle", [-1, True, 1.0, "0", None])
def test_probe_order_rejects_bad_cycles(cycle: object) -> None:
    with pytest.raises(InvalidOptionError) as info:
        probe_order(cycle)  # type: ignore[arg-type]
    assert info.value.field == "cycle"


@pytest.mark.parametrize("samples", [0, -3, True, 2.0, None])
def test_probe_plan_rejects_bad_sample_counts(samples: object) -> None:
    with pytest.raises(InvalidOptionError) as info:
        probe_plan(0, random.Random(0), 4, samples)  # type: ignore[arg-type]
    assert info.value.field == "samples"


def test_probe_plan_rejects_bad_partition_counts() -> None:
    with pytest.raises(InvalidOptionError) as info:
        probe_plan(0, random.Random(0), 0)
    assert info.value.field == "n_partitions"


# -- median ----------------------------------------------------------------------------------


@given(st.lists(timings, min_size=1, max_size=15))
def test_median_is_the_lower_middle_observed_value(values: list[float]) -> None:
    result = median(values)
    assert result == statistics.median_low(values)
    assert result in values
    below = sum(1 for v in values if v < result)
    above = sum(1 for v in values if v > result)
    assert below <= (len(values) - 1) // 2
    assert above <= len(values) // 2


@given(st.permutations([1.0, 2.0, 30.0]))
def test_median_of_three_is_the_middle_element(values: list[float]) -> None:
    assert median(values) == 2.0


def test_median_of_nothing_is_an_error() -> None:
    with pytest.raises(InvalidOptionError):
        median([])


# -- HintSelector: examples ------------------------------------------------------------------


def result(
    by_job_name: Sequence[float], global_priority: Sequence[float]
) -> dict[Hint, list[float]]:
    return {Hint.BY_JOB_NAME: list(by_job_name), Hint.GLOBAL_PRIORITY: list(global_priority)}


FAST_GLOBAL = result([9, 9, 9], [1, 1, 1])
FAST_BY_NAME = result([1, 1, 1], [9, 9, 9])
TIE = result([3, 1, 5], [3, 0, 9])


def test_selector_starts_on_by_job_name() -> None:
    selector = HintSelector()
    assert selector.current is Hint.BY_JOB_NAME
    assert selector.cycle == 0
    assert not selector.probed
    assert selector.challenger_streak == 0


def test_first_completed_probe_is_adopted_at_once() -> None:
    selector = HintSelector()
    decision = selector.on_probe_result(FAST_GLOBAL)
    assert decision == HintDecision(
        Hint.GLOBAL_PRIORITY,
        True,
        DecisionReason.INITIAL,
        {Hint.BY_JOB_NAME: 9, Hint.GLOBAL_PRIORITY: 1},
        0,
    )
    assert selector.current is Hint.GLOBAL_PRIORITY
    assert selector.probed
    assert selector.cycle == 1


def test_first_probe_may_confirm_the_initial_hint() -> None:
    decision = HintSelector().on_probe_result(TIE)
    assert decision.reason is DecisionReason.INITIAL
    assert decision.hint is Hint.BY_JOB_NAME
    assert not decision.changed


def test_failures_before_the_first_success_do_not_count_as_completion() -> None:
    selector = HintSelector()
    assert selector.on_probe_failed().reason is DecisionReason.FAILED
    assert selector.on_probe_result({}).reason is DecisionReason.FAILED
    assert selector.cycle == 2
    decision = selector.on_probe_result(FAST_GLOBAL)
    assert decision.reason is DecisionReason.INITIAL
    assert decision.changed


def test_later_switch_needs_two_consecutive_wins() -> None:
    selector = HintSelector()
    selector.on_probe_result(FAST_BY_NAME)  # initial: keep byJobName
    first = selector.on_probe_result(FAST_GLOBAL)
    assert (first.reason, first.hint, first.changed, first.challenger_streak) == (
        DecisionReason.CHALLENGER_LEADS,
        Hint.BY_JOB_NAME,
        False,
        1,
    )
    second = selector.on_probe_result(FAST_GLOBAL)
    assert (second.reason, second.hint, second.changed, second.challenger_streak) == (
        DecisionReason.SWITCHED,
        Hint.GLOBAL_PRIORITY,
        True,
        0,
    )
    assert selector.current is Hint.GLOBAL_PRIORITY


@pytest.mark.parametrize(
    "interruption",
    [FAST_BY_NAME, TIE, None],
    ids=["current-wins", "tie", "failure"],
)
def test_current_win_tie_or_failure_resets_the_streak(
    interruption: dict[Hint, list[float]] | None,
) -> None:
    selector = HintSelector()
    selector.on_probe_result(FAST_BY_NAME)
    selector.on_probe_result(FAST_GLOBAL)
    assert selector.challenger_streak == 1
    if interruption is None:
        decision = selector.on_probe_failed()
        assert decision.reason is DecisionReason.FAILED
        assert decision.medians is None
    else:
        assert selector.on_probe_result(interruption).reason is DecisionReason.KEPT
    assert selector.challenger_streak == 0
    assert selector.on_probe_result(FAST_GLOBAL).reason is DecisionReason.CHALLENGER_LEADS
    assert selector.current is Hint.BY_JOB_NAME


def test_medians_not_means_decide() -> None:
    # one slow outlier must not hand the win to the other hint
    decision = HintSelector().on_probe_result(result([1, 1, 500], [2, 2, 2]))
    assert decision.hint is Hint.BY_JOB_NAME
    assert decision.medians == {Hint.BY_JOB_NAME: 1, Hint.GLOBAL_PRIORITY: 2}


@pytest.mark.parametrize(
    "samples",
    [
        {Hint.BY_JOB_NAME: [1.0, 1.0, 1.0]},
        result([1, 1], [1, 1, 1]),
        result([1, 1, 1], [1, 1, -1]),
        result([1, 1, math.nan], [1, 1, 1]),
        result([1, 1, 1], [1, math.inf, 1]),
        result([1, 1, True], [1, 1, 1]),
        result([1, 1, "2"], [1, 1, 1]),  # type: ignore[list-item]
        result([1, 1, None], [1, 1, 1]),  # type: ignore[list-item]
    ],
    ids=["missing", "too-few", "negative", "nan", "inf", "bool", "str", "none"],
)
def test_bad_samples_count_as_a_failure(samples: Mapping[Hint, Sequence[float]]) -> None:
    selector = HintSelector()
    decision = selector.on_probe_result(samples)
    assert decision == HintDecision(Hint.BY_JOB_NAME, False, DecisionReason.FAILED)
    assert not selector.probed
    assert selector.cycle == 1


def test_more_samples_than_needed_are_used() -> None:
    decision = HintSelector().on_probe_result(result([5, 5, 5, 5, 5], [1, 1, 1, 9, 9]))
    assert decision.hint is Hint.GLOBAL_PRIORITY


def test_string_keys_are_accepted_as_hints() -> None:
    samples: dict[str, list[float]] = {"byJobName": [4, 4, 4], "globalPriority": [2, 2, 2]}
    decision = HintSelector().on_probe_result(samples)  # type: ignore[arg-type]
    assert decision.hint is Hint.GLOBAL_PRIORITY


def test_next_plan_follows_the_cycle() -> None:
    selector = HintSelector()
    assert {step.order for step in selector.next_plan(random.Random(0), 4)} == {
        (Hint.BY_JOB_NAME, Hint.GLOBAL_PRIORITY)
    }
    selector.on_probe_failed()
    assert {step.order for step in selector.next_plan(random.Random(0), 4)} == {
        (Hint.GLOBAL_PRIORITY, Hint.BY_JOB_NAME)
    }


# -- HintSelector against an independent reference model ------------------------------------

# An outcome is None (failure / timeout) or a pair of sample lists (byJobName, globalPriority).
sample_lists = st.lists(st.integers(min_value=0, max_value=5).map(float), min_size=3, max_size=3)
outcomes = st.one_of(st.none(), st.tuples(sample_lists, sample_lists))


def reference_model(
    history: list[tuple[list[float], list[float]] | None],
) -> list[tuple[str, str, bool]]:
    """Spec §3.11 restated as a fold, independently of the implementation.

    Returns (hint, reason, changed) after each outcome.
    """
    current, adopted, wins = "byJobName", False, 0
    trace: list[tuple[str, str, bool]] = []
    for outcome in history:
        if outcome is None:
            wins = 0
            trace.append((current, "failed", False))
            continue
        meds = {
            "byJobName": sorted(outcome[0])[1],
            "globalPriority": sorted(outcome[1])[1],
        }
        other = "globalPriority" if current == "byJobName" else "byJobName"
        beats = meds[other] < meds[current]
        if not adopted:
            adopted, wins = True, 0
            trace.append((other if beats else current, "initial", beats))
            current = other if beats else current
        elif not beats:
            wins = 0
            trace.append((current, "kept", False))
        elif wins + 1 < 2:
            wins += 1
            trace.append((current, "challenger_leads", False))
        else:
            wins = 0
            current = other
            trace.append((current, "switched", True))
    return trace


@given(st.lists(outcomes, max_size=30))
def test_selector_matches_the_reference_model(
    history: list[tuple[list[float], list[float]] | None],
) -> None:
    selector = HintSelector()
    expected = reference_model(history)
    for i, outcome in enumerate(history):
        before = selector.current
        if outcome is None:
            decision = selector.on_probe_failed()
        else:
            decision = selector.on_probe_result(result(*outcome))
            assert decision.medians is not None
            assert decision.medians[Hint.BY_JOB_NAME] == median(outcome[0])
        assert (str(decision.hint), str(decision.reason), decision.changed) == expected[i]
        assert decision.hint is selector.current
        assert decision.changed is (decision.hint is not before)
        assert decision.challenger_streak == selector.challenger_streak
        assert selector.cycle == i + 1
        assert selector.challenger_streak in (0, 1)


@given(st.lists(outcomes, max_size=30))
def test_no_switch_without_consecutive_wins_after_adoption(
    history: list[tuple[list[float], list[float]] | None],
) -> None:
    """After the first completed probe, every change is preceded by a challenger lead."""
    selector = HintSelector()
    previous: HintDecision | None = None
    for outcome in history:
        decision = (
            selector.on_probe_failed()
            if outcome is None
            else selector.on_probe_result(result(*outcome))
        )
        if decision.changed and decision.reason is not DecisionReason.INITIAL:
            assert previous is not None
            assert previous.reason is DecisionReason.CHALLENGER_LEADS
        previous = decision
