"""``dogs jobs`` and ``dogs history`` (dogs_cli.jobs), and the state fixes of ``dogs
status``: bad input without a server, then every command against the real mongod, with a real
worker where a job has to fail."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from typer.testing import CliRunner

from dogs_core import JobStatus
from dogs_core.domain.records import ClaimRequest
from dogs_core.domain.steps import RecordedStep
from dogs_core.ids import new_execution_id
from dogs_mongo import MongoJobStore
from dogs_mongo.container import DogsContainer
from dogs_testing.settling import released, rescheduled, settle_one_sync
from tests.cli import cli_jobs
from tests.cli.test_cli import REGISTRY, assert_clean_error, invoke

UNKNOWN_ID = "01900000-0000-7000-8000-000000000000"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


# ----------------------------------------------------------------------------------------------
# Without a server: every bad input is one line naming the flag, exit 2
# ----------------------------------------------------------------------------------------------


def test_help_lists_the_job_commands(runner: CliRunner) -> None:
    top = invoke(runner, "--help")
    assert top.exit_code == 0
    assert "jobs" in top.stdout
    assert "history" in top.stdout
    result = invoke(runner, "jobs", "--help")
    assert result.exit_code == 0, result.output
    for command in ("list", "show", "cancel", "retry", "reschedule", "delete"):
        assert command in result.stdout


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["jobs", "list", "--state", "bogus"], ["--state bogus", "expected one of", "failed"]),
        (["jobs", "list", "--limit", "0"], ["--limit 0", "between 1 and 1000"]),
        (["jobs", "list", "--limit", "5000"], ["--limit 5000", "between 1 and 1000"]),
        (["jobs", "list", "--limit", "many"], ["--limit many", "must be an integer"]),
        (["jobs", "list", "--after", " "], ["--after", "must not be empty"]),
        (["jobs", "list", "--registry", "tests.no_such_module:jobs"], ["cannot import"]),
        (["jobs", "list"], ["no MongoDB URI"]),
        (["jobs", "show", UNKNOWN_ID, "--executions", "0"], ["--executions 0", "at least 1"]),
        (["jobs", "cancel"], ["a job ID or --unique-key"]),
        (["jobs", "cancel", UNKNOWN_ID, "--unique-key", "k"], ["not both"]),
        (["jobs", "cancel", UNKNOWN_ID, "--name", "nap"], ["--name scopes a --unique-key"]),
        (["jobs", "cancel", "--unique-key", "k", "--name", "nap"], ["--name needs --registry"]),
        (["jobs", "reschedule", UNKNOWN_ID], ["--run-in, --run-at or --priority"]),
        (["jobs", "reschedule", UNKNOWN_ID, "--run-in", "soon"], ["--run-in soon"]),
        (["jobs", "reschedule", UNKNOWN_ID, "--run-at", "2030-01-01T09:00"], ["timezone"]),
        (["jobs", "reschedule", UNKNOWN_ID, "--priority", "high"], ["--priority high"]),
        (["jobs", "reschedule", UNKNOWN_ID, "--priority", str(2**64)], ["MAX_SAFE_INTEGER"]),
        (["jobs", "delete"], ["a job ID, or --state"]),
        (["jobs", "delete", UNKNOWN_ID, "--state", "failed"], ["not both"]),
        (["jobs", "delete", "--state", "running"], ["--state running", "cancel"]),
        (["jobs", "delete", "--name", "nap"], ["--state"]),
        (
            ["history", "--job-id", "not-a-uuid"],
            ["--job-id not-a-uuid", "not an id (ids are UUIDs"],
        ),
        (["history", "--name", "nap", "--status", "bogus"], ["--status bogus", "snoozed"]),
        (["history", "--name", "nap", "--limit", "0"], ["--limit 0", "between 1 and 1,000"]),
    ],
)
def test_input_errors(runner: CliRunner, args: list[str], fragments: list[str]) -> None:
    assert_clean_error(invoke(runner, *args, "--database", "app"), *fragments)


# ----------------------------------------------------------------------------------------------
# Against the real mongod
# ----------------------------------------------------------------------------------------------


@pytest.fixture
def db_env(mongodb_uri: str, mongo_database_name: str) -> dict[str, str | None]:
    return {"DOGS_MONGODB_URI": mongodb_uri, "DOGS_MONGODB_DATABASE": mongo_database_name}


@pytest.fixture
def store(sync_mongo_client: Any, mongo_database_name: str) -> MongoJobStore:
    return MongoJobStore(sync_mongo_client, mongo_database_name)


@pytest.fixture
def dogs(runner: CliRunner, db_env: dict[str, str | None]) -> Callable[..., Any]:
    """``dogs *args`` against the test's database."""

    def call(*args: str, code: int = 0) -> Any:
        result = invoke(runner, *args, env=db_env)
        assert result.exit_code == code, (args, result.exit_code, result.output)
        return result

    return call


