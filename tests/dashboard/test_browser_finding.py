"""The finding pages of issue 29 in a real headless Chromium over a real mongod: the Executions
page and its filters, the Errors page with its folded tracebacks, the Archive browser, a search
that finds a finished and an archived job, a job page whose huge params open on "Show all", and
the overview's held count. The seed writes records and rows through the store (no workers: the
pages read what any worker leaves)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from dogs_core import DogsClient
from dogs_core.domain.outcome import Defer
from dogs_core.domain.records import (
    ClaimRequest,
    HistoryRecord,
    HistoryStatus,
    Hold,
    HoldReason,
    JobType,
    NewJob,
    Owner,
)
from dogs_core.ids import new_execution_id, new_record_id
from dogs_core.ports import AsyncJobStore
from dogs_mongo.container import DogsContainer
from dogs_testing.settling import settle_one, terminal
from tests.dashboard.serving import ServedDashboard, serving
from tests.dashboard.test_browser import cell, click, text, wait_for

pytestmark = pytest.mark.mongo


TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/srv/venv/lib/python3.11/site-packages/dogs_core/runtime/invocation.py", line 252,'
    " in _timed\n    value = await run_sync(call)\n"
    '  File "/srv/venv/lib/python3.11/site-packages/anyio/to_thread.py", line 65, in run_sync\n'
    "    return await backend.run(call)\n"
    '  File "/srv/shop/mail.py", line 17, in send_email\n'
    '    raise SMTPException(f"mailbox {user} full")\n'
    "smtplib.SMTPException: mailbox 42 full\n"
)


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
        tries=1,
        started_at=started,
        ended_at=started + timedelta(milliseconds=180),
        status=status,
        expires_at=started + timedelta(days=7),
        **fields,
    )


async def _failed(store: AsyncJobStore, name: str, at: datetime, **fields: Any) -> str:
    job_id = new_record_id()
    await store.insert_job(NewJob(job_id, name, fields.pop("params", None), at, 100, 0, **fields))
    claimed = await store.claim(
        ClaimRequest((name,), 0, "byJobName", at, at + timedelta(minutes=1), new_execution_id())
    )
    assert claimed is not None
    assert await settle_one(store, job_id, claimed.lock_id, terminal(at))
    return job_id


async def seed(container: DogsContainer, client: DogsClient) -> dict[str, Any]:
    store = container.store()
    now = datetime.now(UTC)
    finished = new_record_id()
    rows = [
        _row(new_record_id(), "send_email", timedelta(minutes=3), HistoryStatus.ERROR,
             error_type="smtplib.SMTPException", error_message="mailbox 42 full",
             error_traceback=TRACEBACK, owner=Owner("web-1", 7, "w-a")),
        _row(new_record_id(), "send_email", timedelta(minutes=2), HistoryStatus.ERROR,
             error_type="smtplib.SMTPException", error_message="mailbox 7 full",
             error_traceback=TRACEBACK, owner=Owner("web-2", 8, "w-b")),
        _row(finished, "send_email", timedelta(minutes=1), HistoryStatus.SUCCESS),
    ]  # fmt: skip
    await store.write_history_many(rows)
    huge = await _failed(
        store, "import_orders", now - timedelta(minutes=5), params={"rows": ["x" * 90] * 500}
    )
    archived = await _failed(
        store, "import_orders", now - timedelta(days=40), unique_identifier="batch-7"
    )
    await store.setup_archive()
    await store.archive_failed_records(
        cutoff=now - timedelta(days=30), batch_size=10, archived_at=now
    )
    held = new_record_id()
    await store.insert_job(NewJob(held, "export", None, now - timedelta(minutes=2), 100, 0))
    claimed = await store.claim(
        ClaimRequest(("export",), 0, "byJobName", now, now + timedelta(minutes=1), "lock-x")
    )
    assert claimed is not None
    hold = Hold(HoldReason.CONCURRENCY, now - timedelta(minutes=2), now + timedelta(hours=1))
    assert await settle_one(store, held, "lock-x", Defer(hold.until, tries=0, hold=hold))
    return {"finished": finished, "huge": huge, "archived": archived, "rows": rows}


@pytest.fixture(scope="module")
def served(mongodb_uri: str, database: str, browser: WebDriver) -> Iterator[ServedDashboard]:
    with serving(ServedDashboard(mongodb_uri, database, seed, {"refresh_seconds": 0})) as dashboard:
        yield dashboard


def _rows(browser: WebDriver, table: str) -> list[str]:
    cells = browser.find_elements(By.CSS_SELECTOR, f"#{table} tr[data-execution-id]")
    return [str(row.get_attribute("data-execution-id")) for row in cells]


def test_executions_across_jobs_and_their_filters(
    browser: WebDriver, served: ServedDashboard
) -> None:
    rows = served.seeded["rows"]
    browser.get(served.url + "/")
    click(browser, "#nav-executions")
    wait_for(browser, lambda: _rows(browser, "executions-table")[:3] == [
        r.execution_id for r in reversed(rows)
    ])  # fmt: skip
    Select(browser.find_element(By.CSS_SELECTOR, "#ex-status")).select_by_value("error")
    browser.find_element(By.CSS_SELECTOR, "#ex-owner").send_keys("web-1")
    click(browser, "#ex-go")
    wait_for(browser, lambda: _rows(browser, "executions-table") == [rows[0].execution_id])
    assert "mailbox 42 full" in text(browser, "#executions-table")
    click(browser, "#ex-clear")
    wait_for(browser, lambda: len(_rows(browser, "executions-table")) >= 3)


def test_errors_grouped_with_the_users_frame_first(
    browser: WebDriver, served: ServedDashboard
) -> None:
    browser.get(served.url + "/errors")
    group = browser.find_element(By.CSS_SELECTOR, "#errors-table tr.error-group")
    assert group.get_attribute("data-count") == "2"  # "mailbox 42 full", "mailbox 7 full"
    assert "mailbox <n> full" in group.text
    trace = text(browser, "#errors-table details.traceback pre")
    assert "/srv/shop/mail.py" in trace
    assert "2 frames of dogs_core, anyio" in trace
    folded = "return document.querySelector('#errors-table details.frames').open;"
    assert browser.execute_script(folded) is False  # Dogs' and anyio's frames, folded
    click(browser, "#errors-table details.frames summary")  # unfold them
    wait_for(browser, lambda: browser.execute_script(folded) is True)
    assert "invocation.py" in text(browser, "#errors-table pre.tb")
    click(browser, '#window-tabs a[data-window="24h"]')
    wait_for(browser, lambda: "24h" in browser.current_url)


def test_search_finds_finished_and_archived_jobs_and_the_archive_browser(
    browser: WebDriver, served: ServedDashboard
) -> None:
    finished, archived = served.seeded["finished"], served.seeded["archived"]
    browser.get(served.url + "/jobs")
    box = browser.find_element(By.CSS_SELECTOR, "#search-q")
    box.send_keys(finished)
    click(browser, "#search-go")
    wait_for(browser, lambda: "with the id" in text(browser, "#search-result"))
    found = browser.find_element(By.CSS_SELECTOR, f'tr[data-found-id="{finished}"]')
    assert found.get_attribute("data-where") == "finished"
    box = browser.find_element(By.CSS_SELECTOR, "#search-q")
    box.clear()
    box.send_keys("batch-7")
    click(browser, "#search-go")
    wait_for(browser, lambda: "with the unique key" in text(browser, "#search-result"))
    click(browser, f'tr[data-found-id="{archived}"] a')
    wait_for(browser, lambda: "moved this job there" in text(browser, "#archived"))
    assert text(browser, "#job-state") == "failed (archived)"
    click(browser, "#nav-archive")
    wait_for(
        browser,
        lambda: browser.find_elements(
            By.CSS_SELECTOR, f'#archive-table tr[data-job-id="{archived}"]'
        ),
    )


def test_huge_params_are_cut_with_a_way_to_see_all(
    browser: WebDriver, served: ServedDashboard
) -> None:
    browser.get(f"{served.url}/jobs/{served.seeded['huge']}")
    assert "Failed at" in text(browser, "#record")
    assert "Next run" not in text(browser, "#record")
    cut = len(text(browser, "#params"))
    assert cut < 5_000
    click(browser, "#params-all")
    wait_for(browser, lambda: len(text(browser, "#params")) > 40_000)


def test_the_overview_counts_a_held_job(browser: WebDriver, served: ServedDashboard) -> None:
    browser.get(served.url + "/")
    assert cell(browser, "export", "held") == "1"
    assert cell(browser, "export", "scheduled") == "0"
