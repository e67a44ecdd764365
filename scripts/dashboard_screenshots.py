#!/usr/bin/env python3
"""Take the dashboard screenshots of docs/dashboard.md with the headless Chromium.

    python scripts/dashboard_screenshots.py                 # a mongod of its own
    python scripts/dashboard_screenshots.py --uri mongodb://127.0.0.1:27017/?replicaSet=rs0

Fills a fresh database (dropped at the end) with demo data: an hour of history rows for the
throughput chart, then real executions by real workers (successes, retries, a job that fails
for good with its traceback, jobs waiting for later, a paused name), serves the dashboard
with uvicorn while workers run (one render_pdf invoice renders, two wait behind its global
limit) and writes docs/images/dashboard-overview.png, dashboard-jobs.png, dashboard-job.png,
dashboard-executions.png and dashboard-errors.png; then, with two ``Workers`` instances running
beside the server (one busy with long jobs), the operator's console: dashboard-workers.png,
dashboard-bulk.png (a bulk retry of an outage's failures, done) and dashboard-audit.png. Needs
the dev extra and Debian's chromium and chromium-driver
(``$DOGS_TEST_CHROMIUM`` and ``$DOGS_TEST_CHROMEDRIVER`` override their paths).
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from dogs_core import DogsClient, JobContext, Jobs, RetryPolicy, Scheduled, Workers
from dogs_core.domain.records import HistoryRecord, HistoryStatus, JobType
from dogs_core.ids import new_execution_id, new_record_id
from dogs_dashboard import create_app
from dogs_mongo.container import DogsContainer, redact_uri
from dogs_mongo.mongod import start_local_mongod

IMAGES = Path(__file__).resolve().parent.parent / "docs" / "images"

jobs = Jobs()


@jobs.event(max_tries=3, retry=RetryPolicy(base=timedelta(milliseconds=50), jitter=0))
async def send_email(params: dict[str, str], ctx: JobContext) -> str:
    if params["to"].startswith("bounce"):
        raise ConnectionError(f"SMTP 550: mailbox {params['to']} unavailable")
    return f"sent to {params['to']}"


@jobs.event
async def resize_image(params: dict[str, int], ctx: JobContext) -> str:
    await anyio.sleep(random.uniform(0.01, 0.05))
    return f"resized to {params['width']}px"


@jobs.event(max_tries=1)
def import_orders(params: dict[str, str], ctx: JobContext) -> str:
    rows = params["path"]
    raise ValueError(f"cannot parse {rows}: line 42: expected 7 columns, got 5")


@jobs.event(global_concurrency=1)
async def render_pdf(params: dict[str, int], ctx: JobContext) -> str:
    await anyio.sleep(120)  # still rendering while the pages are shot: the others are held
    return f"rendered invoice {params['invoice']}"


@jobs.event(max_tries=1, lock_time="20m")
async def render_video(params: dict[str, int], ctx: JobContext) -> str:
    await anyio.sleep(params["seconds"])
    return "rendered"


#: The outage the bulk retry repairs: its emails failed for good while this is False.
smtp = {"up": False}


@jobs.event(max_tries=1)
async def send_invoice(params: dict[str, str], ctx: JobContext) -> str:
    if not smtp["up"]:
        raise ConnectionRefusedError("SMTP server refused the connection")
    return f"sent to {params['to']}"


def history(rng: random.Random, now: Any) -> list[HistoryRecord]:
    """An hour of finished executions, busier towards now, for the throughput chart."""
    rows = []
    for minute in range(60):
        for name, rate in (("send_email", 6), ("resize_image", 4)):
            for _ in range(rng.randint(0, int(rate * (1 + minute / 40)) + (rate >= 1))):
                started = now - timedelta(minutes=60 - minute, seconds=rng.uniform(0, 59))
                took = timedelta(milliseconds=rng.lognormvariate(4, 0.8))
                failed = rng.random() < 0.04
                upstream = rng.choice((504, 502, 503))
                rows.append(
                    HistoryRecord(
                        execution_id=new_execution_id(),
                        job_id=new_record_id(),
                        job_name=name,
                        type=JobType.EVENT,
                        priority=100,
                        tries=1,
                        started_at=started,
                        ended_at=started + took,
                        status=HistoryStatus.ERROR if failed else HistoryStatus.SUCCESS,
                        expires_at=now + timedelta(days=7),
                        result=None if failed else "ok",
                        error_type="TimeoutError" if failed else None,  # a built-in, bare
                        error_message=f"upstream answered {upstream} after 30 s"
                        if failed
                        else None,
                        outcome=("retried" if rng.random() < 0.7 else "failed")
                        if failed
                        else "succeeded",
                    )
                )
    return rows


async def fill(container: DogsContainer, client: DogsClient) -> dict[str, str]:
    store = container.store()
    rng = random.Random(15)
    await store.write_history_many(history(rng, client.clock.now()))
    ran = [await client.schedule(send_email, {"to": f"user{n}@example.com"}) for n in range(12)]
    ran += [await client.schedule(send_email, {"to": "bounce@example.com"})]
    ran += [await client.schedule(resize_image, {"width": w}) for w in (320, 640, 1280)]
    failed = await client.schedule(import_orders, {"path": "s3://orders/2026-12-01.csv"})
    pdfs = [await client.schedule(render_pdf, {"invoice": n}) for n in range(3)]
    async with Workers(store, jobs, workers_count=8, poll_interval="100ms") as workers:
        for outcome in [*ran, failed]:
            assert isinstance(outcome, Scheduled)
            await client.wait_for(outcome.id, timeout=30)
        await anyio.sleep(0.5)  # one invoice renders, the others are held by the limit
        await workers.stop(grace=0)
    assert all(isinstance(pdf, Scheduled) for pdf in pdfs)
    for n in range(5):
        await client.schedule(send_email, {"to": f"later{n}@example.com"}, run_in=f"{n + 1}h")
    for n in range(3):
        await client.schedule(resize_image, {"width": 100 * n}, unique_key=f"avatar:{n}")
    await client.schedule(import_orders, {"path": "s3://orders/2026-12-02.csv"}, run_in="30m")
    await client.pause("resize_image")
    assert isinstance(failed, Scheduled)
    return {"failed": failed.id}


async def outage(store: Any, client: DogsClient) -> dict[str, str]:
    """Invoices that failed during an SMTP outage, then retried in bulk by an operator; a
    deleted job and a cancelled one."""
    from dogs_core.domain.bulk import bulk_selection
    from dogs_core.runtime.plumbing.actors import acting_as

    invoices = [await client.schedule(send_invoice, {"to": f"c{n}@example.com"}) for n in range(40)]
    async with Workers(store, jobs, workers_count=8, poll_interval="100ms") as workers:
        for outcome in invoices:
            assert isinstance(outcome, Scheduled)
            await client.wait_for(outcome.id, timeout=30)
        smtp["up"] = True
        with acting_as("alice", source="dashboard"):
            selection = bulk_selection(
                job_name="send_invoice", state="failed", error_type="ConnectionRefusedError"
            )
            report = await client.bulk("retry", selection, chunk_size=10)
            later = await client.schedule(send_email, {"to": "x@example.com"}, run_in="2h")
            assert isinstance(later, Scheduled)
            await client.delete(later.id)
        with acting_as("bob", source="cli"):
            await client.resume("resize_image")
            await client.pause("resize_image")
        await anyio.sleep(1)
        await workers.stop()
    return {"bulk": report.audit_id or ""}


@contextmanager
def served(uri: str, database: str) -> Iterator[tuple[str, dict[str, str]]]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ready = threading.Event()
    state: dict[str, Any] = {}

    async def serve() -> None:
        container = DogsContainer(uri=uri, database=database)
        try:
            client = container.client()
            state["seeded"] = await fill(container, client)
            state["seeded"].update(await outage(container.store(), client))
            for seconds in (900, 900, 600):
                await client.schedule(render_video, {"seconds": seconds})
            app = create_app(client, source=redact_uri(uri), refresh_seconds=5)
            config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
            state["server"] = server = uvicorn.Server(config)
            store = container.store()
            busy = Workers(store, jobs, workers_count=4, poll_interval="200ms")
            idle = Workers(store, jobs, workers_count=8, poll_interval="200ms")
            async with busy, idle, anyio.create_task_group() as group:
                group.start_soon(server.serve)
                while not server.started:  # noqa: ASYNC110
                    await anyio.sleep(0.05)
                await anyio.sleep(11)  # the long jobs run; the second beat lists them
                from dogs_core.runtime.plumbing.actors import acting_as

                with acting_as("alice", source="dashboard"):
                    await client.quiet_worker(idle.owner.instance_id)
                ready.set()
                while not server.should_exit:  # noqa: ASYNC110
                    await anyio.sleep(0.1)
                await busy.stop(grace=0)
                await idle.stop(grace=0)
        finally:
            ready.set()
            await container.aclose()

    thread = threading.Thread(target=lambda: anyio.run(serve, backend="asyncio"), daemon=True)
    thread.start()
    ready.wait(120)
    if "server" not in state:
        sys.exit("the dashboard did not start")
    try:
        yield f"http://127.0.0.1:{port}", state["seeded"]
    finally:
        state["server"].should_exit = True
        thread.join(30)


def browser() -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = os.environ.get("DOGS_TEST_CHROMIUM", "/usr/bin/chromium")
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--hide-scrollbars"):
        options.add_argument(flag)
    options.add_argument("--window-size=1360,860")
    driver = os.environ.get("DOGS_TEST_CHROMEDRIVER", "/usr/bin/chromedriver")
    return webdriver.Chrome(options=options, service=webdriver.ChromeService(driver))


def shoot(chrome: webdriver.Chrome, url: str, name: str, ready: str) -> None:
    chrome.get(url)
    WebDriverWait(chrome, 10).until(lambda c: c.find_elements(By.CSS_SELECTOR, ready))
    path = IMAGES / f"dashboard-{name}.png"
    chrome.save_screenshot(str(path))
    size = path.stat().st_size
    print(f"{path.relative_to(IMAGES.parent.parent)}: {size // 1024} KB")
    if size > 300 * 1024:
        sys.exit(f"{path} is larger than 300 KB")


def take(uri: str) -> None:
    from pymongo import MongoClient

    database = f"dogs_screenshots_{uuid.uuid4().hex[:8]}"
    IMAGES.mkdir(parents=True, exist_ok=True)
    try:
        with served(uri, database) as (url, seeded):
            chrome = browser()
            try:
                shoot(chrome, url + "/", "overview", "#overview-table")
                shoot(chrome, url + "/jobs?name=send_email", "jobs", "#jobs-table")
                shoot(chrome, f"{url}/jobs/{seeded['failed']}", "job", "details.traceback")
                shoot(chrome, url + "/workers", "workers", "#workers-table")
                shoot(chrome, f"{url}/bulk/{seeded['bulk']}", "bulk", "#bulk-progress")
                shoot(chrome, url + "/audit", "audit", "#audit-table")
                shoot(chrome, url + "/executions?status=error", "executions", "#executions-table")
                shoot(chrome, url + "/errors", "errors", "#errors-table")
            finally:
                chrome.quit()
    finally:
        MongoClient(uri).drop_database(database)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uri", help="MongoDB URI (default: start a mongod of its own)")
    args = parser.parse_args()
    if args.uri:
        take(args.uri)
        return
    mongod = start_local_mongod()
    try:
        take(mongod.uri)
    finally:
        mongod.stop()


if __name__ == "__main__":
    main()