def schedule(dogs: Callable[..., Any], job: str, *args: str) -> str:
    result = dogs("schedule", REGISTRY, job, *args)
    assert result.stdout.startswith("Scheduled "), result.stdout
    return str(result.stdout.split()[1])


def as_json(result: Any) -> Any:
    return json.loads(result.stdout)


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def claim(store: MongoJobStore, job_name: str, *, lock_for: timedelta) -> str:
    now = datetime.now(UTC)
    request = ClaimRequest(
        job_names=(job_name,),
        partition=0,
        hint="byJobName",
        now=now,
        locked_until=now + lock_for,
        lock_id=new_execution_id(),
    )
    claimed = store.claim(request)
    assert claimed is not None
    return claimed.job_id


@pytest.mark.mongo
def test_schedule_list_and_cancel(dogs: Callable[..., Any], store: MongoJobStore) -> None:
    later = schedule(dogs, "greet", "--params", '{"name": "Ada"}', "--run-in", "1h")
    now = schedule(dogs, "nap", "--unique-key", "nap-1")

    page = as_json(dogs("jobs", "list", "--json"))
    assert [job["id"] for job in page["jobs"]] == [later, now], "creation order"
    assert page["next_after"] is None
    by_id = {job["id"]: job for job in page["jobs"]}
    assert by_id[later]["state"] == "scheduled"
    assert by_id[now]["state"] == "due"
    assert by_id[now]["unique_key"] == "nap-1"
    assert datetime.fromisoformat(by_id[later]["next_run_at"]) > datetime.now(UTC)
    scheduled = as_json(dogs("jobs", "list", "--state", "scheduled", "--json"))
    assert [job["id"] for job in scheduled["jobs"]] == [later]

    table = dogs("jobs", "list", "--name", "greet").stdout
    assert later in table
    assert "scheduled" in table
    assert now not in table

    cancelled = dogs("jobs", "cancel", later)
    assert cancelled.stdout.strip() == f"Cancelled {later} (greet)"
    assert store.get_record(later) is None
    rows = as_json(dogs("history", "--job-id", later, "--json"))
    assert [row["status"] for row in rows] == ["cancelled"]
    again = dogs("jobs", "cancel", later, code=1)
    assert "is over (its last execution: cancelled)" in again.stdout

    by_key = dogs("jobs", "cancel", "--unique-key", "nap-1")
    assert by_key.stdout.startswith(f"Cancelled {now} (nap)")
    assert schedule(dogs, "nap", "--unique-key", "nap-1") != now, "the key is free again"
    assert "Not found" in dogs("jobs", "cancel", UNKNOWN_ID, code=1).stdout
    assert "Not found" in dogs("jobs", "show", UNKNOWN_ID, code=1).stdout


