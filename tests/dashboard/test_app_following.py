"""The dashboard shows a running job's progress (in the job list and on its page) and the log
lines of its running, else last, execution, escaped; through Starlette's TestClient over the
in-memory store."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from starlette.testclient import TestClient

from dogs_core import DogsClient, Jobs
from dogs_core.domain.progress import Progress
from dogs_core.domain.records import HistoryStatus, JobRecord, JobType
from dogs_core.ids import new_execution_id, new_record_id
from dogs_dashboard import create_app
from dogs_testing import InMemoryJobStore
from dogs_testing.contract.following import log_line
from tests.dashboard.test_app import history_row

jobs = Jobs()


@pytest.fixture
def env() -> Iterator[tuple[InMemoryJobStore, TestClient]]:
    store = InMemoryJobStore()
    app = create_app(DogsClient(store, jobs))
    with TestClient(app) as http:
        yield store, http


def running(store: InMemoryJobStore, fraction: float | None, message: str) -> JobRecord:
    now = datetime.now(UTC)
    execution = new_execution_id()
    record = JobRecord(
        id=new_record_id(),
        job_name="import_file",
        type=JobType.EVENT,
        priority=100,
        next_run_at=now - timedelta(seconds=5),
        partition=0,
        tries=1,
        lock_id=execution,
        locked_until=now + timedelta(minutes=5),
        progress=Progress(fraction, message, {"rows": 4200}, now, execution),
    )
    store.sync.insert_record(record)
    return record


def test_the_job_list_shows_a_bar_on_running_jobs(
    env: tuple[InMemoryJobStore, TestClient],
) -> None:
    store, http = env
    record = running(store, 0.42, "chunk <42>/100")
    unknown = running(store, None, "warming up")
    html = http.get("/jobs?state=running").text
    row = html.split(f'data-job-id="{record.id}"')[1].split("</tr>")[0]
    assert '<progress max="1" value="0.4200">' in row
    assert "42%" in row
    assert "chunk &lt;42&gt;/100" in row
    indeterminate = html.split(f'data-job-id="{unknown.id}"')[1].split("</tr>")[0]
    assert '<progress max="1"></progress>' in indeterminate


def test_the_job_page_shows_the_progress_and_the_running_lines(
    env: tuple[InMemoryJobStore, TestClient],
) -> None:
    store, http = env
    record = running(store, 0.5, "half")
    assert record.lock_id is not None
    lines = [log_line(record.lock_id, record.id, seq, message="<b>row</b>") for seq in range(3)]
    store.sync.write_log_lines(lines)
    html = http.get(f"/jobs/{record.id}").text
    assert re.search(r'id="job-progress"[^>]*data-fraction="0.5000"', html)
    assert "&#34;rows&#34;: 4200" in html
    log = html.split('id="log-lines"')[1].split("</section>")[0]
    assert f"the running execution {record.lock_id}" in log
    assert log.count("<li ") == 3
    assert "&lt;b&gt;row&lt;/b&gt; 1" in log
    assert "<b>row</b>" not in log
    assert "Traceback ..." in log  # line 1's exception
    fragment = http.get(f"/jobs/{record.id}?fragment=1").text
    assert 'id="log-lines"' in fragment, "the lines are in the live part"


def test_a_finished_job_shows_its_last_execution_lines_and_final_progress(
    env: tuple[InMemoryJobStore, TestClient],
) -> None:
    store, http = env
    row = history_row("import_file", HistoryStatus.SUCCESS)
    final = Progress(1.0, "done", None, row.ended_at, row.execution_id)
    store.sync.write_history_many([dataclasses.replace(row, progress=final)])
    store.sync.write_log_lines([log_line(row.execution_id, row.job_id, 0, message="last")])
    html = http.get(f"/jobs/{row.job_id}").text
    assert f"the last execution {row.execution_id}" in html
    assert "last 0" in html
    executions = html.split('id="executions"')[1]
    assert 'data-fraction="1.0000"' in executions


def test_no_lines_kept_says_how_to_keep_them(env: tuple[InMemoryJobStore, TestClient]) -> None:
    store, http = env
    row = history_row("import_file", HistoryStatus.SUCCESS)
    store.sync.write_history_many([row])
    html = http.get(f"/jobs/{row.job_id}").text
    assert 'id="no-log-lines"' in html
    assert "store_logs=True" in html
