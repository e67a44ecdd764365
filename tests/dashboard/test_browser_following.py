"""A running job followed in a real headless Chromium over a real mongod: its progress bar in the
job list and on its page, and its execution's log lines under it, updating live (no reload) as
the job moves on, then the finished job's lines and final progress.

The job's steps are gated by the test (threading events), so each state is waited for, never
timed. Uses the browser and helpers of ``test_browser`` (skipped the same way without Chromium).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import MongoClient
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from dogs_core import DogsClient, JobContext, Jobs, SyncDogsClient
from dogs_core.runtime.worker.blocking import BlockingWorkers
from dogs_mongo import MongoJobStore
from dogs_mongo.container import DogsContainer
from tests.dashboard.serving import ServedDashboard, serving
from tests.dashboard.test_browser import _id, job_rows, text, wait_for

pytestmark = pytest.mark.mongo


jobs = Jobs()
gates = [threading.Event(), threading.Event()]


@jobs.event(store_logs=True)
def import_rows(params: None, ctx: JobContext) -> str:
    ctx.progress(0.25, "step 1 of 4", data={"rows": 250})
    ctx.logger.info("step 1 done")
    gates[0].wait(60)
    ctx.progress(0.75, "step 3 of 4", data={"rows": 750})
    ctx.logger.warning("step 3 done, 2 rows skipped")
    gates[1].wait(60)
    ctx.progress(1.0, "all 4 steps")
    return "imported"


async def _nothing(container: DogsContainer, client: DogsClient) -> dict[str, Any]:
    return {}


@pytest.fixture(scope="module")
def served(mongodb_uri: str, database: str, browser: WebDriver) -> Iterator[ServedDashboard]:
    with serving(
        ServedDashboard(mongodb_uri, database, _nothing, {"refresh_seconds": 0.3})
    ) as dashboard:
        yield dashboard


def _fraction(browser: WebDriver, selector: str) -> str:
    return str(browser.find_element(By.CSS_SELECTOR, selector).get_attribute("data-fraction"))


def test_a_running_job_moves_on_live(
    browser: WebDriver, served: ServedDashboard, sync_mongo_client: MongoClient[dict[str, Any]]
) -> None:
    store = MongoJobStore(sync_mongo_client, served.database)
    client = SyncDogsClient(store, jobs)
    job_id = _id(client.schedule(import_rows))
    workers = BlockingWorkers(store, jobs, poll_interval="100ms", progress_interval="100ms")
    workers.start()
    try:
        browser.get(served.url + "/jobs?state=running")
        wait_for(browser, lambda: job_rows(browser) == [job_id])
        row = f'tr[data-job-id="{job_id}"] .progress'
        wait_for(browser, lambda: _fraction(browser, row) == "0.2500")
        assert "step 1 of 4" in text(browser, row)

        browser.get(f"{served.url}/jobs/{job_id}")
        browser.execute_script("window.notReloaded = true;")
        wait_for(browser, lambda: _fraction(browser, "#job-progress") == "0.2500")
        wait_for(browser, lambda: "step 1 done" in text(browser, "#log-lines"))
        assert "250" in text(browser, "#progress-data")

        gates[0].set()  # the job moves on: the page follows without a reload
        wait_for(browser, lambda: _fraction(browser, "#job-progress") == "0.7500")
        wait_for(browser, lambda: "step 3 done, 2 rows skipped" in text(browser, "#log-lines"))
        assert "WARNING" in text(browser, "#log li.level-warning")  # read again if redrawn
        assert browser.execute_script("return window.notReloaded === true;")

        gates[1].set()  # it ends: its record goes, its lines and final progress stay
        wait_for(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "#record-gone"))
        assert "the last execution" in text(browser, "#log-lines")
        assert "step 1 done" in text(browser, "#log")
        assert _fraction(browser, "#executions .progress") == "1.0000"
        assert browser.execute_script("return window.notReloaded === true;")
    finally:
        for gate in gates:
            gate.set()
        workers.stop(grace=5)
