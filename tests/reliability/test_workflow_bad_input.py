"""Bad input to the workflows' entry points: a specific error naming the step (or the field)
and the value, and nothing written (no workflow, no step, no record)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pydantic
import pytest

from dogs_core.domain.workflows import Batch, Workflow
from dogs_core.errors import (
    DogsError,
    InvalidIdError,
    InvalidOptionError,
    InvalidParamsError,
    InvalidWorkflowError,
    MissingRoleError,
    WorkflowNotFoundError,
)
from dogs_core.jobs import Jobs
from dogs_core.ports import REQUIRED_ROLES, Role
from dogs_core.runtime import DogsClient
from dogs_testing.memory import InMemoryJobStore

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


jobs = Jobs()


@jobs.event
async def fetch(params: dict[str, Any] | None, ctx: object) -> None: ...


class Order(pydantic.BaseModel):
    order_id: int


@jobs.event
async def typed(params: Order, ctx: object) -> None: ...


@jobs.event(save_executions_for=timedelta(0))
async def forgetful(params: None, ctx: object) -> None: ...


@jobs.recurrent(run_every=60)
async def tick(ctx: object) -> None: ...


other = Jobs()


@other.event
async def stranger(params: None, ctx: object) -> None: ...


def one(job: Any, params: Any = None, **options: Any) -> Workflow:
    wf = Workflow()
    wf.add(job, params, **options)
    return wf


def cycle() -> Workflow:
    wf = Workflow()
    wf.add(fetch, name="a", after=["c"])
    wf.add(fetch, name="b", after=["a"])
    wf.add(fetch, name="c", after=["b"])
    return wf


def too_large() -> Workflow:
    wf = Workflow()
    for _ in range(20_001):
        wf.add(fetch)
    return wf


def duplicate_name() -> Workflow:
    wf = Workflow()
    wf.add(fetch, name="x")
    wf.add(fetch, name="x")
    return wf


def foreign_step() -> Workflow:
    elsewhere = Workflow()
    step = elsewhere.add(fetch)
    wf = Workflow()
    wf.add(fetch, after=[step])
    return wf


def items_after_the_callback() -> Workflow:
    batch = Batch()
    batch.add(fetch)
    batch.then(fetch)
    batch.add(fetch)
    return batch


Start = Callable[[DogsClient], Awaitable[Any]]


def start(build: Callable[[], Workflow], **options: Any) -> Start:
    async def call(client: DogsClient) -> Any:
        return await client.start_workflow(build(), **options)

    return call


# One line per case (a table is easier to read than wrapped lines).
# ruff: noqa: E501
UNKNOWN = "0190c2c4-0000-7000-8000-000000000000"  # an id no workflow has

CASES: list[tuple[str, Start, type[DogsError], str]] = [
    ("a cycle", start(cycle), InvalidWorkflowError, "cycle"),
    ("an unknown step in after", start(lambda: one(fetch, after=["nope"])), InvalidWorkflowError, "names no step"),
    ("a step after itself", start(lambda: one(fetch, name="me", after=["me"])), InvalidWorkflowError, "itself"),
    ("an unknown job name", start(lambda: one("missing")), InvalidWorkflowError, "'missing'"),
    ("a job of another registry", start(lambda: one(stranger)), InvalidWorkflowError, "stranger"),
    ("a recurrent job", start(lambda: one(tick)), InvalidOptionError, "event job"),
    ("a bad policy", start(lambda: one(fetch, on_failure="retry")), InvalidWorkflowError, "on_failure"),
    ("a policy of the wrong type", start(lambda: one(fetch, on_failure=3)), InvalidWorkflowError, "on_failure"),
    ("params failing their model", start(lambda: one(typed, {"order_id": "x"})), InvalidParamsError, "step 'typed'"),
    ("params that are not a mapping", start(lambda: one(fetch, [1, 2])), InvalidParamsError, "step 'fetch'"),
    ("params not storable", start(lambda: one(fetch, {"when": object()})), InvalidParamsError, "step 'fetch'"),
    ("params over 16 MiB", start(lambda: one(fetch, {"blob": "x" * (16 * 1024 * 1024)})), InvalidParamsError, "step 'fetch'"),
    ("too many steps", start(too_large), InvalidWorkflowError, "more than 20000 steps"),
    ("no step", start(Workflow), InvalidWorkflowError, "at least one step"),
    ("a job without history", start(lambda: one(forgetful)), InvalidWorkflowError, "keeps no history"),
    ("a step name twice", start(duplicate_name), InvalidWorkflowError, "another step has this name"),
    ("a step of another workflow", start(foreign_step), InvalidWorkflowError, "another workflow"),
    ("an item after the callback", start(items_after_the_callback), InvalidWorkflowError, "before then"),
    ("a bad priority", start(lambda: one(fetch, priority="high")), InvalidOptionError, "priority"),
    ("not a workflow", lambda c: c.start_workflow("wf"), InvalidOptionError, "Workflow"),  # type: ignore[arg-type]
    ("not a session", start(lambda: one(fetch), session=object()), InvalidOptionError, "session"),
    ("a state that does not exist", lambda c: c.list_workflows(state="done"), InvalidOptionError, "state"),
    ("a page of zero", lambda c: c.list_workflows(limit=0), InvalidOptionError, "limit"),
    ("an empty id", lambda c: c.get_workflow(""), InvalidOptionError, "workflow_id"),
    ("a negative timeout", lambda c: c.wait_for_workflow(UNKNOWN, timeout=-1), InvalidOptionError, "timeout"),
    ("cancel an unknown workflow", lambda c: c.cancel_workflow(UNKNOWN), WorkflowNotFoundError, UNKNOWN),
    ("retry an unknown workflow", lambda c: c.retry_workflow(UNKNOWN), WorkflowNotFoundError, UNKNOWN),
    ("cancel a malformed id", lambda c: c.cancel_workflow("nope"), InvalidIdError, "workflow_id='nope': not an id"),
    ("wait for a malformed id", lambda c: c.wait_for_workflows(["nope"]), InvalidIdError, "workflow_ids='nope'"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "call", "error", "match"), CASES, ids=[c[0] for c in CASES])
async def test_bad_input_raises_a_specific_error_and_writes_nothing(
    case: str, call: Start, error: type[DogsError], match: str
) -> None:
    store = InMemoryJobStore()
    client = DogsClient(store, jobs)
    with pytest.raises(error, match=match):
        await call(client)
    assert await store.find_records(limit=10) == []
    assert await store.find_workflows() == []
    assert await store.pending_steps() == []


async def test_a_store_without_the_workflows_role_says_so_and_writes_nothing() -> None:
    store = InMemoryJobStore()

    class Older(InMemoryJobStore):
        """A custom store written before workflows: it lists the required roles only."""

        roles = REQUIRED_ROLES

    older = Older(sync=store.sync)
    client = DogsClient(older, jobs)
    calls: dict[str, Callable[[], Awaitable[object]]] = {
        "start_workflow": lambda: client.start_workflow(one(fetch)),
        "get_workflow": lambda: client.get_workflow(UNKNOWN),
        "list_workflows": lambda: client.list_workflows(),
        "wait_for_workflows": lambda: client.wait_for_workflows([UNKNOWN], timeout=1),
        "cancel_workflow": lambda: client.cancel_workflow(UNKNOWN),
        "retry_workflow": lambda: client.retry_workflow(UNKNOWN),
    }
    for feature, call in calls.items():
        with pytest.raises(MissingRoleError) as raised:
            await call()
        error = raised.value
        assert (error.role, error.feature) == (Role.WORKFLOWS.value, feature)
        assert f"{feature} needs the store's 'workflows' role, which Older does not" in str(error)
        assert "its roles: " in str(error)
        assert "workflows" not in error.roles
    assert await store.find_records(limit=10) == []
