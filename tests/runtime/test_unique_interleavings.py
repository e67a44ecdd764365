"""Unique scheduling under every interleaving hypothesis picks: several clients schedule one key
at once (skip, states, a window, replace, debounce, throttle), while a worker may claim the
record and end it (writing the key's window first, as an execution does), all on one in-memory
store whose every call waits at a gate until the test lets exactly one through.

So each store call of each actor is one atomic step, and hypothesis chooses which actor takes
the next step: the same granularity MongoDB gives (one single-document operation per call).
Checked at the end of each history:

* every call got one outcome, and each names a record that existed;
* the ``Scheduled`` outcomes are exactly the records that became visible (published);
* without a worker, exactly one record exists for the key, and exactly one call scheduled it;
  replace and debounce leave it with the params of one of the calls;
* with a window, no record inserted after the worker wrote the key's hold becomes visible (the
  clock does not move, so the window lasts the whole history), and no parked record is left
  behind. A record parked *before* the hold was written (a replace queued behind the running
  holder) may be published just after it: its call had taken the key and looked at the hold
  before the window opened, so the call is ordered before the window, exactly as if its publish
  had landed first (the record runs behind the holder either way);
* a throttle schedules exactly one record in its period.

Each property fails without the mechanism it checks (for example: publishing without the
second look at the hold lets a record through after an end, which the window check catches).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dogs_core import Jobs
from dogs_core.domain.outcome import Delete
from dogs_core.domain.records import (
    ClaimRequest,
    Debounced,
    Duplicate,
    HistoryStatus,
    Replaced,
    Scheduled,
    ScheduleOutcome,
)
from dogs_core.domain.settle import Settlement
from dogs_core.domain.uniqueness import PARKED_AT, Unique
from dogs_core.runtime import DogsClient
from dogs_testing import InMemoryJobStore, JobStoreWrapper, ManualClock

T = TypeVar("T")
T0 = datetime(2030, 1, 1, tzinfo=UTC)
KEY = "cust:42"
PERIOD = timedelta(minutes=10)

jobs = Jobs()


@jobs.event
async def sync_customer(params: dict[str, Any], ctx: object) -> None: ...


MODES: dict[str, Unique] = {
    "skip": Unique(KEY),
    "pending-only": Unique(KEY, states="pending"),
    "window": Unique(KEY, period=PERIOD),
    "replace": Unique(KEY, on_conflict="replace"),
    "replace-window": Unique(KEY, on_conflict="replace", period=PERIOD),
    "debounce": Unique(KEY, on_conflict="debounce", delay="30s", max_wait="5m"),
    "throttle": Unique(KEY, on_conflict="throttle", period=PERIOD),
}


@dataclass
class Gate(JobStoreWrapper):
    """Every store call waits here until the test's controller lets it through; the calls
    that went through are logged with their arguments and results, in order."""

    inner: Any
    waiting: list[anyio.Event] = field(default_factory=list)
    log: list[tuple[str, tuple[Any, ...], Any]] = field(default_factory=list)
    changed: anyio.Event = field(default_factory=anyio.Event)

    async def _forward(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        turn = anyio.Event()
        self.waiting.append(turn)
        self.poke()
        await turn.wait()
        result = await getattr(self.inner, method)(*args, **kwargs)
        self.log.append((method, args, result))
        return result

    def poke(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()


@dataclass
class History:
    outcomes: dict[int, ScheduleOutcome] = field(default_factory=dict)
    ended: list[str] = field(default_factory=list)


async def _scenario(
    data: st.DataObject, mode: str, callers: int, worker: bool, running: bool = False
) -> None:
    """``running``: the key is held, before the calls start, by a record a worker has already
    claimed, which the worker ends while they run (so the key's window opens in the middle)."""
    memory = InMemoryJobStore()
    gate = Gate(memory)
    clock = ManualClock(T0)
    unique = MODES[mode]
    history = History()
    live = callers + (1 if worker or running else 0)
    held = None
    if running:
        client = DogsClient(memory, jobs, clock=clock, clock_sync_interval=None)
        first = await client.schedule(sync_customer, {"n": -1}, unique=unique)
        assert isinstance(first, Scheduled)
        held = await memory.claim(_request(0))
        assert held is not None
        assert held.job_id == first.id

    async def call(number: int) -> None:
        nonlocal live
        try:
            client = DogsClient(gate, jobs, clock=clock, clock_sync_interval=None)
            history.outcomes[number] = await client.schedule(
                sync_customer, {"n": number}, unique=unique
            )
        finally:
            live -= 1
            gate.poke()

    async def work() -> None:
        """Claim and end the key's records as an execution does: the window's hold first."""
        nonlocal live
        try:
            for attempt in range(2):
                request = _request(attempt + 1)
                claimed = held if running and attempt == 0 else await gate.claim(request)
                if claimed is None:
                    continue
                if unique.window is not None and claimed.unique_identifier is not None:
                    until = request.now + unique.window
                    await gate.extend_unique_hold(KEY, claimed.job_id, until=until)
                ended = Delete(HistoryStatus.SUCCESS)
                await gate.settle_many([Settlement(claimed.job_id, claimed.lock_id, ended)])
                history.ended.append(claimed.job_id)
        finally:
            live -= 1
            gate.poke()

    async with anyio.create_task_group() as group:
        for number in range(callers):
            group.start_soon(call, number)
        if worker or running:
            group.start_soon(work)
        while live:
            while live and len(gate.waiting) < live:
                await gate.changed.wait()
            if not gate.waiting:
                break
            index = data.draw(st.integers(0, len(gate.waiting) - 1))
            gate.waiting.pop(index).set()
            await anyio.lowlevel.checkpoint()
    await _check(memory, gate, history, mode, unique, callers, worker or running)


async def _check(
    memory: InMemoryJobStore, gate: Gate, history: History, mode: str, unique: Unique,
    callers: int, worker: bool,
) -> None:  # fmt: skip
    records = await memory.all_records("sync_customer")
    assert len(history.outcomes) == callers
    visible = _published(gate)
    scheduled = {o.id for o in history.outcomes.values() if isinstance(o, Scheduled)}
    assert scheduled == visible
    existed = visible | {r.id for r in records} | set(history.ended)
    for outcome in history.outcomes.values():
        named = outcome.existing_id if isinstance(outcome, Duplicate) else outcome.id
        assert named in existed
    assert not any(r.next_run_at == PARKED_AT or r.parked_at for r in records)
    if mode == "throttle":
        assert len(scheduled) == 1
        return
    if not worker:
        assert len(records) == 1
        assert len(scheduled) == 1
        if unique.on_conflict in ("replace", "debounce"):
            assert records[0].params in [{"n": n} for n in range(callers)]
            kinds = {type(o) for o in history.outcomes.values()} - {Scheduled}
            assert kinds <= {Replaced, Debounced, Duplicate}
    if unique.window is not None:
        first_hold = next(
            (i for i, (m, _, _) in enumerate(gate.log) if m == "extend_unique_hold"), None
        )
        if first_hold is not None:
            parked = _parked_inserts(gate)
            late = [
                job_id
                for i, job_id in _publish_steps(gate)
                if i > first_hold and parked.get(job_id, i) > first_hold
            ]
            assert not late, f"inserted after the window opened, then published: {gate.log}"


def _request(attempt: int) -> ClaimRequest:
    return ClaimRequest(
        ("sync_customer",), 0, "byJobName", T0 + timedelta(hours=1), T0 + timedelta(hours=2),
        f"lock-{attempt}",
    )  # fmt: skip


def _publish_steps(gate: Gate) -> list[tuple[int, str]]:
    """The steps that made a record visible, with its id: an insert that scheduled a record
    that was not parked, or a publish of a parked one."""
    steps = []
    for index, (method, args, result) in enumerate(gate.log):
        if method == "insert_job" and isinstance(result, Scheduled) and args[0].parked_at is None:
            steps.append((index, result.id))
        if method == "publish_parked" and result is True:
            steps.append((index, args[0]))
    return steps


def _parked_inserts(gate: Gate) -> dict[str, int]:
    """The step at which each parked record was inserted, by id."""
    return {
        result.id: index
        for index, (method, args, result) in enumerate(gate.log)
        if method == "insert_job" and isinstance(result, Scheduled) and args[0].parked_at
    }


def _published(gate: Gate) -> set[str]:
    return {job_id for _, job_id in _publish_steps(gate)}


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.data(),
    st.sampled_from(sorted(MODES)),
    st.integers(2, 4),
    st.booleans(),
)
def test_unique_schedules_are_exact_in_every_interleaving(
    data: st.DataObject, mode: str, callers: int, worker: bool
) -> None:
    anyio.run(
        _scenario, data, mode, callers, worker,
        backend="trio", backend_options={"clock": trio.testing.MockClock(autojump_threshold=0)},
    )  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(["window", "replace-window", "skip"]), st.integers(2, 3))
def test_no_outcome_names_a_parked_record_of_a_call_that_drops_it(
    data: st.DataObject, mode: str, callers: int
) -> None:
    """The key's running record ends while the calls run: one call may then park its record
    and drop it again on its second look (the window opened), and a concurrent call that
    found that parked record holding the key must not report it as the ``Duplicate``: it waits
    for the parked record's call, then reports what holds the key (the ended record, through
    its window). Fails when a parked holder is skipped at first sight."""
    anyio.run(
        _scenario, data, mode, callers, False, True,
        backend="trio", backend_options={"clock": trio.testing.MockClock(autojump_threshold=0)},
    )  # fmt: skip
