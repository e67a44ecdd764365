"""Issue 29's "Measured today" list, the command line's half, and its finding commands: every
bad value one ``Error:`` line (``--priority 1e20``, ``jobs show not-a-uuid``, ``jobs list
--after garbage``), piped tables at full width, a failed or running job without a "Next run
... ago", a job cancelled before it ran without a start or duration, huge params cut, the
traceback with the user's frame first; then ``dogs history`` across jobs by every filter,
``dogs errors``, ``dogs find`` of a live, finished or archived job, and ``dogs status``'s
held jobs. Each was wrong (or missing) before issue 29."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from typer.testing import CliRunner

from dogs_cli.output import print_status
from dogs_cli.stats import print_stats
from dogs_core.domain.outcome import Defer
from dogs_core.domain.records import (
    ClaimRequest,
    HistoryRecord,
    HistoryStatus,
    Hold,
    HoldReason,
    JobType,
    NameStatus,
    NewJob,
    Owner,
)
from dogs_core.ids import new_execution_id, new_record_id
from dogs_mongo import MongoJobStore
from dogs_testing.settling import settle_one_sync, terminal
from tests.cli.test_cli import assert_clean_error, invoke

UNKNOWN_ID = "01900000-0000-7000-8000-000000000000"
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/srv/app/.venv/lib/python3.11/site-packages/dogs_core/runtime/invocation.py", '
    "line 252, in _timed\n    value = await run_sync(call)\n"
    '  File "/srv/app/.venv/lib/python3.11/site-packages/anyio/to_thread.py", line 65, in run\n'
    "    return await backend.run_sync_in_worker_thread(\n"
    '  File "/srv/app/shop/imports.py", line 42, in import_orders\n'
    '    raise ValueError("line 7: expected 7 columns, got 5")\n'
    "ValueError: line 7: expected 7 columns, got 5\n"
)


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


# -- without a server -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["schedule", "tests.cli.cli_jobs:jobs", "nap", "--priority", "1e20"], ["--priority 1e20"]),
        (["status", "--timeout", "soon"], ["'--timeout'", "dogs status --help"]),
        (["status", "--bogus"], ["No such option: --bogus"]),
        (["jobs", "show"], ["Missing argument 'ID'"]),
        (["jobs", "show", "not-a-uuid"], ["ID not-a-uuid: not an id (ids are UUIDs"]),
        (["jobs", "list", "--after", "garbage"], ["--after garbage: not an id"]),
        (["jobs", "retry", "42"], ["ID 42: not an id"]),
        (["workflows", "show", "not-a-uuid"], ["ID not-a-uuid: not an id"]),
        (["workflows", "cancel", "nope"], ["ID nope: not an id"]),
        (["audit", "--job-id", "not-a-uuid"], ["--job-id not-a-uuid: not an id"]),
        (["audit", "--before", "x"], ["--before x: not an id"]),
        (["jobs", "logs", "not-an-id"], ["ID not-an-id: not a job id", "nor an execution id"]),
        (["jobs", "logs", UNKNOWN_ID, "--after", "garbage"], ["--after garbage: not a log line"]),
        (["history", "--since", "yesterday-ish"], ["--since yesterday-ish"]),
        (["history", "--param", "user id=4"], ["--param 'user id=4'", "dotted names"]),
        (["history", "--owner", " "], ["--owner", "must not be empty"]),
        (["errors", "--window", "forever"], ["--window forever"]),
        (["errors", "--window", "8d"], ["--window 8d: must be at most 7d"]),
        (
            ["schedules", "set", "s1", "nap", "--every", "0"],
            ["--every 0: must be greater than zero"],
        ),
        (
            ["schedules", "set", "s1", "nap", "--cron", "61 * * * *", "--timezone", "UTC"],
            ["--cron"],
        ),
        (
            ["schedules", "set", "s1", "nap", "--cron", "0 * * * *", "--timezone", "Mars/Base"],
            ["--timezone Mars/Base"],
        ),
        (["errors", "--max-rows", "0"], ["--max-rows 0"]),
        (["find", " "], ["must not be empty"]),
    ],
)
def test_every_bad_value_is_one_error_line(
    runner: CliRunner, args: list[str], fragments: list[str]
) -> None:
    result = invoke(runner, *args, "--database", "app")
    assert_clean_error(result, *fragments)
    assert "datetime." not in result.output  # no Python repr in a message


def test_piped_status_and_stats_are_as_wide_as_their_content(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: cut to 80 columns when piped (the docs said as wide as their content)."""
    monkeypatch.delenv("COLUMNS", raising=False)
    name = "a_job_name_long_enough_to_need_more_than_eighty_columns_in_all"
    now = datetime(2030, 1, 1, tzinfo=UTC)
    print_status(
        [NameStatus(name, due=1, held=2, terminal=3, oldest_due_at=now - timedelta(minutes=5))],
        now,
        records_collection="jobs",
        as_json=False,
    )
    status = capsys.readouterr().out
    assert name in status
    assert "…" not in status
    assert max(len(line) for line in status.splitlines()) > 80
    header = next(line for line in status.splitlines() if "Due" in line)
    for column in ("Running", "Held", "Stale", "Failed", "Oldest due"):
        assert column in header
    assert "Terminal" not in header


