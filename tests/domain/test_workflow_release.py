"""What is released now (pure): the local rule, the whole-workflow plan and the ends read from
records and rows, with hypothesis properties over random workflows and completion orders."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dogs_core.domain.records import (
    HistoryRecord,
    HistoryStatus,
    JobRecord,
    JobStatus,
    JobType,
)
from dogs_core.domain.workflow_records import (
    MAX_STEP_RESULT_BYTES,
    Dependent,
    Gate,
    ReleasedStep,
    StepState,
    WorkflowState,
    gate_of,
)
from dogs_core.domain.workflow_release import (
    MISSING_ROW_GRACE,
    StepNode,
    bounded_result,
    decide_dependent,
    evidence_ending,
    fails_workflow,
    has_ended,
    plan,
    row_ending,
    workflow_end,
)
from dogs_core.domain.workflows import FailurePolicy

NOW = datetime(2030, 1, 1, tzinfo=UTC)
P = FailurePolicy

# -- the local rule -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "policy", "gate"),
    [
        (StepState.BLOCKED, P.FAIL, Gate.WAIT),
        (StepState.RELEASED, P.CONTINUE, Gate.WAIT),
        (StepState.SUCCEEDED, P.FAIL, Gate.PASS),
        (StepState.FAILED, P.FAIL, Gate.SKIP),
        (StepState.FAILED, P.SKIP, Gate.SKIP),
        (StepState.FAILED, P.CONTINUE, Gate.PASS),
        (StepState.CANCELLED, P.CONTINUE, Gate.PASS),
        (StepState.CANCELLED, P.SKIP, Gate.SKIP),
        (StepState.SKIPPED, P.CONTINUE, Gate.SKIP),
    ],
)
def test_gates(state: StepState, policy: FailurePolicy, gate: Gate) -> None:
    assert gate_of(state, policy) is gate


def test_a_dependent_waits_then_skips_or_is_released() -> None:
    def view(waiting: bool, skipping: bool) -> Dependent:
        return Dependent("s", "w", 0, waiting, skipping)

    assert decide_dependent(view(True, True)) is None
    assert decide_dependent(view(False, True)) is StepState.SKIPPED
    assert decide_dependent(view(False, False)) is StepState.RELEASED


def test_only_a_failure_under_fail_fails_the_workflow() -> None:
    assert fails_workflow(StepState.FAILED, P.FAIL)
    assert fails_workflow(StepState.CANCELLED, P.FAIL)
    assert not fails_workflow(StepState.FAILED, P.SKIP)
    assert not fails_workflow(StepState.SUCCEEDED, P.FAIL)


def test_a_workflow_ends_once_nothing_is_left_to_run() -> None:
    assert workflow_end({StepState.SUCCEEDED: 3}) is WorkflowState.SUCCEEDED
    assert workflow_end({StepState.SUCCEEDED: 3, StepState.SKIPPED: 1}) is WorkflowState.COMPLETED
    assert workflow_end({StepState.SUCCEEDED: 3, StepState.RELEASED: 1}) is None
    assert workflow_end({StepState.BLOCKED: 1}) is None
    # a step failed under "fail" whose own fail_workflow a crash cut: still failed
    assert workflow_end({StepState.FAILED: 1}, failing=True) is WorkflowState.FAILED
    assert workflow_end({StepState.FAILED: 1, StepState.RELEASED: 1}, failing=True) is None
    assert has_ended(StepState.SKIPPED)
    assert not has_ended(StepState.RELEASED)


def test_results_are_bounded() -> None:
    assert bounded_result(None) == (None, False)
    assert bounded_result(3) == (3, False)
    assert bounded_result({"a": [1]}) == ({"a": [1]}, False)
    assert bounded_result("x" * (MAX_STEP_RESULT_BYTES + 1)) == (None, True)


# -- ends from records and rows -------------------------------------------------------------------

STEP = ReleasedStep("s1", "w1", "r1", P.SKIP, 0, NOW)


def _row(status: HistoryStatus, *, job_id: str = "r1", result: Any = None) -> HistoryRecord:
    return HistoryRecord(
        execution_id="e1",
        job_id=job_id,
        job_name="j",
        type=JobType.EVENT,
        priority=100,
        tries=1,
        started_at=NOW,
        ended_at=NOW + timedelta(seconds=1),
        status=status,
        expires_at=NOW + timedelta(days=7),
        result=result,
        error_message=None if status is HistoryStatus.SUCCESS else "boom",
    )


def _record(*, terminal: bool = False, lock_id: str | None = None) -> JobRecord:
    return JobRecord(
        id="r1",
        job_name="j",
        type=JobType.EVENT,
        priority=100,
        next_run_at=NOW,
        partition=0,
        lock_id=lock_id,
        status=JobStatus.MAX_TRIES_REACHED if terminal else None,
        max_tries_reached_at=NOW if terminal else None,
    )


def test_a_success_row_ends_its_step_at_once() -> None:
    ending = row_ending(STEP, _row(HistoryStatus.SUCCESS, result={"n": 1}))
    assert ending is not None
    assert (ending.state, ending.gate, ending.record_id) == (StepState.SUCCEEDED, Gate.PASS, "r1")
    assert ending.outcome.result == {"n": 1}
    assert ending.outcome.execution_id == "e1"
    assert row_ending(STEP, _row(HistoryStatus.ERROR)) is None
    assert row_ending(STEP, _row(HistoryStatus.SUCCESS, job_id="other")) is None


def test_an_error_ends_its_step_only_once_its_job_has_ended() -> None:
    error = _row(HistoryStatus.ERROR)
    assert evidence_ending(STEP, _record(), error, now=NOW) is None  # a retry is coming
    ended = evidence_ending(STEP, _record(terminal=True), error, now=NOW)
    assert ended is not None
    assert (ended.state, ended.gate) == (StepState.FAILED, Gate.SKIP)
    assert ended.outcome.error_message == "boom"
    discarded = evidence_ending(STEP, None, error, now=NOW)
    assert discarded is not None
    assert discarded.state is StepState.FAILED
    cancelled = evidence_ending(STEP, None, _row(HistoryStatus.CANCELLED), now=NOW)
    assert cancelled is not None
    assert cancelled.state is StepState.CANCELLED
    success = evidence_ending(STEP, _record(lock_id="e1"), _row(HistoryStatus.SUCCESS), now=NOW)
    assert success is not None
    assert success.state is StepState.SUCCEEDED


def test_a_job_gone_without_a_row_fails_its_step_after_the_grace() -> None:
    assert evidence_ending(STEP, _record(), None, now=NOW) is None
    # The grace counts from the first sight of the gap, never from the release: a step that
    # ran long, its record just removed by a Node worker whose row follows, is not judged.
    long_after = NOW + 100 * MISSING_ROW_GRACE
    assert evidence_ending(STEP, None, None, now=long_after) is None
    assert evidence_ending(STEP, None, None, now=long_after, missing_since=long_after) is None
    half = long_after + MISSING_ROW_GRACE / 2
    assert evidence_ending(STEP, None, None, now=half, missing_since=long_after) is None
    late = evidence_ending(
        STEP, None, None, now=long_after + MISSING_ROW_GRACE, missing_since=long_after
    )
    assert late is not None
    assert late.state is StepState.FAILED
    assert late.outcome.status is None
    assert "no history row" in (late.outcome.error_message or "")
    terminal = evidence_ending(STEP, _record(terminal=True), None, now=NOW)
    assert terminal is not None
    assert terminal.state is StepState.FAILED
    # A row of another record (an older release) says nothing of this one.
    assert (
        evidence_ending(STEP, _record(), _row(HistoryStatus.SUCCESS, job_id="r0"), now=NOW) is None
    )


# -- the whole workflow: properties ---------------------------------------------------------------


@st.composite
def workflows(draw: st.DrawFn) -> tuple[dict[str, StepNode], dict[str, bool]]:
    """A random DAG (each step after some earlier ones), a policy per step, and whether each
    step's job would succeed if it ran."""
    size = draw(st.integers(1, 9))
    steps: dict[str, StepNode] = {}
    succeeds: dict[str, bool] = {}
    for index in range(size):
        name = f"s{index}"
        earlier = list(steps)
        after = draw(st.lists(st.sampled_from(earlier), unique=True, max_size=3)) if earlier else []
        policy = draw(st.sampled_from(list(FailurePolicy)))
        steps[name] = StepNode(tuple(after), policy)
        succeeds[name] = draw(st.booleans())
    return steps, succeeds


