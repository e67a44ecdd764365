"""Every example runs by itself and says what it should; the custom adapter passes the contract.

The examples run in this process (``main([])``, their default in-memory store), the ``--uri``
variants against the session's real mongod (marked ``mongo``).
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from examples import (
    custom_adapter,
    dashboard_mount,
    durable_steps,
    finding,
    fleet_limits,
    following,
    leases,
    long_job_heartbeat,
    managing_jobs,
    misfire,
    observability,
    quickstart_async,
    recurrent_cron,
    skewed_clocks,
    stats,
    sync_app,
    telemetry_events,
    transactional_schedule,
    wait_for_result,
    workflows,
)
from examples.custom_adapter import MetricsJobStore

from dogs_core.domain.records import JobRecord
from dogs_core.ports import AsyncJobStore
from dogs_testing import InMemoryJobStore
from dogs_testing.contract import ArchiveUnderTest, StoreContract

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def output_of(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().out


def test_quickstart_async(capsys: pytest.CaptureFixture[str]) -> None:
    quickstart_async.main([])
    out = output_of(capsys)
    assert re.search(r"second 'welcome:1' was a duplicate of \S+", out)
    for name in ("ada", "grace", "linus"):
        assert f"send_welcome: success -> welcomed {name}" in out
    assert out.count("send_welcome: success") == 3
    assert "purge_sessions: success -> 0" in out
    assert re.search(r"purge_sessions runs next at \d\d:\d\d UTC", out)


def test_quickstart_wiring_stays_short() -> None:
    source = (EXAMPLES / "quickstart_async.py").read_text()
    wiring = source.split("# -- the wiring")[1].split("# -- the results")[0]
    lines = [line for line in wiring.splitlines()[1:] if line.strip()]
    assert len(lines) < 15, lines


def test_sync_app(capsys: pytest.CaptureFixture[str]) -> None:
    sync_app.main([])
    out = output_of(capsys)
    assert out.count("invoice queued") == 4
    assert "POST /checkout order=1: invoice already queued" in out
    for order_id in (1, 2, 3, 4):
        assert f"success: invoice-{order_id}.pdf" in out
    assert "invoice-4.pdf (120.00 EUR)" in out
    assert "handlers ran in worker threads: True" in out


def test_recurrent_cron(capsys: pytest.CaptureFixture[str]) -> None:
    recurrent_cron.main([])
    out = output_of(capsys)
    assert "Sat 30 03:00 CET = 02:00 UTC" in out
    assert "Sun 31 03:00 CEST = 01:00 UTC" in out
    assert "nightly_report: 4 runs (Paris time: Fri 13:00, Sat 03:00, Sun 03:00, Mon 03:00)" in out
    match = re.search(r"refresh_rates: (\d+) runs", out)
    assert match is not None
    assert int(match.group(1)) == 13  # at start, then every 6 h for 3 days
    seconds = re.search(r"3 virtual days took ([\d.]+) s", out)
    assert seconds is not None


def test_long_job_heartbeat(capsys: pytest.CaptureFixture[str]) -> None:
    long_job_heartbeat.main([])
    out = output_of(capsys)
    assert "30 minutes of virtual time" in out
    assert "reindex: success after 10.1 min; lock renewals: 30" in out
    assert "export: success after 8.3 min; lock renewals: 10" in out
    assert "fragile: stale after 1.0 min, stale after 1.0 min; lock renewals: 0" in out
    assert "fragile is kept as maxTriesReached after 3 tries" in out


def test_custom_adapter(capsys: pytest.CaptureFixture[str]) -> None:
    custom_adapter.main([])
    out = output_of(capsys)
    assert "20 thumbnails made through MetricsJobStore" in out
    # Settlements of concurrent executions are written in batches: 1 to 20 calls for 20 jobs.
    complete = re.search(r"^settle_many\s+(\d+)\s+0\s", out, re.MULTILINE)
    assert complete is not None
    assert 1 <= int(complete.group(1)) <= 20
    assert re.search(r"^claim(_many)?\s+\d+\s+0\s", out, re.MULTILINE)


def test_durable_steps_in_memory(capsys: pytest.CaptureFixture[str]) -> None:
    durable_steps.main([])
    out = output_of(capsys)
    assert "the order is sleeping until " in out
    assert "retry_now wakes the order" in out
    assert "try 1: snoozed -> None" in out
    assert "try 2: replaying reserve, charge, wait for the warehouse from the record" in out
    assert "try 1: error -> the shipping API answered 503" in out
    assert "'payment': 'ch_42_1999', 'parcel': 'parcel-42'" in out
    assert "function calls: reserve 1, charge 1, ship 2" in out


@pytest.mark.mongo
def test_durable_steps_on_mongodb(mongodb_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    durable_steps.main(["--uri", mongodb_uri])
    out = output_of(capsys)
    assert "the order is sleeping until " in out
    assert "try 2: replaying reserve, charge, wait for the warehouse from the record" in out
    assert "function calls: reserve 1, charge 1, ship 2" in out
    assert "payments stored: 1" in out


def test_transactional_schedule_without_a_database(capsys: pytest.CaptureFixture[str]) -> None:
    """Without --uri there are no transactions: the in-memory store refuses the session."""
    transactional_schedule.main([])
    out = output_of(capsys)
    assert "SessionNotSupportedError: the in-memory store cannot join a database session" in out
    assert "records written: 0" in out


@pytest.mark.parametrize(
    "script",
    [
        "quickstart_async.py",
        "sync_app.py",
        "recurrent_cron.py",
        "long_job_heartbeat.py",
        "transactional_schedule.py",
        "managing_jobs.py",
        "telemetry_events.py",
        "fleet_limits.py",
        "leases.py",
        "stats.py",
        "observability.py",
        "skewed_clocks.py",
    ],
)
def test_examples_run_as_scripts(script: str) -> None:
    assert _script(script).strip()


def _script(script: str, *arguments: str, timeout: float = 60) -> str:
    """What ``examples/<script>`` printed, run as a script; it must exit 0."""
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *arguments],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _demo(*arguments: str) -> str:
    """What the README's demo (``scripts/demo`` runs ``examples/demo.py``) printed, at a small
    size; it must end with its summary read from the history."""
    printed = _script("demo.py", "--events", "40", *arguments, timeout=120)
    out = " ".join(printed.split())  # Rich wraps its lines at the terminal's width
    assert "a second 'w:0' was reported as Duplicate (scheduled twice on purpose" in out
    assert "The failed attempts are on purpose" in out
    assert "Summary (from the job history)" in out
    finished = re.search(r"(\d+) event jobs done in", out)
    assert finished, out
    # A send_email gives up after 4 failed tries of 15 % each: about one run in a hundred.
    assert 35 <= int(finished.group(1)) <= 40
    return out


def test_the_demo_in_memory() -> None:
    out = _demo("--memory")
    assert "on the in-memory store" in out


@pytest.mark.mongo
def test_the_demo_on_mongodb(mongodb_uri: str) -> None:
    out = _demo("--uri", mongodb_uri)
    assert "on MongoDB database dogs_demo_" in out


class TestMetricsJobStore(StoreContract):
    """The user-side contract test shown in examples/custom_adapter.py."""

    @pytest.fixture
    def store(self) -> MetricsJobStore:
        return MetricsJobStore(InMemoryJobStore())

    @pytest.fixture
    def archive(self, store: MetricsJobStore) -> ArchiveUnderTest:
        # The archive part's copy_batch and archived_keys are test hooks of the wrapped store.
        assert isinstance(store.inner, InMemoryJobStore)
        return store.inner

    async def seed_record(self, store: AsyncJobStore, record: JobRecord) -> None:
        assert isinstance(store, MetricsJobStore)
        assert isinstance(store.inner, InMemoryJobStore)
        await store.inner.insert_record(record)


@pytest.mark.mongo
@pytest.mark.parametrize(
    ("main", "expected"),
    [
        (quickstart_async.main, "send_welcome: success -> welcomed linus"),
        (sync_app.main, "success: invoice-4.pdf"),
        (custom_adapter.main, "20 thumbnails made through MetricsJobStore"),
    ],
    ids=["quickstart_async", "sync_app", "custom_adapter"],
)
def test_examples_on_mongodb(
    main: Callable[[Sequence[str] | None], None],
    expected: str,
    mongodb_uri: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    main(["--uri", mongodb_uri])
    assert expected in output_of(capsys)


@pytest.mark.mongo
def test_transactional_schedule_on_mongodb(
    mongodb_uri: str, capsys: pytest.CaptureFixture[str]
) -> None:
    transactional_schedule.main(["--uri", mongodb_uri])
    out = output_of(capsys)
    assert "order 1: placed with its confirmation job" in out
    assert "order 1: already placed: its confirmation job is kept, written once" in out
    assert "order 2: placed with its confirmation job" in out
    assert "order 3: out of stock: neither the order nor its job was written" in out
    assert "orders stored: [1, 2]" in out
    assert "send_confirmation: success -> order 1 confirmed to ada@example.com" in out
    assert "send_confirmation: success -> order 2 confirmed to grace@example.com" in out
    assert out.count("send_confirmation: success") == 2


WAIT_FOR_LINES = (
    "change feed open: True",
    "width 640: resized to 640px (try 1)",
    "width 1025: resized to 1025px (try 2)",
    "width -1: failed for good on try 2: no such width",
)


def test_wait_for_result(capsys: pytest.CaptureFixture[str]) -> None:
    wait_for_result.main([])
    out = output_of(capsys)
    for line in WAIT_FOR_LINES:
        assert line in out


@pytest.mark.mongo
def test_wait_for_result_on_mongodb(mongodb_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    wait_for_result.main(["--uri", mongodb_uri])
    out = output_of(capsys)
    for line in WAIT_FOR_LINES:
        assert line in out


MANAGING_JOBS_LINES = (
    "find_jobs(state='scheduled'): ['send_report']",
    "find_jobs(state='due'): ['import_file']",
    "cancel send_report: Cancelled, was running: False",
    "history of send_report: ['cancelled']",
    "import_file: error on try 2: ValueError: cannot parse a.csv",
    "find_jobs(state='failed'): [('import_file', 2)]",
    "retry_now import_file: due, tries 0",
    "import_file: success on try 1: imported a.csv",
    "history of import_file, newest first:\n"
    "  try 1  success   imported a.csv\n"
    "  try 2  error     ValueError: cannot parse a.csv\n"
    "  try 1  error     ValueError: cannot parse a.csv\n",
    "cancel crunch while it runs: Cancelled, was running: True",
    "crunch stopped: True",
    "get_result(crunch): cancelled",
    "poll_feed: polled on try 1; history ['success', 'snoozed']",
)


def test_managing_jobs(capsys: pytest.CaptureFixture[str]) -> None:
    managing_jobs.main([])
    out = output_of(capsys)
    for line in MANAGING_JOBS_LINES:
        assert line in out


@pytest.mark.mongo
def test_managing_jobs_on_mongodb(mongodb_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    managing_jobs.main(["--uri", mongodb_uri])
    out = output_of(capsys)
    for line in MANAGING_JOBS_LINES:
        assert line in out


FLEET_LIMITS_LINES = (
    "render_pdf: 12 jobs, at most 3 at once (limit 3)",
    "sync_account: 9 jobs, at most 1 at once per account (limit 1)",
    "call_partner: 10 starts in ",
    "render_pdf history: 12 rows, all on try 1: True",
    "paused: ['send_newsletter']",
    "send_newsletter while paused: 0 of 3 ran",
    "send_newsletter after resume: 3 of 3 ran",
)


def check_fleet_limits(out: str) -> None:
    for line in FLEET_LIMITS_LINES:
        assert line in out
    # 3 windows or more: how the starts fall into them is chance, but none holds more than 4.
    most = re.search(r"at most (\d+) in one \(limit 4\)", out)
    assert most is not None, out
    assert 1 <= int(most.group(1)) <= 4


def test_fleet_limits(capsys: pytest.CaptureFixture[str]) -> None:
    fleet_limits.main([])
    check_fleet_limits(output_of(capsys))


@pytest.mark.mongo
def test_fleet_limits_on_mongodb(mongodb_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    fleet_limits.main(["--uri", mongodb_uri])
    check_fleet_limits(output_of(capsys))


LEASES_LINES = (
    "took 'nightly-cleanup': token 1, lost: False",
    "a second try while it is held: LockHeldError",
    "three hosts took it in turn: 3 holders, at most 1 at once",
    "cleaned by the first holder (token 1)",
    "a late write with the old token 1 is refused: True",
    "a sync script took it: token 5, its write accepted: True",
)


def _check_leases(out: str) -> None:
    for line in LEASES_LINES:
        assert line in out
    # The hosts take it in any order; the tokens follow the order they took it in.
    tokens = [int(token) for token in re.findall(r"cleaned by host-\w \(token (\d+)\)", out)]
    assert tokens == [2, 3, 4], out


def test_leases(capsys: pytest.CaptureFixture[str]) -> None:
    leases.main([])
    _check_leases(output_of(capsys))


@pytest.mark.mongo
def test_leases_on_mongodb(mongodb_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    leases.main(["--uri", mongodb_uri])
    _check_leases(output_of(capsys))


TELEMETRY_LINES = (
    "scheduled: 4",
    "resize_image failed: 1",
    "resize_image retried: 1",
    "resize_image succeeded: 3",
    "slowest run took at least 50 ms: True",
    "alerts: ['image 50 is corrupt']",
    "WARNING dogs.jobs: resize_image",
)


def test_telemetry_events(capsys: pytest.CaptureFixture[str]) -> None:
    telemetry_events.main([])
    out = output_of(capsys)
    for line in TELEMETRY_LINES:
        assert line in out
    assert out.count("INFO    dogs.jobs: started resize_image") == 5
    assert "{'job_name': 'resize_image', 'tries': 2}" in out


@pytest.mark.mongo
def test_telemetry_events_on_mongodb(mongodb_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    telemetry_events.main(["--uri", mongodb_uri])
    out = output_of(capsys)
    for line in TELEMETRY_LINES:
        assert line in out


def test_dashboard_mount(capsys: pytest.CaptureFixture[str]) -> None:
    dashboard_mount.main(["--check"])
    out = output_of(capsys)
    for line in (
        "GET /: 200",
        "GET /dogs/ without credentials: 401",
        "GET /dogs/ as admin: 200",
        "every link under /dogs/: True",
        "overview lists send_email: True",
        "overview lists import_file: True",
        "failed jobs listed: 1",
        "POST pause import_file: 303, audited as admin",
    ):
        assert line in out


OBSERVABILITY_LINES = (
    "spans: 4 schedule, 3 run",
    "every run span links to its schedule span: True",
    "every 'render pdf' span is a child of a run span: True",
    "run render_invoice tries=1 outcome=failed status=ERROR",
    'dogs_executions_total{job_name="render_invoice",outcome="succeeded"} 2.0',
    'dogs_executions_total{job_name="render_invoice",outcome="failed"} 1.0',
    'dogs_jobs{job_name="later",state="scheduled"} 1.0',
    'dogs_jobs{job_name="render_invoice",state="failed"} 1.0',
)


def test_observability(capsys: pytest.CaptureFixture[str]) -> None:
    observability.main([])
    out = output_of(capsys)
    for line in OBSERVABILITY_LINES:
        assert line in out
    assert out.count("outcome=succeeded status=UNSET") == 2


@pytest.mark.mongo
def test_observability_on_mongodb(mongodb_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    observability.main(["--uri", mongodb_uri])
    out = output_of(capsys)
    for line in OBSERVABILITY_LINES:
        assert line in out


STATS_LINES = (
    "charge_card: 8 attempts, 6 succeeded, 2 errors {'CardDeclinedError': 2}, 2 failed jobs, "
    "attempt success 75%, job success 75%",
    "resize_image: 16 attempts, 16 succeeded, 0 errors {}, 0 failed jobs, "
    "attempt success 100%, job success 100%",
    "resize_image p50 below 300 ms: True",
    "resize_image slowest at least 300 ms: True",
    "resize_image attempts counted minute by minute: 16",
    "charge_card over 5 minutes: 8 attempts",
)


FINDING_LINES = (
    "receipt-25: found by its unique key, finished, last run success",
    "errors: 2 x MailboxFullError 'mailbox <n> full' in send_receipt",
    "run on this host: 6 executions, 2 errors",
    "import_orders waiting with plan=pro: 2",
)


def test_finding(capsys: pytest.CaptureFixture[str]) -> None:
    finding.main([])
    out = output_of(capsys)
    for line in FINDING_LINES:
        assert line in out


@pytest.mark.mongo
def test_finding_on_mongodb(mongodb_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    finding.main(["--uri", mongodb_uri])
    out = output_of(capsys)
    for line in FINDING_LINES:
        assert line in out


SKEWED_CLOCKS_LINES = (
    "instance ahead: measured offset -22.5 s to the database's clock",
    "instance behind: measured offset +22.5 s to the database's clock",
    "jobs run: 40 of 40",
    "each job ran once: True",
)


@pytest.mark.mongo
def test_skewed_clocks_on_mongodb(mongodb_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    skewed_clocks.main(["--uri", mongodb_uri])
    out = output_of(capsys)
    for line in SKEWED_CLOCKS_LINES:
        assert line in out


def test_stats(capsys: pytest.CaptureFixture[str]) -> None:
    stats.main([])
    out = output_of(capsys)
    for line in STATS_LINES:
        assert line in out


@pytest.mark.mongo
def test_stats_on_mongodb(mongodb_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    stats.main(["--uri", mongodb_uri])
    out = output_of(capsys)
    for line in STATS_LINES:
        assert line in out


MISFIRE_LINES = (
    "report_once (misfire='run_once'): 1 run(s), for the slots: 4.5 h ago",
    "report_skip (misfire='skip', misfire_grace='1m'): 0 run(s), for the slots: none",
    "report_all (misfire='run_all', max_catch_up=3): 3 run(s), for the slots: 2.5 h ago, 1.5 h "
    "ago, 0.5 h ago",
    "JobMisfired: report_skip skipped 5 slot(s) (4.5 h ago to 0.5 h ago)",
    "JobMisfired: report_all skipped 2 slot(s) (4.5 h ago to 3.5 h ago)",
    "nightly at priority 1000 (the default): ran after 0 of 300 older events",
)


def test_misfire(capsys: pytest.CaptureFixture[str]) -> None:
    misfire.main([])
    out = output_of(capsys)
    for line in MISFIRE_LINES:
        assert line in out
    assert out.count("next run in 0.5 h") == 2, "skip and run_all are back on the slot grid"
    assert re.search(r"nightly at priority 100: ran after \d{3} of 300 older events", out)


@pytest.mark.mongo
def test_misfire_on_mongodb(mongodb_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    misfire.main(["--uri", mongodb_uri])
    out = output_of(capsys)
    for line in MISFIRE_LINES:
        assert line in out


def _archiving_output(capsys: pytest.CaptureFixture[str]) -> str:
    out = output_of(capsys)
    assert "would archive: 27 history rows, 3 failed records" in out
    assert "archived 30 documents in 6 batches" in out
    assert "history rows of send_receipt left in the live collection: 0" in out
    assert "in the history archive: 27" in out
    assert "in the records archive: 3" in out
    assert "a second run moves 0" in out
    return out


def test_archiving(capsys: pytest.CaptureFixture[str]) -> None:
    from examples import archiving

    archiving.main([])
    assert "history: a batch of 10 (10 so far)" in _archiving_output(capsys)


@pytest.mark.mongo
def test_archiving_on_mongodb(mongodb_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    from examples import archiving

    archiving.main(["--uri", mongodb_uri])
    _archiving_output(capsys)


FASTAPI_LINES = (
    "POST cat.png 640: new=True; again: new=False",
    "the same job both times: True",
    "GET its result (waiting up to 10 s): {'status': 'done', 'thumbnail': 'cat.png at 640px'}",
    "width 0: {'status': 'failed', 'error': 'no such width: 0'}",
    "GET an unknown job: 404",
    "lifespan over: workers stopped, clients closed",
)


def test_fastapi_app(capsys: pytest.CaptureFixture[str]) -> None:
    from examples import fastapi_app

    fastapi_app.main([])
    out = output_of(capsys)
    for line in FASTAPI_LINES:
        assert line in out


@pytest.mark.mongo
def test_fastapi_app_on_mongodb(mongodb_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    from examples import fastapi_app

    fastapi_app.main(["--uri", mongodb_uri])
    out = output_of(capsys)
    for line in FASTAPI_LINES:
        assert line in out


FLASK_LINES = (
    "POST /orders/1: new=True",
    "POST /orders/2: new=True",
    "POST /orders/1: new=False",
    "GET /jobs/<order 1's job> before a worker ran: {'status': 'waiting'}",
    "GET /jobs/...: {'result': 'receipt of order 1 sent to buyer1@example.com', "
    "'status': 'success'}",
    "GET /jobs/...: {'result': 'receipt of order 2 sent to buyer2@example.com', "
    "'status': 'success'}",
)


def test_flask_app(capsys: pytest.CaptureFixture[str]) -> None:
    from examples import flask_app

    flask_app.main([])
    out = output_of(capsys)
    for line in (*FLASK_LINES, "workers stopped"):
        assert line in out


@pytest.mark.mongo
def test_flask_app_on_mongodb(mongodb_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The jobs run by ``flask dogs worker`` in a second process."""
    from examples import flask_app

    flask_app.main(["--uri", mongodb_uri])
    out = output_of(capsys)
    for line in (*FLASK_LINES, "flask dogs worker exited with 0 after SIGINT"):
        assert line in out


