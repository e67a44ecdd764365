"""Workflows as built and checked (pure): the builder, the whole-graph checks, the compiled
workflow and the record's ``workflow`` field."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dogs_core.domain.records import HistoryStatus
from dogs_core.domain.workflow_marker import (
    batch_entry,
    read_batch,
    read_upstream,
    upstream_entries,
)
from dogs_core.domain.workflow_records import (
    MAX_UPSTREAM_BYTES,
    Gate,
    StepOutcome,
    StepState,
    WorkflowStarted,
    WorkflowState,
    WorkflowView,
)
from dogs_core.domain.workflow_start import compile_workflow, release_job, with_trace_context
from dogs_core.domain.workflows import (
    MAX_WORKFLOW_STEPS,
    Batch,
    FailurePolicy,
    Workflow,
    chain,
    find_cycle,
)
from dogs_core.errors import (
    InvalidOptionError,
    InvalidParamsError,
    InvalidWorkflowError,
    JobNotRegisteredError,
    WorkflowUpstreamError,
)
from dogs_core.jobs import Jobs

NOW = datetime(2030, 1, 1, tzinfo=UTC)

jobs = Jobs()


@jobs.event
async def fetch(params: dict[str, Any], ctx: object) -> None: ...


@jobs.event
async def parse(params: None, ctx: object) -> None: ...


@jobs.event(save_executions_for=timedelta(0))
async def forgetful(params: None, ctx: object) -> None: ...


@jobs.recurrent(run_every=60)
async def tick(ctx: object) -> None: ...


@dataclasses.dataclass
class Url:
    url: str


@jobs.event
async def typed(params: Url, ctx: object) -> None: ...


def _resolve(job: Any) -> Any:
    if isinstance(job, str):
        if job not in jobs:
            raise JobNotRegisteredError(job)
        return jobs.get(job)
    return job


def compiled(workflow: Workflow) -> Any:
    counter = iter(range(10**6))
    return compile_workflow(
        workflow,
        resolve=_resolve,
        new_id=lambda: f"id-{next(counter):06d}",
        partition=lambda: 3,
        now=NOW,
    )


# -- building -------------------------------------------------------------------------------------


def test_steps_are_named_after_their_job_and_numbered_when_it_repeats() -> None:
    wf = Workflow("w")
    first = wf.add(fetch, {"u": 1})
    second = wf.add(fetch, {"u": 2}, after=first)
    third = wf.add("fetch", after=[first, second, "fetch"])
    named = wf.add(parse, name="mine")
    assert [s.name for s in (first, second, third, named)] == [
        "fetch",
        "fetch-2",
        "fetch-3",
        "mine",
    ]
    assert wf.steps[2].after == ("fetch", "fetch-2")  # repeats dropped
    assert len(wf) == 4
    assert repr(first) == "Step('fetch')"
    assert "4 steps" in repr(wf)


def test_chain_puts_each_step_after_the_one_before() -> None:
    wf = chain(fetch, (parse, None), ("fetch", {"u": 1}), name="c")
    assert [(s.name, s.after) for s in wf.steps] == [
        ("fetch", ()),
        ("parse", ("fetch",)),
        ("fetch-2", ("parse",)),
    ]
    other = Workflow()
    root = other.add(fetch)
    steps = other.chain(parse, parse, after=root, on_failure="skip")
    assert [s.after for s in other.steps] == [(), ("fetch",), ("parse",)]
    assert {s.on_failure for s in other.steps[1:]} == {FailurePolicy.SKIP}
    assert [s.name for s in steps] == ["parse", "parse-2"]


def test_a_batch_has_continue_items_and_one_summary_callback_after_all() -> None:
    batch = Batch("b")
    items = [batch.add(fetch, {"n": n}) for n in range(3)]
    done = batch.then(parse, name="done")
    assert batch.callback is done
    specs = batch.steps
    assert {s.on_failure for s in specs[:3]} == {FailurePolicy.CONTINUE}
    assert specs[3].after == tuple(item.name for item in items)
    assert specs[3].summary
    assert not any(s.summary for s in specs[:3])
    with pytest.raises(InvalidWorkflowError, match="add items before then"):
        batch.add(fetch)
    with pytest.raises(InvalidWorkflowError, match="one callback"):
        batch.then(parse)
    with pytest.raises(InvalidWorkflowError, match="items before then"):
        Batch().then(parse)


@pytest.mark.parametrize(
    ("build", "error", "match"),
    [
        (lambda wf: wf.add(tick), InvalidOptionError, "event job"),
        (lambda wf: wf.add(42), InvalidOptionError, "job definition"),
        (lambda wf: wf.add(""), InvalidOptionError, "job definition"),
        (lambda wf: wf.add(fetch, on_failure="explode"), InvalidWorkflowError, "on_failure"),
        (lambda wf: wf.add(fetch, name="x", after=["x"]), InvalidWorkflowError, "itself"),
        (lambda wf: wf.add(fetch, after=[3]), InvalidWorkflowError, "steps or step names"),
        (lambda wf: wf.add(fetch, after={"a": 1}), InvalidWorkflowError, "a list"),
        (lambda wf: wf.add(fetch, after=5), InvalidWorkflowError, "a list"),
        (lambda wf: wf.add(fetch, name=""), InvalidOptionError, "non-empty"),
        (lambda wf: wf.add(fetch, name="a\nb"), InvalidOptionError, "control"),
        (lambda wf: wf.add(fetch, name="x" * 201), InvalidOptionError, "at most"),
        (lambda wf: wf.add(fetch, priority="high"), InvalidOptionError, "priority"),
        (lambda wf: wf.chain(), InvalidOptionError, "at least one"),
        (lambda wf: wf.chain((fetch, 1, 2)), InvalidOptionError, "job or"),
        (lambda wf: Workflow(name=7), InvalidOptionError, "non-empty"),  # type: ignore[arg-type]
    ],
)
def test_what_add_can_check_alone_it_checks_at_once(build: Any, error: type, match: str) -> None:
    wf = Workflow()
    with pytest.raises(error, match=match):
        build(wf)
    assert len(wf) == 0


def test_a_name_used_twice_and_a_step_of_another_workflow_are_refused() -> None:
    wf, other = Workflow(), Workflow()
    wf.add(fetch, name="a")
    foreign = other.add(fetch)
    with pytest.raises(InvalidWorkflowError, match="another step has this name"):
        wf.add(parse, name="a")
    with pytest.raises(InvalidWorkflowError, match="another workflow"):
        wf.add(parse, after=[foreign])


def test_validate_names_unknown_steps_cycles_and_empty_workflows() -> None:
    with pytest.raises(InvalidWorkflowError, match="at least one step"):
        Workflow().validate()
    unknown = Workflow()
    unknown.add(fetch, after=["nope"])
    with pytest.raises(InvalidWorkflowError, match="'fetch': after names no step") as caught:
        unknown.validate()
    assert caught.value.step == "fetch"
    cyclic = Workflow()
    cyclic.add(fetch, name="a", after=["c"])
    cyclic.add(fetch, name="b", after=["a"])
    cyclic.add(fetch, name="c", after=["b"])
    with pytest.raises(InvalidWorkflowError, match="cycle") as caught:
        cyclic.validate()
    assert "a -> b -> c -> a" in str(caught.value) or "->" in str(caught.value)


def test_a_workflow_over_the_size_limit_is_refused_naming_the_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dogs_core.domain import workflows

    monkeypatch.setattr(workflows, "MAX_WORKFLOW_STEPS", 3)
    wf = Workflow()
    for _ in range(3):
        wf.add(fetch)
    with pytest.raises(InvalidWorkflowError, match="more than 3 steps") as caught:
        wf.add(fetch, name="fourth")
    assert caught.value.step == "fourth"
    assert MAX_WORKFLOW_STEPS == 20_000


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.integers(0, 9), st.lists(st.integers(0, 9), max_size=4), max_size=10))
def test_find_cycle_finds_one_exactly_when_there_is_one(raw: dict[int, list[int]]) -> None:
    edges = {str(node): [str(p) for p in parents] for node, parents in raw.items()}
    cycle = find_cycle(edges)
    # Kahn's algorithm as the reference: a graph without cycle can be emptied of its sources.
    remaining = {node: {p for p in parents if p in edges} for node, parents in edges.items()}
    while True:
        sources = [node for node, parents in remaining.items() if not parents]
        if not sources:
            break
        for node in sources:
            del remaining[node]
        for parents in remaining.values():
            parents.difference_update(sources)
    assert (cycle is None) == (not remaining)
    if cycle is not None:
        for here, there in zip(cycle, [*cycle[1:], cycle[0]], strict=True):
            assert there in edges[here]


# -- compiling ------------------------------------------------------------------------------------


def test_a_compiled_workflow_releases_its_roots_and_links_children() -> None:
    wf = Workflow("import-42")
    root = wf.add(fetch, {"url": "u"}, priority=7)
    mid = wf.add(parse, after=[root], on_failure="continue")
    wf.add("parse", after=[root, mid])
    done = compiled(wf)
    assert done.workflow.name == "import-42"
    assert done.workflow.state is WorkflowState.RUNNING
    assert done.workflow.step_count == 3
    first, second, third = done.steps
    assert (first.state, first.record_id, first.released_at) == (
        StepState.RELEASED,
        done.records[0].id,
        NOW,
    )
    assert (second.state, second.gate, second.record_id) == (StepState.BLOCKED, Gate.WAIT, None)
    assert first.children == (second.id, third.id)
    assert third.after == (first.id, second.id)
    assert second.policy is FailurePolicy.CONTINUE
    (record,) = done.records
    assert (record.job_name, record.priority, record.partition, record.params) == (
        "fetch",
        7,
        3,
        {"url": "u"},
    )
    assert record.next_run_at == NOW
    assert record.workflow == {"id": done.workflow.id, "step": first.id, "name": "fetch"}
    traced = with_trace_context(done, {"traceparent": "00-a-b-01"})
    assert traced.workflow.trace_context == {"traceparent": "00-a-b-01"}
    assert {str(r.trace_context) for r in traced.records} == {str({"traceparent": "00-a-b-01"})}
    assert traced.steps[1].trace_context == {"traceparent": "00-a-b-01"}


@pytest.mark.parametrize(
    ("job", "params", "error", "match"),
    [
        ("missing", None, InvalidWorkflowError, "step 'missing'"),
        (forgetful, None, InvalidWorkflowError, "keeps no history"),
        (typed, {"nope": 1}, InvalidParamsError, "step 'typed'"),
        (fetch, {"bad": object()}, InvalidParamsError, "step 'fetch'"),
        (fetch, "not a mapping", InvalidParamsError, "step 'fetch'"),
    ],
)
def test_a_step_whose_job_or_params_are_bad_is_named(
    job: Any, params: Any, error: type, match: str
) -> None:
    wf = Workflow()
    wf.add(job, params)
    with pytest.raises(error, match=match):
        compiled(wf)


def test_a_typed_step_stores_its_params_dumped() -> None:
    wf = Workflow()
    wf.add(typed, Url("https://x"))
    assert compiled(wf).records[0].params == {"url": "https://x"}


def test_only_a_workflow_is_compiled() -> None:
    with pytest.raises(InvalidWorkflowError, match="takes a Workflow"):
        compiled("nope")  # type: ignore[arg-type]


# -- the record's workflow field ------------------------------------------------------------------


def test_a_release_carries_its_dependencies_results_within_the_budget() -> None:
    wf = Workflow()
    a = wf.add(fetch, {"u": 1}, name="a")
    b = wf.add(fetch, {"u": 2}, name="b")
    wf.add(parse, name="c", after=[a, b])
    done = compiled(wf)
    big = "x" * (MAX_UPSTREAM_BYTES - 40)
    first = dataclasses.replace(
        done.steps[0],
        state=StepState.SUCCEEDED,
        outcome=StepOutcome(HistoryStatus.SUCCESS, NOW, result={"big": big}),
    )
    second = dataclasses.replace(
        done.steps[1],
        state=StepState.FAILED,
        outcome=StepOutcome(HistoryStatus.ERROR, NOW, result={"small": 1}),
    )
    job = release_job(done.steps[2], record_id="r", now=NOW, upstream=[first, second])
    upstream = {u.name: u for u in read_upstream(job.workflow)}
    assert upstream["a"].result == {"big": big}
    assert upstream["a"].succeeded
    assert upstream["b"].state is StepState.FAILED
    assert upstream["b"].status is HistoryStatus.ERROR
    with pytest.raises(WorkflowUpstreamError, match="too large"):
        _ = upstream["b"].result  # past the budget
    assert read_batch(job.workflow) is None


def test_an_omitted_result_stays_omitted_and_a_missing_outcome_reads_as_none() -> None:
    wf = Workflow()
    a = wf.add(fetch, name="a")
    b = wf.add(fetch, name="b")
    wf.add(parse, name="c", after=[a, b])
    done = compiled(wf)
    omitted = dataclasses.replace(
        done.steps[0],
        state=StepState.SUCCEEDED,
        outcome=StepOutcome(HistoryStatus.SUCCESS, NOW, result_omitted=True),
    )
    entries = upstream_entries([omitted, done.steps[1]])
    assert entries[0]["resultOmitted"] is True
    assert entries[1]["status"] is None
    assert read_upstream(None) == ()
    assert read_upstream({"upstream": ["junk"]}) == ()


def test_a_batch_summary_round_trips() -> None:
    entry = batch_entry({StepState.SUCCEEDED: 3, StepState.FAILED: 1}, ["s1"])
    summary = read_batch({"batch": entry})
    assert summary is not None
    assert (summary.total, summary.succeeded, summary.failed, summary.failed_ids) == (
        4,
        3,
        1,
        ("s1",),
    )
    assert read_batch({"batch": "junk"}) is None
    batch = Batch()
    batch.add(fetch)
    batch.then(parse)
    done = compiled(batch)
    callback = done.steps[1]
    job = release_job(callback, record_id="r", now=NOW)  # no counts given: zeros
    assert read_batch(job.workflow) == read_batch({"batch": batch_entry({}, ())})


def test_started_and_view_helpers() -> None:
    wf = Workflow()
    step = wf.add(fetch, name="a")
    done = compiled(wf)
    started = WorkflowStarted(done.workflow.id, None, {"a": done.steps[0].id})
    assert started.step_id(step) == started.step_id("a") == done.steps[0].id
    view = WorkflowView(done.workflow, done.steps)
    assert view.id == done.workflow.id
    assert view.state is WorkflowState.RUNNING
    assert view.step("a") is done.steps[0]
    assert view.step(done.steps[0].id) is done.steps[0]
    with pytest.raises(KeyError):
        view.step("b")
    assert view.counts()[StepState.RELEASED] == 1
