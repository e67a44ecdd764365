"""The operator's console in a real headless Chromium (Selenium 4, Debian's chromium and
chromium-driver) over a real mongod, with a real ``Workers`` instance beating the registry:
the Workers page and a remote quiet the worker obeys, a worker's page, "select all matching"
on the job list through a bulk retry and its live progress page, the Audit page and its filter,
a deleted job's page saying who deleted it, the favicon, a stop, and the token login.

Skipped without the browser locally, a failure in CI (see test_browser.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest
import uvicorn
from pymongo import MongoClient
from selenium.common.exceptions import (
    NoSuchElementException,
    StaleElementReferenceException,
    TimeoutException,
)
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from dogs_core import DogsClient, JobContext, Jobs, Workers
from dogs_core.domain.records import JobRecord, JobStatus, JobType
from dogs_core.domain.registry import WorkerAction
from dogs_core.ids import new_record_id
from dogs_dashboard import create_app
from dogs_dashboard.auth import CredentialsAuth, parse_credentials
from dogs_mongo import MongoJobStore
from dogs_mongo.container import DogsContainer
from dogs_mongo.queries import document_from_record
from tests.dashboard.serving import ServedDashboard, serving
from tests.dashboard.test_browser import act, click, text, wait_for

pytestmark = pytest.mark.mongo

jobs = Jobs()


@jobs.event
async def send_email(params: dict[str, str], ctx: JobContext) -> str:
    await anyio.sleep(float(params.get("seconds", "0")))
    return "sent"


TOKEN = "console-token-0123456789"


@dataclass
class ServedWithWorkers(ServedDashboard):
    """The dashboard, and a real ``Workers`` instance of :data:`jobs` in the same loop."""

    workers: list[Workers] = field(default_factory=list)

    async def _serve(self) -> None:
        container = DogsContainer(uri=self.uri, database=self.database)
        try:
            client = container.client(jobs)
            self.seeded = await self.seed(container, client)
            app = create_app(client, source=self.uri, **self.options)
            config = uvicorn.Config(
                app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off"
            )
            self._server = uvicorn.Server(config)
            async with Workers(container.store(), jobs, poll_interval="200ms") as workers:
                self.workers.append(workers)
                async with anyio.create_task_group() as group:
                    group.start_soon(self._server.serve)
                    while not self._server.started:  # noqa: ASYNC110 - uvicorn's own flag
                        await anyio.sleep(0.02)
                    self._ready.set()
                    while not self._server.should_exit:  # noqa: ASYNC110
                        await anyio.sleep(0.1)
                    await workers.stop(grace=0)
        finally:
            self._ready.set()
            await container.aclose()


def test_a_tagged_list_then_a_bulk_delete(
    browser: WebDriver, served: ServedWithWorkers, store: MongoJobStore
) -> None:
    # another job's records: the module's other tests count the failed send_email ones
    tagged = [_failed(store, "import_orders", tags=("tenant:acme",)) for _ in range(3)]
    kept = _failed(store, "import_orders", tags=("tenant:other",))
    browser.get(served.url + "/jobs?tag=tenant:acme")
    # a wrong count typed: the server refuses and deletes nothing
    click(browser, '#select-all a[data-bulk="delete"]')
    browser.find_element(By.CSS_SELECTOR, "#bulk-typed").send_keys("2")
    old = browser.find_element(By.CSS_SELECTOR, "main")
    click(browser, "#bulk-go")
    wait_for(browser, lambda: old.id != browser.find_element(By.CSS_SELECTOR, "main").id)
    assert "Type 3 to delete them" in text(browser, "#confirm-question")
    assert all(store.get_record(job_id) is not None for job_id in tagged)
    browser.get(served.url + "/jobs?tag=tenant:acme")
    said = _select_all_and_confirm(browser, "delete", total="3")
    assert "Delete 3 jobs (jobs tagged tenant:acme): they are kept in the archive" in said
    wait_for(browser, lambda: text(browser, "#bulk-changed") == "3")
    assert [store.get_record(job_id) for job_id in tagged] == [None, None, None]
    assert store.get_record(kept) is not None
    store.records_collection.delete_one({"_id": kept})


def _failed(store: MongoJobStore, name: str = "send_email", tags: tuple[str, ...] = ()) -> str:
    now = datetime.now(UTC)
    record = JobRecord(
        id=new_record_id(),
        job_name=name,
        type=JobType.EVENT,
        priority=100,
        next_run_at=now + timedelta(hours=1),
        tries=3,
        status=JobStatus.MAX_TRIES_REACHED,
        max_tries_reached_at=now,
        expires_at=now + timedelta(days=7),
        tags=tags,
    )
    store.records_collection.insert_one(document_from_record(record))
    return record.id


async def _nothing(container: DogsContainer, client: DogsClient) -> dict[str, Any]:
    return {}


@pytest.fixture(scope="module")
def store(sync_mongo_client: MongoClient[dict[str, Any]], database: str) -> MongoJobStore:
    store = MongoJobStore(sync_mongo_client, database)
    store.setup()
    return store


@pytest.fixture(scope="module")
def served(mongodb_uri: str, database: str, browser: WebDriver) -> Iterator[ServedWithWorkers]:
    with serving(
        ServedWithWorkers(mongodb_uri, database, _nothing, {"refresh_seconds": 0.5})
    ) as dashboard:
        yield dashboard


def patient(browser: WebDriver, check: Callable[[], bool], seconds: float = 30) -> None:
    """``check()`` once it is true, for something a worker's next beat brings (10 s apart)."""

    def attempt(_: WebDriver) -> bool:
        try:
            return check()
        except (StaleElementReferenceException, NoSuchElementException, TimeoutException):
            return False

    WebDriverWait(browser, seconds).until(attempt)


