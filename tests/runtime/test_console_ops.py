"""The operator's console under virtual time on the in-memory store: the workers' registry
(beats bounded to one write per 10 s, remote quiet and stop), bulk actions by filter (chunks,
progress, fencing, resume) and the audit trail of every operator action."""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from typing import Any

import anyio
import pytest

from dogs_core import Jobs
from dogs_core.domain.archiving import ArchiveKind
from dogs_core.domain.audit import AuditAction, AuditOutcome
from dogs_core.domain.bulk import BulkAction, BulkReport, RecordKind, bulk_selection
from dogs_core.domain.records import HistoryStatus, JobState, JobType
from dogs_core.domain.registry import WorkerState, liveness
from dogs_core.errors import (
    EmptySelectionError,
    InvalidOptionError,
    MissingRoleError,
    TransientStoreError,
    UnknownJobError,
)
from dogs_core.ports import REQUIRED_ROLES
from dogs_core.runtime import JobContext
from dogs_core.runtime.plumbing.actors import acting_as
from tests.runtime.conftest import Harness, RecordingStore, now

pytestmark = pytest.mark.anyio

Params = dict[str, Any] | None


def _jobs() -> tuple[Jobs, list[float]]:
    jobs = Jobs()
    started: list[float] = []

    @jobs.event(max_tries=1)
    async def flaky(params: Params, ctx: JobContext) -> None:
        started.append(now())
        if params and params.get("fail"):
            raise ConnectionError("refused") if params["fail"] == "conn" else ValueError("bad")

    @jobs.event
    async def slow(params: Params, ctx: JobContext) -> None:
        started.append(now())
        await anyio.sleep(20)

    @jobs.recurrent(run_every=3600)
    async def hourly(ctx: JobContext) -> None:
        pass

    return jobs, started


class CountingStore(RecordingStore):
    """Counts the registry writes (beats) and when they happened."""

    def __init__(self) -> None:
        super().__init__()
        self.beats: list[float] = []

    async def beat_worker(self, info: Any) -> Any:
        self.beats.append(now())
        return await super().beat_worker(info)


# -- the registry ---------------------------------------------------------------------------


async def test_beats_are_one_write_per_ten_seconds_and_say_what_runs() -> None:
    jobs, _ = _jobs()
    h = Harness(jobs, store=CountingStore())
    store = h.store
    assert isinstance(store, CountingStore)
    job = await h.client.schedule("slow")
    async with h.workers(workers_count=3) as workers:
        await anyio.sleep(5)
        [info] = await h.client.workers()
        assert info.instance_id == workers.owner.instance_id
        assert info.job_names == ("flaky", "slow", "hourly")
        assert (info.workers_count, info.state) == (3, WorkerState.RUNNING)
        await anyio.sleep(10)  # a beat at 10 s sees the job running since ~0 s
        [info] = await h.client.workers()
        assert info.slots_in_use == 1
        [running] = info.executions
        assert running.job_id == getattr(job, "id", None)
        assert running.started_at <= h.at(1)
        await anyio.sleep(95)
        await workers.stop()
    beats = store.beats
    gaps = [later - earlier for earlier, later in itertools.pairwise(beats[:-1])]
    assert all(gap >= 10 for gap in gaps), beats  # the bound, measured
    assert len(beats) == 12 + 1, str(beats)  # t = 0, 10 ... 110, and the last one at the stop
    assert workers.beacon is not None
    assert workers.beacon.beats == len(beats)
    [info] = await h.client.workers()
    assert info.state is WorkerState.STOPPED
    assert liveness(info, h.at(10_000)) is WorkerState.STOPPED


class FailingBeats(RecordingStore):
    """Its beats fail once ``dead``: a worker whose process died says nothing more."""

    dead = False

    async def beat_worker(self, info: Any) -> Any:
        if self.dead:
            raise TransientStoreError("the process is gone")
        return await super().beat_worker(info)


async def test_a_worker_whose_beats_stopped_shows_as_lost() -> None:
    jobs, _ = _jobs()
    store = FailingBeats()
    h = Harness(jobs, store=store)
    async with h.workers() as workers:
        await anyio.sleep(12)
        store.dead = True
        await anyio.sleep(30)
        await workers.stop()
    [info] = await h.client.workers()
    assert info.state is WorkerState.RUNNING  # what it last said
    assert info.last_beat == h.at(10)
    assert liveness(info, h.at(40)) is WorkerState.RUNNING
    assert liveness(info, h.at(41)) is WorkerState.LOST
    assert info.expires_at == h.at(70)  # then the store's TTL removes it