@pytest.mark.mongo
def test_an_id_in_upper_case_finds_its_job(dogs: Callable[..., Any]) -> None:
    job_id = schedule(dogs, "nap", "--run-in", "1h")
    loud = job_id.upper()
    assert loud != job_id
    shown = dogs("jobs", "show", loud).stdout
    assert job_id in shown
    assert "Not found" not in shown
    assert [job["id"] for job in as_json(dogs("jobs", "list", "--json"))["jobs"]] == [job_id]
    assert dogs("jobs", "cancel", loud).stdout.strip() == f"Cancelled {job_id} (nap)"
    rows = as_json(dogs("history", "--job-id", loud, "--json"))
    assert [row["status"] for row in rows] == ["cancelled"]


@pytest.mark.mongo
def test_pages_follow_the_cursor(dogs: Callable[..., Any]) -> None:
    ids = [schedule(dogs, "nap", "--run-in", "1h") for _ in range(3)]
    first = dogs("jobs", "list", "--name", "nap", "--limit", "2")
    cursor = ids[1]
    assert f"Next page: dogs jobs list --name nap --limit 2 --after {cursor}" in first.stdout
    second = as_json(
        dogs("jobs", "list", "--name", "nap", "--limit", "2", "--after", cursor, "--json")
    )
    assert [job["id"] for job in second["jobs"]] == [ids[2]]
    assert second["next_after"] is None
    assert "No job records match." in dogs("jobs", "list", "--state", "failed").stdout


@pytest.fixture
def worker(mongodb_uri: str, mongo_database_name: str) -> Iterator[None]:
    """A real worker (the blocking facade) for the registry's jobs, polling every 50 ms."""
    cli_jobs.flaky_fixed["fixed"] = False
    container = DogsContainer(uri=mongodb_uri, database=mongo_database_name, driver="sync")
    workers = container.blocking_workers(cli_jobs.jobs, poll_interval=0.05, workers_count=2)
    workers.start()
    try:
        yield
    finally:
        workers.stop(grace=5)
        container.close()
        cli_jobs.flaky_fixed["fixed"] = False


@pytest.mark.mongo
@pytest.mark.usefixtures("worker")
def test_retry_a_failed_job_and_read_its_history(
    dogs: Callable[..., Any], store: MongoJobStore
) -> None:
    job_id = schedule(dogs, "flaky")

    def failed() -> bool:
        record = store.get_record(job_id)
        return record is not None and record.status is JobStatus.MAX_TRIES_REACHED

    wait_until(failed, "flaky to reach its attempt limit")
    listed = as_json(dogs("jobs", "list", "--state", "failed", "--json"))
    assert [(job["id"], job["tries"]) for job in listed["jobs"]] == [(job_id, 2)]
    shown = dogs("jobs", "show", job_id).stdout
    assert "failed" in shown
    assert "Last executions" in shown
    assert "RuntimeError: flaky is broken (try 2)" in shown

    cli_jobs.flaky_fixed["fixed"] = True
    retried = dogs("jobs", "retry", job_id)
    assert retried.stdout.startswith(f"Rescheduled {job_id} (flaky): due, next run ")
    assert "tries 0" in retried.stdout
    wait_until(lambda: store.get_record(job_id) is None, "the revived job to succeed")

    rows = as_json(dogs("history", "--job-id", job_id, "--json"))
    assert [(row["status"], row["tries"]) for row in rows] == [
        ("success", 1),
        ("error", 2),
        ("error", 1),
    ]
    assert rows[0]["result"] == "fixed"
    assert rows[1]["error_type"] == "RuntimeError"
    assert rows[1]["error_message"] == "flaky is broken (try 2)"
    assert "Traceback" in rows[1]["error_traceback"]
    assert rows[0]["was_stale"] is False
    assert rows[0]["owner"]["pid"] > 0
    for row in rows:
        datetime.fromisoformat(row["started_at"])
    errors = as_json(dogs("history", "--name", "flaky", "--status", "error", "--json"))
    assert [row["tries"] for row in errors] == [2, 1]
    table = dogs("history", "--job-id", job_id).stdout
    for column in ("Started", "Status", "Duration", "Was stale", "Owner", "Error"):
        assert column in table
    assert "RuntimeError: flaky is broken" in table
    gone = dogs("jobs", "show", job_id).stdout
    assert "no record (it is over; its last execution ended success)" in gone


