"""Issue 27 in the runtime, on the in-memory store under virtual time: runtime schedules run by
workers that know their event job (added, changed, paused, resumed and deleted while they run;
a changed cron or timezone recomputing the next run), a replace behind a running holder staying
behind it, start deadlines discarding a late job with an ``expired`` row, a key's window written
before its record goes, and the bad inputs of ``schedule`` and ``client.schedules`` writing
nothing."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import anyio
import pytest

from dogs_core import (
    DogsError,
    Duplicate,
    InvalidOptionError,
    InvalidScheduleError,
    InvalidTagsError,
    Jobs,
    JobStats,
    MissingRoleError,
    Replaced,
    Scheduled,
    ScheduleInCodeError,
    ScheduleNotFoundError,
    Unique,
    UniqueError,
)
from dogs_core.domain.events import Event, JobExpired
from dogs_core.domain.records import HistoryStatus
from dogs_core.ports import Role
from dogs_core.runtime import DogsClient, JobContext
from dogs_core.runtime.plumbing.telemetry import Telemetry
from dogs_testing import JobStoreWrapper
from tests.runtime.conftest import Harness, now

pytestmark = pytest.mark.anyio


def _jobs(runs: list[tuple[float, str, Any]]) -> Jobs:
    jobs = Jobs()

    @jobs.event
    async def nightly_report(params: dict[str, Any], ctx: JobContext) -> None:
        runs.append((now(), ctx.record.job_name, params["tenant"]))

    @jobs.recurrent(run_every="1h")
    async def cleanup(ctx: JobContext) -> None: ...

    return jobs


async def test_a_runtime_schedule_runs_while_it_is_changed_paused_and_deleted() -> None:
    runs: list[tuple[float, str, Any]] = []
    h = Harness(_jobs(runs))
    client = h.client
    upserted = await client.schedules.upsert(
        "nightly-acme", "nightly_report", every="10s", params={"tenant": "acme"}
    )
    assert upserted.change == "created"
    again = await client.schedules.upsert(
        "nightly-acme", "nightly_report", every="10s", params={"tenant": "acme"}
    )
    assert again.change == "unchanged"
    async with h.workers(poll_interval=1) as workers:
        await anyio.sleep(25)  # runs at 10 and 20 (every 10 s after the last run)
        await client.schedules.upsert(
            "nightly-acme", "nightly_report", every="4s", params={"tenant": "acme2"}
        )  # at 25: next run at 29, then every 4 s
        await anyio.sleep(10)
        assert (await client.schedules.pause("nightly-acme")).paused
        paused_at = now()
        await anyio.sleep(20)
        assert not (await client.schedules.resume("nightly-acme")).paused
        resumed_at = now()
        await anyio.sleep(9)
        assert await client.schedules.delete("nightly-acme")
        deleted_at = now()
        await anyio.sleep(20)
        await workers.stop()
    times = [t for t, _, _ in runs]
    assert [t for t in times if t < 25] == pytest.approx([10, 20], abs=1.5)
    assert [p for t, _, p in runs if 25 < t < paused_at] == ["acme2", "acme2"]
    assert not [t for t in times if paused_at < t < resumed_at]
    assert len([t for t in times if resumed_at < t < deleted_at]) == 2
    assert not [t for t in times if t > deleted_at + 1]
    assert {name for _, name, _ in runs} == {"nightly-acme"}
    rows = h.store.history("nightly-acme")
    assert {row.status for row in rows} == {HistoryStatus.SUCCESS}
    assert len(rows) == len(runs)


async def test_the_list_shows_runtime_schedules_and_code_jobs() -> None:
    h = Harness(_jobs([]))
    client = h.client
    await client.schedules.upsert(
        "nightly-acme",
        "nightly_report",
        cron="0 3 * * *",
        timezone="Europe/Paris",
        params={"tenant": "acme"},
    )
    async with h.workers() as workers:  # bootstraps the code job's record
        await anyio.sleep(0.5)
        await workers.stop()
    listed = await client.schedules.list()
    assert [(s.id, s.source, s.job, s.rule) for s in listed] == [
        ("cleanup", "code", "cleanup", "every 1:00:00"),
        ("nightly-acme", "runtime", "nightly_report", "cron 0 3 * * * (Europe/Paris)"),
    ]
    one = await client.schedules.get("nightly-acme")
    assert one is not None
    assert (one.params, one.paused, one.next_run_at) == (
        {"tenant": "acme"},
        False,
        h.at(0) + timedelta(hours=2),
    )
    assert await client.schedules.get("nothing") is None
    with pytest.raises(ScheduleInCodeError):
        await client.schedules.pause("cleanup")
    with pytest.raises(ScheduleInCodeError):
        await client.schedules.upsert("cleanup", "nightly_report", every=60)
    with pytest.raises(ScheduleNotFoundError):
        await client.schedules.resume("nothing")
    assert not await client.schedules.delete("nothing")


async def test_a_job_not_started_by_its_deadline_is_discarded_with_an_expired_row() -> None:
    ran: list[float] = []
    jobs = Jobs()

    @jobs.event
    async def send_report(params: dict[str, Any], ctx: JobContext) -> None:
        ran.append(now())

    h = Harness(jobs)
    events: list[Event] = []
    telemetry = Telemetry()
    telemetry.subscribe(events.append)
    client = DogsClient(h.store, jobs, clock=h.clock, telemetry=telemetry)
    late = await client.schedule(send_report, {}, start_before="15m", tags=["tenant:acme"])
    on_time = await client.schedule(send_report, {}, run_in="20m", start_before="1h")
    assert isinstance(late, Scheduled)
    assert isinstance(on_time, Scheduled)
    await anyio.sleep(16 * 60)  # no worker for 16 minutes: the first one missed its deadline
    async with h.workers(poll_interval=1, telemetry=telemetry) as workers:
        await anyio.sleep(10 * 60)
        await workers.stop()
    assert ran == [pytest.approx(20 * 60, abs=2)]
    (row,) = [r for r in h.store.history("send_report") if r.job_id == late.id]
    assert row.status is HistoryStatus.EXPIRED
    assert "deadline" in (row.error_message or "")
    assert h.store.record(late.id) is None
    assert [type(e) for e in events if isinstance(e, JobExpired)] == [JobExpired]
    (stats,) = await client.stats(send_report, window="1h", until=h.at(3600))
    assert isinstance(stats, JobStats)
    assert (stats.expired, stats.succeeded) == (1, 1)


async def test_the_window_is_written_before_the_record_goes() -> None:
    jobs = Jobs()

    @jobs.event
    async def sync_customer(params: dict[str, Any], ctx: JobContext) -> None: ...

    h = Harness(jobs)
    calls: list[str] = []

    class Recording(JobStoreWrapper):
        async def around(self, method: str, call: Any) -> Any:
            if method in ("extend_unique_hold", "settle_many"):
                calls.append(method)
            return await call()

    store = Recording(h.store)
    client = DogsClient(store, jobs, clock=h.clock)
    unique = Unique("cust:42", period="10m")
    first = await client.schedule(sync_customer, {}, unique=unique)
    assert isinstance(first, Scheduled)
    from dogs_core.runtime import Workers

    async with Workers(store, jobs, clock=h.clock, poll_interval=1, watch_changes=False) as w:
        await anyio.sleep(2)
        await w.stop()
    assert calls[:2] == ["extend_unique_hold", "settle_many"]
    assert h.store.record(first.id) is None
    held = await client.schedule(sync_customer, {}, unique=unique)
    assert isinstance(held, Duplicate)
    assert (held.reason, held.existing_id) == ("window", first.id)
    assert held.held_until is not None
    await anyio.sleep(10 * 60)
    assert isinstance(await client.schedule(sync_customer, {}, unique=unique), Scheduled)


# -- bad input: each raises a specific DogsError and writes nothing -------------------------

DEBOUNCE = Unique("k", on_conflict="debounce", delay=5)
BAD_SCHEDULES: list[tuple[dict[str, Any], type[DogsError], str]] = [
    ({"unique": Unique(by=("customer",))}, UniqueError, "unique.by"),
    ({"unique": Unique(by=("a.b",))}, UniqueError, "unique.by"),
    ({"unique": "k"}, UniqueError, "unique"),
    ({"unique": Unique("k"), "unique_key": "k"}, UniqueError, "unique"),
    ({"unique": DEBOUNCE, "run_in": 10}, UniqueError, "unique.on_conflict"),
    ({"unique": Unique("x" * 1100)}, UniqueError, "unique.key"),
    ({"tags": ["x"] * 0 + [f"t{i}" for i in range(21)]}, InvalidTagsError, "tags"),
    ({"tags": ["x" * 101]}, InvalidTagsError, "tags[0]"),
    ({"tags": [1]}, InvalidTagsError, "tags[0]"),
    ({"tags": "report"}, InvalidTagsError, "tags"),
    ({"start_before": -5}, InvalidScheduleError, "start_before"),
    ({"start_before": 0}, InvalidScheduleError, "start_before"),
    ({"start_before": "1m", "run_in": "5m"}, InvalidScheduleError, "start_before"),
    ({"start_before": True}, InvalidOptionError, "start_before"),
]  # fmt: skip


@pytest.mark.parametrize(("options", "error", "field"), BAD_SCHEDULES)
async def test_bad_schedule_options_write_nothing(
    options: dict[str, Any], error: type[DogsError], field: str
) -> None:
    jobs = Jobs()

    @jobs.event
    async def sync_customer(params: dict[str, Any], ctx: JobContext) -> None: ...

    h = Harness(jobs)
    with pytest.raises(error) as raised:
        await h.client.schedule(sync_customer, {"customer_id": 1}, **options)
    assert getattr(raised.value, "field", None) == field
    assert h.store.records() == []


async def test_debounce_on_a_recurrent_job_is_refused() -> None:
    h = Harness(_jobs([]))
    unique = Unique("k", on_conflict="debounce", delay=5)
    with pytest.raises(UniqueError, match="recurrent"):
        await h.client.schedule("cleanup", None, unique=unique)
    assert h.store.records() == []


async def test_a_store_without_the_roles_says_which_it_lacks() -> None:
    h = Harness(_jobs([]))

    class Old(JobStoreWrapper):
        roles = frozenset(Role) - {Role.UNIQUENESS, Role.SCHEDULES}

    client = DogsClient(Old(h.store), h.jobs, clock=h.clock)
    with pytest.raises(MissingRoleError, match=r"unique= .* needs the store's 'uniqueness' role"):
        await client.schedule("nightly_report", {"tenant": "a"}, unique=Unique("k", period=60))
    with pytest.raises(MissingRoleError, match=r"client\.schedules needs the store's 'schedules'"):
        await client.schedules.upsert("s", "nightly_report", every=60)
    plain = await client.schedule("nightly_report", {"tenant": "a"}, unique=Unique("k"))
    assert isinstance(plain, Scheduled)  # Dogs' rule needs no role


BAD_UPSERTS: list[tuple[dict[str, Any], type[DogsError], str]] = [
    ({"schedule_id": ""}, InvalidOptionError, "schedule_id"),
    ({"schedule_id": "x" * 201}, InvalidOptionError, "schedule_id"),
    ({"schedule_id": "nightly_report"}, InvalidOptionError, "schedule_id"),
    ({"cron": "0 25 * * *", "timezone": "UTC", "every": None}, InvalidScheduleError, "cron"),
    ({"cron": "0 3 * * *", "timezone": "No/Where", "every": None}, InvalidScheduleError, "timezone"),  # noqa: E501
    ({"every": 0}, InvalidScheduleError, "run_every"),
    ({"job": "cleanup"}, InvalidOptionError, "job"),
    ({"job": "unknown"}, DogsError, ""),
    ({"params": {"$bad": 1}}, DogsError, ""),
    ({"misfire": "twice"}, InvalidOptionError, "misfire"),
    ({"priority": "high"}, InvalidOptionError, "priority"),
]  # fmt: skip


@pytest.mark.parametrize(("options", "error", "field"), BAD_UPSERTS)
async def test_bad_upserts_write_nothing(
    options: dict[str, Any], error: type[DogsError], field: str
) -> None:
    h = Harness(_jobs([]))
    arguments: dict[str, Any] = {
        "schedule_id": "nightly-acme",
        "job": "nightly_report",
        "every": 60,
        "params": {"tenant": "acme"},
        **options,
    }
    with pytest.raises(error) as raised:
        await h.client.schedules.upsert(**arguments)
    if field:
        assert getattr(raised.value, "field", None) == field
    assert h.store.records() == []


async def test_a_changed_cron_or_timezone_recomputes_the_next_run() -> None:
    h = Harness(_jobs([]))  # the clock starts at 2026-01-01 00:00 UTC (winter time)
    schedules = h.client.schedules

    async def upsert(cron: str, timezone: str) -> tuple[str, Any]:
        done = await schedules.upsert("nightly", "nightly_report", cron=cron, timezone=timezone)
        return done.change, done.schedule.next_run_at

    assert await upsert("0 3 * * *", "Europe/Paris") == ("created", h.at(2 * 3600))
    assert await upsert("0 3 * * *", "America/New_York") == ("updated", h.at(8 * 3600))
    assert await upsert("30 4 * * *", "America/New_York") == ("updated", h.at(9.5 * 3600))
    assert await upsert("30 4 * * *", "America/New_York") == ("unchanged", h.at(9.5 * 3600))


async def test_a_replace_while_the_holder_runs_waits_behind_it() -> None:
    spans: dict[int, tuple[float, float]] = {}
    jobs = Jobs()

    @jobs.event(lock_time="1m")
    async def reindex(params: dict[str, Any], ctx: JobContext) -> None:
        started = now()
        await anyio.sleep(30)
        spans[params["v"]] = (started, now())

    h = Harness(jobs)
    newest = Unique("reindex", on_conflict="replace")
    first = await h.client.schedule(reindex, {"v": 1}, unique=newest)
    assert isinstance(first, Scheduled)
    async with h.workers(poll_interval=1) as workers:
        await anyio.sleep(10)  # v1 runs, its lock until about 61 s
        holder = h.store.record(first.id)
        assert holder is not None
        assert holder.locked_until is not None
        second = await h.client.schedule(reindex, {"v": 2}, unique=newest)
        assert isinstance(second, Scheduled)  # the running one is left alone
        assert second.id != first.id
        waiting = h.store.record(second.id)
        assert waiting is not None
        assert waiting.next_run_at >= holder.locked_until
        third = await h.client.schedule(reindex, {"v": 3}, unique=newest)
        assert third == Replaced(second.id, "reindex")  # the waiting one takes the params
        await anyio.sleep(120)
        await workers.stop()
    assert sorted(spans) == [1, 3]  # v2's params were replaced by v3's before it ran
    assert spans[3][0] >= spans[1][1]  # no overlap: the new one ran after the old one
    assert {r.status for r in h.store.history("reindex")} == {HistoryStatus.SUCCESS}