async def test_registry_off_writes_nothing() -> None:
    jobs, _ = _jobs()
    h = Harness(jobs, store=CountingStore())
    async with h.workers(registry_enabled=False) as workers:
        await anyio.sleep(30)
        assert workers.beacon is None
        await workers.stop()
    assert await h.client.workers() == []


async def test_remote_quiet_stops_claims_and_lets_running_jobs_finish() -> None:
    jobs, started = _jobs()
    h = Harness(jobs)
    await h.client.schedule("slow")
    async with h.workers() as workers:
        await anyio.sleep(1)
        with acting_as("alice", source="cli"):
            after = await h.client.quiet_worker(workers.owner.instance_id[:6])  # a prefix
        assert after is not None
        assert after.command is not None
        assert after.command.requested_by == "alice (cli)"
        await anyio.sleep(10)  # the next beat brings the command
        later = await h.client.schedule("flaky")
        await anyio.sleep(40)
        assert len(started) == 1  # the slow job ran to its end, the new one was never claimed
        record = await h.client.get_job(getattr(later, "id", ""))
        assert record is not None
        assert record.state(h.clock.now()) is JobState.DUE
        [info] = await h.client.workers()
        assert (info.state, info.slots_in_use) == (WorkerState.QUIET, 0)
        await workers.stop()
    [entry] = await h.client.audit_log(action="worker_quiet")
    assert (entry.actor.name, entry.count, entry.target) == ("alice", 1, after.instance_id)


async def test_remote_stop_drains_with_its_grace() -> None:
    jobs, _ = _jobs()
    h = Harness(jobs)
    await h.client.schedule("slow")
    async with h.workers() as workers:
        await anyio.sleep(1)
        assert await h.client.stop_worker(workers.owner.instance_id, grace=5) is not None
        with anyio.fail_after(60):
            await workers.serve()  # returns once the remote stop drained the workers
        stopped_at = now()
    assert 10 <= stopped_at <= 16  # the beat at 10 s, then at most the 5 s grace
    [info] = await h.client.workers()
    assert info.state is WorkerState.STOPPED
    assert await h.client.stop_worker(info.instance_id) is None  # not live any more
    assert await h.client.quiet_worker("nobody") is None


# -- bulk actions -----------------------------------------------------------------------------


async def _failed(h: Harness, count: int, kind: str = "value") -> list[str]:
    ids = [
        getattr(await h.client.schedule("flaky", {"fail": kind}), "id", "") for _ in range(count)
    ]
    async with h.workers(workers_count=4) as workers:
        await anyio.sleep(5)
        await workers.stop()
    return ids


async def test_bulk_retry_by_error_type_in_chunks_with_progress() -> None:
    jobs, _ = _jobs()
    h = Harness(jobs)
    values = await _failed(h, 5)
    refused = await _failed(h, 3, "conn")
    selection = bulk_selection(state="failed", error_type="ConnectionRefusedError")
    assert await h.client.bulk_count(selection) == 0  # ConnectionError, not a subclass name
    selection = bulk_selection(state="failed", error_type="ConnectionError")
    dry = await h.client.bulk("retry", selection, dry_run=True)
    assert (dry.dry_run, dry.matched, dry.changed) == (True, 3, 0)
    reports: list[BulkReport] = []
    with acting_as("bob", source="dashboard"):
        report = await h.client.bulk("retry", selection, chunk_size=2, on_progress=reports.append)
    assert (report.matched, report.changed, report.skipped_total, report.complete) == (
        3,
        3,
        0,
        True,
    )
    assert [r.changed for r in reports] == [2, 3] or [r.changed for r in reports][-1] == 3
    for job_id in refused:
        record = await h.client.get_job(job_id)
        assert record is not None
        assert (record.status, record.tries) == (None, 0)
    for job_id in values:
        record = await h.client.get_job(job_id)
        assert record is not None
        assert record.state(h.clock.now()) is JobState.FAILED
    entry = await h.client.audit_entry(report.audit_id or "")
    assert entry is not None
    assert entry.bulk is not None
    assert (entry.action, entry.outcome, entry.count) == ("bulk_retry", AuditOutcome.DONE, 3)
    assert (entry.actor.name, entry.actor.source, entry.bulk.runner) == ("bob", "dashboard", None)
    assert entry.target == "failed jobs whose last error is ConnectionError"


