"""dogs_integrations.django in this process, on the example project (examples/django_project:
Django on the real mongod through django-mongodb-backend) with a second, SQLite database for
the on-commit path: Django's test client posting to the view, schedule_on_commit's three modes,
the DOGS setting's and the discovery's errors, the management commands' bad options, and the
staff-only dashboard. A real ``manage.py dogs_worker`` runs the view's jobs in
tests/test_examples.py::test_django_app_on_mongodb."""

from __future__ import annotations

import os
import re
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.mongo

PROJECT = Path(__file__).resolve().parents[2] / "examples" / "django_project"


@pytest.fixture(scope="module")
def site(mongodb_uri: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The example project set up in this process (once: Django's settings are global), on a
    fresh database; its name."""
    import django
    from django.conf import settings

    database = f"dogs_django_{uuid.uuid4().hex[:8]}"
    if not settings.configured:
        sys.path.insert(0, str(PROJECT))
        os.environ.update(
            MONGODB_URI=mongodb_uri,
            MONGODB_DATABASE=database,
            DJANGO_SETTINGS_MODULE="mysite.settings",
        )
        sqlite = tmp_path_factory.mktemp("django") / "ledger.sqlite3"
        settings.DATABASES["ledger"] = {"ENGINE": "django.db.backends.sqlite3", "NAME": sqlite}
        django.setup()
    from django.core.management import call_command

    call_command("migrate", run_syncdb=True, verbosity=0)
    yield str(settings.DATABASES["default"]["NAME"])
    from dogs_integrations.django import client

    client.reset()


def receipts_scheduled() -> list[dict[str, Any]]:
    from shop.jobs import send_receipt

    from dogs_integrations.django import get_client

    return [dict(job.params or {}) for job in get_client().find_jobs(send_receipt).jobs]


def test_a_view_writes_the_order_and_its_job_in_one_transaction(site: str) -> None:
    from django.test import Client
    from shop.models import Order

    before = len(receipts_scheduled())
    http = Client(raise_request_exception=False)
    answer = http.post("/orders/", {"email": "ada@example.com", "total_cents": 4200}).json()
    assert answer["written"] == "transaction"
    assert http.post("/orders/", {"email": "bob@example.com", "total_cents": -1}).status_code == 500
    assert not Order.objects.filter(email="bob@example.com").exists(), "the order rolled back"
    scheduled = receipts_scheduled()
    assert len(scheduled) == before + 1, "and so did its job"
    assert {"order_id": answer["order"]} in scheduled


def test_on_a_sql_database_the_job_waits_for_the_commit(site: str) -> None:
    from django.db import transaction
    from shop.jobs import send_receipt

    from dogs_integrations.django import schedule_on_commit

    with transaction.atomic(using="ledger"):
        pending = schedule_on_commit(send_receipt, {"order_id": "sql-1"}, using="ledger")
        assert (pending.mode, pending.outcome) == ("on_commit", None)
        assert {"order_id": "sql-1"} not in receipts_scheduled()
    assert pending.outcome is not None, "written once the transaction committed"
    assert {"order_id": "sql-1"} in receipts_scheduled()

    dropped: list[object] = []

    def rolled_back() -> None:
        with transaction.atomic(using="ledger"):
            dropped.append(schedule_on_commit(send_receipt, {"order_id": "sql-2"}, using="ledger"))
            raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError):
        rolled_back()
    assert getattr(dropped[0], "outcome", "?") is None
    assert {"order_id": "sql-2"} not in receipts_scheduled()


def test_without_a_transaction_the_job_is_written_at_once(site: str) -> None:
    from django.db import transaction
    from shop.jobs import send_receipt

    from dogs_integrations.django import schedule_on_commit

    now = schedule_on_commit(send_receipt, {"order_id": "now-1"})
    assert now.mode == "now"
    assert now.outcome is not None
    # Django's own atomic() is no transaction on django-mongodb-backend: written at once too.
    with transaction.atomic():
        assert schedule_on_commit(send_receipt, {"order_id": "now-2"}).mode == "now"


def test_schedule_on_commit_checks_its_input_first(site: str) -> None:
    from dogs_core.errors import InvalidOptionError, InvalidParamsError, UnknownJobError
    from dogs_integrations.django import schedule_on_commit

    with pytest.raises(UnknownJobError, match="known jobs: send_receipt"):
        schedule_on_commit("send_reciept")
    with pytest.raises(InvalidParamsError):
        schedule_on_commit("send_receipt", {"$bad": 1})
    with pytest.raises(InvalidOptionError, match="using='nowhere': not a database"):
        schedule_on_commit("send_receipt", {"order_id": "x"}, using="nowhere")
    with pytest.raises(InvalidOptionError, match="run_in='soon'"):
        schedule_on_commit("send_receipt", {"order_id": "x"}, run_in="soon")


@pytest.mark.parametrize(
    ("dogs", "message"),
    [
        ({"USING": "default", "WORKERS_COUNT": 0}, "DOGS['WORKERS_COUNT']=0: must be at least 1"),
        ({"USING": "default", "WORKERS": 2}, "DOGS['WORKERS']=2: not a setting of Dogs"),
        ({"uri": "mongodb://h/"}, "DOGS['URI']='mongodb://h/': the keys of DOGS are in capitals"),
        ({"USING": "nowhere"}, "DOGS['USING']='nowhere': not a database of DATABASES"),
        ({"USING": "ledger"}, "DATABASES['ledger'] is not a django_mongodb_backend database"),
        ({"URI": 42}, "DOGS['URI']=42"),
        ({"USING": "default", "JOBS_MODULE": "my-jobs"}, "DOGS['JOBS_MODULE']='my-jobs'"),
        ("mongodb://h/", "DOGS='mongodb://h/': must be a dict of settings"),
    ],
)
def test_a_wrong_setting_is_named(site: str, dogs: object, message: str) -> None:
    from django.core.exceptions import ImproperlyConfigured
    from django.test import override_settings

    from dogs_integrations.django import DogsSettingsError
    from dogs_integrations.django.conf import dogs_settings, reset

    def read() -> None:
        reset()
        dogs_settings()

    try:
        with override_settings(DOGS=dogs), pytest.raises(DogsSettingsError) as caught:
            read()
    finally:
        reset()
    assert message in str(caught.value)
    assert isinstance(caught.value, ImproperlyConfigured)


def test_jobs_are_found_in_the_apps_or_the_error_says_where(site: str) -> None:
    from django.conf import settings
    from django.test import override_settings

    from dogs_integrations.django import JobsDiscoveryError, get_jobs
    from dogs_integrations.django.discovery import reset

    assert get_jobs().names == ("send_receipt",)

    def read() -> None:
        reset()
        get_jobs()

    apps = [app for app in settings.INSTALLED_APPS if app != "shop"]
    try:
        with override_settings(INSTALLED_APPS=apps), pytest.raises(JobsDiscoveryError) as none:
            read()
        broken = [*apps, "tests.integrations.django_apps.broken_jobs"]
        with override_settings(INSTALLED_APPS=broken), pytest.raises(JobsDiscoveryError) as bad:
            read()
    finally:
        reset()
    assert "no jobs found in the installed apps (no app has a jobs.py)" in str(none.value)
    assert str(bad.value).startswith(
        "tests.integrations.django_apps.broken_jobs.jobs defines no Jobs registry named 'jobs' "
        "(found a int)"
    )


def test_management_commands_take_the_options_of_dogs(
    site: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from django.core.management import call_command

    with pytest.raises(SystemExit) as worker:
        call_command("dogs_worker", "--workers-count", "2", "--no-such-option")
    assert worker.value.code == 2
    assert "No such option: --no-such-option" in capsys.readouterr().err
    with pytest.raises(SystemExit) as schedule:
        call_command("dogs_schedule", "send_receipt", "--params", '{"order_id": "cli-1"}')
    assert schedule.value.code == 0
    assert capsys.readouterr().out.startswith("Scheduled ")
    assert {"order_id": "cli-1"} in receipts_scheduled()
    with pytest.raises(SystemExit) as helped:
        call_command("dogs_worker", "--help")
    assert helped.value.code == 0
    shown = capsys.readouterr().out
    usage = [line.strip() for line in shown.splitlines() if "Usage:" in line]
    assert usage == ["Usage: manage.py dogs_worker [OPTIONS]"], "no MODULE:REGISTRY to give"
    assert "--workers-count" in shown
    assert "MODULE:REGISTRY" not in shown
    assert "--app-dir" not in shown


def test_the_dashboard_is_for_active_staff_only(site: str) -> None:
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.core.asgi import get_asgi_application
    from django.test import Client
    from starlette.testclient import TestClient

    from dogs_integrations.django.dashboard import with_dashboard

    def session_of(user: User) -> dict[str, str]:
        client = Client()
        client.force_login(user)
        return {settings.SESSION_COOKIE_NAME: client.cookies[settings.SESSION_COOKIE_NAME].value}

    suffix = uuid.uuid4().hex[:6]
    staff = User.objects.create_user(f"staff{suffix}", password="x", is_staff=True)
    customer = User.objects.create_user(f"customer{suffix}", password="x")
    app = with_dashboard(get_asgi_application())
    with TestClient(app, follow_redirects=False) as http:
        anonymous = http.get("/admin/dogs/")
        assert anonymous.status_code == 302
        assert anonymous.headers["location"] == "/admin/login/?next=/admin/dogs/"
        http.cookies.update(session_of(customer))
        assert http.get("/admin/dogs/").status_code == 403
        http.cookies.update(session_of(staff))
        overview = http.get("/admin/dogs/")
        assert overview.status_code == 200
        assert "send_receipt" in overview.text
        assert 'href="/admin/dogs/jobs' in overview.text, "links under the mount path"
        assert http.get("/admin/").status_code == 200, "the rest is Django's (its admin)"
        assert f'id="user">{staff.username}' in overview.text
        # An action is audited under the staff user's Django username, not "anonymous".
        csrf = re.search(r'name="csrf_token" value="([0-9a-f]{64})"', overview.text)
        assert csrf is not None
        form = {"csrf_token": csrf.group(1), "name": "send_receipt", "confirmed": "yes"}
        assert http.post("/admin/dogs/actions/pause", data=form).status_code == 303
        form["csrf_token"] = csrf.group(1)
        assert http.post("/admin/dogs/actions/resume", data=form).status_code == 303
    from dogs_integrations.django import get_client

    entries = get_client().audit_log(limit=2)
    assert [(e.action, e.actor.name, e.actor.source) for e in entries] == [
        ("resume", staff.username, "dashboard"),
        ("pause", staff.username, "dashboard"),
    ]
