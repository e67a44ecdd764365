"""The dashboard's workflow pages in a real headless Chromium over a real mongod: the list, the
graph drawn as SVG (a node per step, coloured by state, an edge per dependency, each node a
link to its job's page), and the cancel and retry actions end to end through their confirm
dialogs. The browser binaries are found as tests/dashboard/test_browser.py finds them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import MongoClient
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from dogs_core import DogsClient, JobContext, Jobs, SyncDogsClient, Workers
from dogs_core.domain.workflow_records import WorkflowState
from dogs_core.domain.workflows import Workflow
from dogs_mongo import MongoJobStore
from dogs_mongo.container import DogsContainer
from tests.dashboard.serving import ServedDashboard, serving
from tests.dashboard.test_browser import act, click, text, wait_for

pytestmark = pytest.mark.mongo


jobs = Jobs()


@jobs.event(max_tries=1)
async def fetch(params: dict[str, str], ctx: JobContext) -> dict[str, str]:
    return {"body": params["url"]}


@jobs.event(max_tries=1)
async def index(params: None, ctx: JobContext) -> None:
    raise RuntimeError("the index is down")


@jobs.event(max_tries=1)
async def report(params: None, ctx: JobContext) -> str:
    return "reported"


def diamond(name: str) -> Workflow:
    wf = Workflow(name)
    fetched = wf.add(fetch, {"url": "https://example.com"})
    parsed = wf.add(report, name="parse", after=[fetched])
    indexed = wf.add(index, after=[fetched], on_failure="continue")
    wf.add(report, after=[parsed, indexed])
    return wf


async def seed(container: DogsContainer, client: DogsClient) -> dict[str, Any]:
    """One workflow run to its end by real workers (its index failed under continue), and one
    left running (no worker runs it any more)."""
    done = await client.start_workflow(diamond("done"))
    async with Workers(container.store(), jobs, workers_count=4, poll_interval="100ms") as workers:
        await client.wait_for_workflow(done.id, timeout=30)
        await workers.stop()
    running = await client.start_workflow(diamond("running"))
    return {"done": done.id, "running": running.id}


@pytest.fixture(scope="module")
def served(mongodb_uri: str, database: str, browser: WebDriver) -> Iterator[ServedDashboard]:
    with serving(ServedDashboard(mongodb_uri, database, seed, {"refresh_seconds": 0})) as dashboard:
        yield dashboard


@pytest.fixture(scope="module")
def client(sync_mongo_client: MongoClient[dict[str, Any]], database: str) -> SyncDogsClient:
    return SyncDogsClient(MongoJobStore(sync_mongo_client, database), jobs)


def nodes(browser: WebDriver) -> dict[str, str]:
    found = browser.find_elements(By.CSS_SELECTOR, "#dag g.node[data-step]")
    return {str(n.get_attribute("data-step")): str(n.get_attribute("data-state")) for n in found}


def test_the_list_links_to_the_graph_of_each_workflow(
    browser: WebDriver, served: ServedDashboard
) -> None:
    browser.get(served.url + "/workflows")
    assert browser.title.startswith("Workflows")
    rows = browser.find_elements(By.CSS_SELECTOR, "#workflows-table tr[data-workflow-id]")
    assert {row.get_attribute("data-workflow-id") for row in rows} == {
        served.seeded["done"],
        served.seeded["running"],
    }
    click(browser, '#workflow-state-tabs a[data-state="completed"]')
    wait_for(
        browser,
        lambda: (
            [
                r.get_attribute("data-workflow-id")
                for r in browser.find_elements(
                    By.CSS_SELECTOR, "#workflows-table tr[data-workflow-id]"
                )
            ]
            == [served.seeded["done"]]
        ),
    )
    click(browser, f'a[href$="/workflows/{served.seeded["done"]}"]')
    wait_for(browser, lambda: text(browser, "#workflow-state") == "completed")
    assert nodes(browser) == {
        "fetch": "succeeded",
        "parse": "succeeded",
        "index": "failed",
        "report": "succeeded",
    }
    assert len(browser.find_elements(By.CSS_SELECTOR, "#dag path.edge")) == 4
    # The graph is drawn: its boxes have a size, and a failed box is coloured apart.
    failed = browser.find_element(By.CSS_SELECTOR, '#dag g.node[data-step="index"] rect')
    succeeded = browser.find_element(By.CSS_SELECTOR, '#dag g.node[data-step="fetch"] rect')
    assert failed.size["width"] > 100
    assert failed.value_of_css_property("fill") != succeeded.value_of_css_property("fill")
    assert "the index is down" in text(browser, '#steps-table tr[data-step="index"]')


def test_a_node_leads_to_its_job_page(browser: WebDriver, served: ServedDashboard) -> None:
    browser.get(f"{served.url}/workflows/{served.seeded['done']}")
    click(browser, '#dag a.node-link g[data-step="index"]')
    wait_for(browser, lambda: browser.title.startswith("index "))
    assert "the index is down" in text(browser, "#executions")


def test_cancel_a_running_workflow_and_retry_it(
    browser: WebDriver, served: ServedDashboard, client: SyncDogsClient
) -> None:
    running = served.seeded["running"]
    browser.get(f"{served.url}/workflows/{running}")
    assert nodes(browser) == {
        "fetch": "released",
        "parse": "blocked",
        "index": "blocked",
        "report": "blocked",
    }
    act(browser, "cancel_workflow", running, accept=True)
    assert f"Cancelled workflow {running}" in text(browser, "#flash")
    assert client.get_workflow(running).state is WorkflowState.CANCELLED
    assert set(nodes(browser).values()) == {"cancelled"}
    act(browser, "retry_workflow", running, accept=True)
    assert f"4 steps of workflow {running} run again (1 released now)" in text(browser, "#flash")
    assert client.get_workflow(running).state is WorkflowState.RUNNING
