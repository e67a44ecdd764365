"""Misfire policies and recurrent priority at run time (virtual time, the in-memory store).

An hourly cron job runs at startup (00:00), its workers stop at 00:30 and start again at 05:30:
the slots 01:00 ... 05:00 were missed. Each policy is checked by the slots whose handler ran (the
record's ``next_run_at`` when claimed), the history rows, the log line and the event of a skip.
Then the backlog: a recurrent job defined next to 1,800 older event jobs runs in the first claim
rounds at its default priority, and only after the backlog at the events' priority.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

import anyio
import pytest

from dogs_core.domain.events import Event, JobMisfired
from dogs_core.domain.records import HistoryStatus
from dogs_core.jobs import Jobs
from dogs_core.runtime import JobContext, Workers
from dogs_core.runtime.plumbing.telemetry import Telemetry
from tests.runtime.conftest import Harness, now

pytestmark = pytest.mark.anyio

HOUR = 3600.0


def hourly(h: Harness, slots: list[tuple[float, datetime]], **options: Any) -> Jobs:
    jobs = Jobs()

    @jobs.recurrent(cron="0 * * * *", timezone="UTC", **options)
    async def report(ctx: JobContext) -> None:
        assert ctx.record.next_run_at is not None
        slots.append((now(), ctx.record.next_run_at))

    return jobs


async def stopped_for_five_slots(**options: Any) -> tuple[Harness, list[datetime], list[Event]]:
    """Run 00:00-00:30 and 05:30-07:10; the slots whose handler ran, oldest first."""
    h = Harness(Jobs())
    ran: list[tuple[float, datetime]] = []
    h.jobs = hourly(h, ran, **options)
    telemetry, events = Telemetry(), list[Event]()
    telemetry.subscribe(events.append)

    def workers() -> Workers:
        return Workers(
            h.store,
            h.jobs,
            clock=h.clock,
            telemetry=telemetry,
            poll_interval=5,
            watch_changes=False,
        )

    async with workers() as first:
        await anyio.sleep(0.5 * HOUR)
        await first.stop()
    await anyio.sleep(5 * HOUR)
    async with workers() as second:
        await anyio.sleep(1 * HOUR + 40 * 60)
        await second.stop()
    return h, [slot for _, slot in ran], events


async def test_run_once_collapses_the_missed_slots_into_one_run() -> None:
    h, slots, events = await stopped_for_five_slots()
    assert slots == [h.at(0), h.at(1 * HOUR), h.at(6 * HOUR), h.at(7 * HOUR)]
    assert len(h.store.history("report")) == 4
    assert not [e for e in events if isinstance(e, JobMisfired)]


async def test_skip_runs_none_of_the_late_slots_and_tells_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="dogs")
    h, slots, events = await stopped_for_five_slots(misfire="skip", misfire_grace=600)
    assert slots == [h.at(0), h.at(6 * HOUR), h.at(7 * HOUR)], "on-time runs only"
    rows = h.store.history("report")
    assert [r.status for r in rows] == [HistoryStatus.SUCCESS] * 3, "no row for a skip"
    (misfired,) = [e for e in events if isinstance(e, JobMisfired)]
    assert (misfired.skipped, misfired.first_slot, misfired.last_slot) == (
        5,
        h.at(1 * HOUR),
        h.at(5 * HOUR),
    )
    assert misfired.next_run_at == h.at(6 * HOUR)
    (line,) = [r for r in caplog.records if "missed slot" in r.getMessage()]
    assert line.levelno == logging.INFO
    assert "skipped 5 missed slot(s) of report" in line.getMessage()
    (record,) = h.store.records()
    assert record.tries == 0, "the skip gave its try back"


async def test_run_all_runs_the_three_newest_missed_slots_then_is_on_time() -> None:
    h, slots, events = await stopped_for_five_slots(misfire="run_all", max_catch_up=3)
    late = [h.at(hour * HOUR) for hour in (3, 4, 5)]
    assert slots == [h.at(0), *late, h.at(6 * HOUR), h.at(7 * HOUR)]
    (misfired,) = [e for e in events if isinstance(e, JobMisfired)]
    assert (misfired.skipped, misfired.next_run_at) == (2, h.at(3 * HOUR))
    assert len(h.store.history("report")) == 6
    (record,) = h.store.records()
    assert record.next_run_at == h.at(8 * HOUR)


async def test_a_late_run_within_the_grace_runs() -> None:
    jobs = Jobs()
    runs: list[float] = []

    @jobs.recurrent(run_every=60, misfire="skip", misfire_grace=30)
    async def tick(ctx: JobContext) -> None:
        runs.append(now())

    h = Harness(jobs)
    async with h.workers(poll_interval=20) as workers:  # claims up to 20 s late
        await anyio.sleep(200)
        await workers.stop()
    assert len(runs) >= 3, "a claim 20 s late is within the 30 s grace"


# -- priority against a backlog ---------------------------------------------------------------


async def first_recurrent_run(priority: int | None) -> tuple[float, int]:
    """1,800 event jobs due since before startup, then workers with a recurrent job: when the
    recurrent job first ran, and how many events ran before it."""
    jobs = Jobs()
    order: list[str] = []
    recurrent_at: list[float] = []
    ran = anyio.Event()

    @jobs.event
    async def backlog(params: Any, ctx: JobContext) -> None:
        order.append("event")
        await anyio.sleep(1)

    options: dict[str, Any] = {} if priority is None else {"priority": priority}

    @jobs.recurrent(run_every=HOUR, **options)
    async def nightly(ctx: JobContext) -> None:
        order.append("recurrent")
        recurrent_at.append(now())
        ran.set()

    h = Harness(jobs)
    result = await h.client.schedule_many(backlog, [{} for _ in range(1800)])
    assert result.scheduled_count == 1800
    await anyio.sleep(1)  # the events are older than the recurrent record
    start = now()
    async with h.workers(workers_count=8, poll_interval=1) as workers:
        with anyio.move_on_after(1800 / 8 + 60):
            await ran.wait()
        await workers.stop()
    assert recurrent_at
    return recurrent_at[0] - start, order.index("recurrent")


async def test_a_new_recurrent_job_runs_before_an_older_event_backlog() -> None:
    waited, events_before = await first_recurrent_run(None)
    # Measured: 0 events before it, 0 s.
    assert events_before < 8 * 4, "within the first claim rounds (one per partition)"
    assert waited < 5


async def test_at_the_events_priority_it_waits_behind_the_backlog() -> None:
    waited, events_before = await first_recurrent_run(100)
    # Measured: 1,800 events before it, 225 s (the whole backlog: 1,800 x 1 s on 8 workers).
    assert events_before > 1000, "sorted by nextRunAt among equals: the older backlog first"
    assert waited > 100
