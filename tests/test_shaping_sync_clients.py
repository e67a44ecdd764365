"""Issue 27 on the blocking clients (the generated ``SyncDogsClient`` over a sync store, and
``BlockingDogsClient`` over an async one): unique options and ``client.schedules`` behave as on
the async client; and the pieces a worker builds a runtime schedule's run from."""

from __future__ import annotations

from typing import Any

import pytest

from dogs_core import (
    BlockingDogsClient,
    Debounced,
    Discard,
    Duplicate,
    EventJobDefinition,
    Jobs,
    Replaced,
    Scheduled,
    SyncDogsClient,
    Unique,
)
from dogs_core.domain.capacity import CapacityLedger
from dogs_core.domain.runtime_schedules import schedule_spec
from dogs_core.errors import UnknownJobError, WorkersStateError
from dogs_core.runtime.worker.schedule_book import schedule_definition
from dogs_testing import InMemoryJobStore
from dogs_testing.memory import SyncInMemoryJobStore

jobs = Jobs()
SEEN: list[Any] = []


@jobs.event
def notify(params: dict[str, Any], ctx: object) -> str:
    SEEN.append(params)
    return "done"


def on_error(error: BaseException, params: Any, ctx: object) -> Discard:
    SEEN.append(("error", params))
    return Discard()


@jobs.event(on_error=on_error)
async def report(params: dict[str, Any], ctx: object) -> None: ...


@pytest.mark.parametrize("blocking", [False, True])
def test_unique_options_and_schedules_on_blocking_clients(blocking: bool) -> None:
    client: SyncDogsClient = (
        BlockingDogsClient(InMemoryJobStore(), jobs)
        if blocking
        else SyncDogsClient(SyncInMemoryJobStore(), jobs)
    )
    debounce = Unique("k", on_conflict="debounce", delay="30s")
    assert isinstance(client.schedule(notify, {"n": 1}, unique=debounce), Scheduled)
    assert isinstance(client.schedule(notify, {"n": 2}, unique=debounce), Debounced)
    replace = Unique("r", on_conflict="replace")
    first = client.schedule(notify, {"n": 1}, unique=replace, run_in="1h")
    assert isinstance(first, Scheduled)
    assert client.schedule(notify, {"n": 2}, unique=replace) == Replaced(first.id, "r")
    throttle = Unique("t", on_conflict="throttle", period="1m")
    assert isinstance(client.schedule(notify, {}, unique=throttle), Scheduled)
    dropped = client.schedule(notify, {}, unique=throttle)
    assert isinstance(dropped, Duplicate)
    assert dropped.reason == "throttle"
    assert len(client.find_jobs(tags="x").jobs) == 0
    client.schedule(notify, {}, tags=["x"])
    assert len(client.find_jobs(tags=["x"]).jobs) == 1
    upserted = client.schedules.upsert("nightly", notify, every="1h", params={"n": 9})
    assert upserted.change == "created"
    assert client.schedules.pause("nightly").paused
    assert [s.id for s in client.schedules.list()] == ["nightly"]
    assert client.schedules.delete("nightly")
    if isinstance(client, BlockingDogsClient):
        client.close()


class _Context:
    def __init__(self, params: Any) -> None:
        self.params = params


def test_a_schedule_runs_as_a_recurrent_job_of_its_event_job() -> None:
    spec = schedule_spec("notify", every="1h", misfire="skip")
    event = jobs.get("notify")
    assert isinstance(event, EventJobDefinition)
    definition = schedule_definition("nightly", spec, event, priority=0)
    assert (definition.name, definition.priority, definition.misfire.mode) == (
        "nightly",
        1000,
        "skip",
    )
    assert not definition.is_async  # a def handler stays one (it runs in a worker thread)
    SEEN.clear()
    assert definition.handler(_Context({"n": 3})) == "done"
    assert SEEN == [{"n": 3}]
    unknown = schedule_definition("orphan", schedule_spec("gone", every="1h"), None, 5)
    with pytest.raises(UnknownJobError):
        unknown.handler(_Context(None))


def test_callbacks_get_the_schedule_params() -> None:
    event = jobs.get("report")
    assert isinstance(event, EventJobDefinition)
    definition = schedule_definition("weekly", schedule_spec("report", every="1h"), event, 100)
    assert definition.is_async
    assert definition.on_error is not None
    SEEN.clear()
    assert definition.on_error(ValueError(), None, _Context({"week": 2})) == Discard()
    assert SEEN == [("error", {"week": 2})]


def test_the_ledger_offers_dynamic_names_uncapped() -> None:
    ledger = CapacityLedger(2, {"a": 1})
    assert ledger.set_dynamic(["s1", "a"])  # a configured name is ignored
    assert ledger.dynamic == ("s1",)
    assert not ledger.set_dynamic(["s1"])
    assert ledger.claimable().names == ("a", "s1")
    reservation = ledger.reserve()
    assert reservation is not None
    ledger.settle(reservation, "s1")
    ledger.set_dynamic([])  # no longer due: not offered, its execution still counted
    assert ledger.claimable().names == ("a",)
    assert not ledger.claimable().names_filtered
    ledger.release("s1")
    with pytest.raises(UnknownJobError):  # forgotten once idle and no longer offered
        ledger.release("s1")
    ledger.set_dynamic(["s1"])
    with pytest.raises(WorkersStateError):
        ledger.release("s1")  # offered, but nothing of it runs
