"""Issue 27 in the dashboard, in a real headless Chromium over a real mongod: the schedules page
lists runtime schedules and code-defined recurrent jobs, and pauses and resumes a runtime one
through its confirm dialog (the store is checked after each); the job list filters by tag."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from pymongo import MongoClient
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from dogs_core import DogsClient, JobContext, Jobs, SyncDogsClient, Workers
from dogs_mongo import MongoJobStore
from dogs_mongo.container import DogsContainer
from tests.dashboard.serving import ServedDashboard, serving
from tests.dashboard.test_browser import _id, act, job_rows, text, wait_for

pytestmark = pytest.mark.mongo


jobs = Jobs()


@jobs.event
async def nightly_report(params: dict[str, str], ctx: JobContext) -> None: ...


@jobs.recurrent(run_every="1h")
async def cleanup(ctx: JobContext) -> None: ...


async def seed(container: DogsContainer, client: DogsClient) -> dict[str, Any]:
    """A runtime schedule, and the code job's record (bootstrapped by a worker)."""
    await client.schedules.upsert(
        "report-acme", nightly_report, cron="0 3 * * *", timezone="Europe/Paris",
        params={"tenant": "acme"},
    )  # fmt: skip
    async with Workers(container.store(), jobs, poll_interval="100ms") as workers:
        while await client.schedules.get("cleanup") is None:  # noqa: ASYNC110 (a store read)
            await anyio.sleep(0.05)
        await workers.stop()
    return {}


@pytest.fixture(scope="module")
def served(mongodb_uri: str, database: str, browser: WebDriver) -> Iterator[ServedDashboard]:
    with serving(
        ServedDashboard(mongodb_uri, database, seed, {"refresh_seconds": 0.5})
    ) as dashboard:
        yield dashboard


@pytest.fixture(scope="module")
def store(sync_mongo_client: MongoClient[dict[str, Any]], database: str) -> MongoJobStore:
    return MongoJobStore(sync_mongo_client, database)


def field(browser: WebDriver, schedule_id: str, name: str) -> str:
    selector = f'tr[data-schedule="{schedule_id}"] td[data-field="{name}"]'
    return wait_for(browser, lambda: browser.find_element(By.CSS_SELECTOR, selector).text.strip())


def test_schedules_are_listed_paused_and_resumed(
    browser: WebDriver, served: ServedDashboard, store: MongoJobStore
) -> None:
    browser.get(served.url + "/")
    browser.find_element(By.CSS_SELECTOR, "#nav-schedules").click()
    wait_for(browser, lambda: "Schedules" in browser.title)
    assert field(browser, "cleanup", "source") == "code"
    assert field(browser, "report-acme", "source") == "runtime"
    assert field(browser, "report-acme", "state") == "active"
    assert not browser.find_elements(By.CSS_SELECTOR, 'button[data-target="cleanup"]')
    act(browser, "pause-schedule", "report-acme", accept=True)
    assert "Paused schedule report-acme" in text(browser, "#flash")
    assert field(browser, "report-acme", "state") == "paused"
    record = store.get_schedule_record("report-acme")
    assert record is not None
    assert record.schedule is not None
    assert record.schedule.paused
    assert record.next_run_at.year == 9999
    act(browser, "resume-schedule", "report-acme", accept=True)
    assert "Resumed schedule report-acme" in text(browser, "#flash")
    assert field(browser, "report-acme", "state") == "active"
    record = store.get_schedule_record("report-acme")
    assert record is not None
    assert record.schedule is not None
    assert not record.schedule.paused
    assert record.next_run_at.year < 9999


def test_jobs_are_filtered_by_tag(
    browser: WebDriver, served: ServedDashboard, store: MongoJobStore
) -> None:
    client = SyncDogsClient(store, jobs)
    acme = _id(client.schedule(nightly_report, {"t": "a"}, run_in="1h", tags=["tenant:acme"]))
    _id(client.schedule(nightly_report, {"t": "g"}, run_in="1h", tags=["tenant:globex"]))
    browser.get(served.url + "/jobs?tag=tenant:acme")
    assert job_rows(browser) == [acme]
    browser.find_element(By.CSS_SELECTOR, f'tr[data-job-id="{acme}"] a.tag').click()
    wait_for(browser, lambda: "tagged tenant:acme" in browser.find_element(By.TAG_NAME, "h1").text)
    assert job_rows(browser) == [acme]