async def test_bulk_cancel_and_delete_list_what_they_removed() -> None:
    jobs, _ = _jobs()
    h = Harness(jobs)
    later = [getattr(await h.client.schedule("flaky", run_in="1h"), "id", "") for _ in range(4)]
    running = getattr(await h.client.schedule("slow"), "id", "")
    async with h.workers() as workers:
        await anyio.sleep(2)
        report = await h.client.bulk("cancel", bulk_selection(all=True), chunk_size=3)
        await anyio.sleep(35)  # the fenced-off execution stops at its next write
        await workers.stop()
    # every event job was cancelled (the running one too); the recurrent one was skipped
    assert (report.changed, dict(report.skipped)) == (5, {"recurrent": 1})
    for job_id in [*later, running]:
        assert await h.client.get_job(job_id) is None
        rows = await h.client.get_executions(job_id=job_id)
        assert HistoryStatus.CANCELLED in [row.status for row in rows]
    about = await h.client.job_audit(later[0])
    assert [entry.action for entry in about] == ["bulk_chunk"]
    assert about[0].parent_id == report.audit_id
    hourly = await h.client.find_jobs("hourly")
    assert [record.type for record in hourly] == [JobType.RECURRENT]
    deleted = await h.client.bulk("delete", bulk_selection(job_name="hourly"))
    assert deleted.changed == 1
    chunks = await h.client.audit_log(action="bulk_chunk", top_level=False)
    assert len(chunks) == 3  # two chunks of the cancel, one of the delete


async def test_bulk_reschedule_never_touches_a_running_job() -> None:
    jobs, _ = _jobs()
    h = Harness(jobs)
    waiting = getattr(await h.client.schedule("flaky", run_in="1h"), "id", "")
    running = getattr(await h.client.schedule("slow"), "id", "")
    async with h.workers() as workers:
        await anyio.sleep(2)
        report = await h.client.bulk(
            BulkAction.RESCHEDULE, bulk_selection(all=True), run_in="2h", priority=7
        )
        await workers.stop(grace=0)
    assert report.changed == 2  # the waiting job and the recurrent record
    assert report.skipped == {"running": 1}
    record = await h.client.get_job(waiting)
    assert record is not None
    assert (record.next_run_at, record.priority) == (h.at(2) + (h.at(7200) - h.at(0)), 7)
    assert (await h.client.get_job(running)) is not None


async def test_a_bulk_action_stopped_early_resumes_where_it_stopped() -> None:
    jobs, _ = _jobs()
    h = Harness(jobs)
    ids = await _failed(h, 7)
    first = await h.client.bulk("retry", bulk_selection(state="failed"), chunk_size=2, max_chunks=2)
    assert (first.changed, first.complete) == (4, False)
    entry = await h.client.audit_entry(first.audit_id or "")
    assert entry is not None
    assert entry.outcome is AuditOutcome.STOPPED
    assert entry.resumable
    rest = await h.client.resume_bulk(first.audit_id or "")
    assert (rest.changed, rest.complete, rest.chunks) == (7, True, 4)
    for job_id in ids:
        record = await h.client.get_job(job_id)
        assert record is not None
        assert record.status is None
    with pytest.raises(InvalidOptionError, match="that bulk action is done"):
        await h.client.resume_bulk(first.audit_id or "")


async def test_a_running_bulk_action_is_resumed_only_once_stalled() -> None:
    jobs, _ = _jobs()
    h = Harness(jobs)
    await _failed(h, 3)
    entry = await h.client.prepare_bulk("delete", bulk_selection(state="failed"))
    with pytest.raises(InvalidOptionError, match="is running"):
        await h.client.resume_bulk(entry.id)
    await anyio.sleep(61)  # its runner died: no progress for a minute
    report = await h.client.resume_bulk(entry.id)
    assert report.changed == 3
    # the first runner, alive after all, finds its entry taken over and stops
    with pytest.raises(InvalidOptionError, match="taken over"):
        await h.client.run_bulk(entry)


