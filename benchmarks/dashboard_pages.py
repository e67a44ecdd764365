"""How fast the dashboard's pages answer on a big database: each page's p50, p95 and max over
many requests, served by uvicorn over HTTP on a collection of ``--records`` records (1,000,000
by default; ``--quick``: 5,000, three rounds) and as many history rows.

The seed: 20 job names; records in every state (about 40 % scheduled later, 40 % due, 5 %
retrying, 1 % running, 0.5 % stale, 8 % failed, 0.5 % held by a fleet limit), created over the
last day (UUIDv7 ids of that time), a tenth with a unique key, params ``{user_id, plan}``;
history rows spread over the last day (92 % success, 5 % errors of three types with tracebacks,
1 % each stale, cancelled, snoozed), run by ten hosts; 10,000 archived failed records and
executions (a tenth of that with ``--quick``). The store's indexes are built after the seed.

The pages (the overview, its live fragment, the job list by state and name, a search by id,
unique key and of a finished job, filters by params and creation time, a job page, the
executions across jobs and by status, error type, owner, time range and params, the errors of
an hour and a day, the archive): one request each to warm up (the overview's first request is
reported alone: it counts every record), then ``--rounds`` rounds of every page in turn. The
overview serves its counts as a snapshot read again in the background once counting is slow
(``dogs_dashboard.snapshots``): those background reads run during the rounds, as they would
with a browser open.

Target: each page's p95 <= 300 ms. Checks (exit 1): every page answers 200 and shows what it
should (rows where the seed put some). A missed target is reported, not an error (the machine
may be shared).

    python -m benchmarks.dashboard_pages                 # a throw-away local mongod
    python -m benchmarks.dashboard_pages --quick
    python -m benchmarks.dashboard_pages --uri mongodb://127.0.0.1:27017/?replicaSet=rs0 \\
        --database dogs_pages_1m --keep                  # seed once, measure again later
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import anyio
import uvicorn
from pymongo import MongoClient

from benchmarks.support.cli import add_out, add_quick, add_uri, new_parser
from benchmarks.support.report import (
    command_line,
    fmt,
    markdown_table,
    new_console,
    print_table,
    report_header,
    targets_section,
    write_results,
)
from benchmarks.support.server import scratch_database, serving
from benchmarks.support.timing import percentile
from dogs_core.domain.records import (
    HistoryRecord,
    HistoryStatus,
    Hold,
    HoldReason,
    JobRecord,
    JobStatus,
    JobType,
    Owner,
)
from dogs_dashboard import create_app
from dogs_mongo import MongoJobStore
from dogs_mongo import queries as q
from dogs_mongo.container import DogsContainer
from dogs_mongo.queries import archive as qa

__all__ = ["PAGES", "main", "seed"]

TARGET_P95_MS: Final = 300.0
RECORDS: Final = 1_000_000
QUICK_RECORDS: Final = 5_000
NAMES: Final = tuple(f"job_{n:02d}" for n in range(20))
HOSTS: Final = tuple(f"host-{n}" for n in range(10))
ERRORS: Final = (
    ("smtplib.SMTPException", "mailbox {n} full"),
    ("app.errors.PaymentDeclined", "card {n} declined by the issuer"),
    ("builtins.TimeoutError", "upstream timed out after {n} ms"),
)
TRACEBACK: Final = (
    "Traceback (most recent call last):\n"
    + '  File "/srv/venv/lib/python3.12/site-packages/dogs_core/runtime/execution/invocation.py", '
    "line 252, in _timed\n    value = await call()\n"
    * 6
    + '  File "/srv/app/shop/tasks.py", line 88, in handler\n    raise Error(message)\n'
)
BATCH: Final = 10_000

Document = dict[str, Any]


# -- the seed ---------------------------------------------------------------------------------


def _uuid7(moment: datetime, rng: random.Random) -> str:
    millis = (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)
    value = (millis << 80) | (0x7 << 76) | (rng.getrandbits(12) << 64) | (0b10 << 62)
    value |= rng.getrandbits(62)
    text = f"{value:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def _record(i: int, now: datetime, rng: random.Random) -> JobRecord:
    created = now - timedelta(seconds=86_400 * (1 - i / RECORDS_SEEDED[0]))
    base = JobRecord(
        id=_uuid7(created, rng),
        job_name=NAMES[i % len(NAMES)],
        type=JobType.EVENT,
        priority=100,
        next_run_at=now - timedelta(seconds=rng.randint(1, 3600)),
        partition=rng.randrange(8),
        params={"user_id": i, "plan": rng.choice(("free", "pro", "team"))},
        unique_identifier=f"order-{i}" if i % 10 == 0 else None,
    )
    kind = rng.random()
    later = now + timedelta(seconds=rng.randint(60, 86_400))
    owner = Owner(rng.choice(HOSTS), 4242, "w-1")
    if kind < 0.40:
        return replace(base, next_run_at=later)
    if kind < 0.80:
        return base
    if kind < 0.85:
        return replace(base, tries=2)
    if kind < 0.865:  # running, then stale: a lock live, and one left to expire
        ahead = kind < 0.86
        return replace(
            base,
            lock_id=f"l{i}",
            tries=1,
            locked_until=now + timedelta(minutes=5 if ahead else -5),
            lock_owner=owner,
            last_run_at=now - timedelta(seconds=30 if ahead else 360),
        )
    if kind < 0.87:
        hold = Hold(HoldReason.CONCURRENCY, since=base.next_run_at, until=later)
        return replace(base, next_run_at=later, held=hold)
    return replace(
        base,
        tries=5,
        status=JobStatus.MAX_TRIES_REACHED,
        max_tries_reached_at=now - timedelta(minutes=rng.randint(1, 600)),
        expires_at=now + timedelta(days=7),
    )


#: The size of the seed being written (set by :func:`seed`, read by :func:`_record`).
RECORDS_SEEDED = [RECORDS]


def _row(i: int, now: datetime, rng: random.Random) -> HistoryRecord:
    started = now - timedelta(seconds=86_400 * rng.random())
    draw = rng.random()
    status = HistoryStatus.SUCCESS
    error: tuple[str, str] | None = None
    if draw < 0.05:
        status, error = HistoryStatus.ERROR, ERRORS[i % len(ERRORS)]
    elif draw < 0.06:
        status = HistoryStatus.STALE
    elif draw < 0.07:
        status = HistoryStatus.CANCELLED
    elif draw < 0.08:
        status = HistoryStatus.SNOOZED
    return HistoryRecord(
        execution_id=f"e{i}",
        job_id=_uuid7(started - timedelta(seconds=5), rng),
        job_name=NAMES[i % len(NAMES)],
        type=JobType.EVENT,
        priority=100,
        tries=1,
        started_at=started,
        ended_at=started + timedelta(milliseconds=rng.randint(5, 2000)),
        status=status,
        expires_at=now + timedelta(days=7),
        params={"user_id": i, "plan": "pro"},
        error_type=None if error is None else error[0],
        error_message=None if error is None else error[1].format(n=rng.randint(1, 999)),
        error_traceback=None if error is None else TRACEBACK,
        unique_identifier=f"order-h{i}" if i % 10 == 0 else None,
        owner=Owner(HOSTS[i % len(HOSTS)], 4242, f"w-{i % 3}"),
        outcome=None if error is None else ("retried" if i % 2 else "failed"),
    )


def seed(client: MongoClient[Document], database: str, records: int, now: datetime,
         say: Any = print) -> None:  # fmt: skip
    """Write the records, the rows and the archive (see the module documentation), then build
    the store's indexes."""
    RECORDS_SEEDED[0] = records
    rng = random.Random(29)
    db = client[database]
    store = MongoJobStore(client, database)

    def record(i: int) -> Document:
        return q.document_from_record(_record(i, now, rng))

    def row(i: int) -> Document:
        return _history_document(_row(i, now, rng))

    builders: tuple[tuple[str, Callable[[int], Document], str], ...] = (
        ("records", record, q.DEFAULT_RECORDS_COLLECTION),
        ("history rows", row, q.DEFAULT_HISTORY_COLLECTION),
    )
    for what, build, collection in builders:
        count = records
        started = time.perf_counter()
        for first in range(0, count, BATCH):
            documents = [build(i) for i in range(first, min(first + BATCH, count))]
            db[collection].insert_many(documents, ordered=False)
            if first and first % (BATCH * 20) == 0:
                say(f"  {first:,} {what}...")
        say(f"seeded {count:,} {what} in {time.perf_counter() - started:.0f} s")
    archived = max(records // 100, 200)
    stamp = {qa.ARCHIVED_AT_FIELD: now - timedelta(days=1)}
    old = now - timedelta(days=60)
    db[q.DEFAULT_RECORDS_COLLECTION + qa.ARCHIVE_SUFFIX].insert_many(
        [
            {
                **q.document_from_record(_record(i, old, rng)),
                "status": "maxTriesReached",
                "maxTriesReachedAt": old,
                **stamp,
            }
            for i in range(archived)
        ]
    )
    db[q.DEFAULT_HISTORY_COLLECTION + qa.ARCHIVE_SUFFIX].insert_many(
        [{**_history_document(_row(i, old, rng)), **stamp} for i in range(archived)]
    )
    started = time.perf_counter()
    store.setup()
    store.setup_archive()
    say(f"built the indexes in {time.perf_counter() - started:.0f} s")


def _renew_running_locks(client: MongoClient[Document], database: str, now: datetime) -> None:
    """Give the seed's running records a lock ahead of ``now`` again: on a database seeded
    earlier their five minutes are over, and the running page would list none. The running
    ones are the locked records of the seed's newest run (the stale ones ran 330 s before)."""
    records = client[database][q.DEFAULT_RECORDS_COLLECTION]
    newest = records.find_one({"lockId": {"$ne": None}}, sort=[("lastRunAt", -1)])
    if newest is None:
        return
    records.update_many(
        {"lockId": {"$ne": None}, "lastRunAt": newest["lastRunAt"]},
        {"$set": {"lockedUntil": now + timedelta(minutes=5)}},
    )


def _history_document(row: HistoryRecord) -> Document:
    (upsert,) = q.history_many_updates([row])
    document: Document = upsert[1]["$setOnInsert"]
    return document


# -- the pages --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Page:
    """One page to time: its path, and a text its answer must contain."""

    label: str
    path: str
    shows: str


def pages(samples: dict[str, str]) -> list[Page]:
    """Every page, with ids and keys read from the seeded database (``samples``)."""
    name = NAMES[3]
    return [
        Page("overview (snapshot)", "/", 'id="overview-table"'),
        Page("overview, live part", "/?fragment=1", 'id="overview-table"'),
        Page("jobs, all", "/jobs", "data-job-id="),
        Page("jobs, due", "/jobs?state=due", "data-job-id="),
        Page("jobs, failed", "/jobs?state=failed", "data-job-id="),
        Page("jobs, held", "/jobs?state=held", "data-job-id="),
        Page("jobs, running", "/jobs?state=running", "data-job-id="),
        Page("jobs of a name", f"/jobs?name={name}", "data-job-id="),
        Page("jobs, params filter", f"/jobs?name={name}&param=plan%3Dpro", "data-job-id="),
        Page("jobs, created in the last hour", "/jobs?created_since=1h", "data-job-id="),
        Page("search: a live id", f"/jobs?q={samples['live']}", "with the id"),
        Page("search: a finished id", f"/jobs?q={samples['finished']}", 'data-where="finished"'),
        Page("search: a unique key", f"/jobs?q={samples['key']}", "with the unique key"),
        Page("job page", f"/jobs/{samples['failed']}", 'id="executions"'),
        Page("executions, newest", "/executions", "data-execution-id="),
        Page("executions, errors", "/executions?status=error", "data-execution-id="),
        Page("executions, cancelled", "/executions?status=cancelled", "data-execution-id="),
        Page("executions, an error type",
             "/executions?error_type=app.errors.PaymentDeclined", "data-execution-id="),
        Page("executions of a name, last hour", f"/executions?name={name}&since=1h",
             "data-execution-id="),
        Page("executions by owner", "/executions?owner=host-3", "data-execution-id="),
        Page("executions, params filter", f"/executions?name={name}&param=plan%3Dpro",
             "data-execution-id="),
        Page("errors, last hour", "/errors", 'class="error-group"'),
        Page("errors, last 24 h", "/errors?window=24h", 'class="error-group"'),
        Page("archive, failed jobs", "/archive", "data-job-id="),
        Page("archive, executions", "/archive?kind=history", "data-execution-id="),
    ]  # fmt: skip


PAGES = pages


def samples_of(client: MongoClient[Document], database: str, now: datetime) -> dict[str, str]:
    db = client[database]
    records = db[q.DEFAULT_RECORDS_COLLECTION]
    live = records.find_one({"uniqueIdentifier": {"$exists": True}, "status": None})
    failed = records.find_one({"status": "maxTriesReached"})
    finished = db[q.DEFAULT_HISTORY_COLLECTION].find_one({"status": "success"})
    assert live is not None
    assert failed is not None
    assert finished is not None
    return {
        "live": str(live["_id"]),
        "key": str(live["uniqueIdentifier"]),
        "failed": str(failed["_id"]),
        "finished": str(finished["jobId"]),
    }


# -- the server and the timing ----------------------------------------------------------------


@contextmanager
def served(uri: str, database: str) -> Iterator[str]:
    """The dashboard of ``database`` served by uvicorn in a thread; its base URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ready = threading.Event()
    state: dict[str, Any] = {}

    async def serve() -> None:
        container = DogsContainer(uri=uri, database=database)
        try:
            app = create_app(container.client(), refresh_seconds=5)
            config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
            state["server"] = server = uvicorn.Server(config)
            async with anyio.create_task_group() as group:
                group.start_soon(server.serve)
                while not server.started:  # noqa: ASYNC110 - uvicorn's own flag
                    await anyio.sleep(0.02)
                ready.set()
        finally:
            ready.set()
            await container.aclose()

    thread = threading.Thread(target=lambda: anyio.run(serve, backend="asyncio"), daemon=True)
    thread.start()
    ready.wait(60)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        state["server"].should_exit = True
        thread.join(30)


@dataclass
class Timing:
    page: Page
    millis: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def fetch(base: str, page: Page) -> tuple[float, str | None]:
    """One request: its milliseconds, and what was wrong with the answer (``None``: fine)."""
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(base + page.path, timeout=60) as response:
            body = response.read().decode()
            status = response.status
    except urllib.error.HTTPError as error:
        body, status = error.read().decode(), error.code
    millis = (time.perf_counter() - started) * 1000
    if status != 200:
        return millis, f"HTTP {status}"
    if page.shows not in body:
        return millis, f"no {page.shows!r} in the page"
    return millis, None


def measure(base: str, page_list: Sequence[Page], rounds: int) -> tuple[float, list[Timing]]:
    """The overview's first (cold) request, then ``rounds`` rounds of every page in turn."""
    cold, problem = fetch(base, page_list[0])
    timings = [Timing(page) for page in page_list]
    if problem:
        timings[0].problems.append(problem)
    for timing in timings:  # warm up: one request each, not counted
        fetch(base, timing.page)
    for _ in range(rounds):
        for timing in timings:
            millis, problem = fetch(base, timing.page)
            timing.millis.append(millis)
            if problem and problem not in timing.problems:
                timing.problems.append(problem)
    return cold, timings


# -- the command ------------------------------------------------------------------------------


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = new_parser("dashboard_pages", __doc__.splitlines()[0])
    add_uri(parser)
    add_quick(parser, f"{QUICK_RECORDS:,} records and rows, 3 rounds")
    parser.add_argument("--records", type=int, default=None, help=f"records ({RECORDS:,})")
    parser.add_argument("--rounds", type=int, default=None, help="rounds of every page (30)")
    parser.add_argument("--database", default=None, help="use (and seed once) this database")
    parser.add_argument("--keep", action="store_true", help="keep the database at the end")
    add_out(parser, "dashboard_pages.md and .json")
    args = parser.parse_args(argv)
    args.records = args.records or (QUICK_RECORDS if args.quick else RECORDS)
    args.rounds = args.rounds or (3 if args.quick else 30)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    console = new_console()
    command = command_line("benchmarks.dashboard_pages", argv)
    now = datetime.now(UTC)
    with serving(args.uri, console) as server:
        client: MongoClient[Document] = MongoClient(server.uri, tz_aware=True)
        database = args.database or scratch_database("dashboard_pages")
        try:
            existing = client[database][q.DEFAULT_RECORDS_COLLECTION].estimated_document_count()
            if existing != args.records:
                client.drop_database(database)
                seed(client, database, args.records, now, say=console.print)
            else:
                console.print(f"reusing {database}: {existing:,} records")
                MongoJobStore(client, database).setup()  # the indexes as this version has them
                _renew_running_locks(client, database, now)
            page_list = pages(samples_of(client, database, now))
            with served(server.uri, database) as base:
                cold, timings = measure(base, page_list, args.rounds)
        finally:
            if not args.keep:
                client.drop_database(database)
            client.close()
    return _report(console, args, command, server, cold, timings)


def _report(console: Any, args: argparse.Namespace, command: str, server: Any, cold: float,
            timings: list[Timing]) -> int:  # fmt: skip
    headers = ["Page", "Requests", "p50 ms", "p95 ms", "Max ms", "Outcome"]
    rows = []
    problems = []
    for timing in timings:
        p95 = percentile(timing.millis, 0.95)
        verdict = "; ".join(timing.problems) or ("ok" if p95 <= TARGET_P95_MS else "slow")
        problems += [f"{timing.page.label}: {p}" for p in timing.problems]
        rows.append([timing.page.label, str(len(timing.millis)),
                     fmt(percentile(timing.millis, 0.5), ".0f"), fmt(p95, ".0f"),
                     fmt(max(timing.millis), ".0f"), verdict])  # fmt: skip
    title = f"Dashboard pages, {args.records:,} records and {args.records:,} history rows"
    print_table(console, title, headers, rows)
    missed = [row[0] for row in rows if row[-1] == "slow"]
    summary = (
        f"First overview request (counts every record, inline): {cold:.0f} ms. "
        f"Pages over the p95 target of {TARGET_P95_MS:.0f} ms: {', '.join(missed) or 'none'}."
    )
    console.print(summary)
    if args.out is not None:
        markdown = "\n".join([
            *report_header(title, command, server), markdown_table(headers, rows), "", summary,
            "", *targets_section([f"each page's p95 <= {TARGET_P95_MS:.0f} ms"]),
            f"CPUs: {os.cpu_count()}.", "",
        ])  # fmt: skip
        payload = {"records": args.records, "rounds": args.rounds, "cold_overview_ms": cold,
                   "pages": {t.page.label: t.millis for t in timings}}  # fmt: skip
        write_results(Path(args.out), "dashboard_pages", markdown, payload)
    for problem in problems:
        console.print(f"[red]FAILED[/] {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
