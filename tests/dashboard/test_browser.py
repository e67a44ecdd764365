"""The dashboard in a real headless Chromium (Selenium 4, Debian's chromium and
chromium-driver) over a real mongod: the pages render, search and lists work, and every
action goes end to end through its confirm dialog (the store is checked afterwards).

The browser binaries are /usr/bin/chromium and /usr/bin/chromedriver, or
``$DOGS_TEST_CHROMIUM`` and ``$DOGS_TEST_CHROMEDRIVER``. Without them the tests are skipped
locally and FAIL in CI (``CI=true``), where the test command installs them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from pymongo import MongoClient
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from dogs_core import DogsClient, JobContext, Jobs, Scheduled, SyncDogsClient, Workers
from dogs_core.domain.records import HistoryStatus
from dogs_mongo import MongoJobStore
from dogs_mongo.container import DogsContainer
from tests.dashboard.serving import ServedDashboard, serving

pytestmark = pytest.mark.mongo

T = TypeVar("T")
WAIT = 10.0

jobs = Jobs()


@jobs.event
async def send_email(params: dict[str, str], ctx: JobContext) -> str:
    return f"sent to {params['to']}"


@jobs.event(max_tries=1)
async def import_file(params: dict[str, str], ctx: JobContext) -> str:
    raise ValueError(f"cannot parse {params['path']}")


@jobs.event
async def send_report(params: dict[str, str], ctx: JobContext) -> str:
    return "sent"


# -- the browser and the server ---------------------------------------------------------------


async def seed(container: DogsContainer, client: DogsClient) -> dict[str, Any]:
    """Three sent emails and one import that fails for good, run by real workers."""
    emails = [_id(await client.schedule(send_email, {"to": f"u{n}@example.com"})) for n in range(3)]
    failed = _id(await client.schedule(import_file, {"path": "<orders>.csv"}))
    async with Workers(container.store(), jobs, workers_count=4, poll_interval="100ms") as workers:
        for job_id in [*emails, failed]:
            await client.wait_for(job_id, timeout=30)
        await workers.stop()
    return {"emails": emails, "failed": failed}


@pytest.fixture(scope="module")
def served(mongodb_uri: str, database: str, browser: WebDriver) -> Iterator[ServedDashboard]:
    with serving(
        ServedDashboard(mongodb_uri, database, seed, {"refresh_seconds": 0.5})
    ) as dashboard:
        yield dashboard


@pytest.fixture(scope="module")
def store(sync_mongo_client: MongoClient[dict[str, Any]], database: str) -> MongoJobStore:
    return MongoJobStore(sync_mongo_client, database)


@pytest.fixture(scope="module")
def client(store: MongoJobStore) -> SyncDogsClient:
    return SyncDogsClient(store, jobs)


# -- the tests --------------------------------------------------------------------------------


def test_overview_renders_counts(browser: WebDriver, served: ServedDashboard) -> None:
    browser.get(served.url + "/")
    assert browser.title.startswith("Overview")
    assert text(browser, "#source") == served.uri
    assert cell(browser, "import_file", "failed") == "1"
    assert cell(browser, "send_email", "due") == "0"
    if not browser.find_elements(By.CSS_SELECTOR, "#stats-error"):  # the store aggregates stats
        assert cell(browser, "send_email", "runs") == "3"
        assert cell(browser, "import_file", "runs") == "1"
        # One lookup from the page: the live part is redrawn twice a second, and a row found
        # first may be gone by the time its chart is looked for.
        bars = 'tr[data-name="send_email"] svg.chart rect.chart-bar'
        assert wait_for(browser, lambda: browser.find_elements(By.CSS_SELECTOR, bars))


def test_lists_by_state_and_search(
    browser: WebDriver, served: ServedDashboard, client: SyncDogsClient
) -> None:
    later = _id(client.schedule(send_report, {"to": "ops"}, run_in="1h", unique_key="report:1"))
    browser.get(served.url + "/jobs?state=scheduled")
    assert job_rows(browser) == [later]
    click(browser, '#state-tabs a[data-state="failed"]')
    wait_for(browser, lambda: job_rows(browser) == [served.seeded["failed"]])
    search(browser, later)
    assert job_rows(browser) == [later]
    assert "with the id" in text(browser, "#search-result")
    search(browser, "report:1")
    assert job_rows(browser) == [later]
    assert "with the unique key" in text(browser, "#search-result")


def test_job_page_shows_the_traceback(browser: WebDriver, served: ServedDashboard) -> None:
    browser.get(f"{served.url}/jobs/{served.seeded['failed']}")
    assert text(browser, "#job-state") == "failed"
    assert "cannot parse <orders>.csv" in text(browser, "#executions")
    trace = text(browser, "#executions details.traceback pre")
    assert "Traceback (most recent call last)" in trace
    assert "ValueError: cannot parse <orders>.csv" in trace
    assert '"path": "<orders>.csv"' in text(browser, "#params")


def test_retry_now(browser: WebDriver, served: ServedDashboard, store: MongoJobStore) -> None:
    failed = served.seeded["failed"]
    browser.get(f"{served.url}/jobs/{failed}")
    act(browser, "retry", failed, accept=True)
    assert "is due now" in text(browser, "#flash")
    record = store.get_record(failed)
    assert record is not None
    assert record.status is None
    assert record.tries == 0


def test_cancel(
    browser: WebDriver, served: ServedDashboard, client: SyncDogsClient, store: MongoJobStore
) -> None:
    job_id = _id(client.schedule(send_report, {"to": "a"}, run_in="1h"))
    browser.get(f"{served.url}/jobs/{job_id}")
    act(browser, "cancel", job_id, accept=True)
    assert f"Cancelled send_report {job_id}" in text(browser, "#flash")
    assert store.get_record(job_id) is None
    rows = store.read_history(job_id=job_id)
    assert [row.status for row in rows] == [HistoryStatus.CANCELLED]


def test_delete_asks_first(
    browser: WebDriver, served: ServedDashboard, client: SyncDogsClient, store: MongoJobStore
) -> None:
    job_id = _id(client.schedule(send_report, {"to": "b"}, run_in="1h"))
    browser.get(f"{served.url}/jobs?name=send_report")
    act(browser, "delete", job_id, accept=False)  # "No" in the dialog: nothing happens
    assert store.get_record(job_id) is not None
    act(browser, "delete", job_id, accept=True)
    assert f"Deleted send_report {job_id}" in text(browser, "#flash")
    assert store.get_record(job_id) is None
    assert job_id not in job_rows(browser)


def test_pause_and_resume(
    browser: WebDriver, served: ServedDashboard, store: MongoJobStore
) -> None:
    browser.get(served.url + "/")
    act(browser, "pause", "send_email", accept=True)
    assert "Paused send_email" in text(browser, "#flash")
    assert store.paused_names() == frozenset({"send_email"})
    assert cell(browser, "send_email", "paused") == "paused"
    act(browser, "resume", "send_email", accept=True)
    assert "Resumed send_email" in text(browser, "#flash")
    assert store.paused_names() == frozenset()


def test_live_refresh(browser: WebDriver, served: ServedDashboard, client: SyncDogsClient) -> None:
    browser.get(served.url + "/jobs?name=send_report")
    browser.execute_script("window.notReloaded = true;")
    job_id = _id(client.schedule(send_report, {"to": "live"}, run_in="1h"))
    wait_for(browser, lambda: job_id in job_rows(browser))
    assert browser.execute_script("return window.notReloaded === true;")


# -- helpers ----------------------------------------------------------------------------------


def _id(outcome: object) -> str:
    assert isinstance(outcome, Scheduled)
    return outcome.id


def wait_for(browser: WebDriver, check: Callable[[], T]) -> T:
    """``check()`` once it is truthy; a redraw of the live part in between is retried."""

    def attempt(_: WebDriver) -> T | bool:
        try:
            return check()
        except (StaleElementReferenceException, NoSuchElementException):
            return False

    result = WebDriverWait(browser, WAIT).until(attempt)
    assert not isinstance(result, bool) or result
    return result  # type: ignore[return-value]


def text(browser: WebDriver, selector: str) -> str:
    return wait_for(browser, lambda: browser.find_element(By.CSS_SELECTOR, selector).text)


def cell(browser: WebDriver, name: str, kind: str) -> str:
    selector = f'tr[data-name="{name}"] td[data-count="{kind}"]'
    return wait_for(browser, lambda: browser.find_element(By.CSS_SELECTOR, selector).text.strip())


def job_rows(browser: WebDriver) -> list[str]:
    """The ids of the job list's rows (read again when the live part is redrawn meanwhile)."""
    for _ in range(5):
        try:
            rows = browser.find_elements(By.CSS_SELECTOR, "#jobs-table tr[data-job-id]")
            return [str(row.get_attribute("data-job-id")) for row in rows]
        except StaleElementReferenceException:
            continue
    raise AssertionError("the job list kept changing")


def click(browser: WebDriver, selector: str) -> None:
    def press() -> bool:
        browser.find_element(By.CSS_SELECTOR, selector).click()
        return True

    wait_for(browser, press)


def search(browser: WebDriver, query: str) -> None:
    box = browser.find_element(By.CSS_SELECTOR, "#search-q")
    box.clear()
    box.send_keys(query)
    browser.find_element(By.CSS_SELECTOR, "#search-go").click()
    wait_for(browser, lambda: query in text(browser, "#search-result"))


def act(browser: WebDriver, action: str, target: str, *, accept: bool) -> None:
    """Press an action's button, answer its confirm dialog, and wait for the page after."""
    old = browser.find_element(By.CSS_SELECTOR, "main")
    click(browser, f'button[data-action="{action}"][data-target="{target}"]')
    dialog = WebDriverWait(browser, WAIT).until(expected_conditions.alert_is_present())
    assert target in dialog.text or action in dialog.text.lower()
    if accept:
        dialog.accept()
        WebDriverWait(browser, WAIT).until(expected_conditions.staleness_of(old))
        text(browser, "#flash")
    else:
        dialog.dismiss()
