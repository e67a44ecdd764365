"""Generated histories of workflows on the in-memory store, with the release crashing at every
point: workers run the released jobs (each succeeds or fails for good, in an order the step
priorities and the interleaving choose), and the release (the real
:class:`~dogs_core.runtime.worker.releaser.WorkflowReleaser`: a feed batch of rows, a sweep, a batch
seen again) is cut after any number of its store calls (the n-th call and every later one
raise, as if the process died there; a crashed releaser's feed batch is lost, as a change
stream's notification would be).

Checked after every step:

* **Safety.** A step that was released (released, or ended by its own run) has every
  dependency passing; a record of a step exists only while its step is released, and it is the
  step's current record; no step ever gets two records (released exactly once).
* **Invisible while blocked.** No blocked step has a record.

And at the end, after sweeps without crashes (the safety net): every step has ended, every
workflow has its end state, and the states are a fixpoint of the whole-workflow plan (nothing
left to release or skip).

Every id of a history (workflows, steps, records, locks) comes from a counter, not from the
clock: the order of ids decides the order of sweeps' pages, and a failure found once must
replay from hypothesis' database and shrink.
"""

from __future__ import annotations

import itertools
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from dogs_core.domain.outcome import Delete, MarkTerminal
from dogs_core.domain.records import ClaimRequest, HistoryRecord, HistoryStatus, JobRecord
from dogs_core.domain.settle import Settlement
from dogs_core.domain.workflow_records import (
    Gate,
    StepState,
    WorkflowState,
)
from dogs_core.domain.workflow_release import StepNode, has_ended, plan
from dogs_core.domain.workflow_start import compile_workflow
from dogs_core.domain.workflows import FailurePolicy, Workflow
from dogs_core.jobs import Jobs
from dogs_core.runtime.plumbing._async import advance
from dogs_core.runtime.plumbing.forwarding import ForwardingJobStore
from dogs_core.runtime.worker.releaser import WorkflowReleaser
from dogs_testing.memory import InMemoryJobStore

T0 = datetime(2030, 1, 1, tzinfo=UTC)
_T0_MS = int(T0.timestamp() * 1000)
_DRAWN_RECORD_IDS = vars(advance)["new_record_id"]

jobs = Jobs()


@jobs.event
async def step(params: Any, ctx: Any) -> None: ...


def _note(text: str) -> None:
    """A line of hypothesis' statistics (``--hypothesis-show-statistics``)."""
    if currently_in_test_context():
        event(text)


@pytest.fixture(autouse=True)
def _real_ids_after_each_test() -> Iterator[None]:
    yield
    vars(advance)["new_record_id"] = _DRAWN_RECORD_IDS


def _counted_ids() -> Any:
    """UUIDv7-shaped ids (T0's milliseconds, then a counter): the same in every replay."""
    counter = itertools.count(1)

    def new_id() -> str:
        return str(uuid.UUID(int=(_T0_MS << 80) | (0x7 << 76) | (0b10 << 62) | next(counter)))

    return new_id


class Crash(Exception):
    """The releaser's process died before this store call."""