def _run(
    steps: dict[str, StepNode], succeeds: dict[str, bool], picks: list[int]
) -> tuple[dict[str, StepState], WorkflowState]:
    """The global plan applied after each completion, completing released steps in the order
    ``picks`` chooses; checks safety at every release."""
    states = dict.fromkeys(steps, StepState.BLOCKED)
    workflow = WorkflowState.RUNNING
    turn = 0
    while True:
        decided = plan(steps, states, workflow)
        for name in decided.release:
            for parent in steps[name].after:
                # Safety: released only once every dependency passes.
                assert gate_of(decided.states[parent], steps[parent].policy) is Gate.PASS
        states = dict(decided.states)
        if decided.end is not None and workflow is WorkflowState.RUNNING:
            workflow = decided.end
        running = sorted(name for name, state in states.items() if state is StepState.RELEASED)
        if not running:
            return states, workflow
        pick = running[picks[turn % len(picks)] % len(running)] if picks else running[0]
        turn += 1
        states[pick] = StepState.SUCCEEDED if succeeds[pick] else StepState.FAILED


def _reference(steps: dict[str, StepNode], succeeds: dict[str, bool]) -> dict[str, StepState]:
    """Without a failure under ``fail``: a step runs iff every dependency passes (succeeded,
    or failed under ``continue``); one that cannot run is skipped."""
    final: dict[str, StepState] = {}
    for name, node in steps.items():  # dependencies come first
        runs = all(
            final[parent] is StepState.SUCCEEDED
            or (final[parent] is StepState.FAILED and steps[parent].policy is P.CONTINUE)
            for parent in node.after
        )
        if not runs:
            final[name] = StepState.SKIPPED
        else:
            final[name] = StepState.SUCCEEDED if succeeds[name] else StepState.FAILED
    return final