@pytest.mark.mongo
def test_django_app_on_mongodb(mongodb_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A view writes an order and its job in one MongoDB transaction; manage.py dogs_worker
    runs the job (both in processes of their own)."""
    from examples import django_app

    django_app.main(["--uri", mongodb_uri])
    out = output_of(capsys)
    for line in (
        "POST /orders/ ada@example.com: job written: transaction",
        "POST /orders/ linus@example.com (a bad total): 500",
        "orders stored: 2",
        "receipts run by manage.py dogs_worker: 2",
        "manage.py dogs_worker exited with 0 after SIGINT",
        "ada@example.com: receipt for 42.00 EUR sent to ada@example.com",
        "grace@example.com: receipt for 19.99 EUR sent to grace@example.com",
    ):
        assert line in out, out


@pytest.mark.mongo
def test_beanie_app_on_mongodb(mongodb_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    from examples import beanie_app

    beanie_app.main(["--uri", mongodb_uri])
    out = output_of(capsys)
    for line in (
        "ada@example.com: placed with its receipt job",
        "bob@example.com: payment declined: neither the order nor its job was written",
        "orders stored: 1",
        "send_receipt: success -> receipt for 42.00 EUR sent to ada@example.com",
    ):
        assert line in out, out
    assert out.count("send_receipt: success") == 1


# -- following a job (examples/following.py) ----------------------------------------------------


def _check_following(out: str) -> None:
    assert "progress [##" in out
    assert "progress [####################] chunk 10/10 {'rows': 1000}" in out
    assert "progress: the job has ended" in out
    assert "log INFO chunk 1 stored (100 rows so far)" in out
    assert "log WARNING 3 rows skipped: no email" in out
    assert "logs: 11 lines followed, the job has ended" in out
    assert "render_report: report.pdf, last progress page 5/5" in out
    assert "get_job after the end: None" in out
    assert "history row: success, final progress 100% chunk 10/10" in out
    assert "get_logs: 11 lines by job id, 11 by execution id" in out
    assert "last line: WARNING 3 rows skipped: no email" in out


def test_following(capsys: pytest.CaptureFixture[str]) -> None:
    following.main([])
    _check_following(output_of(capsys))


@pytest.mark.mongo
def test_following_on_mongodb(mongodb_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    following.main(["--uri", mongodb_uri])
    _check_following(output_of(capsys))


WORKFLOW_LINES = (
    "import https://example.com (fail): succeeded",
    "parse=4, index=indexed",
    "import https://broken/fail (fail): failed (index=failed, report=skipped)",
    "import https://broken/skip (skip): completed (index=failed, report=skipped)",
    "import https://broken/continue (continue): completed (index=failed, report=succeeded)",
    "album 7: completed: album 7: 16 of 20 thumbnails, failed 4",
    "chain: succeeded, 4 words",
    "retried 2 steps of a failed workflow",
)


def test_workflows(capsys: pytest.CaptureFixture[str]) -> None:
    workflows.main([])
    out = output_of(capsys)
    for line in WORKFLOW_LINES:
        assert line in out, line


@pytest.mark.mongo
def test_workflows_on_mongodb(mongodb_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    workflows.main(["--uri", mongodb_uri])
    out = output_of(capsys)
    for line in WORKFLOW_LINES:
        assert line in out, line


def test_unique_and_debounce(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 27: every option of schedule() says what it did."""
    from examples import unique_and_debounce

    unique_and_debounce.main([])
    out = output_of(capsys)
    assert "window: Scheduled, then Duplicate (record) while pending" in out
    assert "window: after the run, Duplicate (window)" in out
    assert "by params: Scheduled, Duplicate (record), Duplicate (record)" in out
    assert "replace v3: Replaced" in out
    assert "debounce: 1 scheduled, 19 debounced" in out
    assert "throttle: Scheduled, Duplicate (throttle), Duplicate (throttle)" in out
    assert "tags: 1 job tagged tenant:acme" in out
    assert "start deadline: 1 expired (not started by its deadline" in out
    assert "('notify', [('n', 19)])" in out  # the debounce ran once, with the latest params
    assert "('reindex', [('version', 3)])" in out


def test_runtime_schedules(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 27: a schedule added, changed, paused, resumed and deleted while a worker runs."""
    from examples import runtime_schedules

    runtime_schedules.main([])
    out = output_of(capsys)
    assert "created report-acme" in out
    assert "the same upsert again: unchanged" in out
    assert "updated report-acme: new params" in out
    assert "runs while paused: 0" in out
    assert "runs after delete: 0" in out
    assert re.search(r"cleanup\s+code\s+cleanup", out)
    assert re.search(r"report-globex\s+runtime\s+nightly_report\s+cron 0 3", out)
    ran = re.search(r"report-acme ran (\d+) times", out)
    assert ran is not None
    assert int(ran.group(1)) >= 1
