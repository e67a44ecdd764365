"""Numbers a Node worker can read, through the clients over the in-memory store: a priority or
a params int beyond +/-(2**53 - 1) is refused before anything is written, wherever it enters
(``schedule``, ``schedule_many`` items, ``reschedule``), and a handler result holding one is kept
in history as its ``repr``. The bodies of the ``check_*`` functions also run on the real mongod
(tests/mongo/test_node_safe_ints.py)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from dogs_core.domain.records import HistoryStatus, Scheduled
from dogs_core.domain.validation import MAX_SAFE_INTEGER, MIN_SAFE_INTEGER
from dogs_core.errors import InvalidOptionError, InvalidParamsError
from dogs_core.jobs import Jobs
from dogs_core.runtime import JobContext, ScheduleItem
from tests.runtime.conftest import Harness
from tests.runtime.test_client import client_of

pytestmark = pytest.mark.anyio

#: The priorities that broke Node Dogs 4.6.8 in the measurement, and the first ones past the range.
BROKE_NODE = [2**62, 2**63 - 1, 2**53, -(2**53)]
#: What the handler of ``totals`` returns: an int Node cannot read, and one it can.
BIG_RESULT = {"total": 2**62}
SAFE_RESULT = {"total": MAX_SAFE_INTEGER}


def registry() -> Jobs:
    jobs = Jobs()

    @jobs.event
    async def mail(params: dict[str, Any] | None, ctx: JobContext) -> None:
        return None

    @jobs.event
    async def totals(params: dict[str, Any] | None, ctx: JobContext) -> dict[str, int]:
        return BIG_RESULT if params and params.get("big") else SAFE_RESULT

    return jobs


async def check_unsafe_priorities_write_nothing(client: Any) -> None:
    """``schedule(priority=)`` beyond the range raises naming the field and writes nothing."""
    for value in BROKE_NODE:
        with pytest.raises(InvalidOptionError) as error:
            await client.schedule("mail", priority=value)
        assert (error.value.field, error.value.value) == ("priority", value)
    assert list(await client.find_jobs()) == []
    for value in (MAX_SAFE_INTEGER, MIN_SAFE_INTEGER):
        assert isinstance(await client.schedule("mail", priority=value), Scheduled)
    assert sorted(r.priority for r in await client.find_jobs()) == [
        MIN_SAFE_INTEGER,
        MAX_SAFE_INTEGER,
    ]


async def check_unsafe_params_write_nothing(client: Any) -> None:
    with pytest.raises(InvalidParamsError) as error:
        await client.schedule("mail", {"order": {"total": 2**53}})
    assert (error.value.field, error.value.value) == ("params.order.total", 2**53)
    assert "as a string" in str(error.value)
    assert list(await client.find_jobs()) == []


async def check_schedule_many_refuses_only_the_unsafe_items(client: Any) -> None:
    result = await client.schedule_many(
        "mail",
        [
            ScheduleItem(params={"i": 0}, priority=2**62),
            {"params": {"i": 1}, "priority": 2**63 - 1},
            ScheduleItem(params={"i": 2, "n": 2**53}),
            ScheduleItem(params={"i": 3, "n": 2**53 - 1}, priority=MAX_SAFE_INTEGER),
        ],
    )
    assert result.scheduled_count == 1
    assert [(e.index, type(e.error)) for e in result.errors] == [
        (0, InvalidOptionError),
        (1, InvalidOptionError),
        (2, InvalidParamsError),
    ]
    (record,) = await client.find_jobs()
    assert (record.params, record.priority) == ({"i": 3, "n": 2**53 - 1}, MAX_SAFE_INTEGER)


async def check_reschedule_refuses_an_unsafe_priority(client: Any) -> None:
    outcome = await client.schedule("mail", priority=3)
    assert isinstance(outcome, Scheduled)
    for value in BROKE_NODE:
        with pytest.raises(InvalidOptionError, match=r"^priority="):
            await client.reschedule(outcome.id, priority=value)
    record = await client.get_job(outcome.id)
    assert record is not None
    assert record.priority == 3
    await client.reschedule(outcome.id, priority=MAX_SAFE_INTEGER)
    record = await client.get_job(outcome.id)
    assert record is not None
    assert record.priority == MAX_SAFE_INTEGER


CHECKS = [
    check_unsafe_priorities_write_nothing,
    check_unsafe_params_write_nothing,
    check_schedule_many_refuses_only_the_unsafe_items,
    check_reschedule_refuses_an_unsafe_priority,
]


@pytest.fixture(params=["async", "sync"])
def flavor(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize("check", CHECKS, ids=lambda check: check.__name__)
async def test_on_the_memory_store(flavor: str, check: Any) -> None:
    h = Harness(registry())
    await check(client_of(h, flavor))
    assert all(
        r.priority in range(MIN_SAFE_INTEGER, MAX_SAFE_INTEGER + 1) for r in h.store.records()
    )


async def test_a_result_node_cannot_read_is_kept_in_history_as_its_repr() -> None:
    h = Harness(registry())
    await h.client.schedule("totals", {"big": True})
    await h.client.schedule("totals", {"big": False})
    async with h.workers() as workers:
        await anyio.sleep(5)
        await workers.stop()
    rows = sorted(h.store.history("totals"), key=lambda row: isinstance(row.result, str))
    assert [(row.status, row.result) for row in rows] == [
        (HistoryStatus.SUCCESS, SAFE_RESULT),
        (HistoryStatus.SUCCESS, repr(BIG_RESULT)),
    ]
    assert h.store.records("totals") == []