def _fails_somewhere(steps: dict[str, StepNode], reference: dict[str, StepState]) -> bool:
    return any(
        reference[name] is StepState.FAILED and node.policy is P.FAIL
        for name, node in steps.items()
    )


@settings(max_examples=300, deadline=None)
@given(workflows(), st.lists(st.integers(0, 50), max_size=20))
def test_every_step_ends_and_no_step_runs_before_its_dependencies_allow(
    drawn: tuple[dict[str, StepNode], dict[str, bool]], picks: list[int]
) -> None:
    steps, succeeds = drawn
    states, workflow = _run(steps, succeeds, picks)
    assert all(has_ended(state) for state in states.values()), states
    assert workflow is not WorkflowState.RUNNING
    reference = _reference(steps, succeeds)
    if _fails_somewhere(steps, reference):
        assert workflow is WorkflowState.FAILED
    else:
        # The order of completions does not matter: the reference knows none.
        assert states == reference
        expected = (
            WorkflowState.SUCCEEDED
            if all(s is StepState.SUCCEEDED for s in states.values())
            else WorkflowState.COMPLETED
        )
        assert workflow is expected


@settings(max_examples=200, deadline=None)
@given(workflows(), st.lists(st.integers(0, 50), max_size=20))
def test_the_local_rule_in_any_order_reaches_the_global_plan(
    drawn: tuple[dict[str, StepNode], dict[str, bool]], picks: list[int]
) -> None:
    """What the releasers do (decide the dependents of each step that ended, a skip going on
    to the skipped step's dependents) ends where the whole-workflow plan does."""
    steps, succeeds = drawn
    children: dict[str, list[str]] = {name: [] for name in steps}
    for name, node in steps.items():
        for parent in node.after:
            children[parent].append(name)
    states = {
        name: StepState.RELEASED if not node.after else StepState.BLOCKED
        for name, node in steps.items()
    }
    failed_workflow = False
    turn = 0
    while True:
        running = sorted(name for name, state in states.items() if state is StepState.RELEASED)
        if not running:
            break
        pick = running[picks[turn % len(picks)] % len(running)] if picks else running[0]
        turn += 1
        states[pick] = StepState.SUCCEEDED if succeeds[pick] else StepState.FAILED
        if fails_workflow(states[pick], steps[pick].policy):
            failed_workflow = True
            for name, state in states.items():
                if state is StepState.BLOCKED:
                    states[name] = StepState.SKIPPED
        frontier = [pick]
        while frontier:
            following: list[str] = []
            for child in dict.fromkeys(c for parent in frontier for c in children[parent]):
                if states[child] is not StepState.BLOCKED:
                    continue
                gates = {gate_of(states[p], steps[p].policy) for p in steps[child].after}
                decided = decide_dependent(
                    Dependent(child, "w", 0, Gate.WAIT in gates, Gate.SKIP in gates)
                )
                if decided is not None:
                    states[child] = decided
                    if decided is StepState.SKIPPED:
                        following.append(child)
            frontier = following
    final = plan(steps, states, WorkflowState.FAILED if failed_workflow else WorkflowState.RUNNING)
    assert final.release == final.skip == frozenset()  # a fixpoint: nothing left to decide
    assert all(has_ended(state) for state in states.values())
    reference = _reference(steps, succeeds)
    if not _fails_somewhere(steps, reference):
        assert states == reference


def test_a_failure_under_fail_skips_every_blocked_step_and_fails_the_workflow() -> None:
    steps = {"a": StepNode(()), "b": StepNode(("a",)), "c": StepNode(())}
    states = {"a": StepState.FAILED, "b": StepState.BLOCKED, "c": StepState.RELEASED}
    decided = plan(steps, states)
    assert decided.fail
    assert decided.end is WorkflowState.FAILED
    assert decided.skip == {"b"}
    assert decided.states["c"] is StepState.RELEASED  # already released: it runs to its end
    assert plan(steps, states, WorkflowState.CANCELLED).release == frozenset()