@pytest.mark.mongo
def test_reschedule_and_delete(dogs: Callable[..., Any], store: MongoJobStore) -> None:
    job_id = schedule(dogs, "greet", "--params", '{"name": "Ada"}', "--run-in", "1h")
    moved = dogs("jobs", "reschedule", job_id, "--run-in", "2h", "--priority", "9")
    assert moved.stdout.startswith(f"Rescheduled {job_id} (greet): scheduled")
    record = store.get_record(job_id)
    assert record is not None
    assert record.priority == 9
    in_two_hours = datetime.now(UTC) + timedelta(hours=2)
    assert abs((record.next_run_at - in_two_hours).total_seconds()) < 60
    dogs("jobs", "reschedule", job_id, "--run-at", "2020-01-01T00:00:00Z")
    shown = as_json(dogs("jobs", "show", job_id, "--json"))
    assert shown["job"]["state"] == "due"
    assert shown["job"]["next_run_at"].startswith("2020-01-01T00:00:00")
    assert shown["executions"] == []

    deleted = dogs("jobs", "delete", job_id)
    assert deleted.stdout.strip() == f"Deleted {job_id} (greet, was due)"
    assert store.get_record(job_id) is None
    assert "Not found" in dogs("jobs", "delete", job_id, code=1).stdout
    assert "Not found" in dogs("jobs", "retry", job_id, code=1).stdout


@pytest.mark.mongo
def test_bulk_delete_is_a_dry_run_without_yes(
    dogs: Callable[..., Any], store: MongoJobStore
) -> None:
    ids = [schedule(dogs, "nap", "--run-in", "1h") for _ in range(3)]
    kept = schedule(dogs, "greet", "--params", '{"name": "Ada"}', "--run-in", "1h")
    dry = dogs("jobs", "delete", "--name", "nap", "--state", "scheduled")
    assert "Would delete 3 scheduled record(s) of nap (a dry run: nothing was deleted)" in (
        dry.stdout
    )
    assert "dogs jobs delete --name nap --state scheduled --yes" in dry.stdout
    assert all(store.get_record(job_id) is not None for job_id in ids)
    done = dogs("jobs", "delete", "--name", "nap", "--state", "scheduled", "--yes")
    assert done.stdout.strip() == "Deleted 3 scheduled record(s) of nap."
    assert all(store.get_record(job_id) is None for job_id in ids)
    assert store.get_record(kept) is not None
    nothing = dogs("jobs", "delete", "--state", "failed")
    assert nothing.stdout.strip() == "Nothing to delete: 0 failed record(s)."


@pytest.mark.mongo
def test_a_running_job_is_left_alone_until_cancelled(
    dogs: Callable[..., Any], store: MongoJobStore
) -> None:
    job_id = schedule(dogs, "nap")
    assert claim(store, "nap", lock_for=timedelta(minutes=5)) == job_id
    listed = as_json(dogs("jobs", "list", "--state", "running", "--json"))
    assert [job["id"] for job in listed["jobs"]] == [job_id]
    assert "is running" in dogs("jobs", "retry", job_id, code=1).stdout
    assert "is running" in dogs("jobs", "delete", job_id, code=1).stdout
    assert "is running" in dogs("jobs", "reschedule", job_id, "--run-in", "1h", code=1).stdout
    stopped = dogs("jobs", "cancel", job_id)
    assert "its running execution" in stopped.stdout
    assert store.get_record(job_id) is None