# -- against a real mongod --------------------------------------------------------------------


@pytest.fixture
def db_env(mongodb_uri: str, mongo_database_name: str) -> dict[str, str | None]:
    return {"DOGS_MONGODB_URI": mongodb_uri, "DOGS_MONGODB_DATABASE": mongo_database_name}


@pytest.fixture
def store(sync_mongo_client: Any, mongo_database_name: str) -> MongoJobStore:
    store = MongoJobStore(sync_mongo_client, mongo_database_name)
    store.setup()
    return store


def _dogs(runner: CliRunner, env: dict[str, str | None], *args: str, code: int = 0) -> Any:
    result = invoke(runner, *args, env=env)
    assert result.exit_code == code, (args, result.exit_code, result.output)
    return result


def _insert(store: MongoJobStore, name: str, *, params: Any = None, at: datetime,
            uid: str | None = None) -> str:  # fmt: skip
    job_id = new_record_id()
    store.insert_job(NewJob(job_id, name, params, at, 100, partition=0, unique_identifier=uid))
    return job_id


def _claim(store: MongoJobStore, name: str, now: datetime, seconds: float = 60) -> Any:
    owner = Owner("web-7", 4242, "w-1")
    request = ClaimRequest(
        (name,), 0, "byJobName", now, now + timedelta(seconds=seconds), new_execution_id(), owner
    )
    claimed = store.claim(request)
    assert claimed is not None
    return claimed


def _row(
    job_id: str, name: str, started: datetime, status: HistoryStatus, **fields: Any
) -> HistoryRecord:
    return HistoryRecord(
        execution_id=new_execution_id(),
        job_id=job_id,
        job_name=name,
        type=JobType.EVENT,
        priority=100,
        tries=fields.pop("tries", 1),
        started_at=started,
        ended_at=started + timedelta(milliseconds=120),
        status=status,
        expires_at=started + timedelta(days=7),
        **fields,
    )


