"""The audit trail's pure rules (dogs_core.domain.audit): actors and queries checked, what an
entry says of each kind of result, its target and details, a bulk action's progress and
resumability, how a removed job left, and the outcome in words."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from dogs_core.domain.archiving import ArchiveKind, ArchiveReport
from dogs_core.domain.audit import (
    MAX_AUDIT_JOB_IDS,
    STALLED_AFTER,
    Actor,
    AuditAction,
    AuditEntry,
    AuditOutcome,
    BulkProgress,
    audit_details,
    audit_target,
    check_actor,
    check_audit_query,
    check_job_ids,
    job_fate,
    outcome_words,
    recorded_result,
)
from dogs_core.domain.records import JobRecord, JobType
from dogs_core.domain.registry import WorkerInfo, WorkerState
from dogs_core.domain.steering import (
    AlreadyFinished,
    Cancelled,
    Deleted,
    NotFound,
    Rescheduled,
    Running,
)
from dogs_core.errors import InvalidOptionError

NOW = datetime(2030, 5, 1, 12, 0, tzinfo=UTC)
ALICE = Actor("alice", "cli", "host-a")
RECORD = JobRecord(id="job-1", job_name="send", type=JobType.EVENT, priority=1, next_run_at=NOW)


def entry(action: str = "delete", **changes: object) -> AuditEntry:
    base = AuditEntry(
        id="e1", at=NOW, actor=ALICE, action=action, target="job-1", outcome=AuditOutcome.DONE
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def progress(**changes: object) -> BulkProgress:
    base = BulkProgress(selection={}, matched=10, chunk_size=5)
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_actors_are_checked() -> None:
    assert check_actor(ALICE) is ALICE
    assert str(ALICE) == "alice (cli)"
    for bad, field in (
        ("alice", "actor"),
        (Actor("", "cli"), "actor.name"),
        (Actor("x" * 201, "cli"), "actor.name"),
        (Actor("alice", "email"), "actor.source"),
        (Actor("alice", "cli", ""), "actor.host"),
    ):
        with pytest.raises(InvalidOptionError) as error:
            check_actor(bad)
        assert error.value.field == field


def test_queries_and_job_ids_are_checked() -> None:
    query = check_audit_query(limit=5, action="pause", actor="bob", job_id="j", top_level=False)
    assert (query.limit, query.action, query.actor, query.job_id, query.top_level) == (
        5, "pause", "bob", "j", False,
    )  # fmt: skip
    for kwargs in ({"limit": 0}, {"limit": 501}, {"action": "explode"}, {"top_level": "yes"}):
        with pytest.raises(InvalidOptionError):
            check_audit_query(**kwargs)
    assert check_job_ids(["a", "b"]) == ("a", "b")
    with pytest.raises(InvalidOptionError, match="at most"):
        check_job_ids(["x"] * (MAX_AUDIT_JOB_IDS + 1))
    with pytest.raises(InvalidOptionError, match="job ids"):
        check_job_ids([""])


def test_what_each_result_comes_to() -> None:
    cases = [
        (Cancelled("job-1", "send", True, "x"), 1, AuditOutcome.DONE, ("job-1",)),
        (Rescheduled(RECORD), 1, AuditOutcome.DONE, ("job-1",)),
        (Deleted(RECORD), 1, AuditOutcome.DONE, ("job-1",)),
        (NotFound("job-1"), 0, AuditOutcome.NOT_DONE, ("job-1",)),
        (AlreadyFinished("job-1", "success"), 0, AuditOutcome.NOT_DONE, ("job-1",)),
        (Running(RECORD), 0, AuditOutcome.NOT_DONE, ("job-1",)),
        (True, 1, AuditOutcome.DONE, ()),
        (False, 0, AuditOutcome.NOT_DONE, ()),
        (7, 7, AuditOutcome.DONE, ()),
        (0, 0, AuditOutcome.NOT_DONE, ()),
        (None, 0, AuditOutcome.NOT_DONE, ("job-1",)),
        (object(), 1, AuditOutcome.DONE, ("job-1",)),
    ]
    for result, count, outcome, ids in cases:
        what = recorded_result(result, "job-1")
        assert (what.count, what.outcome, what.job_ids) == (count, outcome, ids), result
    report = ArchiveReport(cutoff=NOW, moved={ArchiveKind.HISTORY: 3}, elapsed=timedelta(0))
    archived = recorded_result(report)
    assert (archived.count, archived.details) == (3, {"moved": {"history": 3}})
    assert recorded_result(dataclasses.replace(report, moved={})).outcome is AuditOutcome.NOT_DONE
    worker = WorkerInfo("w1", "host", 1, "v", (), 1, 0, (), 0, NOW, NOW, WorkerState.RUNNING, NOW)
    assert recorded_result(worker).target == "w1"


def test_targets_and_details() -> None:
    class Definition:
        name = "send"

    assert audit_target(AuditAction.PAUSE, {"job": None}) == "every job"
    assert audit_target(AuditAction.RESUME, {"job": Definition()}) == "send"
    assert audit_target(AuditAction.DELETE_JOBS, {"state": "failed", "job": "send"}) == (
        "failed jobs of send"
    )
    assert audit_target(AuditAction.DELETE_JOBS, {"state": "due", "job": None}) == "due jobs"
    assert audit_target(AuditAction.ARCHIVE, {"older_than": "30d"}) == "rows older than 30d"
    assert audit_target(AuditAction.CANCEL, {"job_id": "j"}) == "j"
    assert audit_target(AuditAction.CANCEL, {"unique_key": "k", "job": "send"}) == (
        "unique key k of send"
    )
    assert audit_target(AuditAction.CANCEL, {"unique_key": "k"}) == "unique key k"
    assert audit_target(AuditAction.CANCEL, {}) == "?"
    assert audit_target(AuditAction.CANCEL, {"job": 42}) == "?"
    details = audit_details(
        {"job_id": "j", "run_at": NOW, "priority": 3, "job": Definition(), "callback": print,
         "none": None, "other": [1]}
    )  # fmt: skip
    assert details == {"job_id": "j", "run_at": NOW, "priority": 3, "job": "send", "other": "[1]"}


def test_a_bulk_entry_progresses_stalls_and_resumes() -> None:
    running = entry("bulk_retry", outcome=AuditOutcome.RUNNING, bulk=progress(), updated_at=NOW)
    assert running.resumable
    assert not running.stalled(NOW + STALLED_AFTER - timedelta(seconds=1))
    assert running.stalled(NOW + STALLED_AFTER)
    assert outcome_words(running) == "running: 0 changed so far"
    later = running.with_progress(progress(changed=4), outcome=AuditOutcome.RUNNING, now=NOW)
    assert (later.count, later.updated_at) == (4, NOW)
    assert progress(changed=4, skipped={"running": 1}).done_fraction == 0.5
    assert progress(matched=0).done_fraction is None
    assert progress(changed=20).done_fraction == 1.0
    failed = later.with_progress(progress(), outcome=AuditOutcome.FAILED, now=NOW, error="boom")
    assert outcome_words(failed) == "failed: boom"
    done = later.with_progress(progress(), outcome=AuditOutcome.DONE, now=NOW)
    assert not done.resumable
    assert not entry().resumable
    assert not entry().stalled(NOW + timedelta(days=1))
    assert outcome_words(entry(outcome=AuditOutcome.NOT_DONE)) == "not done"
    assert outcome_words(entry(details={"result": "deleted"})) == "deleted"


def test_how_a_removed_job_left() -> None:
    deleted = entry("delete")
    cancelled = entry("cancel", at=NOW - timedelta(hours=1))
    chunk = entry("bulk_chunk", parent_id="p1", details={"action": "cancel"})
    nothing = entry("delete", outcome=AuditOutcome.NOT_DONE)
    assert str(job_fate([nothing, deleted], None)) == (
        "deleted by alice (cli) at 2030-05-01 12:00:00 UTC"
    )
    assert job_fate([cancelled], None) is not None
    fate = job_fate([chunk], NOW)
    assert fate is not None
    assert (str(fate).split(" at ")[0], fate.audit_id) == ("cancelled in bulk by alice (cli)", "p1")
    bulk_delete = job_fate([entry("bulk_chunk", details={"action": "delete"})], None)
    assert bulk_delete is not None
    assert bulk_delete.what == "deleted"
    archived = job_fate([entry("retry")], NOW)
    assert str(archived) == "archived at 2030-05-01 12:00:00 UTC"
    assert job_fate([nothing], None) is None
