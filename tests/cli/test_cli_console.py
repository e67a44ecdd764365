"""``dogs workers``, ``dogs bulk`` and ``dogs audit``: bad input without a server (one line
naming the flag, exit 2), then the commands against the real mongod: a bulk retry by error
type (its dry run, progress and audit rows), a bulk delete whose jobs' pages say who deleted
them, a resume refused, and a worker listed, shown by a prefix, quieted and stopped."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from typer.testing import CliRunner

from dogs_core.domain.archiving import ArchiveKind
from dogs_core.domain.records import (
    HistoryRecord,
    HistoryStatus,
    JobRecord,
    JobState,
    JobStatus,
    JobType,
)
from dogs_core.domain.registry import WorkerAction, WorkerInfo, WorkerState
from dogs_core.ids import new_execution_id, new_record_id
from dogs_mongo import MongoJobStore
from dogs_mongo.queries import document_from_record
from tests.cli.test_cli import assert_clean_error, invoke


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["bulk", "retry", "--state", "bogus"], ["--state bogus", "expected one of"]),
        (["bulk", "retry", "--since", "yesterday"], ["--since yesterday", "duration ago"]),
        (["bulk", "retry", "--since", "1h", "--until", "2h"], ["--until", "later than since"]),
        (["bulk", "retry", "--time-field", "birthday"], ["--time-field birthday"]),
        (["bulk", "retry", "--error-type", "Bad Error"], ["--error-type", "class name"]),
        (["bulk", "delete", "--chunk-size", "0"], ["--chunk-size 0", "between 1 and 5000"]),
        (["bulk", "reschedule", "--state", "failed"], ["--run-in, --run-at or --priority"]),
        (["bulk", "reschedule", "--priority", "high"], ["--priority high"]),
        (["bulk", "resume", " "], ["AUDIT_ID"]),
        (["workers", "show", "a b"], ["ID 'a b'"]),
        (["workers", "stop", "w1", "--grace", "soon"], ["--grace soon"]),
        (["audit", "--limit", "0"], ["--limit 0", "between 1 and 500"]),
        (["audit", "--action", "explode"], ["--action explode", "bulk_retry"]),
        (["workers", "list"], ["no MongoDB URI"]),
    ],
)
def test_input_errors(runner: CliRunner, args: list[str], fragments: list[str]) -> None:
    assert_clean_error(invoke(runner, *args, "--database", "app"), *fragments)


def test_help(runner: CliRunner) -> None:
    top = invoke(runner, "--help").stdout
    for command in ("workers", "bulk", "audit"):
        assert command in top
    assert "resume" in invoke(runner, "bulk", "--help").stdout
    wide: dict[str, str | None] = {"COLUMNS": "300"}
    for command in ("retry", "cancel", "reschedule", "delete"):
        shown = invoke(runner, "bulk", command, "--help", env=wide).stdout
        assert "held or sleeping." in shown, f"bulk {command} --state lists every state"
        assert all(state.value in shown for state in JobState)
    assert "failed, held." in invoke(runner, "jobs", "delete", "--help", env=wide).stdout


# -- against the real mongod ------------------------------------------------------------------


@pytest.fixture
def store(sync_mongo_client: Any, mongo_database_name: str) -> MongoJobStore:
    return MongoJobStore(sync_mongo_client, mongo_database_name)


@pytest.fixture
def dogs(runner: CliRunner, mongodb_uri: str, mongo_database_name: str) -> Callable[..., Any]:
    env: dict[str, str | None] = {
        "DOGS_MONGODB_URI": mongodb_uri,
        "DOGS_MONGODB_DATABASE": mongo_database_name,
    }

    def call(*args: str, code: int = 0) -> Any:
        result = invoke(runner, *args, env=env)
        assert result.exit_code == code, (args, result.exit_code, result.output)
        return result

    return call


def failed(store: MongoJobStore, name: str, error_type: str) -> str:
    """A failed record of ``name`` whose last execution raised ``error_type``."""
    now = datetime.now(UTC)
    record = JobRecord(
        id=new_record_id(),
        job_name=name,
        type=JobType.EVENT,
        priority=100,
        next_run_at=now - timedelta(minutes=1),
        tries=3,
        status=JobStatus.MAX_TRIES_REACHED,
        max_tries_reached_at=now,
        expires_at=now + timedelta(days=7),
    )
    store.records_collection.insert_one(document_from_record(record))
    row = HistoryRecord(
        execution_id=new_execution_id(),
        job_id=record.id,
        job_name=name,
        type=JobType.EVENT,
        priority=100,
        tries=3,
        started_at=now - timedelta(seconds=2),
        ended_at=now - timedelta(seconds=1),
        status=HistoryStatus.ERROR,
        expires_at=now + timedelta(days=7),
        error_type=error_type,
        error_message="boom",
    )
    store.write_history_many([row])
    return record.id


@pytest.mark.mongo
def test_bulk_retry_delete_and_the_audit_trail(
    dogs: Callable[..., Any], store: MongoJobStore
) -> None:
    store.setup()
    refused = [failed(store, "send_email", "ConnectionRefusedError") for _ in range(3)]
    other = failed(store, "send_email", "ValueError")
    dry = dogs("bulk", "retry", "--state", "failed", "--error-type", "ConnectionRefusedError")
    assert "Would retry 3 failed jobs whose last error is ConnectionRefusedError" in dry.stdout
    assert "--yes" in dry.stdout
    done = dogs(
        "bulk", "retry", "--state", "failed", "--error-type", "ConnectionRefusedError",
        "--chunk-size", "2", "--yes",
    )  # fmt: skip
    assert "Retried 3 of 3 failed jobs" in done.stdout
    assert "retry: 2/3 (66%)" in done.stderr  # progress on stderr
    for job_id in refused:
        record = store.get_record(job_id)
        assert record is not None
        assert (record.status, record.tries) == (None, 0)
    assert store.get_record(other) is not None
    deleted = json.loads(dogs("bulk", "delete", "--state", "failed", "--yes", "--json").stdout)
    assert (deleted["changed"], deleted["complete"]) == (1, True)
    gone = dogs("jobs", "show", other).stdout  # its history row is still there
    assert "is in the archive since" in gone  # kept recoverable
    assert "deleted in bulk by " in gone
    assert "(cli)" in gone
    entries = json.loads(dogs("audit", "--json").stdout)
    assert [(e["action"], e["count"], e["source"]) for e in entries] == [
        ("bulk_delete", 1, "cli"),
        ("bulk_retry", 3, "cli"),
    ]
    chunks = json.loads(dogs("audit", "--job-id", other, "--json").stdout)
    assert [e["action"] for e in chunks] == ["bulk_chunk"]
    again = dogs("bulk", "resume", entries[1]["id"], code=2)
    assert "that bulk action is done" in again.stderr


@pytest.mark.mongo
def test_workers_list_show_quiet_and_stop(dogs: Callable[..., Any], store: MongoJobStore) -> None:
    now = datetime.now(UTC)
    store.setup_registry()
    store.beat_worker(
        WorkerInfo(
            instance_id="abcDEF123worker",
            host="host-a",
            pid=4242,
            version="0.1.0",
            job_names=("send_email",),
            workers_count=8,
            slots_in_use=0,
            executions=(),
            executions_total=0,
            started_at=now - timedelta(minutes=5),
            last_beat=now,
            state=WorkerState.RUNNING,
            expires_at=now + timedelta(minutes=1),
        )
    )
    listed = json.loads(dogs("workers", "list", "--json").stdout)
    assert [(w["instance_id"], w["state"]) for w in listed] == [("abcDEF123worker", "running")]
    shown = dogs("workers", "show", "abcDEF").stdout
    assert "host-a (pid 4242)" in shown
    assert "0 in use of 8" in shown
    assert "Asked abcDEF123worker" in dogs("workers", "quiet", "abcDEF").stdout
    assert "to stop" in dogs("workers", "stop", "abcDEF123worker", "--grace", "5s").stdout
    info = store.get_worker("abcDEF123worker")
    assert info is not None
    assert info.command is not None
    assert (info.command.action, info.command.grace) == (WorkerAction.STOP, timedelta(seconds=5))
    assert "running -> stop" in dogs("workers", "list").stdout
    assert "No live worker nobody" in dogs("workers", "quiet", "nobody", code=1).stdout
    entries = json.loads(dogs("audit", "--json").stdout)
    assert [(e["action"], e["target"], e["outcome"]) for e in entries] == [
        ("worker_quiet", "nobody", "not_done"),
        ("worker_stop", "abcDEF123worker", "done"),
        ("worker_quiet", "abcDEF123worker", "done"),
    ]


@pytest.mark.mongo
def test_bulk_touches_only_what_it_names(dogs: Callable[..., Any], store: MongoJobStore) -> None:
    store.setup()
    store.setup_archive()
    plain = [failed(store, "send_email", "ValueError") for _ in range(2)]
    dogs("schedules", "set", "nightly", "send_email", "--every", "1h")
    step = JobRecord(
        id=new_record_id(),
        job_name="send_email",
        type=JobType.EVENT,
        priority=100,
        next_run_at=datetime.now(UTC) + timedelta(hours=1),
        workflow={"id": "wf-1", "step": "b", "generation": 0},
    )
    store.records_collection.insert_one(document_from_record(step))
    # no filter: refused, without --all, nothing written
    for action in ("delete", "retry", "cancel"):
        refused = dogs("bulk", action, "--yes", code=2)
        assert "no filter given" in refused.stderr
        assert "--all" in refused.stderr
    actions = [e["action"] for e in json.loads(dogs("audit", "--json").stdout)]
    assert not [action for action in actions if action.startswith("bulk")]
    # --all: plain jobs only; the dry run counts the schedule and the step apart
    dry = dogs("bulk", "delete", "--all")
    assert "Would delete 2 jobs (a dry run" in dry.stdout
    assert "dogs bulk delete --all --yes" in dry.stdout
    assert "Left out: 1 run-time schedule, 1 workflow step match" in dry.stdout
    assert "--include-schedules / --include-steps" in dry.stdout
    done = dogs("bulk", "delete", "--all", "--yes")
    assert "Deleted 2 of 2 jobs" in done.stdout
    assert "kept in the records' archive" in done.stdout
    assert all(store.get_record(job_id) is None for job_id in plain)
    assert store.get_record(step.id) is not None
    assert "nightly" in dogs("schedules", "list").stdout
    # recoverable: the archive holds them, and the audit entry its filter
    assert set(plain) <= set(store.archived_keys(ArchiveKind.FAILED_RECORDS))
    shown = dogs("jobs", "show", plain[0]).stdout
    assert "is in the archive since" in shown
    assert "deleted in bulk by" in shown
    entry = json.loads(dogs("audit", "--action", "bulk_delete", "--json").stdout)[0]
    assert entry["target"] == "jobs"
    # a schedule named exactly is asked for
    named = dogs("bulk", "delete", "--name", "nightly")
    assert "Would delete 1 jobs of nightly: 1 run-time schedule (a dry run" in named.stdout
    # a typo: exit 2 naming it, not a quiet 0
    typo = dogs("bulk", "retry", "--name", "send_emial", "--yes", code=2)
    assert "unknown job name 'send_emial'" in typo.stderr
    assert "send_email" in typo.stderr  # the known names
    assert "--state bogus" in dogs("bulk", "retry", "--state", "bogus", code=2).stderr
    # a known name that matches nothing is fine
    assert (
        "Nothing to retry" in dogs("bulk", "retry", "--name", "send_email", "--state", "due").stdout
    )
    # --purge drops them: nothing more in the archive
    purged = dogs("bulk", "delete", "--all", "--include-steps", "--purge", "--yes")
    assert "Deleted 1 of 1 jobs and workflow steps" in purged.stdout
    assert "archive" not in purged.stdout
    assert store.get_record(step.id) is None
    assert step.id not in store.archived_keys(ArchiveKind.FAILED_RECORDS)
