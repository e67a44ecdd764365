"""The dashboard's finding and truth (issue 29) through Starlette's TestClient over the in-memory
store: search finds live, finished and archived jobs; the Executions, Errors and Archive pages
and their filters; the job page's times, params and folded traceback; held jobs and the plain
stats words on the overview; slow counts served as a snapshot."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest
from starlette.testclient import TestClient

from dogs_core import DogsClient, JobContext, Jobs
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
from dogs_dashboard import create_app
from dogs_testing import InMemoryJobStore
from dogs_testing.settling import settle_one_sync, terminal

jobs = Jobs()


@jobs.event
async def send_email(params: dict[str, Any], ctx: JobContext) -> str:
    return "sent"


TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/srv/venv/lib/python3.11/site-packages/dogs_core/runtime/invocation.py", line 252,'
    " in _timed\n    value = await run_sync(call)\n"
    '  File "/srv/venv/lib/python3.11/site-packages/anyio/to_thread.py", line 65, in run_sync\n'
    "    return await backend.run(call)\n"
    '  File "/srv/shop/imports.py", line 42, in import_orders\n'
    '    raise ValueError("bad row")\n'
    "ValueError: bad row\n"
)


class Env:
    def __init__(self, client: DogsClient, store: InMemoryJobStore, http: TestClient) -> None:
        self.client, self.store, self.http = client, store, http

    def get(self, path: str, **params: Any) -> str:
        response = self.http.get(path, params=params) if params else self.http.get(path)
        assert response.status_code == 200, (path, response.status_code, response.text[:500])
        return response.text


@pytest.fixture
def env() -> Iterator[Env]:
    store = InMemoryJobStore()
    client = DogsClient(store, jobs)
    with TestClient(create_app(client)) as http:
        yield Env(client, store, http)


def _row(
    job_id: str, name: str, ago: timedelta, status: HistoryStatus, **fields: Any
) -> HistoryRecord:
    started = datetime.now(UTC) - ago
    return HistoryRecord(
        execution_id=new_execution_id(),
        job_id=job_id,
        job_name=name,
        type=JobType.EVENT,
        priority=100,
        tries=fields.pop("tries", 1),
        started_at=started,
        ended_at=started + timedelta(milliseconds=250),
        status=status,
        expires_at=started + timedelta(days=7),
        **fields,
    )


def _insert(env: Env, name: str, at: datetime, **fields: Any) -> str:
    job_id = new_record_id()
    env.store.sync.insert_job(
        NewJob(job_id, name, fields.pop("params", None), at, 100, partition=0, **fields)
    )
    return job_id


def _claim(env: Env, name: str, now: datetime, seconds: float = 60) -> Any:
    request = ClaimRequest(
        (name,), 0, "byJobName", now, now + timedelta(seconds=seconds), new_execution_id(),
        Owner("web-1", 11, "w-1"),
    )  # fmt: skip
    claimed = env.store.sync.claim(request)
    assert claimed is not None
    return claimed


def _failed(env: Env, name: str, at: datetime, **fields: Any) -> str:
    job_id = _insert(env, name, at - timedelta(seconds=1), **fields)
    claimed = _claim(env, name, at)
    assert settle_one_sync(env.store.sync, job_id, claimed.lock_id, terminal(at))
    return job_id


def test_search_finds_live_finished_and_archived_jobs(env: Env) -> None:
    """Was: a succeeded job's id said "No job with the id or unique key"."""
    now = datetime.now(UTC)
    live = _insert(env, "send_email", now + timedelta(hours=1), unique_identifier="k-live")
    finished = new_record_id()
    env.store.sync.write_history_many(
        [
            _row(
                finished,
                "send_email",
                timedelta(minutes=5),
                HistoryStatus.SUCCESS,
                unique_identifier="k-done",
            )
        ]
    )
    archived = _failed(env, "import_orders", now - timedelta(days=40), unique_identifier="k-old")
    assert env.store.sync.archive_failed_records(
        cutoff=now - timedelta(days=30), batch_size=10, archived_at=now
    ) == 1  # fmt: skip
    for query, where in ((live, None), (finished, "finished"), (archived, "archived")):
        html = env.get("/jobs", q=query)
        assert "with the id" in html, query
        if where is None:
            assert f'data-job-id="{live}"' in html
        else:
            assert f'data-found-id="{query}" data-where="{where}"' in html
    assert 'data-where="finished"' in env.get("/jobs", q="k-done")
    assert 'data-where="archived"' in env.get("/jobs", q="k-old")
    assert "not live, not in the history, not in the archive" in env.get("/jobs", q="nobody")
    page = env.get(f"/jobs/{archived}")
    assert 'id="archived"' in page
    assert "failed (archived)" in page


