"""The contract suite, the workflows role (optional): workflows and their steps
(:class:`~dogs_core.ports.AsyncWorkflowStore`): blocked steps without records, atomic starts and
releases, every decision a compare-and-set that one caller of many writes.

Not part of :class:`~dogs_core.JobStoreContract` (a store need not have workflows). Subclass
:class:`WorkflowContract` (name starting with ``Test``) and provide ``store``: a set-up store
that lists :attr:`~dogs_core.ports.Role.WORKFLOWS` in its ``roles`` (``setup_workflows`` done).
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any, cast

import anyio

from dogs_core.domain.records import HistoryRecord, HistoryStatus, JobType, Owner
from dogs_core.domain.workflow_records import (
    Dependent,
    FinishedWorkflow,
    Gate,
    NewWorkflow,
    StepEnding,
    StepOutcome,
    StepRelease,
    StepSkip,
    StepState,
    WorkflowState,
    gate_of,
)
from dogs_core.domain.workflow_start import compile_workflow
from dogs_core.domain.workflows import Batch, JobRef, Workflow
from dogs_core.ids import new_execution_id, new_record_id
from dogs_core.jobs import Jobs
from dogs_core.ports import AsyncJobStore, AsyncWorkflowStore, Role, has_role
from dogs_testing.contract.base import _DAY, _MS, T0, ContractBase, _at_once
from dogs_testing.settling import settle_one, terminal

__all__ = ["WorkflowContract"]

_JOBS = Jobs()


@_JOBS.event(name="wf_step")
async def _wf_step(params: Any, ctx: Any) -> None:
    """The job of every step of the suite's workflows."""


def _resolve(job: JobRef) -> Any:
    return _wf_step


def _compiled(workflow: Workflow) -> NewWorkflow:
    return compile_workflow(
        workflow, resolve=_resolve, new_id=new_record_id, partition=lambda: 0, now=T0
    )


def _diamond() -> tuple[Workflow, dict[str, str]]:
    """fetch -> (parse, index) -> report."""
    wf = Workflow("diamond")
    fetch = wf.add(_wf_step, {"url": "u"}, name="fetch")
    parse = wf.add(_wf_step, name="parse", after=[fetch])
    index = wf.add(_wf_step, name="index", after=[fetch], on_failure="continue")
    wf.add(_wf_step, name="report", after=[parse, index])
    return wf, {}


def _row(record_id: str, status: HistoryStatus, result: Any = None) -> HistoryRecord:
    return HistoryRecord(
        execution_id=new_execution_id(),
        job_id=record_id,
        job_name="wf_step",
        type=JobType.EVENT,
        priority=100,
        tries=1,
        started_at=T0,
        ended_at=T0 + 5 * _MS,
        status=status,
        expires_at=T0 + 7 * _DAY,
        result=result,
    )