def _instance(served: ServedWithWorkers) -> str:
    return served.workers[0].owner.instance_id


def test_the_workers_pages_a_remote_quiet_then_a_remote_stop(
    browser: WebDriver, served: ServedWithWorkers, store: MongoJobStore
) -> None:
    browser.get(served.url + "/")
    click(browser, "#nav-workers")
    instance = _instance(served)
    row = f'tr[data-instance="{instance}"]'
    assert text(browser, f'{row} td[data-field="state"]') == "running"
    assert text(browser, f'{row} td[data-field="slots"]') == "0/4"
    old = browser.find_element(By.CSS_SELECTOR, "main")
    click(browser, f'{row} button[data-op="quiet"]')
    browser.switch_to.alert.accept()
    wait_for(browser, lambda: old.id != browser.find_element(By.CSS_SELECTOR, "main").id)
    assert f"Asked {instance}" in text(browser, "#flash")
    info = store.get_worker(instance)
    assert info is not None
    assert info.command is not None
    assert info.command.action is WorkerAction.QUIET
    # the worker takes it with its next beat (within 10 s); the live page follows
    patient(browser, lambda: text(browser, f'{row} td[data-field="state"]') == "quiet")

    # its own page (one test: the states follow each other, and xdist may split a module)
    browser.get(served.url + "/workers")
    click(browser, f'a[href="/workers/{_instance(served)}"]')
    assert "quiet" in text(browser, "#worker-state")
    assert "0 in use of 4" in text(browser, "#worker-slots")
    assert browser.find_elements(By.CSS_SELECTOR, "#worker-executions")

    # then a remote stop: the worker drains and its document says stopped
    browser.get(f"{served.url}/workers/{instance}")
    old = browser.find_element(By.CSS_SELECTOR, "main")
    click(browser, 'button[data-op="stop"]')
    browser.switch_to.alert.accept()
    wait_for(browser, lambda: old.id != browser.find_element(By.CSS_SELECTOR, "main").id)
    browser.get(f"{served.url}/workers")
    row = f'tr[data-instance="{instance}"]'
    patient(browser, lambda: text(browser, f'{row} td[data-field="state"]') == "stopped")


def _select_all_and_confirm(browser: WebDriver, action: str, *, total: str) -> str:
    """On a job list: select every match for ``action``, check the count, go, confirm and wait
    for the next page; what the confirmation said. A delete or cancel has no confirm dialog:
    the operator types the count it removes (Sidekiq-style)."""
    click(browser, f'#select-all a[data-bulk="{action}"]')
    assert text(browser, "#bulk-total") == total
    old = browser.find_element(By.CSS_SELECTOR, "main")
    if action in ("delete", "cancel"):
        said = text(browser, "#bulk-typed-question")
        browser.find_element(By.CSS_SELECTOR, "#bulk-typed").send_keys(total)
        click(browser, "#bulk-go")
    else:
        click(browser, "#bulk-go")
        dialog = browser.switch_to.alert
        said = dialog.text
        dialog.accept()
    wait_for(browser, lambda: old.id != browser.find_element(By.CSS_SELECTOR, "main").id)
    return said