@pytest.mark.mongo
def test_jobs_show_tells_the_truth(
    runner: CliRunner, db_env: dict[str, str | None], store: MongoJobStore
) -> None:
    now = datetime.now(UTC)
    huge = {"rows": ["x" * 100] * 1200}  # ~120 KB
    failed = _insert(store, "import_orders", params=huge, at=now - timedelta(minutes=5))
    claimed = _claim(store, "import_orders", now - timedelta(minutes=4))
    assert settle_one_sync(store, failed, claimed.lock_id, terminal(now - timedelta(minutes=4)))
    store.write_history_many(
        [
            _row(
                failed,
                "import_orders",
                now - timedelta(minutes=4),
                HistoryStatus.ERROR,
                error_type="ValueError",
                error_message="line 7: expected 7 columns, got 5",
                error_traceback=TRACEBACK,
                outcome="failed",
            ),
        ]
    )
    shown = _dogs(runner, db_env, "jobs", "show", failed).stdout
    # A failed job: when it failed, no "Next run ... ago".
    assert "Failed at" in shown
    assert "Next run" not in shown
    # 120 KB of params: cut, with the way to see them all.
    assert len(shown) < 20_000
    assert f"`dogs jobs show {failed} --full` prints them all" in shown
    # The user's frame first: the scheduler's and anyio's folded into one line.
    assert "2 frames of dogs_core, anyio (folded)" in shown
    traceback = shown[shown.index("Traceback of the newest error") :]
    assert traceback.index("shop/imports.py") < traceback.index("ValueError: line 7")
    assert "invocation.py" not in shown
    full = _dogs(runner, db_env, "jobs", "show", failed, "--full").stdout
    assert "invocation.py" in full
    assert len(full) > 120_000

    running = _insert(store, "nap", at=now - timedelta(seconds=30))
    _claim(store, "nap", now)
    shown_running = _dogs(runner, db_env, "jobs", "show", running).stdout
    assert "Running since" in shown_running
    assert "Next run" not in shown_running
    listed = _dogs(runner, db_env, "jobs", "list", "--name", "nap").stdout
    assert "running since" in listed
    assert "ago)" in listed  # since when it runs, not a next run in the past

    later = _insert(store, "nap", at=now + timedelta(hours=1))
    _dogs(runner, db_env, "jobs", "cancel", later)
    cancelled = _dogs(runner, db_env, "jobs", "show", later).stdout
    assert "cancelled (never ran)" in cancelled
    row = next(line for line in cancelled.splitlines() if "never ran" in line)
    assert "0 ms" not in row


@pytest.mark.mongo
def test_status_counts_held_jobs_and_says_failed(
    runner: CliRunner, db_env: dict[str, str | None], store: MongoJobStore
) -> None:
    now = datetime.now(UTC)
    job_id = _insert(store, "export", at=now - timedelta(minutes=2))
    claimed = _claim(store, "export", now - timedelta(minutes=1))
    hold = Hold(HoldReason.RATE, since=now - timedelta(minutes=2), until=now + timedelta(hours=1))
    give_back = Defer(now + timedelta(hours=1), tries=0, hold=hold)
    assert settle_one_sync(store, job_id, claimed.lock_id, give_back)
    (row,) = json.loads(_dogs(runner, db_env, "status", "--json").stdout)
    assert (row["held"], row["due"], row["scheduled_later"]) == (1, 0, 0)
    assert row["oldest_due_age_seconds"] >= 119  # waiting since it was due, not "in 1h"
    assert row["failed"] == row["terminal"] == 0
    table = _dogs(runner, db_env, "status").stdout
    assert "Held" in table
    assert "Terminal" not in table
    shown = _dogs(runner, db_env, "jobs", "show", job_id).stdout
    assert "held" in shown
    assert "refused by its rate limit" in shown
    assert [r.id for r in store.find_records(state=None)] == [job_id]


