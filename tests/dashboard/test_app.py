"""The dashboard app through Starlette's TestClient over the in-memory store: pages, search,
paging, the actions and their CSRF and confirm checks, read-only mode, mounting under a
prefix, escaping, and no password anywhere."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from dogs_core import DogsClient, JobContext, Jobs
from dogs_core.domain.records import (
    HistoryRecord,
    HistoryStatus,
    JobRecord,
    JobStatus,
    JobType,
    Scheduled,
)
from dogs_core.domain.stats import JobStats
from dogs_core.domain.steps import RecordedStep
from dogs_core.errors import InvalidOptionError
from dogs_core.ids import new_execution_id, new_record_id
from dogs_dashboard import create_app
from dogs_testing import InMemoryJobStore

jobs = Jobs()


@jobs.event
async def send_email(params: dict[str, Any], ctx: JobContext) -> str:
    return "sent"


@jobs.event
async def resize(params: dict[str, Any], ctx: JobContext) -> str:
    return "resized"


PASSWORD = "s3cr3t-Pa55"
SOURCE = f"mongodb://ops:{PASSWORD}@db.example:27017/app"
TOKEN = re.compile(r'name="csrf_token" value="([0-9a-f]{64})"')


class CountingClient(DogsClient):
    """A client that counts its stats reads (the app caches them)."""

    stats_calls = 0

    async def stats(self, *args: Any, **kwargs: Any) -> list[JobStats]:
        CountingClient.stats_calls += 1
        return await super().stats(*args, **kwargs)


@dataclass
class Env:
    store: InMemoryJobStore
    client: DogsClient
    http: TestClient

    def schedule(self, job: Any = send_email, params: object = None, **options: Any) -> str:
        outcome = self.http.portal.call(lambda: self.client.schedule(job, params, **options))  # type: ignore[union-attr]
        assert isinstance(outcome, Scheduled)
        return outcome.id

    def token(self, path: str = "/") -> str:
        match = TOKEN.search(self.http.get(path).text)
        assert match is not None, "no action form on " + path
        return match.group(1)

    def post(self, action: str, token: str | None, **fields: str) -> Any:
        data = dict(fields)
        if token is not None:
            data["csrf_token"] = token
        return self.http.post(f"/actions/{action}", data=data, follow_redirects=False)


def make_env(**options: Any) -> Iterator[Env]:
    store = InMemoryJobStore()
    client = CountingClient(store, jobs)
    app = create_app(client, source=SOURCE, **options)
    with TestClient(app) as http:
        yield Env(store, client, http)


@pytest.fixture
def env() -> Iterator[Env]:
    yield from make_env()


@pytest.fixture
def read_only_env() -> Iterator[Env]:
    yield from make_env(read_only=True)


def failed_record(name: str = "resize", params: Mapping[str, Any] | None = None) -> JobRecord:
    now = datetime.now(UTC)
    return JobRecord(
        id=new_record_id(),
        job_name=name,
        type=JobType.EVENT,
        priority=100,
        next_run_at=now - timedelta(minutes=5),
        params=params,
        tries=3,
        status=JobStatus.MAX_TRIES_REACHED,
        max_tries_reached_at=now,
        expires_at=now + timedelta(days=7),
    )


def error_row(record: JobRecord, message: str, traceback: str) -> HistoryRecord:
    return history_row(
        record.job_name,
        HistoryStatus.ERROR,
        job_id=record.id,
        error_message=message,
        error_type="builtins.ValueError",
        error_traceback=traceback,
    )


def history_row(
    name: str,
    status: HistoryStatus,
    *,
    job_id: str | None = None,
    duration: timedelta = timedelta(seconds=2),
    **fields: Any,
) -> HistoryRecord:
    now = datetime.now(UTC)
    return HistoryRecord(
        execution_id=new_execution_id(),
        job_id=job_id or new_record_id(),
        job_name=name,
        type=JobType.EVENT,
        priority=100,
        tries=3,
        started_at=now - duration,
        ended_at=now,
        status=status,
        expires_at=now + timedelta(days=7),
        **fields,
    )


# -- pages ----------------------------------------------------------------------------------


def test_overview_counts_each_name(env: Env) -> None:
    env.schedule(params={"to": "a"})
    env.schedule(params={"to": "b"}, run_in="1h")
    env.store.sync.insert_record(failed_record())
    fast = timedelta(milliseconds=10)
    quick = [history_row("send_email", HistoryStatus.SUCCESS, duration=fast) for _ in range(9)]
    slow = history_row("send_email", HistoryStatus.ERROR, duration=timedelta(milliseconds=1500))
    env.store.sync.write_history_many([*quick, slow])
    html = env.http.get("/").text
    email = row_of(html, "send_email")
    assert count_in(email, "due") == "1"
    assert count_in(email, "scheduled") == "1"
    assert count_in(email, "runs") == "10"
    assert count_in(row_of(html, "resize"), "failed") == "1"
    assert "90.0%" in email  # the stats' success rate
    assert "1.50 s" in email  # its p95 (nearest rank: the slowest of 10)
    assert 1 <= email.count('class="chart-bar"') <= 2  # the minute(s) the rows started in
    assert 'class="chart-bar"' not in row_of(html, "resize")


def test_overview_shows_pauses_and_caches_the_stats(env: Env) -> None:
    env.schedule()
    env.http.portal.call(lambda: env.client.pause("send_email"))  # type: ignore[union-attr]
    before = CountingClient.stats_calls
    html = env.http.get("/").text
    env.http.get("/?fragment=1")
    assert CountingClient.stats_calls - before <= 1  # cached between the page and its refresh
    assert "paused" in count_cell(row_of(html, "send_email"), "paused")
    assert 'data-action="resume" data-target="send_email"' in html


def test_the_fragment_is_the_live_part_only(env: Env) -> None:
    env.schedule()
    page = env.http.get("/").text
    fragment = env.http.get("/?fragment=1").text
    assert "<html" not in fragment
    assert 'id="overview-table"' in fragment
    assert fragment.strip() in page  # the same markup: the script swaps only real changes


def test_list_by_state(env: Env) -> None:
    due = env.schedule()
    later = env.schedule(run_in="1h")
    html = env.http.get("/jobs?state=due").text
    assert due in html
    assert later not in html
    html = env.http.get("/jobs?state=scheduled&name=send_email").text
    assert later in html
    assert due not in html


def test_paging_walks_every_record_once(env: Env) -> None:
    ids = [env.schedule(params={"n": n}) for n in range(5)]
    seen: list[str] = []
    path: str | None = "/jobs?limit=2"
    pages = 0
    while path is not None:
        html = env.http.get(path).text
        seen += re.findall(r'data-job-id="([^"]+)"', html)
        match = re.search(r'href="([^"]+)" id="next-page"', html)
        path = None if match is None else match.group(1).replace("&amp;", "&")
        pages += 1
    assert seen == ids
    assert pages == 3


def test_search_by_id_and_by_unique_key(env: Env) -> None:
    keyed = env.schedule(unique_key="welcome:42")
    other = env.schedule()
    by_id = env.http.get("/jobs", params={"q": other}).text
    assert job_ids(by_id) == [other]
    assert "with the id" in by_id
    by_key = env.http.get("/jobs", params={"q": "welcome:42"}).text
    assert job_ids(by_key) == [keyed]
    assert "with the unique key" in by_key
    missing = env.http.get("/jobs", params={"q": "nothing-like-it"}).text
    assert job_ids(missing) == []
    assert "No job with the id or unique key nothing-like-it" in missing


def test_job_page_shows_executions_and_escaped_tracebacks(env: Env) -> None:
    record = failed_record(params={"html": "<script>alert(1)</script>"})
    env.store.sync.insert_record(record)
    traceback = "Traceback (most recent call last):\nValueError: <img src=x onerror=alert(2)>"
    env.store.sync.write_history_many([error_row(record, "<b>bad</b> width", traceback)])
    html = env.http.get(f"/jobs/{record.id}").text
    assert "failed" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script>alert(1)" not in html
    assert "&lt;b&gt;bad&lt;/b&gt; width" in html
    assert "&lt;img src=x onerror=alert(2)&gt;" in html
    assert '<details class="traceback" open>' in html


def test_job_page_lists_a_sleeping_jobs_recorded_steps(env: Env) -> None:
    now = datetime.now(UTC)
    wake = now + timedelta(days=3)
    record = dataclasses.replace(
        failed_record(),
        status=None,
        max_tries_reached_at=None,
        expires_at=None,
        tries=0,
        next_run_at=wake,
        sleeping_until=wake,
        steps=(
            RecordedStep("charge", {"id": "<b>ch_1</b>"}, now, "e1", 1234),
            RecordedStep("sleep:1", wake, now, "e1", 0),
        ),
    )
    env.store.sync.insert_record(record)
    html = env.http.get(f"/jobs/{record.id}").text
    assert 'id="job-state">sleeping<' in html
    assert "Sleeping until" in html
    assert 'id="steps"' in html
    assert '<tr data-step="charge">' in html
    assert '<tr data-step="sleep:1">' in html
    assert "&lt;b&gt;ch_1&lt;/b&gt;" in html
    assert "<b>ch_1</b>" not in html


def test_a_finished_job_keeps_its_page(env: Env) -> None:
    record = failed_record()
    env.store.sync.write_history_many([error_row(record, "gone", "tb")])
    html = env.http.get(f"/jobs/{record.id}").text
    assert 'id="record-gone"' in html
    assert "gone" in html


@pytest.mark.parametrize(
    ("path", "status", "text"),
    [
        ("/jobs/no-such-job", 400, "not an id (ids are UUIDs"),
        ("/jobs/01900000-0000-7000-8000-000000000000", 404, "no job"),
        ("/jobs?state=everywhere", 400, "state"),
        ("/jobs?limit=0", 400, "limit"),
        ("/jobs?limit=5000", 400, "limit"),
    ],
)
def test_bad_requests_get_an_error_page(env: Env, path: str, status: int, text: str) -> None:
    response = env.http.get(path)
    assert response.status_code == status
    assert text in response.text
    assert "Traceback" not in response.text


def test_no_page_shows_the_password(env: Env) -> None:
    job_id = env.schedule(params={"to": "a"})
    for path in ("/", "/jobs", f"/jobs/{job_id}", "/?fragment=1", "/jobs/nope"):
        text = env.http.get(path).text
        assert PASSWORD not in text
    assert "mongodb://ops:***@db.example:27017/app" in env.http.get("/").text


# -- actions --------------------------------------------------------------------------------


def test_a_post_without_a_valid_token_is_refused(env: Env) -> None:
    job_id = env.schedule()
    assert env.post("delete", None, job_id=job_id, confirmed="yes").status_code == 403
    assert env.post("delete", "0" * 64, job_id=job_id, confirmed="yes").status_code == 403
    token = env.token()
    env.http.cookies.clear()  # a token without its cookie, as a forged cross-site form has
    assert env.post("delete", token, job_id=job_id, confirmed="yes").status_code == 403
    assert env.store.sync.get_record(job_id) is not None


def test_get_never_acts(env: Env) -> None:
    job_id = env.schedule()
    assert env.http.get(f"/actions/delete?job_id={job_id}&confirmed=yes").status_code == 405
    assert env.store.sync.get_record(job_id) is not None


def test_an_unconfirmed_action_asks_first(env: Env) -> None:
    job_id = env.schedule()
    token = env.token()
    response = env.post("delete", token, job_id=job_id, next="/jobs")
    assert response.status_code == 200
    assert 'id="confirm-form"' in response.text
    assert 'name="confirmed" value="yes"' in response.text
    assert env.store.sync.get_record(job_id) is not None
    done = env.post("delete", token, job_id=job_id, next="/jobs", confirmed="yes")
    assert done.status_code == 303
    assert done.headers["location"] == "/jobs"  # the message rides in a signed cookie
    assert "Deleted send_email" in env.http.get("/jobs").text
    assert env.store.sync.get_record(job_id) is None


def test_cancel_retry_pause_resume(env: Env) -> None:
    token = env.token()
    job_id = env.schedule(run_in="1h")
    assert env.post("cancel", token, job_id=job_id, confirmed="yes").status_code == 303
    assert env.store.sync.get_record(job_id) is None
    rows = env.store.sync.read_history(job_id=job_id)
    assert [row.status for row in rows] == [HistoryStatus.CANCELLED]

    record = failed_record()
    env.store.sync.insert_record(record)
    assert env.post("retry", token, job_id=record.id, confirmed="yes").status_code == 303
    revived = env.store.sync.get_record(record.id)
    assert revived is not None
    assert revived.status is None
    assert revived.tries == 0

    assert env.post("pause", token, name="send_email", confirmed="yes").status_code == 303
    assert env.store.sync.paused_names() == frozenset({"send_email"})
    assert env.post("resume", token, name="send_email", confirmed="yes").status_code == 303
    assert env.store.sync.paused_names() == frozenset()
    assert env.post("pause", token, name="*", confirmed="yes").status_code == 303
    assert env.store.sync.paused_names() == frozenset({"*"})


def test_an_action_says_what_happened(env: Env) -> None:
    token = env.token()
    unknown = "01900000-0000-7000-8000-000000000000"
    gone = env.post("delete", token, job_id=unknown, confirmed="yes", next="/jobs")
    page = env.http.get(gone.headers["location"]).text
    assert 'class="flash error"' in page
    assert f"No job {unknown}" in page
    bad = env.post("delete", token, job_id="no-such-job", confirmed="yes", next="/jobs")
    page = env.http.get(bad.headers["location"]).text
    assert 'class="flash error"' in page
    assert "no-such-job" in page
    assert "not an id" in page


def test_next_never_leaves_the_app(env: Env) -> None:
    token = env.token()
    for target in ("https://evil.example/", "//evil.example/x", "/\\evil.example"):
        response = env.post("pause", token, name="x", confirmed="yes", next=target)
        assert response.headers["location"] == "/"


@pytest.mark.parametrize(
    ("action", "fields"),
    [("explode", {"job_id": "x"}), ("cancel", {}), ("pause", {"name": " "})],
)
def test_bad_actions_are_refused(env: Env, action: str, fields: dict[str, str]) -> None:
    response = env.post(action, env.token(), confirmed="yes", **fields)
    assert response.status_code in (400, 404)


def test_read_only_has_no_buttons_and_refuses_every_post(read_only_env: Env) -> None:
    env = read_only_env
    job_id = env.schedule()
    for path in ("/", "/jobs", f"/jobs/{job_id}"):
        html = env.http.get(path).text
        assert 'method="post"' not in html
        assert 'id="read-only"' in html
    cookie_page = env.http.get("/")
    assert cookie_page.status_code == 200
    # Even a well-formed token is refused: there is no action in read-only mode.
    response = env.post("delete", "0" * 64, job_id=job_id, confirmed="yes")
    assert response.status_code == 403
    assert env.store.sync.get_record(job_id) is not None


# -- mounting -------------------------------------------------------------------------------


def test_mounted_under_a_prefix() -> None:
    store = InMemoryJobStore()
    client = DogsClient(store, jobs)
    outer = Starlette(routes=[Mount("/ops/dogs", app=create_app(client))])
    with TestClient(outer) as http:
        outcome = http.portal.call(lambda: client.schedule(send_email, None))  # type: ignore[union-attr]
        assert isinstance(outcome, Scheduled)
        html = http.get("/ops/dogs/").text
        links = re.findall(r'\s(?:href|action|src)="([^"]+)"', html)
        assert links
        assert all(link.startswith("/ops/dogs/") for link in links), links
        assert http.get("/ops/dogs/static/dashboard.js").status_code == 200
        assert http.get("/ops/dogs/static/dashboard.css").status_code == 200
        assert f"/ops/dogs/jobs/{outcome.id}" in http.get("/ops/dogs/jobs").text
        token = TOKEN.search(html)
        assert token is not None
        response = http.post(
            "/ops/dogs/actions/delete",
            data={
                "csrf_token": token.group(1),
                "job_id": outcome.id,
                "confirmed": "yes",
                "next": "/ops/dogs/jobs",
            },
            follow_redirects=False,
        )
        assert response.status_code == 303
        assert response.headers["location"] == "/ops/dogs/jobs"
        assert store.sync.get_record(outcome.id) is None
        # Outside the mount point, "next" falls back to the dashboard's home.
        again = http.post(
            "/ops/dogs/actions/pause",
            data={"csrf_token": token.group(1), "name": "x", "confirmed": "yes", "next": "/"},
            follow_redirects=False,
        )
        assert again.headers["location"] == "/ops/dogs/"


# -- create_app -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "field_name"),
    [
        ({"read_only": "yes"}, "read_only"),
        ({"secret": "short"}, "secret"),
        ({"title": " "}, "title"),
        ({"source": 42}, "source"),
        ({"refresh_seconds": -1}, "refresh_seconds"),
        ({"refresh_seconds": float("nan")}, "refresh_seconds"),
    ],
)
def test_create_app_checks_its_options(options: dict[str, Any], field_name: str) -> None:
    client = DogsClient(InMemoryJobStore(), jobs)
    with pytest.raises(InvalidOptionError) as raised:
        create_app(client, **options)
    assert raised.value.field == field_name


def test_create_app_wants_the_async_client() -> None:
    with pytest.raises(InvalidOptionError) as raised:
        create_app(object())  # type: ignore[arg-type]
    assert raised.value.field == "client"


def test_a_secret_makes_tokens_outlive_the_process() -> None:
    """Two apps given one secret (two processes behind one address) accept each other's
    tokens; without a secret each has its own."""
    client = DogsClient(InMemoryJobStore(), jobs)
    secret = "x" * 32
    first, second = create_app(client, secret=secret), create_app(client, secret=secret)
    with TestClient(first) as one, TestClient(second) as two:
        match = TOKEN.search(one.get("/").text)
        assert match is not None
        two.cookies.update(one.cookies)
        response = two.post(
            "/actions/pause",
            data={"csrf_token": match.group(1), "name": "x", "confirmed": "yes"},
            follow_redirects=False,
        )
        assert response.status_code == 303


# -- helpers --------------------------------------------------------------------------------


def row_of(html: str, name: str) -> str:
    match = re.search(rf'<tr data-name="{re.escape(name)}">(.*?)</tr>', html, re.DOTALL)
    assert match is not None, f"no row of {name}"
    return match.group(1)


def count_cell(row: str, kind: str) -> str:
    match = re.search(rf'data-count="{kind}">(.*?)</td>', row, re.DOTALL)
    assert match is not None, f"no {kind} cell"
    return match.group(1)


def count_in(row: str, kind: str) -> str:
    return re.sub(r"<[^>]+>", "", count_cell(row, kind)).strip()


def job_ids(html: str) -> list[str]:
    return re.findall(r'data-job-id="([^"]+)"', html)
