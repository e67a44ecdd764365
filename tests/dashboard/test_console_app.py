"""The operator's console in the dashboard through Starlette's TestClient over the in-memory
store: authentication (the auth callable, tokens with a login page, basic users, read-only
roles), flash messages that a URL cannot forge, the favicon, the Workers page with quiet and
stop, bulk actions by filter with their progress page, the audit trail and what a removed
job's page says."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.testclient import TestClient

from dogs_core import DogsClient, JobContext, Jobs
from dogs_core.domain.archiving import ArchiveKind
from dogs_core.domain.records import JobRecord, JobStatus, JobType, Scheduled
from dogs_core.domain.registry import RunningExecution, WorkerAction, WorkerInfo, WorkerState
from dogs_core.errors import InvalidOptionError
from dogs_core.ids import new_record_id
from dogs_dashboard import create_app
from dogs_dashboard.auth import CredentialsAuth, DashboardUser, parse_credentials
from dogs_testing import InMemoryJobStore

jobs = Jobs()


@jobs.event
async def send_email(params: dict[str, Any], ctx: JobContext) -> str:
    return "sent"


TOKEN = re.compile(r'name="csrf_token" value="([0-9a-f]{64})"')
OPERATOR_TOKEN = "op-token-0123456789"
VIEWER_TOKEN = "view-token-0123456789"


@dataclass
class Env:
    store: InMemoryJobStore
    client: DogsClient
    http: TestClient

    def schedule(self, **options: Any) -> str:
        outcome = self.http.portal.call(lambda: self.client.schedule(send_email, None, **options))  # type: ignore[union-attr]
        assert isinstance(outcome, Scheduled)
        return outcome.id

    def failed(self) -> str:
        now = datetime.now(UTC)
        record = JobRecord(
            id=new_record_id(),
            job_name="send_email",
            type=JobType.EVENT,
            priority=100,
            next_run_at=now - timedelta(minutes=5),
            tries=3,
            status=JobStatus.MAX_TRIES_REACHED,
            max_tries_reached_at=now,
            expires_at=now + timedelta(days=7),
        )
        self.store.sync.insert_record(record)
        return record.id

    def token(self, path: str = "/") -> str:
        match = TOKEN.search(self.http.get(path).text)
        assert match is not None, "no form with a CSRF token on " + path
        return match.group(1)

    def op(self, action: str, **fields: str) -> Any:
        data = {"csrf_token": self.token("/"), "confirmed": "yes", **fields}
        return self.http.post(f"/ops/{action}", data=data, follow_redirects=False)


def make_env(**options: Any) -> Iterator[Env]:
    store = InMemoryJobStore()
    client = DogsClient(store, jobs)
    with TestClient(create_app(client, **options)) as http:
        yield Env(store, client, http)


@pytest.fixture
def env() -> Iterator[Env]:
    yield from make_env()


def worker(instance: str = "w1", **changes: Any) -> WorkerInfo:
    now = datetime.now(UTC)
    info = WorkerInfo(
        instance_id=instance,
        host="host-a",
        pid=4242,
        version="0.1.0",
        job_names=("send_email",),
        workers_count=8,
        slots_in_use=1,
        executions=(RunningExecution("job-1", "send_email", "exec-1", now - timedelta(seconds=5)),),
        executions_total=1,
        started_at=now - timedelta(minutes=3),
        last_beat=now,
        state=WorkerState.RUNNING,
        expires_at=now + timedelta(minutes=1),
    )
    return replace(info, **changes)


# -- flash messages and the favicon --------------------------------------------------------------


def test_a_url_cannot_make_the_dashboard_say_anything(env: Env) -> None:
    page = env.http.get("/?msg=Your+account+is+locked&level=error").text
    assert "Your account is locked" not in page
    assert 'id="flash"' not in page
    env.http.cookies.set("dogs_flash", "eyJtIjoiaGkiLCJsIjoiZXJyb3IifQ.00")  # not signed by us
    assert 'id="flash"' not in env.http.get("/").text


def test_an_action_leaves_its_line_for_the_next_page_once(env: Env) -> None:
    job_id = env.schedule(run_in="1h")
    data = {"csrf_token": env.token(), "job_id": job_id, "confirmed": "yes", "next": "/jobs"}
    done = env.http.post("/actions/cancel", data=data, follow_redirects=False)
    assert done.headers["location"] == "/jobs"
    assert "dogs_flash" in done.headers["set-cookie"]
    assert f"Cancelled send_email {job_id}" in env.http.get("/jobs").text
    assert f"Cancelled send_email {job_id}" not in env.http.get("/jobs").text  # once


def test_the_favicon(env: Env) -> None:
    icon = env.http.get("/favicon.ico")
    assert icon.status_code == 200
    assert icon.headers["content-type"] == "image/x-icon"
    assert icon.content[:4] == b"\x00\x00\x01\x00"
    assert 'rel="icon" href="/static/favicon.svg"' in env.http.get("/").text
    assert env.http.get("/static/favicon.svg").status_code == 200


# -- authentication ----------------------------------------------------------------------------


def test_an_auth_callable_says_who_and_whether_they_act() -> None:
    seen: dict[str, DashboardUser | None] = {"who": None}

    async def auth(request: Request) -> DashboardUser | PlainTextResponse | None:
        who = request.headers.get("x-user")
        if who == "redirect":
            return PlainTextResponse("go to the app's login", status_code=302)
        if who is None:
            return None
        seen["who"] = DashboardUser(who, can_act=who != "viewer")
        return seen["who"]

    for env in make_env(auth=auth):
        assert env.http.get("/").status_code == 401
        assert env.http.get("/", headers={"x-user": "redirect"}).status_code == 302
        assert env.http.get("/static/dashboard.css").status_code == 200  # public
        env.http.headers["x-user"] = "viewer"
        job_id = env.schedule(run_in="1h")
        page = env.http.get("/jobs").text
        assert 'method="post" action="/actions' not in page
        assert 'id="read-only"' in page
        assert 'id="user">viewer (viewer)' in page
        refused = env.http.post(  # refused before its token is even looked at
            "/actions/delete",
            data={"csrf_token": "0" * 64, "job_id": job_id, "confirmed": "yes"},
            follow_redirects=False,
        )
        assert refused.status_code == 403
        assert "read-only role" in refused.text
        env.http.headers["x-user"] = "alice"
        data = {"csrf_token": env.token(), "job_id": job_id, "confirmed": "yes"}
        done = env.http.post("/actions/delete", data=data, follow_redirects=False)
        assert done.status_code == 303
        entries = env.http.portal.call(env.client.audit_log)  # type: ignore[union-attr]
        assert [(e.action, e.actor.name, e.actor.source) for e in entries] == [
            ("delete", "alice", "dashboard")
        ]


def test_an_auth_callable_that_returns_nonsense_is_an_error_page() -> None:
    for env in make_env(auth=lambda request: "alice"):
        response = env.http.get("/")
        assert response.status_code == 500
        assert "expected a DashboardUser" in response.text


def test_tokens_log_in_once_and_a_viewer_cannot_act() -> None:
    tokens = parse_credentials(
        f"ops:{OPERATOR_TOKEN}, ci:{VIEWER_TOKEN}:viewer", field="token", tokens=True
    )
    auth = CredentialsAuth(tokens=tokens, secret="s" * 32)
    for env in make_env(auth=auth, secret="s" * 32):
        first = env.http.get("/jobs?state=failed", follow_redirects=False)
        assert first.status_code == 303
        assert first.headers["location"].startswith("/login?next=")
        login = env.http.get(first.headers["location"]).text
        csrf = TOKEN.search(login)
        assert csrf is not None
        data = {"csrf_token": csrf.group(1), "token": "wrong-token-000", "next": "/jobs"}
        assert env.http.post("/login", data=data).status_code == 401
        data["token"] = OPERATOR_TOKEN
        signed_in = env.http.post("/login", data=data, follow_redirects=False)
        assert signed_in.status_code == 303
        assert "HttpOnly" in signed_in.headers["set-cookie"]
        page = env.http.get("/jobs").text
        assert 'id="user">ops' in page
        assert 'id="read-only"' not in page
        out = env.http.post("/logout", data={"csrf_token": env.token()}, follow_redirects=False)
        assert out.headers["location"] == "/login"
        assert env.http.get("/", follow_redirects=False).status_code == 303
        # A script uses the header; a viewer's token reads but cannot act.
        viewer = {"authorization": f"Bearer {VIEWER_TOKEN}"}
        assert 'id="read-only"' in env.http.get("/", headers=viewer).text
        assert env.http.post("/actions/pause", headers=viewer).status_code == 403


def test_basic_users_are_asked_by_the_browser() -> None:
    users = parse_credentials("alice:al1ce-pass,bob:b0b-pass-x:viewer", field="basic", tokens=False)
    for env in make_env(auth=CredentialsAuth(users=users)):
        asked = env.http.get("/")
        assert asked.status_code == 401
        assert asked.headers["www-authenticate"].startswith('Basic realm="Dogs dashboard"')

        def basic(user: str, password: str) -> dict[str, str]:
            encoded = base64.b64encode(f"{user}:{password}".encode()).decode()
            return {"authorization": f"Basic {encoded}"}

        assert env.http.get("/", headers=basic("alice", "wrong")).status_code == 401
        assert env.http.get("/", headers=basic("nobody", "al1ce-pass")).status_code == 401
        assert 'id="user">alice' in env.http.get("/", headers=basic("alice", "al1ce-pass")).text
        assert 'id="read-only"' in env.http.get("/", headers=basic("bob", "b0b-pass-x")).text


@pytest.mark.parametrize(
    ("text", "tokens", "problem"),
    [
        ("", True, "holds no credential"),
        ("alice", False, "USER:PASSWORD"),
        ("alice:short", False, "shorter than 8"),
        ("alice:has space here", False, "malformed"),
    ],
)
def test_credentials_are_checked(text: str, tokens: bool, problem: str) -> None:
    with pytest.raises(InvalidOptionError, match=problem) as error:
        parse_credentials(text, field="DOGS_X", tokens=tokens)
    assert "has space" not in str(error.value)  # a secret is never echoed


def test_a_bare_token_and_roles_parse() -> None:
    found = parse_credentials("abcdefghij\nreader:0123456789:viewer", field="t", tokens=True)
    assert [(c.name, c.secret, c.can_act) for c in found] == [
        ("token", "abcdefghij", True),
        ("reader", "0123456789", False),
    ]


# -- workers -------------------------------------------------------------------------------------


def test_workers_page_and_remote_quiet_and_stop(env: Env) -> None:
    env.http.portal.call(env.store.beat_worker, worker("w1"))  # type: ignore[union-attr]
    env.http.portal.call(env.store.beat_worker, worker("w2", host="host-b"))  # type: ignore[union-attr]
    page = env.http.get("/workers").text
    assert 'data-instance="w1"' in page
    assert 'data-instance="w2"' in page
    assert "1/8" in page
    assert env.http.get("/workers/w1").status_code == 200
    assert env.http.get("/workers/nobody").status_code == 404
    asked = env.op("quiet", instance_id="w1", next="/workers")
    assert asked.status_code == 303
    assert "Asked w1 (host-a:4242) to quiet" in env.http.get("/workers").text
    env.op("stop", instance_id="w2", grace="5s", next="/workers")
    stored = env.http.portal.call(env.store.get_worker, "w2")  # type: ignore[union-attr]
    assert stored is not None
    assert stored.command is not None
    assert stored.command.action is WorkerAction.STOP
    assert stored.command.grace == timedelta(seconds=5)
    assert stored.command.requested_by == "anonymous (dashboard)"
    assert "running -&gt; quiet" in env.http.get("/workers").text  # not taken yet
    env.op("quiet", instance_id="nobody", next="/workers")
    assert "No live worker nobody" in env.http.get("/workers").text
    unconfirmed = env.http.post(
        "/ops/stop",
        data={"csrf_token": env.token("/"), "instance_id": "w1"},
        follow_redirects=False,
    )
    assert 'id="confirm-form"' in unconfirmed.text


def test_console_actions_are_refused_in_read_only_mode() -> None:
    for env in make_env(read_only=True):
        response = env.http.post("/ops/quiet", data={"instance_id": "w1", "confirmed": "yes"})
        assert response.status_code == 403


# -- bulk actions --------------------------------------------------------------------------------


def test_select_all_then_a_bulk_retry_with_its_progress_page(env: Env) -> None:
    failed = [env.failed() for _ in range(3)]
    env.schedule(run_in="1h")
    jobs_page = env.http.get("/jobs?state=failed&name=send_email").text
    link = re.search(r'href="(/bulk\?[^"]*action=retry[^"]*)"', jobs_page)
    assert link is not None
    form = env.http.get(link.group(1).replace("&amp;", "&")).text
    assert 'id="bulk-total">3<' in form
    started = env.http.post(
        "/ops/bulk",
        data={
            "csrf_token": env.token("/"),
            "confirmed": "yes",
            "action": "retry",
            "name": "send_email",
            "state": "failed",
        },
        follow_redirects=False,
    )
    assert started.status_code == 303
    progress = started.headers["location"]
    assert progress.startswith("/bulk/")
    page = env.http.get(progress).text  # the action ran after the response
    assert 'data-outcome="done"' in page
    assert 'id="bulk-changed">3<' in page
    for job_id in failed:
        record = env.store.sync.get_record(job_id)
        assert record is not None
        assert record.status is None
    audit = env.http.get("/audit?action=bulk_retry").text
    assert "failed jobs of send_email" in audit
    again = env.op("bulk-resume", audit_id=progress.rsplit("/", 1)[1], next=progress)
    assert "that bulk action is done" in env.http.get(again.headers["location"]).text


def test_bulk_cancel_reschedule_and_delete_from_the_dashboard(env: Env) -> None:
    later = [env.schedule(run_in="1h") for _ in range(2)]
    failed = [env.failed() for _ in range(2)]

    def bulk(action: str, state: str, **fields: str) -> str:
        # a delete or cancel starts only once the operator typed the count it removes
        typed = {"typed": "2"} if action in ("delete", "cancel") else {}
        data = {"csrf_token": env.token("/"), "confirmed": "yes", "action": action,
                "name": "send_email", "state": state, **typed, **fields}  # fmt: skip
        started = env.http.post("/ops/bulk", data=data, follow_redirects=False)
        assert started.status_code == 303
        page = env.http.get(started.headers["location"]).text
        assert 'data-outcome="done"' in page
        return page

    page = bulk("reschedule", "scheduled", run_in="2h", priority="7")
    assert 'id="bulk-changed">2<' in page
    for job_id in later:
        record = env.store.sync.get_record(job_id)
        assert record is not None
        assert record.priority == 7
        assert record.next_run_at > datetime.now(UTC) + timedelta(minutes=90)
    assert 'id="bulk-changed">2<' in bulk("delete", "failed")
    assert all(env.store.sync.get_record(job_id) is None for job_id in failed)
    assert 'id="bulk-changed">2<' in bulk("cancel", "scheduled")
    assert all(env.store.sync.get_record(job_id) is None for job_id in later)
    audit = env.http.get("/audit").text
    for action in ("bulk_reschedule", "bulk_delete", "bulk_cancel"):
        assert action in audit
    gone = env.http.get(f"/jobs/{failed[0]}").text
    assert "deleted in bulk" in gone
    assert 'id="archived"' in gone  # kept recoverable


def test_a_bulk_delete_without_the_typed_count_is_refused_and_writes_nothing(env: Env) -> None:
    failed = [env.failed() for _ in range(3)]
    form = env.http.get("/bulk?action=delete&name=send_email&state=failed").text
    # the page names what it removes and how many, and asks for the count typed, not confirm()
    assert 'id="bulk-kinds">3 jobs<' in form
    assert 'id="bulk-typed"' in form
    assert "data-confirm" not in form.split('id="bulk-typed-form"', 1)[1].split("</form>", 1)[0]
    base = {"csrf_token": env.token("/"), "action": "delete", "name": "send_email",
            "state": "failed", "count": "3", "next": "/bulk"}  # fmt: skip
    for typed in ({}, {"typed": ""}, {"typed": "2"}, {"typed": "yes"}, {"typed": "4"}):
        refused = env.http.post(
            "/ops/bulk", data={**base, "confirmed": "yes", **typed}, follow_redirects=False
        )
        assert refused.status_code == 400, typed
        assert "Type 3 or send_email to delete them" in refused.text
        assert 'id="confirm-typed"' in refused.text
    asked = env.http.post("/ops/bulk", data=base, follow_redirects=False)  # no JavaScript
    assert asked.status_code == 200
    assert "Delete 3 jobs (failed jobs of send_email)?" in asked.text
    assert all(env.store.sync.get_record(job_id) is not None for job_id in failed)
    assert env.http.portal.call(lambda: env.client.audit_log(action="bulk_delete")) == []  # type: ignore[union-attr]
    by_name = env.http.post(
        "/ops/bulk",
        data={**base, "confirmed": "yes", "typed": "send_email"},
        follow_redirects=False,
    )
    assert by_name.status_code == 303
    page = env.http.get(by_name.headers["location"]).text
    assert 'id="bulk-changed">3<' in page
    assert all(env.store.sync.get_record(job_id) is None for job_id in failed)
    # kept recoverable: the records' archive holds them
    kept = env.store.sync.archived(ArchiveKind.FAILED_RECORDS)
    assert set(failed) <= set(kept)


def test_a_bulk_action_without_a_filter_needs_every_job_ticked(env: Env) -> None:
    scheduled = [env.schedule(run_in="1h") for _ in range(2)]
    page = env.http.get("/bulk?action=delete").text
    assert "tick &#39;every job&#39;" in page or "tick 'every job'" in page
    assert 'id="bulk-typed"' not in page
    refused = env.http.post(
        "/ops/bulk",
        data={
            "csrf_token": env.token("/"),
            "action": "delete",
            "confirmed": "yes",
            "typed": "2",
            "next": "/bulk",
        },
        follow_redirects=False,
    )
    assert refused.status_code == 303
    assert "no filter given" in env.http.get(refused.headers["location"]).text
    assert all(env.store.sync.get_record(job_id) is not None for job_id in scheduled)
    ticked = env.http.get("/bulk?action=delete&all=yes").text
    assert 'id="bulk-total">2<' in ticked
    started = env.http.post(
        "/ops/bulk",
        data={
            "csrf_token": env.token("/"),
            "action": "delete",
            "confirmed": "yes",
            "all": "yes",
            "typed": "2",
            "next": "/bulk",
        },
        follow_redirects=False,
    )
    assert started.status_code == 303
    assert 'id="bulk-changed">2<' in env.http.get(started.headers["location"]).text


def test_the_bulk_form_counts_schedules_apart_and_leaves_them_out(env: Env) -> None:
    env.schedule(run_in="1h")
    env.http.portal.call(  # type: ignore[union-attr]
        lambda: env.client.schedules.upsert("nightly", send_email, every="1h")
    )
    page = env.http.get("/bulk?action=delete&all=yes").text
    assert 'id="bulk-total">1<' in page
    assert "Not selected: 1 run-time schedule match" in page
    both = env.http.get("/bulk?action=delete&all=yes&include_schedules=yes").text
    assert 'id="bulk-kinds">1 job, 1 run-time schedule<' in both


def test_a_bulk_form_with_a_bad_filter_says_why(env: Env) -> None:
    page = env.http.get("/bulk?action=delete&state=exploded").text
    assert 'id="bulk-problem"' in page
    assert "state=" in page
    assert env.http.get("/bulk?action=explode").status_code == 400


# -- the audit trail and removed jobs -------------------------------------------------------------


def test_a_deleted_job_says_who_deleted_it_and_when(env: Env) -> None:
    job_id = env.schedule(run_in="1h")
    data = {"csrf_token": env.token(), "job_id": job_id, "confirmed": "yes"}
    env.http.post("/actions/delete", data=data, follow_redirects=False)
    page = env.http.get(f"/jobs/{job_id}")
    assert page.status_code == 200
    assert "deleted by anonymous (dashboard) at" in page.text
    audit = env.http.get(f"/audit?job_id={job_id}").text
    assert f'href="/jobs/{job_id}"' in audit
    assert env.http.get(f"/jobs/{new_record_id()}").status_code == 404


def test_the_audit_page_pages_and_filters(env: Env) -> None:
    for _ in range(3):
        job_id = env.schedule(run_in="1h")
        data = {"csrf_token": env.token(), "job_id": job_id, "confirmed": "yes"}
        env.http.post("/actions/cancel", data=data, follow_redirects=False)
    data = {"csrf_token": env.token(), "name": "send_email", "confirmed": "yes"}
    env.http.post("/actions/pause", data=data, follow_redirects=False)
    page = env.http.get("/audit").text
    assert page.count('data-action="cancel"') == 3
    assert page.count('data-action="pause"') == 1
    only = env.http.get("/audit?action=pause").text
    assert only.count("data-audit-id=") == 1
    assert env.http.get("/audit?action=nonsense").status_code == 400