@pytest.mark.mongo
def test_history_errors_and_find(
    runner: CliRunner, db_env: dict[str, str | None], store: MongoJobStore
) -> None:
    now = datetime.now(UTC)
    first, second = new_record_id(), new_record_id()
    rows = [
        _row(
            first,
            "send_email",
            now - timedelta(minutes=3),
            HistoryStatus.ERROR,
            error_type="smtplib.SMTPException",
            error_message="mailbox 42 full",
            params={"user": {"id": 42}},
            owner=Owner("web-1", 7, "w-a"),
        ),
        _row(
            second,
            "send_email",
            now - timedelta(minutes=2),
            HistoryStatus.ERROR,
            error_type="smtplib.SMTPException",
            error_message="mailbox 7 full",
            params={"user": {"id": 7}},
            owner=Owner("web-2", 8, "w-b"),
            error_traceback=TRACEBACK,
        ),
        _row(
            new_record_id(),
            "resize",
            now - timedelta(minutes=1),
            HistoryStatus.SUCCESS,
            unique_identifier="avatar:9",
        ),
    ]
    store.write_history_many(rows)

    def ids(*args: str) -> list[str]:
        listed = json.loads(_dogs(runner, db_env, "history", *args, "--json").stdout)
        return [row["job_id"] for row in listed]

    assert ids() == [rows[2].job_id, second, first]  # every job, newest first
    assert ids("--status", "error") == [second, first]
    assert ids("--error-type", "smtplib.SMTPException", "--limit", "1") == [second]
    assert ids("--owner", "web-1") == [first]
    assert ids("--param", "user.id=42") == [first]
    assert ids("--since", "150s", "--name", "send_email") == [second]
    assert ids("--until", "150s") == [first]
    assert ids("--unique-key", "avatar:9") == [rows[2].job_id]
    page = _dogs(runner, db_env, "history", "--limit", "2").stdout
    assert "Next page: dogs history --limit 2 --before " in page

    report = _dogs(runner, db_env, "errors").stdout
    assert "smtplib.SMTPException" in report
    assert "mailbox <n> full" in report  # one group for both messages
    group = next(line for line in report.splitlines() if "mailbox" in line)
    assert group.split("│")[1].strip() == "2"
    assert "shop/imports.py" in report  # the newest of the group's traceback, folded
    assert "invocation.py" not in report
    found = json.loads(_dogs(runner, db_env, "find", first, "--json").stdout)
    assert (found["matched_by"], found["jobs"][0]["where"]) == ("id", "finished")
    by_key = json.loads(_dogs(runner, db_env, "find", "avatar:9", "--json").stdout)
    assert by_key["matched_by"] == "unique key"
    missing = _dogs(runner, db_env, "find", UNKNOWN_ID, code=1).stdout
    assert "not live, not in the history, not in the archive" in missing

    # Archived: a 40-day-old failed job and its row, moved by dogs archive.
    old = now - timedelta(days=40)
    archived_id = _insert(store, "import_orders", at=old - timedelta(seconds=1), uid="batch-3")
    claimed = _claim(store, "import_orders", old)
    assert settle_one_sync(store, archived_id, claimed.lock_id, terminal(old))
    store.write_history_many(
        [
            dataclasses.replace(
                _row(archived_id, "import_orders", old, HistoryStatus.ERROR),
                unique_identifier="batch-3",
                # kept for 60 days: a row already expired could go with mongod's TTL pass
                # (every 60 s) before dogs archive moves it
                expires_at=old + timedelta(days=60),
            )
        ]
    )
    _dogs(runner, db_env, "archive", "--older-than", "30d")
    found_archived = json.loads(_dogs(runner, db_env, "find", "batch-3", "--json").stdout)
    assert [job["where"] for job in found_archived["jobs"]] == ["archived"]
    shown = _dogs(runner, db_env, "jobs", "show", archived_id).stdout
    assert "is in the archive" in shown
    assert "failed (archived)" in shown
    assert ids("--archived") == [archived_id]


def test_stats_columns_are_named_plainly(capsys: pytest.CaptureFixture[str]) -> None:
    """Was: "Failed" meant error rows, "Runs" counted cancels with no cancelled column, and
    Jobs/min divided by the whole window."""
    from dogs_core.domain.stats import stats_from_history

    at = datetime(2030, 1, 1, tzinfo=UTC)
    rows = [
        _row(new_record_id(), "send", at + timedelta(milliseconds=10 * i), HistoryStatus.SUCCESS)
        for i in range(299)
    ] + [_row(new_record_id(), "send", at + timedelta(seconds=4), HistoryStatus.CANCELLED)]
    stats = stats_from_history(rows, since=at, until=at + timedelta(hours=1))
    print_stats(stats, window=timedelta(hours=1), until=at + timedelta(hours=1), as_json=False)
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if "Attempts" in line)
    assert "Cancelled" in header
    assert "Jobs/min" not in header
    line = next(line for line in out.splitlines() if "send" in line)
    cells = [cell.strip() for cell in line.split("│")]
    assert cells[2] == "300"  # attempts
    assert cells[6] == "1"  # cancelled
    assert cells[-2] == "4,500.00"  # attempts per minute over the 4 s they were started in