def test_the_job_list_keeps_its_tag_with_the_other_filters(env: Env) -> None:
    """Was: a tag beside a params (owner, creation time) filter was dropped silently."""
    later = datetime.now(UTC) + timedelta(hours=1)
    vip = _insert(env, "send_email", later, params={"user": 1}, tags=("vip",))
    plain = _insert(env, "send_email", later, params={"user": 1})
    both = env.get("/jobs", tag="vip", param="user=1")
    assert f'data-job-id="{vip}"' in both
    assert f'data-job-id="{plain}"' not in both
    assert f'data-job-id="{plain}"' in env.get("/jobs", param="user=1")
    assert f'data-job-id="{vip}"' not in env.get("/jobs", tag="other", param="user=1")


def test_job_page_times_params_and_folded_traceback(env: Env) -> None:
    now = datetime.now(UTC)
    huge = {"rows": ["x" * 100] * 1000}
    job_id = _failed(env, "import_orders", now - timedelta(minutes=1), params=huge)
    env.store.sync.write_history_many(
        [
            _row(
                job_id,
                "import_orders",
                timedelta(minutes=1),
                HistoryStatus.ERROR,
                error_type="ValueError",
                error_message="bad row",
                error_traceback=TRACEBACK,
                outcome="failed",
            )
        ]
    )
    html = env.get(f"/jobs/{job_id}")
    assert 'data-moment="Failed at"' in html
    assert "Next run" not in html  # was: "Next run ... (17s ago)" for a failed job
    assert 'id="params-cut"' in html
    assert len(html) < 40_000
    assert len(env.get(f"/jobs/{job_id}", params="all")) > 100_000
    assert "2 frames of dogs_core, anyio" in html  # folded, the user's frame shown
    folded = html.index("2 frames of dogs_core, anyio")
    assert html.index("/srv/shop/imports.py") > folded

    later = _insert(env, "send_email", now + timedelta(hours=1))
    anyio.run(env.client.cancel, later)
    cancelled = env.get(f"/jobs/{later}")
    assert "never ran" in cancelled  # was: "Started <the cancel's time>, 0 ms"


def test_overview_counts_held_jobs_and_names_the_stats_plainly(env: Env) -> None:
    now = datetime.now(UTC)
    job_id = _insert(env, "send_email", now - timedelta(minutes=2))
    claimed = _claim(env, "send_email", now - timedelta(minutes=1))
    hold = Hold(
        HoldReason.CONCURRENCY, since=now - timedelta(minutes=2), until=now + timedelta(hours=1)
    )
    assert settle_one_sync(
        env.store.sync, job_id, claimed.lock_id, Defer(hold.until, tries=0, hold=hold)
    )
    env.store.sync.write_history_many(
        [_row(new_record_id(), "send_email", timedelta(minutes=1), HistoryStatus.CANCELLED)]
    )
    html = env.get("/")
    row = re.search(r'<tr data-name="send_email">(.*?)</tr>', html, re.S)
    assert row is not None
    assert re.search(r'data-count="held"><a [^>]*>1</a>', row.group(1))
    assert re.search(r'data-count="scheduled"><a [^>]*>0</a>', row.group(1))
    assert 'data-count="cancelled">1<' in row.group(1)
    for header in ("Held", "Attempts", "Errors", "Cancelled", "Attempt success", "Job success"):
        assert f">{header}<" in html
    assert ">Runs<" not in html
    assert "held" in env.get("/jobs", state="held")