async def test_bulk_input_is_checked_before_anything_is_written() -> None:
    jobs, _ = _jobs()
    h = Harness(jobs)
    with pytest.raises(InvalidOptionError, match="action"):
        await h.client.bulk("explode", bulk_selection())
    with pytest.raises(InvalidOptionError, match="run_at"):
        await h.client.bulk("reschedule", bulk_selection())
    with pytest.raises(InvalidOptionError, match="only a reschedule"):
        await h.client.bulk("retry", bulk_selection(), priority=3)
    with pytest.raises(InvalidOptionError, match="chunk_size"):
        await h.client.bulk("retry", bulk_selection(), chunk_size=0)
    with pytest.raises(InvalidOptionError, match="selection"):
        await h.client.bulk("retry", {"state": "failed"})  # type: ignore[arg-type]
    assert await h.client.audit_log() == []


# -- the audit trail --------------------------------------------------------------------------


async def test_every_single_job_action_is_recorded_with_its_actor() -> None:
    jobs, _ = _jobs()
    h = Harness(jobs)
    one, two, three = [
        getattr(await h.client.schedule("flaky", run_in="1h"), "id", "") for _ in range(3)
    ]
    with acting_as("carol", source="cli"):
        await h.client.cancel(one)
        await h.client.retry_now(two)
        await h.client.reschedule(two, run_in="5m")
        await h.client.delete(three)
        await h.client.delete(three)  # not found: recorded, nothing done
        await h.client.pause("flaky")
        await h.client.resume("flaky")
        await h.client.delete_jobs(state="scheduled", dry_run=True)  # a dry run: not recorded
    entries = await h.client.audit_log()
    assert [e.action for e in reversed(entries)] == [
        "cancel", "retry", "reschedule", "delete", "delete", "pause", "resume",
    ]  # fmt: skip
    assert {e.actor.name for e in entries} == {"carol"}
    assert [e.count for e in reversed(entries)] == [1, 1, 1, 1, 0, 1, 1]
    deleted = await h.client.job_audit(three)
    assert [(e.action, e.outcome) for e in deleted] == [
        ("delete", AuditOutcome.NOT_DONE),
        ("delete", AuditOutcome.DONE),
    ]
    assert deleted[1].details["jobName"] == "flaky"
    page = await h.client.audit_log(limit=2, before=entries[1].id)
    assert [e.id for e in page] == [e.id for e in entries[2:4]]
    by_action = Counter(e.action for e in await h.client.audit_log(actor="carol"))
    assert by_action["delete"] == 2
    outside = await h.client.cancel(two)
    assert outside is not None
    [last] = await h.client.audit_log(limit=1)
    assert (last.actor.source, last.action) == ("api", AuditAction.CANCEL.value)


class RequiredRolesOnly(RecordingStore):
    """A store written before the optional roles: it lists only the required ones."""

    roles = REQUIRED_ROLES


async def test_a_store_without_the_optional_roles() -> None:
    jobs, _ = _jobs()
    h = Harness(jobs, store=RequiredRolesOnly())
    job_id = getattr(await h.client.schedule("flaky", run_in="1h"), "id", "")
    assert await h.client.cancel(job_id) is not None  # works, records nothing
    assert await h.client.job_audit(job_id) == []
    with pytest.raises(MissingRoleError, match="'audit' role"):
        await h.client.audit_log()
    with pytest.raises(MissingRoleError, match="'bulk' role"):
        await h.client.bulk("retry", bulk_selection(all=True))
    with pytest.raises(MissingRoleError, match="'registry' role"):
        await h.client.workers()
    async with h.workers() as workers:
        assert workers.beacon is None
        await workers.stop()
    assert dataclasses.is_dataclass(bulk_selection())