class Crashing(ForwardingJobStore):
    """The store as a releaser sees it: its ``crash_at``-th call and every later one raise."""

    def __init__(self, store: InMemoryJobStore, crash_at: int | None) -> None:
        self.store = store
        self.crash_at = crash_at
        self.calls = 0

    @property
    def _wrapped(self) -> object:
        return self.store

    async def _forward(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.crash_at is not None and self.calls >= self.crash_at:
            raise Crash(method)
        return await getattr(self.store, method)(*args, **kwargs)

    def _forward_feed(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


class Clock:
    def __init__(self) -> None:
        self.at = T0

    def now(self) -> datetime:
        return self.at


@st.composite
def workflows(draw: st.DrawFn) -> Workflow:
    size = draw(st.integers(1, 7))
    wf = Workflow()
    names: list[str] = []
    for index in range(size):
        after = draw(st.lists(st.sampled_from(names), unique=True, max_size=3)) if names else []
        policy = draw(st.sampled_from(list(FailurePolicy)))
        priority = draw(st.integers(0, 3))
        names.append(
            wf.add(step, {"n": index}, after=after, on_failure=policy, priority=priority).name
        )
    return wf


crash_points = st.none() | st.integers(1, 10)


class WorkflowCrashes(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = Clock()
        self.store = InMemoryJobStore()
        self.sync = self.store.sync
        self.unseen: list[HistoryRecord] = []
        self.written: list[HistoryRecord] = []
        self.records_of: dict[str, set[str]] = {}  # step id -> record ids ever seen
        self.workflow_ids: list[str] = []
        self.crashes = 0
        self.new_id = _counted_ids()
        vars(advance)["new_record_id"] = self.new_id  # the release draws one per release

    def releaser(self, crash_at: int | None) -> WorkflowReleaser:
        store = Crashing(self.store, crash_at)
        return WorkflowReleaser(store, clock=self.clock, sweep_page=3)

    def release(self, crash_at: int | None, work: Any) -> None:
        async def run() -> None:
            try:
                await work(self.releaser(crash_at))
            except Crash as crash:
                self.crashes += 1
                _note(f"crashed before {crash}")

        anyio.run(run)

    @initialize(started=st.lists(workflows(), min_size=1, max_size=3))
    def start(self, started: list[Workflow]) -> None:
        for workflow in started:
            compiled = compile_workflow(
                workflow,
                resolve=lambda job: step,
                new_id=self.new_id,
                partition=lambda: 0,
                now=T0,
            )
            self.sync.insert_workflows([compiled])
            self.workflow_ids.append(compiled.workflow.id)

    @rule(succeeds=st.booleans())
    def run_a_job(self, succeeds: bool) -> None:
        self.clock.at += timedelta(seconds=1)
        request = ClaimRequest(
            job_names=("step",),
            partition=0,
            hint="byJobName",
            now=self.clock.at,
            locked_until=self.clock.at + timedelta(minutes=1),
            lock_id=self.new_id(),
        )
        claimed = self.sync.claim(request)
        if claimed is None:
            return
        status = HistoryStatus.SUCCESS if succeeds else HistoryStatus.ERROR
        assert claimed.workflow is not None
        row = HistoryRecord(
            execution_id=claimed.execution_id,
            job_id=claimed.job_id,
            job_name="step",
            type=claimed.type,
            priority=claimed.priority,
            tries=claimed.tries,
            started_at=self.clock.at,
            ended_at=self.clock.at,
            status=status,
            expires_at=self.clock.at + timedelta(days=7),
            result={"ran": claimed.job_id} if succeeds else None,
            error_message=None if succeeds else "failed for good",
            workflow_id=str(claimed.workflow["id"]),
        )
        command = (
            Delete(HistoryStatus.SUCCESS)
            if succeeds
            else MarkTerminal(self.clock.at, expires_at=None, history=HistoryStatus.ERROR)
        )
        (applied,) = self.sync.settle_many(
            [Settlement(claimed.job_id, claimed.lock_id, command, row)]
        )
        assert applied
        self.unseen.append(row)
        self.written.append(row)

    @rule(crash_at=crash_points, take=st.integers(1, 4))
    def release_a_feed_batch(self, crash_at: int | None, take: int) -> None:
        rows, self.unseen = self.unseen[:take], self.unseen[take:]
        if rows:
            self.release(crash_at, lambda releaser: releaser.rows(rows))

    @rule(crash_at=crash_points, pick=st.integers(0, 1000))
    def see_a_row_again(self, crash_at: int | None, pick: int) -> None:
        if self.written:
            row = self.written[pick % len(self.written)]
            self.release(crash_at, lambda releaser: releaser.rows([row]))

    @rule(crash_at=crash_points)
    def sweep(self, crash_at: int | None) -> None:
        self.release(crash_at, lambda releaser: releaser.sweep())

    # -- what must hold after every step -------------------------------------------------------

    def views(self) -> list[Any]:
        return [self.sync.get_workflow(workflow_id) for workflow_id in self.workflow_ids]

    @invariant()
    def released_only_when_allowed_and_once(self) -> None:
        records: dict[str, JobRecord] = {r.id: r for r in self.sync.all_records()}
        steps = {s.id: s for view in self.views() for s in view.steps}
        for record in records.values():
            assert record.workflow is not None
            owner = steps[record.workflow["step"]]
            self.records_of.setdefault(owner.id, set()).add(record.id)
            assert owner.state is not StepState.BLOCKED, "a blocked step has a record"
            assert owner.record_id == record.id
        for row in self.written:
            marker_step = next((s for s in steps.values() if s.record_id == row.job_id), None)
            if marker_step is not None:
                self.records_of.setdefault(marker_step.id, set()).add(row.job_id)
        for step_id, seen in self.records_of.items():
            assert len(seen) == 1, f"step {step_id} was released {len(seen)} times"
        for s in steps.values():
            if s.record_id is None:
                assert s.state in (StepState.BLOCKED, StepState.SKIPPED, StepState.CANCELLED)
                continue
            for parent in s.after:
                assert steps[parent].gate is Gate.PASS, (s.name, steps[parent])

    def teardown(self) -> None:
        """The safety net alone, without crashes, finishes every workflow."""
        try:
            self._finish_with_sweeps()
        finally:
            vars(advance)["new_record_id"] = _DRAWN_RECORD_IDS

    def _finish_with_sweeps(self) -> None:
        for _ in range(200):
            self.run_a_job(succeeds=True)
            self.unseen.clear()  # lost: only sweeps from here on
            self.sweep(None)
            if all(view.state is not WorkflowState.RUNNING for view in self.views()) and not any(
                s.state is StepState.RELEASED for view in self.views() for s in view.steps
            ):
                break
        for view in self.views():
            assert view.state is not WorkflowState.RUNNING, view
            nodes = {s.id: StepNode(s.after, s.policy) for s in view.steps}
            states = {s.id: s.state for s in view.steps}
            assert all(has_ended(state) for state in states.values()), states
            final = plan(nodes, states, WorkflowState.RUNNING)
            assert final.release == final.skip == frozenset()
            assert final.end is view.state or (final.fail and view.state is WorkflowState.FAILED)
        self.released_only_when_allowed_and_once()
        _note(f"workflows ended: {sorted(view.state.value for view in self.views())}")
        counts = Counter(row.job_id for row in self.written)
        assert max(counts.values(), default=1) == 1  # each record ran once


TestWorkflowCrashes = WorkflowCrashes.TestCase
TestWorkflowCrashes.settings = settings(
    max_examples=150,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_a_crash_midway_is_finished_by_the_next_sweep() -> None:
    """A deterministic history: the release of a diamond's first end cut after each of its
    store calls in turn, each time finished by one sweep."""
    for crash_at in range(1, 12):
        machine = WorkflowCrashes()
        wf = Workflow()
        root = wf.add(step, name="root")
        left = wf.add(step, name="left", after=[root])
        right = wf.add(step, name="right", after=[root], on_failure="skip")
        wf.add(step, name="join", after=[left, right])
        machine.start([wf])
        machine.run_a_job(succeeds=True)
        machine.release_a_feed_batch(crash_at, take=1)
        machine.sweep(None)
        view = machine.views()[0]
        states = {s.name: s.state for s in view.steps}
        assert states["left"] is StepState.RELEASED, (crash_at, states)
        assert states["right"] is StepState.RELEASED, (crash_at, states)
        assert not any(s.pending for s in view.steps)
        machine.released_only_when_allowed_and_once()