@pytest.mark.mongo
def test_a_recurrent_job_needs_its_registry_to_be_cancelled(
    dogs: Callable[..., Any], store: MongoJobStore
) -> None:
    before = datetime.now(UTC)
    store.ensure_recurrent("hourly", priority=100, partition=0, now=before)
    (record,) = store.find_records(job_name="hourly")
    refused = dogs("jobs", "cancel", record.id, code=2)
    assert "pass --registry MODULE:REGISTRY" in refused.stderr
    skipped = dogs("jobs", "cancel", record.id, "--registry", REGISTRY)
    assert skipped.stdout.startswith(f"Cancelled {record.id} (hourly)")
    after = store.get_record(record.id)
    assert after is not None, "cancel skips the run of a recurrent job, the record stays"
    assert after.next_run_at > before + timedelta(minutes=30)
    deleted = dogs("jobs", "delete", record.id)
    assert "comes back when a worker with its definition starts" in deleted.stdout


@pytest.mark.mongo
def test_status_counts_a_released_lock_as_due_and_a_stale_one_in_oldest_due(
    dogs: Callable[..., Any], store: MongoJobStore
) -> None:
    given_back = schedule(dogs, "nap", "--run-at", "2021-01-01T00:00:00Z")
    claim(store, "nap", lock_for=timedelta(minutes=5))
    record = store.get_record(given_back)
    assert record is not None
    assert record.lock_id is not None
    assert settle_one_sync(store, given_back, record.lock_id, released(datetime.now(UTC)))
    stale = schedule(dogs, "greet", "--params", '{"name": "Ada"}', "--run-at", "2020-01-01T00:00Z")
    claim(store, "greet", lock_for=timedelta(milliseconds=1))
    time.sleep(0.01)

    rows = {row["job_name"]: row for row in as_json(dogs("status", "--json"))}
    assert (rows["nap"]["due"], rows["nap"]["stale"]) == (1, 0), "a released lock is not stale"
    assert (rows["greet"]["due"], rows["greet"]["stale"]) == (0, 1)
    assert rows["greet"]["oldest_due_at"].startswith("2020-01-01T00:00:00"), "stale waits too"
    table = dogs("status").stdout
    assert "greet" in table
    states = {job["id"]: job["state"] for job in as_json(dogs("jobs", "list", "--json"))["jobs"]}
    assert states == {given_back: "retrying", stale: "stale"}


@pytest.mark.mongo
def test_show_lists_a_durable_jobs_steps_and_a_retry_wakes_it(
    dogs: Callable[..., Any], store: MongoJobStore
) -> None:
    job_id = schedule(dogs, "nap")
    now = datetime.now(UTC)
    request = ClaimRequest(
        job_names=("nap",),
        partition=0,
        hint="byJobName",
        now=now,
        locked_until=now + timedelta(minutes=5),
        lock_id=new_execution_id(),
    )
    claimed = store.claim(request)
    assert claimed is not None
    lock = claimed.lock_id
    charge = RecordedStep("charge", {"id": "ch_<1>"}, now, lock, 42)
    wake = now + timedelta(days=3)
    sleep = RecordedStep("sleep:1", wake, now, lock, 0)
    assert store.record_step(job_id, lock, 0, charge)
    assert store.record_step(job_id, lock, 1, sleep, sleep_until=wake)
    assert settle_one_sync(store, job_id, lock, rescheduled(wake, tries=0))

    shown = dogs("jobs", "show", job_id).stdout
    assert "Recorded steps" in shown
    assert "sleeping" in shown
    assert "Sleeping until" in shown
    assert "charge" in shown
    assert "42 ms" in shown
    assert '{"id": "ch_<1>"}' in shown
    job = as_json(dogs("jobs", "show", job_id, "--json"))["job"]
    assert job["state"] == "sleeping"
    assert job["sleeping_until"] is not None
    assert [(s["name"], s["duration_ms"]) for s in job["steps"]] == [("charge", 42), ("sleep:1", 0)]
    listed = as_json(dogs("jobs", "list", "--state", "sleeping", "--json"))["jobs"]
    assert [j["id"] for j in listed] == [job_id]
    dogs("jobs", "retry", job_id)
    woken = as_json(dogs("jobs", "show", job_id, "--json"))["job"]
    assert woken["state"] == "due"
    assert woken["sleeping_until"] is None
    assert len(woken["steps"]) == 2, "a retry wakes it: its steps replay"