async def test_workflow_and_schedule_changes_are_recorded_with_their_actor() -> None:
    from dogs_core import Workflow

    jobs, _ = _jobs()
    h = Harness(jobs)
    workflow = Workflow("nightly")
    workflow.add("flaky")
    started = await h.client.start_workflow(workflow)
    with acting_as("dave", source="dashboard"):
        await h.client.cancel_workflow(started.id)
        await h.client.cancel_workflow(started.id)  # over already: recorded, nothing done
        await h.client.schedules.upsert("report-acme", "flaky", every="1h")
        await h.client.schedules.upsert("report-acme", "flaky", every="1h")  # unchanged
        await h.client.schedules.pause("report-acme")
        await h.client.schedules.resume("report-acme")
        await h.client.schedules.delete("report-acme")
    everything = list(reversed(await h.client.audit_log()))
    # the released step's job, cancelled by the workflow's cancel, has its own entry
    assert [e.action for e in everything].count("cancel") == 1
    entries = [e for e in everything if e.action != "cancel"]
    assert [(e.action, e.target, e.count) for e in entries] == [
        ("workflow_cancel", started.id, 1),
        ("workflow_cancel", started.id, 0),
        ("schedule_upsert", "report-acme", 1),
        ("schedule_upsert", "report-acme", 0),
        ("schedule_pause", "report-acme", 1),
        ("schedule_resume", "report-acme", 1),
        ("schedule_delete", "report-acme", 1),
    ]
    assert {e.actor.name for e in entries} == {"dave"}
    assert entries[2].details["change"] == "created"
    assert entries[4].details["paused"] is True


async def test_a_bulk_action_takes_only_what_it_names() -> None:
    jobs, _ = _jobs()
    h = Harness(jobs)
    plain = [getattr(await h.client.schedule("flaky", run_in="1h"), "id", "") for _ in range(3)]
    await h.client.schedules.upsert("tenant-7", "flaky", every="1h")
    # no filter, no all: refused before anything is written, the dry run too
    for dry_run in (False, True):
        with pytest.raises(EmptySelectionError, match="no filter given"):
            await h.client.bulk("delete", bulk_selection(), dry_run=dry_run)
    with pytest.raises(EmptySelectionError):
        await h.client.prepare_bulk("retry", bulk_selection(include_schedules=True))
    assert await h.client.audit_log(action="bulk_delete") == []
    # a typo'd name: UnknownJobError naming the known ones, nothing written
    with pytest.raises(UnknownJobError, match=r"'flakey'.*flaky"):
        await h.client.bulk("retry", bulk_selection(job_name="flakey"))
    with pytest.raises(UnknownJobError):
        await h.client.bulk("retry", bulk_selection(job_name="flakey"), dry_run=True)
    assert await h.client.audit_log(action="bulk_retry") == []
    # a name the registry knows, matching nothing, is no error
    none = await h.client.bulk("retry", bulk_selection(job_name="slow"))
    assert none.matched == 0
    # the dry run counts each kind apart; the schedule is left out, and said so
    dry = await h.client.bulk("delete", bulk_selection(all=True), dry_run=True)
    assert (dry.matched, dict(dry.counts), dict(dry.left_out)) == (
        3,
        {RecordKind.JOB: 3},
        {RecordKind.SCHEDULE: 1},
    )
    with pytest.raises(InvalidOptionError, match="purge"):
        await h.client.bulk("retry", bulk_selection(all=True), purge=True)
    report = await h.client.bulk("delete", bulk_selection(job_name="flaky"))
    assert (report.changed, report.archived) == (3, True)
    assert await h.client.schedules.get("tenant-7") is not None
    entry = await h.client.audit_entry(report.audit_id or "")
    assert entry is not None
    assert entry.bulk is not None
    assert entry.bulk.selection["jobName"] == "flaky"  # the filter, with the deletion
    assert (entry.details["purge"], entry.details["counts"]) == (False, {"job": 3, "schedule": 0})
    for job_id in plain:
        assert await h.client.get_job(job_id) is None
        assert (await h.client.job_fate(job_id)) is not None
    archived = h.store.sync.archived(ArchiveKind.FAILED_RECORDS)
    assert sorted(archived) == sorted(plain)
    # the schedule, named exactly, is asked for; --purge keeps nothing
    named = await h.client.bulk("delete", bulk_selection(job_name="tenant-7"), purge=True)
    assert (named.changed, named.archived) == (1, False)
    assert await h.client.schedules.get("tenant-7") is None
    assert "tenant-7" not in h.store.sync.archived(ArchiveKind.FAILED_RECORDS)
