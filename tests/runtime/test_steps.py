"""Durable steps (issue 37, item 1) on the in-memory store with virtual time: a recorded step is
never run again (a retry, a crash's takeover), steps replay by order and name, results are
recorded as stored, bad input records nothing, and a recurrent job's next run starts afresh."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import anyio
import pytest

from dogs_core.domain.records import HistoryStatus, JobState
from dogs_core.domain.schedules import RetryPolicy
from dogs_core.domain.steps import MAX_STEP_RESULT_BYTES
from dogs_core.errors import (
    LockLostError,
    MissingRoleError,
    NondeterminismError,
    StepError,
    StoreError,
)
from dogs_core.jobs import Jobs
from dogs_core.ports import Role
from dogs_core.runtime import JobContext
from tests.runtime.conftest import Harness, RecordingStore, assert_nothing_locked

pytestmark = pytest.mark.anyio

Params = dict[str, Any] | None
LOCK = 20
QUICK = RetryPolicy(base=timedelta(seconds=1), jitter=0)
SLOW = RetryPolicy(base=timedelta(seconds=100), jitter=0)


def _run_ids(outcome: object) -> str:
    return str(getattr(outcome, "id", ""))


async def _drain(h: Harness, seconds: float = 30) -> None:
    async with h.workers() as workers:
        await anyio.sleep(seconds)
        await workers.stop()


async def test_a_retry_replays_the_recorded_steps_and_runs_the_rest() -> None:
    jobs = Jobs()
    calls: list[str] = []

    async def charge(order: int) -> dict[str, Any]:
        calls.append("charge")
        return {"charge": f"ch_{order}", "amounts": (10, 20)}

    def reserve(order: int, *, sku: str) -> str:
        calls.append("reserve")
        return f"{sku}-{order}"

    @jobs.event(max_tries=3, retry=QUICK)
    async def order(params: Params, ctx: JobContext) -> str:
        paid = await ctx.step("charge", charge, 42)
        reserved = await ctx.step("reserve", reserve, 42, sku="A")
        if ctx.tries == 1:
            raise RuntimeError("the shipping API is down")
        calls.append("ship")
        assert paid == {"charge": "ch_42", "amounts": [10, 20]}, "as stored, on every run"
        return reserved

    h = Harness(jobs)
    job_id = _run_ids(await h.client.schedule(order))
    await _drain(h)
    assert calls == ["charge", "reserve", "ship"], "each step ran once across two runs"
    rows = h.store.job_history(job_id)
    assert [r.status for r in rows] == [HistoryStatus.ERROR, HistoryStatus.SUCCESS]
    assert rows[-1].result == "A-42"
    assert h.store.records() == [], "the event record (and its steps) went with its success"


async def test_the_steps_are_on_the_record_between_runs() -> None:
    jobs = Jobs()

    @jobs.event(max_tries=2, retry=SLOW)
    async def order(params: Params, ctx: JobContext) -> None:
        await ctx.step("one", lambda: 1)
        await ctx.step("two", lambda: {"b": [1, "x"]})
        raise RuntimeError("fails after two steps")

    h = Harness(jobs)
    job_id = _run_ids(await h.client.schedule(order))
    await _drain(h, 10)
    record = h.store.record(job_id)
    assert record is not None
    assert [(s.name, s.result) for s in record.steps] == [("one", 1), ("two", {"b": [1, "x"]})]
    assert {s.execution_id for s in record.steps} == {h.store.job_history(job_id)[0].execution_id}
    (row,) = h.store.job_history(job_id)
    assert row.status is HistoryStatus.ERROR


async def test_an_operators_retry_of_a_failed_job_resumes_after_its_steps() -> None:
    jobs = Jobs()
    calls: list[str] = []
    broken = [True]

    def charge() -> str:
        calls.append("charge")
        return "ch_1"

    @jobs.event(max_tries=1)
    async def order(params: Params, ctx: JobContext) -> str:
        paid = await ctx.step("charge", charge)
        if broken[0]:
            raise RuntimeError("the shipping API is down")
        calls.append("ship")
        return paid

    h = Harness(jobs)
    job_id = _run_ids(await h.client.schedule(order))
    await _drain(h, 10)
    failed = await h.client.get_job(job_id)
    assert failed is not None
    assert failed.state(h.clock.now()) is JobState.FAILED
    broken[0] = False
    await h.client.retry_now(job_id)
    await _drain(h, 10)
    assert calls == ["charge", "ship"], "the revived job replayed the charge"
    assert h.store.job_history(job_id)[-1].result == "ch_1"


async def test_a_worker_killed_after_a_step_is_taken_over_without_running_it_again() -> None:
    jobs = Jobs()
    calls: list[str] = []
    recorded = anyio.Event()
    first_run = [True]

    async def send_email() -> str:
        calls.append("email")
        return "sent"

    @jobs.event(lock_time=LOCK)
    async def welcome(params: Params, ctx: JobContext) -> str:
        sent = await ctx.step("email", send_email)
        if first_run[0]:
            first_run[0] = False
            recorded.set()
            await anyio.sleep(3600)  # the first worker dies here
        return sent

    store = RecordingStore()
    h = Harness(jobs, store=store)
    job_id = _run_ids(await h.client.schedule(welcome))
    with anyio.CancelScope() as crash:
        async with h.workers():
            await recorded.wait()
            store.hooks.release_error = StoreError("the process is gone")
            crash.cancel()
    store.hooks.release_error = None
    (left,) = store.records()
    assert left.lock_id is not None
    assert [s.name for s in left.steps] == ["email"]
    survivor = Harness(jobs, store=store, clock=h.clock, seed=1)
    await _drain(survivor, LOCK + 10)
    assert calls == ["email"], "the recorded step was not run again by the takeover"
    rows = store.job_history(job_id)
    assert [r.status for r in rows] == [HistoryStatus.STALE, HistoryStatus.SUCCESS]
    assert rows[-1].result == "sent"
    assert_nothing_locked(store)


async def test_a_run_that_calls_other_steps_fails_with_a_nondeterminism_error() -> None:
    jobs = Jobs()

    @jobs.event(max_tries=2, retry=QUICK)
    async def flow(params: Params, ctx: JobContext) -> None:
        first = "charge" if ctx.tries == 1 else "refund"
        await ctx.step(first, lambda: None)
        if ctx.tries == 1:
            raise RuntimeError("retry me")

    h = Harness(jobs)
    job_id = _run_ids(await h.client.schedule(flow))
    await _drain(h)
    rows = h.store.job_history(job_id)
    assert [r.status for r in rows] == [HistoryStatus.ERROR, HistoryStatus.ERROR]
    assert str(rows[-1].error_type).endswith(NondeterminismError.__name__)
    assert "'charge'" in str(rows[-1].error_message)
    assert "'refund'" in str(rows[-1].error_message)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("bad name", "valid name"),
        ("reused", "called twice"),
        ("unstorable", "cannot be recorded"),
        ("too large", f"at most {MAX_STEP_RESULT_BYTES}"),
        ("parallel", "one at a time"),
    ],
)
async def test_bad_steps_raise_a_step_error_and_record_nothing(body: str, problem: str) -> None:
    jobs = Jobs()
    caught: list[BaseException] = []

    async def slow() -> int:
        await anyio.sleep(1)
        return 1

    @jobs.event(max_tries=1)
    async def flow(params: Params, ctx: JobContext) -> None:
        try:
            if body == "bad name":
                await ctx.step("", lambda: 1)
            elif body == "reused":
                await ctx.step("a", lambda: 1)
                await ctx.step("a", lambda: 2)
            elif body == "unstorable":
                await ctx.step("a", lambda: {1, 2})
            elif body == "too large":
                await ctx.step("a", lambda: "x" * (MAX_STEP_RESULT_BYTES + 1))
            else:
                refused: list[StepError] = []
                async with anyio.create_task_group() as group:
                    group.start_soon(ctx.step, "a", slow)
                    await anyio.sleep(0.1)
                    try:
                        await ctx.step("b", slow)
                    except StepError as error:
                        refused.append(error)
                raise refused[0]
        except StepError as error:
            caught.append(error)
            raise

    h = Harness(jobs)
    job_id = _run_ids(await h.client.schedule(flow))
    await _drain(h, 10)
    assert len(caught) == 1, caught
    assert problem in str(caught[0])
    recorded = [s.name for s in (h.store.sync.get_record(job_id) or _gone()).steps]
    assert recorded == (["a"] if body in ("reused", "parallel") else [])


def _gone() -> Any:
    class Gone:
        steps = ()

    return Gone()


async def test_a_step_that_raises_is_not_recorded_and_its_error_names_it() -> None:
    jobs = Jobs()
    tries: list[int] = []

    async def flaky(attempt: int) -> str:
        tries.append(attempt)
        if attempt == 1:
            raise ConnectionError("card network timeout")
        return "ok"

    @jobs.event(max_tries=2, retry=QUICK)
    async def pay(params: Params, ctx: JobContext) -> str:
        return await ctx.step("charge", flaky, ctx.tries)

    h = Harness(jobs)
    job_id = _run_ids(await h.client.schedule(pay))
    await _drain(h)
    assert tries == [1, 2], "not recorded after it raised: called again on the retry"
    rows = h.store.job_history(job_id)
    assert [r.status for r in rows] == [HistoryStatus.ERROR, HistoryStatus.SUCCESS]
    assert str(rows[0].error_type).endswith("ConnectionError")
    assert "in step 'charge' of job 'pay'" in str(rows[0].error_traceback)


async def test_a_recurrent_run_starts_afresh() -> None:
    jobs = Jobs()
    calls: list[float] = []

    def export() -> int:
        calls.append(0)
        return len(calls)

    @jobs.recurrent(run_every=100)
    async def nightly(ctx: JobContext) -> None:
        await ctx.step("export", export)

    h = Harness(jobs)
    await _drain(h, 250)
    assert len(calls) == 3, "each run ran its step: the steps of an ended run are cleared"
    (record,) = h.store.records("nightly")
    assert record.steps == ()


async def test_a_step_whose_lock_moved_on_is_not_recorded_and_the_handler_is_told() -> None:
    jobs = Jobs()
    seen: list[BaseException] = []
    calls: list[int] = []

    @jobs.event(lock_time=LOCK, max_tries=1)
    async def job(params: Params, ctx: JobContext) -> None:
        # an operator (or another worker) takes the lock away while the handler runs
        h.store.sync.release_all_locks()
        try:
            await ctx.step("a", lambda: calls.append(1))
        except LockLostError as error:
            seen.append(error)
            raise

    h = Harness(jobs)
    job_id = _run_ids(await h.client.schedule(job))
    async with h.workers() as workers:
        await anyio.sleep(2)
        await workers.stop()
    assert len(seen) >= 1
    record = h.store.sync.get_record(job_id)
    assert record is None or record.steps == ()


async def test_a_store_without_the_steps_role_runs_no_step() -> None:
    jobs = Jobs()
    calls: list[int] = []
    caught: list[BaseException] = []

    @jobs.event(max_tries=1)
    async def job(params: Params, ctx: JobContext) -> None:
        try:
            await ctx.step("a", lambda: calls.append(1))
        except MissingRoleError as error:
            caught.append(error)
            raise

    class NoSteps(RecordingStore):
        @property
        def roles(self) -> frozenset[Role]:
            return frozenset(Role) - {Role.STEPS}

    h = Harness(jobs, store=NoSteps())
    await h.client.schedule(job)
    await _drain(h, 5)
    assert calls == []
    assert len(caught) == 1
    assert "steps" in str(caught[0])