def test_select_all_matching_then_a_bulk_retry(
    browser: WebDriver, served: ServedWithWorkers, store: MongoJobStore
) -> None:
    failed = [_failed(store) for _ in range(4)]
    browser.get(served.url + "/jobs?name=send_email&state=failed")
    confirmed = _select_all_and_confirm(browser, "retry", total="4")
    assert "Retry 4 failed jobs of send_email" in confirmed
    assert "Started: bulk_retry" in text(browser, "#flash")
    wait_for(browser, lambda: text(browser, "#bulk-changed") == "4")
    assert text(browser, "#bulk-state") == "done"
    for job_id in failed:
        record = store.get_record(job_id)
        assert record is not None
        assert record.status is None


def test_the_audit_page_and_its_filter(
    browser: WebDriver, served: ServedWithWorkers, store: MongoJobStore
) -> None:
    # Two actions of its own (the module's other tests may run in another xdist worker).
    job_id = _failed(store)
    browser.get(f"{served.url}/jobs/{job_id}")
    act(browser, "retry", job_id, accept=True)
    browser.get(f"{served.url}/")
    act(browser, "pause", "send_email", accept=True)
    act(browser, "resume", "send_email", accept=True)
    click(browser, "#nav-audit")
    actions = [action for action, _ in _audit_rows(browser)]
    assert actions[:3] == ["resume", "pause", "retry"]
    browser.find_element(By.CSS_SELECTOR, '#audit-action option[value="retry"]').click()
    click(browser, "#audit-go")
    wait_for(browser, lambda: "action=retry" in browser.current_url)
    rows = _audit_rows(browser)
    assert {action for action, _ in rows} == {"retry"}
    assert job_id in rows[0][1]
    assert "anonymous (dashboard" in rows[0][1]


def _audit_rows(browser: WebDriver) -> list[tuple[str, str]]:
    """The audit table's rows (action, text), read again when the live part is redrawn."""
    return wait_for(
        browser,
        lambda: [
            (str(row.get_attribute("data-action")), row.text)
            for row in browser.find_elements(By.CSS_SELECTOR, "#audit-table tr[data-action]")
        ],
    )


def test_a_deleted_jobs_page_says_who_deleted_it(
    browser: WebDriver, served: ServedWithWorkers, store: MongoJobStore
) -> None:
    job_id = _failed(store)
    browser.get(f"{served.url}/jobs/{job_id}")
    act(browser, "delete", job_id, accept=True)
    browser.get(f"{served.url}/jobs/{job_id}")
    assert "deleted by anonymous (dashboard) at" in text(browser, "#job-fate")


def test_the_favicon(browser: WebDriver, served: ServedWithWorkers) -> None:
    browser.get(served.url + "/favicon.ico")
    assert "404" not in browser.page_source
    browser.get(served.url + "/")
    icon = browser.find_element(By.CSS_SELECTOR, 'link[rel="icon"]')
    assert str(icon.get_attribute("href")).endswith("/static/favicon.svg")


@pytest.fixture(scope="module")
def guarded(mongodb_uri: str, database: str, browser: WebDriver) -> Iterator[ServedDashboard]:
    tokens = parse_credentials(f"alice:{TOKEN}", field="tokens", tokens=True)
    auth = CredentialsAuth(tokens=tokens, secret="x" * 32)
    with serving(
        ServedDashboard(mongodb_uri, database, _nothing, {"auth": auth, "secret": "x" * 32})
    ) as dashboard:
        yield dashboard


def test_the_token_login(browser: WebDriver, guarded: ServedDashboard) -> None:
    browser.delete_all_cookies()
    browser.get(guarded.url + "/audit")
    wait_for(browser, lambda: "/login" in browser.current_url)
    box = browser.find_element(By.CSS_SELECTOR, "#login-token")
    assert not browser.find_elements(By.CSS_SELECTOR, "#source"), "no data source before"
    box.send_keys("not-the-token")
    click(browser, "#login-go")
    assert "not valid" in text(browser, "#login-failed")
    assert guarded.uri not in browser.page_source
    browser.find_element(By.CSS_SELECTOR, "#login-token").send_keys(TOKEN)
    click(browser, "#login-go")
    wait_for(browser, lambda: browser.current_url.endswith("/audit"))
    assert text(browser, "#user") == "alice"
    click(browser, "#logout")
    wait_for(browser, lambda: "/login" in browser.current_url)