class WorkflowContract(ContractBase):
    """The workflows role (see the module documentation)."""

    def workflows(self, store: AsyncJobStore) -> AsyncWorkflowStore:
        assert has_role(store, Role.WORKFLOWS), "the store must list the workflows role"
        return cast(AsyncWorkflowStore, store)

    async def started(self, store: AsyncJobStore, workflow: Workflow) -> NewWorkflow:
        compiled = _compiled(workflow)
        await self.workflows(store).insert_workflows([compiled])
        return compiled

    async def end(
        self,
        store: AsyncJobStore,
        compiled: NewWorkflow,
        name: str,
        state: StepState = StepState.SUCCEEDED,
        result: Any = None,
    ) -> list[StepEnding]:
        """End the released step ``name`` (as the release would)."""
        step = await self.step(store, compiled.workflow.id, name)
        assert step.record_id is not None, f"step {name} is not released"
        outcome = StepOutcome(status=HistoryStatus.SUCCESS, ended_at=T0, result=result)
        ending = StepEnding(
            step.id,
            step.workflow_id,
            step.record_id,
            state,
            gate_of(state, step.policy),
            outcome,
            step.policy,
        )
        return await self.workflows(store).end_steps([ending], now=T0)

    async def step(self, store: AsyncJobStore, workflow_id: str, name: str) -> Any:
        view = await self.workflows(store).get_workflow(workflow_id)
        assert view is not None
        return view.step(name)

    async def records_of(self, store: AsyncJobStore, name: str = "wf_step") -> list[Any]:
        return [record for record in await self.all_records(store) if record.job_name == name]

    # -- start ------------------------------------------------------------------------------

    async def test_a_workflow_starts_with_records_for_its_first_steps_only(
        self, store: AsyncJobStore
    ) -> None:
        compiled = await self.started(store, _diamond()[0])
        view = await self.workflows(store).get_workflow(compiled.workflow.id)
        assert view is not None
        assert view.state is WorkflowState.RUNNING
        assert [step.name for step in view.steps] == ["fetch", "parse", "index", "report"]
        assert [step.state for step in view.steps] == [
            StepState.RELEASED,
            StepState.BLOCKED,
            StepState.BLOCKED,
            StepState.BLOCKED,
        ]
        records = await self.records_of(store)
        assert [record.id for record in records] == [view.steps[0].record_id]
        marker = records[0].workflow
        assert marker is not None
        assert marker["id"] == compiled.workflow.id
        assert marker["name"] == "fetch"
        assert records[0].params == {"url": "u"}
        # A retried insert (its reply lost) writes nothing more.
        await self.workflows(store).insert_workflows([compiled])
        assert len(await self.records_of(store)) == 1
        assert await self.workflows(store).get_workflow(new_record_id()) is None

    async def test_several_workflows_are_inserted_together(self, store: AsyncJobStore) -> None:
        workflows = self.workflows(store)
        first = _compiled(_diamond()[0])
        second, third = _compiled(_diamond()[0]), _compiled(_diamond()[0])
        await workflows.insert_workflows([first])
        # a retry carrying one already stored: the others are inserted, the stored one kept
        await workflows.insert_workflows([first, second, third])
        for compiled in (first, second, third):
            view = await workflows.get_workflow(compiled.workflow.id)
            assert view is not None
            assert [step.id for step in view.steps] == [step.id for step in compiled.steps]
        records = {record.id for record in await self.records_of(store)}
        assert records == {r.id for c in (first, second, third) for r in c.records}
        await workflows.insert_workflows([])

    async def test_released_steps_are_found_by_record_by_workflow_and_in_pages(
        self, store: AsyncJobStore
    ) -> None:
        batch = Batch("b")
        for n in range(5):
            batch.add(_wf_step, {"n": n})
        batch.then(_wf_step)
        compiled = await self.started(store, batch)
        workflows = self.workflows(store)
        every = await workflows.released_steps()
        assert len(every) == 5
        assert [step.id for step in every] == sorted(step.id for step in every)
        first = every[0]
        assert [s.id for s in await workflows.released_steps(record_ids=[first.record_id])] == [
            first.id
        ]
        mine = await workflows.released_steps(workflow_id=compiled.workflow.id, limit=2)
        assert [s.id for s in mine] == [s.id for s in every[:2]]
        rest = await workflows.released_steps(after=every[1].id)
        assert [s.id for s in rest] == [s.id for s in every[2:]]
        assert await workflows.released_steps(record_ids=[new_record_id()]) == []

    async def test_step_evidence_is_the_record_and_its_newest_row(
        self, store: AsyncJobStore
    ) -> None:
        compiled = await self.started(store, _diamond()[0])
        record_id = compiled.records[0].id
        older = _row(record_id, HistoryStatus.ERROR)
        newer = dataclasses.replace(
            _row(record_id, HistoryStatus.SUCCESS, {"ok": 1}), started_at=T0 + timedelta(seconds=1)
        )
        await store.write_history_many([older, newer])
        gone = new_record_id()
        evidence = await self.workflows(store).step_evidence([record_id, gone])
        record, newest = evidence[record_id]
        assert record is not None
        assert record.id == record_id
        assert newest is not None
        assert newest.execution_id == newer.execution_id
        assert newest.result == {"ok": 1}
        assert evidence[gone] == (None, None)

    # -- ends, dependents, releases ---------------------------------------------------------

    async def test_an_end_is_written_once_whoever_writes_it(self, store: AsyncJobStore) -> None:
        compiled = await self.started(store, _diamond()[0])
        step = await self.step(store, compiled.workflow.id, "fetch")
        outcome = StepOutcome(status=HistoryStatus.SUCCESS, ended_at=T0, result={"n": 1})
        ending = StepEnding(
            step.id, step.workflow_id, step.record_id, StepState.SUCCEEDED, Gate.PASS, outcome
        )
        stale = dataclasses.replace(ending, record_id=new_record_id())
        workflows = self.workflows(store)
        assert await workflows.end_steps([stale], now=T0) == []
        results = await _at_once([lambda: workflows.end_steps([ending], now=T0)] * 8)
        assert sum(len(result) for result in results) == 1
        ended = await self.step(store, compiled.workflow.id, "fetch")
        assert ended.state is StepState.SUCCEEDED
        assert ended.gate is Gate.PASS
        assert ended.pending
        assert ended.outcome is not None
        assert ended.outcome.result == {"n": 1}
        assert [s.id for s in await workflows.pending_steps()] == [step.id]
        await workflows.settle_steps([step.id])
        assert await workflows.pending_steps() == []

    async def test_dependents_say_whether_a_dependency_waits_or_skips(
        self, store: AsyncJobStore
    ) -> None:
        compiled = await self.started(store, _diamond()[0])
        workflows = self.workflows(store)
        fetch = await self.step(store, compiled.workflow.id, "fetch")
        before = await workflows.blocked_steps([fetch.children[0]])
        assert [view.waiting for view in before] == [True]
        await self.end(store, compiled, "fetch")
        views = {view.id: view for view in await workflows.dependents([fetch.id])}
        parse = await self.step(store, compiled.workflow.id, "parse")
        index = await self.step(store, compiled.workflow.id, "index")
        assert set(views) == {parse.id, index.id}
        assert views[parse.id] == Dependent(parse.id, compiled.workflow.id, 0, False, False)
        assert await workflows.blocked_steps([fetch.id]) == []  # released, not blocked

    async def test_a_release_inserts_one_record_whoever_releases_it(
        self, store: AsyncJobStore
    ) -> None:
        compiled = await self.started(store, _diamond()[0])
        await self.end(store, compiled, "fetch", result={"body": "hello"})
        workflows = self.workflows(store)
        parse = await self.step(store, compiled.workflow.id, "parse")
        old = StepRelease(parse.id, parse.workflow_id, parse.generation - 1, new_record_id())
        assert await workflows.release_steps([old], now=T0) == []

        def release() -> Any:
            return workflows.release_steps(
                [StepRelease(parse.id, parse.workflow_id, parse.generation, new_record_id())],
                now=T0,
            )

        results = await _at_once([release] * 8)
        assert sum(len(result) for result in results) == 1
        (written,) = [result[0] for result in results if result]
        released = await self.step(store, compiled.workflow.id, "parse")
        assert released.state is StepState.RELEASED
        assert released.record_id == written.record_id
        records = {record.id: record for record in await self.records_of(store)}
        assert len(records) == 2  # the releases that lost left no record behind
        assert records[written.record_id].next_run_at == T0  # due: claimable at once
        assert await workflows.repair_releases() == 0  # nothing was left half written
        marker = records[written.record_id].workflow
        assert marker is not None
        assert "stagedAt" not in marker
        (upstream,) = marker["upstream"]
        assert upstream["name"] == "fetch"
        assert upstream["state"] == "succeeded"
        assert upstream["result"] == {"body": "hello"}

    async def test_a_batch_callback_is_released_with_counts_and_failed_ids(
        self, store: AsyncJobStore
    ) -> None:
        batch = Batch("many")
        for n in range(70):  # past the small fan-in: decided through the index
            batch.add(_wf_step, {"n": n})
        callback = batch.then(_wf_step, name="done")
        compiled = await self.started(store, batch)
        workflows = self.workflows(store)
        done = await self.step(store, compiled.workflow.id, callback.name)
        items = [step for step in compiled.steps if step.id != done.id]
        failed = items[:3]
        for step in items:
            state = StepState.FAILED if step in failed else StepState.SUCCEEDED
            if step is items[-1]:
                (view,) = await workflows.dependents([items[0].id])
                assert view.waiting  # one item is left
            await self.end(store, compiled, step.name, state)
        (view,) = await workflows.dependents([items[-1].id])
        assert not view.waiting
        assert not view.skipping
        release = StepRelease(done.id, done.workflow_id, done.generation, new_record_id())
        assert await workflows.release_steps([release], now=T0) == [release]
        record = await self.record(store, release.record_id)
        assert record.workflow is not None
        summary = record.workflow["batch"]
        assert (summary["total"], summary["succeeded"], summary["failed"]) == (70, 67, 3)
        assert sorted(summary["failedSteps"]) == sorted(step.id for step in failed)

    async def test_a_skip_is_written_once_and_marks_the_step_pending(
        self, store: AsyncJobStore
    ) -> None:
        compiled = await self.started(store, _diamond()[0])
        workflows = self.workflows(store)
        parse = await self.step(store, compiled.workflow.id, "parse")
        skip = StepSkip(parse.id, parse.workflow_id, parse.generation)
        results = await _at_once([lambda: workflows.skip_steps([skip], now=T0)] * 6)
        assert sum(len(result) for result in results) == 1
        skipped = await self.step(store, compiled.workflow.id, "parse")
        assert (skipped.state, skipped.gate, skipped.pending) == (
            StepState.SKIPPED,
            Gate.SKIP,
            True,
        )
        release = StepRelease(parse.id, parse.workflow_id, parse.generation, new_record_id())
        assert await workflows.release_steps([release], now=T0) == []

    # -- the workflow's end -----------------------------------------------------------------

    async def test_a_failed_workflow_skips_its_blocked_steps_once(
        self, store: AsyncJobStore
    ) -> None:
        compiled = await self.started(store, _diamond()[0])
        workflows = self.workflows(store)
        results = await _at_once(
            [lambda: workflows.fail_workflow(compiled.workflow.id, now=T0)] * 6
        )
        assert results.count(True) == 1
        view = await workflows.get_workflow(compiled.workflow.id)
        assert view is not None
        assert view.state is WorkflowState.FAILED
        assert view.workflow.ended_at is not None
        assert [step.state for step in view.steps] == [
            StepState.RELEASED,  # already released: it runs to its end
            StepState.SKIPPED,
            StepState.SKIPPED,
            StepState.SKIPPED,
        ]
        assert await workflows.finish_workflows([compiled.workflow.id], now=T0) == []

    async def test_a_workflow_finishes_once_when_nothing_is_left_to_run(
        self, store: AsyncJobStore
    ) -> None:
        wf = Workflow("pair")
        first = wf.add(_wf_step, name="first", on_failure="skip")
        wf.add(_wf_step, name="second", after=[first])
        compiled = await self.started(store, wf)
        workflows = self.workflows(store)
        assert await workflows.finish_workflows([compiled.workflow.id], now=T0) == []
        await self.end(store, compiled, "first", StepState.FAILED)
        second = await self.step(store, compiled.workflow.id, "second")
        (view,) = await workflows.dependents([compiled.steps[0].id])
        assert view.skipping
        await workflows.skip_steps([StepSkip(second.id, second.workflow_id, 0)], now=T0)
        results = await _at_once(
            [lambda: workflows.finish_workflows([compiled.workflow.id], now=T0)] * 6
        )
        assert [end for ends in results for end in ends] == [
            FinishedWorkflow(compiled.workflow.id, WorkflowState.COMPLETED)
        ]
        listed = await workflows.find_workflows(state=WorkflowState.COMPLETED)
        assert [summary.workflow.id for summary in listed] == [compiled.workflow.id]
        assert listed[0].counts[StepState.FAILED] == 1
        assert listed[0].counts[StepState.SKIPPED] == 1

    async def test_a_step_failed_under_fail_ends_its_workflow_failed_even_unmarked(
        self, store: AsyncJobStore
    ) -> None:
        # A crash between a step's failed end and its fail_workflow, then the end of a step
        # nothing depends on: the workflow must end failed, not completed.
        wf = Workflow("two leaves")
        wf.add(_wf_step, name="strict")
        wf.add(_wf_step, name="other")
        compiled = await self.started(store, wf)
        workflows = self.workflows(store)
        await self.end(store, compiled, "strict", StepState.FAILED)
        await self.end(store, compiled, "other", StepState.SUCCEEDED)
        (finished,) = await workflows.finish_workflows([compiled.workflow.id], now=T0)
        assert finished.state is WorkflowState.FAILED
        assert not await workflows.fail_workflow(compiled.workflow.id, now=T0)

    async def test_workflows_finish_together_each_as_its_steps_say(
        self, store: AsyncJobStore
    ) -> None:
        # One call for the ends of a busy fleet: each workflow decided on its own steps.
        workflows = self.workflows(store)
        started = {}
        for name in ("done", "failing", "live", "cancelled"):
            wf = Workflow(name)
            wf.add(_wf_step, name="a")
            wf.add(_wf_step, name="b")
            started[name] = await self.started(store, wf)
        for name in ("done", "failing", "live"):
            await self.end(store, started[name], "a", StepState.SUCCEEDED)
        await self.end(store, started["done"], "b", StepState.SUCCEEDED)
        await self.end(store, started["failing"], "b", StepState.FAILED)
        assert await workflows.cancel_workflow(started["cancelled"].workflow.id, now=T0)
        ids = [compiled.workflow.id for compiled in started.values()]
        finished = await workflows.finish_workflows([*ids, ids[0], "no such workflow"], now=T0)
        assert sorted(finished, key=lambda end: ids.index(end.workflow_id)) == [
            FinishedWorkflow(ids[0], WorkflowState.SUCCEEDED),
            FinishedWorkflow(ids[1], WorkflowState.FAILED),
        ]
        assert await workflows.finish_workflows(ids, now=T0) == []
        live = await workflows.get_workflow(ids[2])
        assert live is not None
        assert live.state is WorkflowState.RUNNING

    async def test_workflows_are_listed_newest_first(self, store: AsyncJobStore) -> None:
        ids = []
        for n in range(3):
            wf = Workflow(f"w{n}")
            wf.add(_wf_step)
            compiled = _compiled(wf)
            moved = dataclasses.replace(compiled.workflow, created_at=T0 + n * timedelta(seconds=1))
            await self.workflows(store).insert_workflows(
                [dataclasses.replace(compiled, workflow=moved)]
            )
            ids.append(compiled.workflow.id)
        listed = await self.workflows(store).find_workflows(limit=2)
        assert [summary.workflow.id for summary in listed] == [ids[2], ids[1]]
        assert listed[0].counts[StepState.RELEASED] == 1
        skipped = await self.workflows(store).find_workflows(skip=2)
        assert [summary.workflow.id for summary in skipped] == [ids[0]]
        assert await self.workflows(store).find_workflows(state=WorkflowState.FAILED) == []

    # -- operators --------------------------------------------------------------------------

    async def test_a_cancel_stops_every_release_and_is_done_once(
        self, store: AsyncJobStore
    ) -> None:
        compiled = await self.started(store, _diamond()[0])
        workflows = self.workflows(store)
        results = await _at_once(
            [lambda: workflows.cancel_workflow(compiled.workflow.id, now=T0)] * 6
        )
        assert results.count(True) == 1
        view = await workflows.get_workflow(compiled.workflow.id)
        assert view is not None
        assert view.state is WorkflowState.CANCELLED
        assert [step.state for step in view.steps][1:] == [StepState.CANCELLED] * 3
        parse = view.step("parse")
        release = StepRelease(parse.id, parse.workflow_id, parse.generation, new_record_id())
        assert await workflows.release_steps([release], now=T0) == []
        assert await workflows.fail_workflow(compiled.workflow.id, now=T0) is False

    async def test_a_retry_runs_failed_skipped_and_cancelled_steps_again(
        self, store: AsyncJobStore
    ) -> None:
        wf = Workflow("retry")
        first = wf.add(_wf_step, name="first")
        wf.add(_wf_step, name="second", after=[first])
        wf.add(_wf_step, name="ok")
        compiled = await self.started(store, wf)
        workflows = self.workflows(store)
        assert await workflows.retry_workflow(compiled.workflow.id, now=T0) is None  # running
        first_step = await self.step(store, compiled.workflow.id, "first")
        claimed = await self.claim(store, "wf_step", now=T0 + timedelta(days=400))
        while claimed.job_id != first_step.record_id:  # the failed record stays terminal
            claimed = await self.claim(store, "wf_step", now=T0 + timedelta(days=400))
        assert await settle_one(store, claimed.job_id, claimed.lock_id, terminal(T0))
        await self.end(store, compiled, "first", StepState.FAILED)
        await self.end(store, compiled, "ok")
        assert await workflows.fail_workflow(compiled.workflow.id, now=T0)
        reset = await workflows.retry_workflow(compiled.workflow.id, now=T0)
        assert reset is not None
        ids = {step.name: step.id for step in compiled.steps}
        assert sorted(reset) == sorted([ids["first"], ids["second"]])
        view = await workflows.get_workflow(compiled.workflow.id)
        assert view is not None
        assert view.state is WorkflowState.RUNNING
        assert view.workflow.generation == 1
        again = view.step("first")
        assert (again.state, again.gate, again.generation, again.record_id) == (
            StepState.BLOCKED,
            Gate.WAIT,
            1,
            None,
        )
        assert view.step("ok").state is StepState.SUCCEEDED
        assert await store.get_record(first_step.record_id) is None  # its failed record is gone
        assert await workflows.retry_workflow(compiled.workflow.id, now=T0) is None

    # -- feeds ------------------------------------------------------------------------------

    async def test_the_step_rows_feed_reports_rows_of_steps(self, store: AsyncJobStore) -> None:
        compiled = await self.started(store, _diamond()[0])
        workflows = self.workflows(store)
        record_id = compiled.records[0].id
        ours = dataclasses.replace(
            _row(record_id, HistoryStatus.SUCCESS), workflow_id=compiled.workflow.id
        )
        seen = await self.collect_feed(
            workflows.watch_step_rows(),
            lambda: store.write_history_many([ours]),
            until=lambda rows: any(row.execution_id == ours.execution_id for row in rows),
        )
        assert any(row.job_id == record_id for row in seen)

    async def test_the_step_rows_feed_leaves_out_the_rows_of_one_instance(
        self, store: AsyncJobStore
    ) -> None:
        # A worker's release has its own rows from its settle path: its feed need not bring them.
        compiled = await self.started(store, _diamond()[0])
        workflows = self.workflows(store)
        record_id = compiled.records[0].id

        def row(owner: Owner | None) -> HistoryRecord:
            step_row = _row(record_id, HistoryStatus.ERROR)
            return dataclasses.replace(step_row, workflow_id=compiled.workflow.id, owner=owner)

        mine = row(Owner("here", 1, "this-instance"))
        others = [row(Owner("there", 2, "another-instance")), row(None)]
        seen = await self.collect_feed(
            workflows.watch_step_rows(except_instance="this-instance"),
            lambda: store.write_history_many([mine, *others]),
            until=lambda rows: {r.execution_id for r in rows} >= {r.execution_id for r in others},
        )
        assert mine.execution_id not in {r.execution_id for r in seen}

    async def test_the_workflows_feed_reports_a_workflow_that_changed(
        self, store: AsyncJobStore
    ) -> None:
        compiled = await self.started(store, _diamond()[0])
        workflows = self.workflows(store)
        seen = await self.collect_feed(
            workflows.watch_workflows([compiled.workflow.id]),
            lambda: workflows.cancel_workflow(compiled.workflow.id, now=T0),
            until=lambda ids: compiled.workflow.id in ids,
        )
        assert compiled.workflow.id in seen

    async def collect_feed(self, feed: Any, write: Any, *, until: Any) -> list[Any]:
        """Open ``feed``, ``write``, and read batches until ``until(everything)`` (a safety
        timeout fails the test)."""
        seen: list[Any] = []
        try:
            with anyio.fail_after(30):
                await anext(feed)
                await write()
                while not until(seen):
                    seen.extend(await anext(feed))
        finally:
            await feed.aclose()
        return seen