def test_executions_errors_and_archive_pages(env: Env) -> None:
    now = datetime.now(UTC)
    rows = [
        _row(
            new_record_id(),
            "send_email",
            timedelta(minutes=4),
            HistoryStatus.ERROR,
            error_type="smtplib.SMTPException",
            error_message="mailbox 42 full",
            params={"user": {"id": 42}},
            owner=Owner("web-1", 7, "w-a"),
        ),
        _row(
            new_record_id(),
            "send_email",
            timedelta(minutes=3),
            HistoryStatus.ERROR,
            error_type="smtplib.SMTPException",
            error_message="mailbox 7 full",
            error_traceback=TRACEBACK,
        ),
        _row(new_record_id(), "resize", timedelta(minutes=2), HistoryStatus.SUCCESS),
    ] + [
        _row(new_record_id(), "resize", timedelta(seconds=100 - s), HistoryStatus.SUCCESS)
        for s in range(60)
    ]
    env.store.sync.write_history_many(rows)

    def ids(**params: str) -> list[str]:
        return re.findall(r'data-execution-id="([^"]+)"', env.get("/executions", **params))

    newest = ids()
    assert len(newest) == 50
    assert rows[2].execution_id not in newest  # older than the first page
    following = re.search(r'href="([^"]+)" id="next-page"', env.get("/executions"))
    assert following is not None
    older = re.findall(
        r'data-execution-id="([^"]+)"', env.get(following.group(1).replace("&amp;", "&"))
    )
    assert set(older).isdisjoint(newest)
    assert len(newest) + len(older) == len(rows)
    assert ids(status="error") == [rows[1].execution_id, rows[0].execution_id]
    assert ids(error_type="smtplib.SMTPException", owner="web-1") == [rows[0].execution_id]
    assert ids(param="user.id=42") == [rows[0].execution_id]
    assert len(ids(name="resize", since="150s")) == 50  # a page of the 61
    bad = env.http.get("/executions", params={"status": "exploded"})
    assert bad.status_code == 400

    errors = env.get("/errors")
    (group,) = re.findall(r'<tr class="error-group"[^>]*data-count="(\d+)"', errors)
    assert group == "2"  # "mailbox 42 full" and "mailbox 7 full": one group
    assert "mailbox &lt;n&gt; full" in errors
    assert "2 frames of dogs_core, anyio" in errors
    assert env.http.get("/errors", params={"window": "1y"}).status_code == 400

    old = _failed(env, "import_orders", now - timedelta(days=40), unique_identifier="b-3")
    env.store.sync.write_history_many(
        [_row(old, "import_orders", timedelta(days=40), HistoryStatus.ERROR)]
    )
    env.store.sync.archive_failed_records(
        cutoff=now - timedelta(days=30), batch_size=10, archived_at=now
    )
    env.store.sync.archive_history(cutoff=now - timedelta(days=30), batch_size=10, archived_at=now)
    assert f'data-job-id="{old}"' in env.get("/archive")
    assert f'data-job-id="{old}"' in env.get("/archive", kind="history")
    assert f'data-job-id="{old}"' in env.get("/archive", unique_key="b-3")
    assert f'data-job-id="{old}"' not in env.get("/archive", name="send_email")


class SlowCountsClient(DogsClient):
    """Counting takes 0.4 s (a big collection): the overview serves a snapshot."""

    reads = 0

    async def fleet_status(self) -> list[NameStatus]:
        SlowCountsClient.reads += 1
        await anyio.sleep(0.4)
        return await super().fleet_status()


def test_slow_counts_are_a_snapshot_read_again_in_the_background() -> None:
    store = InMemoryJobStore()
    client = SlowCountsClient(store, jobs)
    with TestClient(create_app(client, refresh_seconds=0)) as http:
        first = http.get("/").text
        assert 'id="snapshot-age"' not in first  # read just now
        assert SlowCountsClient.reads == 1
        started = time.monotonic()
        again = http.get("/?fragment=1").text
        assert time.monotonic() - started < 0.3  # not counted again inline
        assert SlowCountsClient.reads == 1
        assert 'id="overview-table"' in again


def test_pages_need_the_inspection_role() -> None:
    class OldStore(InMemoryJobStore):
        roles = frozenset()  # a custom store written before the role: only the required ones

    client = DogsClient(OldStore(), jobs)
    with TestClient(create_app(client)) as http:
        for path in ("/executions", "/errors", "/archive"):
            response = http.get(path)
            assert response.status_code == 501
            assert "needs the store&#39;s &#39;inspection&#39; role" in response.text
        assert http.get("/").status_code == 200
        assert http.get("/jobs").status_code == 200
