"""Workflows run by workers (virtual time, the in-memory store): the order of their steps, the
three failure policies, results passed on, a batch's callback, cancel, retry, waiting, a step
ended by a Node-shaped row, and the telemetry of it all."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from dogs_core import Discard
from dogs_core.domain.definitions import EventJobDefinition
from dogs_core.domain.events import (
    Event,
    WorkflowFinished,
    WorkflowStartEnded,
    WorkflowStarting,
    WorkflowStepReleased,
)
from dogs_core.domain.records import HistoryRecord, HistoryStatus, JobType
from dogs_core.domain.workflow_records import StepState, WorkflowState
from dogs_core.domain.workflows import MAX_WORKFLOW_STEPS, Batch, Workflow
from dogs_core.errors import (
    InvalidIdError,
    InvalidOptionError,
    WorkflowNotFoundError,
    WorkflowStateError,
    WorkflowTimeoutError,
    WorkflowUpstreamError,
)
from dogs_core.ids import new_execution_id
from dogs_core.jobs import Jobs
from dogs_core.runtime import JobContext
from dogs_core.runtime.plumbing.telemetry import Telemetry
from dogs_core.runtime.worker.releaser import ROWS_PAGE, WorkflowReleaser
from tests.runtime.conftest import Harness, now

pytestmark = pytest.mark.anyio


def _jobs(log: list[tuple[str, float]], failing: set[str] | None = None) -> Jobs:
    """``step(params)`` logs its name and the virtual time, sleeps ``params['s']`` seconds, and
    fails for good when its name is in ``failing``."""
    jobs = Jobs()
    failing = failing or set()

    @jobs.event(max_tries=1)
    async def step(params: dict[str, Any] | None, ctx: JobContext) -> dict[str, Any]:
        name = str(ctx.step_name)
        await anyio.sleep((params or {}).get("s", 0))
        log.append((name, now()))
        if name in failing:
            raise RuntimeError(f"{name} failed")
        return {"from": name, "upstream": [u.name for u in ctx.upstreams]}

    return jobs


def _step(jobs: Jobs) -> EventJobDefinition:
    definition = jobs.get("step")
    assert isinstance(definition, EventJobDefinition)
    return definition


def _success_row(h: Harness, job_id: str, job_name: str, **fields: Any) -> HistoryRecord:
    """A success row of ``job_id``, as a worker writes it a second into the test."""
    return HistoryRecord(
        execution_id=new_execution_id(),
        job_id=job_id,
        job_name=job_name,
        type=JobType.EVENT,
        priority=100,
        tries=1,
        started_at=h.at(1),
        ended_at=h.at(1),
        status=HistoryStatus.SUCCESS,
        expires_at=h.at(86400),
        **fields,
    )


async def _run(h: Harness, workflow: Workflow, **options: Any) -> Any:
    started = await h.client.start_workflow(workflow)
    async with h.workers(**options) as workers:
        view = await h.client.wait_for_workflow(started.id, timeout=600, poll_interval=0.5)
        await workers.stop()
    return view


def _diamond(jobs: Jobs, **policies: Any) -> Workflow:
    step = _step(jobs)
    wf = Workflow("diamond")
    fetch = wf.add(step, {"s": 1}, name="fetch")
    parse = wf.add(step, {"s": 3}, name="parse", after=[fetch], **policies.get("parse", {}))
    index = wf.add(step, {"s": 1}, name="index", after=[fetch], **policies.get("index", {}))
    wf.add(step, name="report", after=[parse, index])
    return wf


async def test_a_diamond_runs_each_step_once_after_its_dependencies_with_their_results() -> None:
    log: list[tuple[str, float]] = []
    h = Harness(_jobs(log))
    view = await _run(h, _diamond(h.jobs), watch_changes=True)
    assert view.state is WorkflowState.SUCCEEDED
    when = dict(log)
    assert [name for name, _ in log] == ["fetch", "index", "parse", "report"]
    assert when["parse"] >= when["fetch"] + 3
    assert when["report"] >= when["parse"]
    report = view.step("report")
    assert report.outcome.result == {"from": "report", "upstream": ["parse", "index"]}
    # Released by the history feed: the report starts within a poll of its last dependency.
    assert when["report"] - when["parse"] < 1
    assert [len(h.store.job_history(s.record_id)) for s in view.steps] == [1, 1, 1, 1]


async def test_a_failed_step_under_fail_fails_the_workflow_and_skips_what_is_blocked() -> None:
    log: list[tuple[str, float]] = []
    h = Harness(_jobs(log, failing={"fetch"}))
    view = await _run(h, _diamond(h.jobs))
    assert view.state is WorkflowState.FAILED
    states = {s.name: s.state for s in view.steps}
    assert states == {
        "fetch": StepState.FAILED,
        "parse": StepState.SKIPPED,
        "index": StepState.SKIPPED,
        "report": StepState.SKIPPED,
    }
    assert view.step("fetch").outcome.error_message == "fetch failed"
    assert [name for name, _ in log] == ["fetch"]


async def test_a_failed_step_under_skip_skips_its_dependents_and_the_rest_goes_on() -> None:
    log: list[tuple[str, float]] = []
    h = Harness(_jobs(log, failing={"index"}))
    wf = _diamond(h.jobs, index={"on_failure": "skip"})
    wf.add(_step(h.jobs), name="alone")
    view = await _run(h, wf)
    assert view.state is WorkflowState.COMPLETED
    states = {s.name: s.state for s in view.steps}
    assert states["index"] is StepState.FAILED
    assert states["report"] is StepState.SKIPPED  # after index
    assert states["parse"] is StepState.SUCCEEDED
    assert states["alone"] is StepState.SUCCEEDED
    assert "report" not in dict(log)


async def test_a_failed_step_under_continue_lets_its_dependents_run_and_see_it() -> None:
    log: list[tuple[str, float]] = []
    seen: list[Any] = []
    h = Harness(_jobs(log, failing={"index"}))

    @h.jobs.event
    async def report(params: None, ctx: JobContext) -> None:
        index = ctx.upstream("index")
        seen.append((index.state, index.status, ctx.upstream("parse").result["from"]))

    wf = Workflow()
    step = _step(h.jobs)
    parse = wf.add(step, name="parse")
    index = wf.add(step, name="index", on_failure="continue")
    wf.add(report, after=[parse, index])
    view = await _run(h, wf)
    assert view.state is WorkflowState.COMPLETED
    assert seen == [(StepState.FAILED, HistoryStatus.ERROR, "parse")]


async def test_a_batch_callback_runs_once_after_every_item_with_counts() -> None:
    log: list[tuple[str, float]] = []
    summaries: list[Any] = []
    h = Harness(_jobs(log))

    @h.jobs.event(max_tries=1)
    async def item(params: dict[str, int], ctx: JobContext) -> None:
        if params["n"] % 4 == 0:
            raise ValueError("bad item")

    @h.jobs.event
    async def done(params: dict[str, str], ctx: JobContext) -> None:
        summaries.append((params["album"], ctx.batch, ctx.step_id, ctx.workflow_id))

    batch = Batch("album-7")
    failed = [batch.add(item, {"n": n}) for n in range(10)]
    callback = batch.then(done, {"album": "7"})
    started = await h.client.start_workflow(batch)
    async with h.workers(watch_changes=True, workers_count=4) as workers:
        view = await h.client.wait_for_workflow(started.id, timeout=600)
        await workers.stop()
    assert view.state is WorkflowState.COMPLETED  # some items failed (under continue)
    ((album, summary, step_id, workflow_id),) = summaries
    assert (album, step_id, workflow_id) == ("7", started.step_id(callback), started.id)
    assert (summary.total, summary.succeeded, summary.failed) == (10, 7, 3)
    expected = {started.step_id(failed[n]) for n in (0, 4, 8)}
    assert set(summary.failed_ids) == expected


async def test_cancel_stops_running_jobs_removes_pending_ones_and_releases_nothing_more() -> None:
    log: list[tuple[str, float]] = []
    h = Harness(_jobs(log))
    step = _step(h.jobs)
    wf = Workflow()
    slow = wf.add(step, {"s": 100}, name="slow")
    wf.add(step, name="after", after=[slow])
    started = await h.client.start_workflow(wf)
    async with h.workers(watch_changes=True, default_lock_time=5) as workers:
        await anyio.sleep(2)  # slow is running
        cancelled = await h.client.cancel_workflow(started.id)
        assert (cancelled.cancelled, cancelled.state, cancelled.stopped) == (
            True,
            WorkflowState.CANCELLED,
            1,
        )
        await anyio.sleep(200)
        await workers.stop()
    view = await h.client.get_workflow(started.id)
    assert view.state is WorkflowState.CANCELLED
    assert {s.name: s.state for s in view.steps} == {
        "slow": StepState.CANCELLED,
        "after": StepState.CANCELLED,
    }
    assert log == []  # the slow handler was stopped, and nothing ran after it
    rows = h.store.job_history(str(view.step("slow").record_id))
    assert [row.status for row in rows] == [HistoryStatus.CANCELLED]
    again = await h.client.cancel_workflow(started.id)
    assert (again.cancelled, again.state) == (False, WorkflowState.CANCELLED)


async def test_retry_runs_failed_and_skipped_steps_again_but_not_succeeded_ones() -> None:
    log: list[tuple[str, float]] = []
    failing = {"parse"}
    h = Harness(_jobs(log, failing=failing))
    view = await _run(h, _diamond(h.jobs))
    assert view.state is WorkflowState.FAILED
    with pytest.raises(WorkflowStateError, match="running"):
        await h.client.retry_workflow((await h.client.start_workflow(_chain(h))).id)
    failing.clear()
    log.clear()
    retried = await h.client.retry_workflow(view.id)
    assert set(retried.step_ids) == {view.step("parse").id, view.step("report").id}
    assert retried.released == 1  # parse; report waits for it
    async with h.workers() as workers:
        again = await h.client.wait_for_workflow(view.id, timeout=600)
        await workers.stop()
    assert again.state is WorkflowState.SUCCEEDED
    assert again.workflow.generation == 1
    diamond = {"fetch", "parse", "index", "report"}
    assert sorted(name for name, _ in log if name in diamond) == ["parse", "report"]
    assert again.step("parse").generation == 1
    assert (await h.client.retry_workflow(view.id)).step_ids == ()  # succeeded: nothing to do


def _chain(h: Harness) -> Workflow:
    wf = Workflow()
    wf.chain(_step(h.jobs), _step(h.jobs))
    return wf


async def test_waiting_reads_errors_and_lists() -> None:
    log: list[tuple[str, float]] = []
    h = Harness(_jobs(log))
    started = await h.client.start_workflow(_chain(h))
    with pytest.raises(WorkflowTimeoutError, match="had not ended after 3s"):
        await h.client.wait_for_workflow(started.id, timeout=3)
    with pytest.raises(WorkflowNotFoundError):
        await h.client.get_workflow("0190c2c4-0000-7000-8000-000000000000")
    with pytest.raises(WorkflowNotFoundError):
        await h.client.wait_for_workflow("0190c2c4-0000-7000-8000-000000000000")
    with pytest.raises(InvalidIdError, match="workflow_id='nope': not an id"):
        await h.client.get_workflow("nope")
    assert (await h.client.get_workflow(started.id.upper())).id == started.id
    listed = await h.client.list_workflows()
    assert [summary.workflow.id for summary in listed] == [started.id]
    assert listed[0].counts[StepState.RELEASED] == 1
    assert await h.client.list_workflows(state="failed") == []


async def test_waiting_for_many_workflows_returns_them_in_the_order_given() -> None:
    log: list[tuple[str, float]] = []
    h = Harness(_jobs(log))
    step = _step(h.jobs)
    ids = []
    for n in (3, 1, 2):
        wf = Workflow(f"sleeps {n}")
        wf.add(step, {"s": n}, name=f"only {n}")
        ids.append((await h.client.start_workflow(wf)).id)
    with pytest.raises(WorkflowTimeoutError, match=r"\(and 2 others\) had not ended after 1s"):
        await h.client.wait_for_workflows(ids, timeout=1)
    async with h.workers(watch_changes=True) as workers:
        views = await h.client.wait_for_workflows([*ids, ids[0]], timeout=60, poll_interval=30)
        await workers.stop()
    assert [view.id for view in views] == [*ids, ids[0]]
    assert {view.state for view in views} == {WorkflowState.SUCCEEDED}
    assert [name for name, _ in log] == ["only 1", "only 2", "only 3"]
    assert await h.client.wait_for_workflows([]) == []
    with pytest.raises(InvalidOptionError, match="workflow_ids="):
        await h.client.wait_for_workflows(ids[0])
    with pytest.raises(WorkflowNotFoundError):
        await h.client.wait_for_workflows([ids[0], "0190c2c4-0000-7000-8000-000000000000"])
    with pytest.raises(InvalidIdError, match="workflow_ids='nope'"):
        await h.client.wait_for_workflows([ids[0], "nope"])


async def test_many_workflows_start_in_one_call_or_none_does() -> None:
    log: list[tuple[str, float]] = []
    h = Harness(_jobs(log))
    step = _step(h.jobs)
    flows = []
    for n in range(3):
        wf = Workflow(f"flow {n}")
        first = wf.add(step, name=f"first {n}")
        wf.add(step, name=f"then {n}", after=[first])
        flows.append(wf)
    started = await h.client.start_workflows(flows)
    assert [s.name for s in started] == ["flow 0", "flow 1", "flow 2"]
    async with h.workers() as workers:
        views = await h.client.wait_for_workflows([s.id for s in started], timeout=60)
        await workers.stop()
    assert {view.state for view in views} == {WorkflowState.SUCCEEDED}
    assert sorted(name for name, _ in log) == sorted(
        [f"first {n}" for n in range(3)] + [f"then {n}" for n in range(3)]
    )
    assert await h.client.start_workflows([]) == []
    with pytest.raises(InvalidOptionError, match=r"workflows\[1\]="):
        await h.client.start_workflows([flows[0], "not a workflow"])  # type: ignore[list-item]
    with pytest.raises(InvalidOptionError, match="workflows="):
        await h.client.start_workflows(flows[0])  # type: ignore[arg-type]
    big = []
    for n in range(2):
        batch = Batch(f"big {n}")
        for item in range(MAX_WORKFLOW_STEPS // 2 + 1):
            batch.add(step, {"n": item})
        big.append(batch)
    with pytest.raises(InvalidOptionError, match="steps in all"):
        await h.client.start_workflows(big)
    assert len(await h.client.list_workflows(limit=100)) == 3  # the refused calls wrote nothing


async def test_a_round_of_more_rows_than_one_lookup_ends_every_step() -> None:
    """A busy fleet's round may bring more rows than one lookup of their steps reads
    (``ROWS_PAGE``): every step of them ends, and the callback after them is released."""
    h = Harness(_jobs([]))
    step = _step(h.jobs)
    work = Batch("wide")
    for n in range(ROWS_PAGE + 5):
        work.add(step, {"n": n})
    work.then(step, name="callback")
    started = await h.client.start_workflow(work)
    view = await h.client.get_workflow(started.id)
    rows = [
        _success_row(h, str(item.record_id), "step", workflow_id=started.id)
        for item in view.steps
        if item.record_id is not None
    ]
    assert len(rows) == ROWS_PAGE + 5
    advanced = await WorkflowReleaser(h.store, clock=h.clock).rows(rows)
    assert len(advanced.ended) == ROWS_PAGE + 5
    after = await h.client.get_workflow(started.id)
    assert after.step("callback").state is StepState.RELEASED


async def test_a_step_ended_by_a_node_shaped_row_releases_its_dependents() -> None:
    """The first step's job is a Node worker's (not in this registry): a row written as Node
    writes it (no owner, no wasStale, no workflowId) after its record was deleted ends it."""
    log: list[tuple[str, float]] = []
    h = Harness(_jobs(log))

    @h.jobs.event
    async def node_job(params: None, ctx: JobContext) -> None:  # a Node worker runs it
        raise AssertionError("never run here")

    wf = Workflow()
    node = wf.add(node_job, name="node")
    wf.add(_step(h.jobs), name="python", after=[node])
    started = await h.client.start_workflow(wf)
    python_only = Jobs()
    python_only.add(_step(h.jobs))
    h_python = Harness(python_only, store=h.store, clock=h.clock)
    async with h_python.workers(watch_changes=True) as workers:
        view = await h.client.get_workflow(started.id)
        record_id = str(view.step("node").record_id)
        await anyio.sleep(1)
        await h.store.delete_record(record_id, unless_running_at=None, unless_failed=False)
        row = _success_row(h, record_id, "node_job", result={"from": "node"})
        await h.store.write_history_many([row])
        done = await h.client.wait_for_workflow(started.id, timeout=60)
        await workers.stop()
    assert done.state is WorkflowState.SUCCEEDED
    outcome = done.step("node").outcome
    assert outcome is not None
    assert outcome.result == {"from": "node"}
    assert [name for name, _ in log] == ["python"]


async def test_a_discarded_failure_ends_its_step_and_a_sweep_alone_releases_without_a_feed() -> (
    None
):
    h = Harness(Jobs())

    async def discard(error: BaseException, params: None, ctx: JobContext) -> Discard:
        # async, as every callback of this suite: a sync one runs in a thread, during which
        # virtual time jumps ahead (its lock expires, the job is retried: the test was flaky)
        return Discard()

    @h.jobs.event(on_error=discard)
    async def flaky(params: None, ctx: JobContext) -> None:
        raise RuntimeError("no")

    @h.jobs.event
    async def after(params: None, ctx: JobContext) -> None:
        assert ctx.upstream("flaky").state is StepState.FAILED

    wf = Workflow()
    first = wf.add(flaky, on_failure="continue")
    wf.add(after, after=[first])
    started = await h.client.start_workflow(wf)
    async with h.workers(watch_changes=False, workflow_sweep_interval=2) as workers:
        view = await h.client.wait_for_workflow(started.id, timeout=60)
        await workers.stop()
    assert view.state is WorkflowState.COMPLETED
    assert view.step("after").state is StepState.SUCCEEDED


async def test_ctx_outside_and_inside_a_workflow() -> None:
    seen: list[Any] = []
    jobs = Jobs()

    @jobs.event
    async def alone(params: None, ctx: JobContext) -> None:
        seen.append((ctx.workflow_id, ctx.step_name, ctx.step_id, ctx.upstreams, ctx.batch))
        with pytest.raises(WorkflowUpstreamError, match="no dependency 'x'"):
            ctx.upstream("x")

    h = Harness(jobs)
    await h.client.schedule(alone)
    async with h.workers() as workers:
        await anyio.sleep(2)
        await workers.stop()
    assert seen == [(None, None, None, (), None)]


async def test_workflow_telemetry_and_one_trace_context_for_every_step() -> None:
    log: list[tuple[str, float]] = []
    telemetry = Telemetry()
    events: list[Event] = []

    def tracer(event: Event) -> None:
        events.append(event)
        if isinstance(event, WorkflowStarting):
            event.trace_context["traceparent"] = "00-trace-span-01"

    telemetry.subscribe(tracer)
    h = Harness(_jobs(log))
    client = h.client
    client.telemetry = telemetry
    started = await client.start_workflow(_chain(h))
    async with h.workers(telemetry=telemetry) as workers:
        await client.wait_for_workflow(started.id, timeout=60)
        await workers.stop()
    kinds = [type(event) for event in events if type(event).__name__.startswith("Workflow")]
    assert kinds == [WorkflowStarting, WorkflowStartEnded, WorkflowStepReleased, WorkflowFinished]
    view = await client.get_workflow(started.id)
    assert view.workflow.trace_context == {"traceparent": "00-trace-span-01"}
    for step in view.steps:
        assert step.trace_context == {"traceparent": "00-trace-span-01"}
    finished = [e for e in events if isinstance(e, WorkflowFinished)]
    assert finished[0].state == "succeeded"
    started_ends = [e for e in events if isinstance(e, WorkflowStartEnded)]
    assert (started_ends[0].steps, started_ends[0].released, started_ends[0].error) == (2, 1, None)
