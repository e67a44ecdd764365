"""A bulk retry of the failed jobs of a big collection, done with progress, while a worker in
another process keeps claiming other work: how long it takes, how fast it goes, whether any
claim waited meanwhile, and what the worker's registry document cost.

The collection holds ``--records`` records (1,000,000): ``--failed`` of them (100,000) failed
records of one job (``failing``, status ``maxTriesReached``, with their error rows), the rest
due in the future under ten other names. A ``dogs worker`` process (``benchmarks.bulk_retry_jobs``:
``probe`` only, ``--poll-interval 100ms``) runs beside; this process schedules a ``probe`` every
``--probe-every`` (20 ms) for the whole run and reads afterwards how long each one waited to be
claimed (its row's ``startedAt`` minus the time it was due): ``--baseline`` seconds before the
bulk action, during it, and ``--after`` seconds after. Then
``client.bulk("retry", bulk_selection(job_name="failing", state="failed"))``: chunks of
``--chunk-size`` (500), each a read and one fenced ``bulkWrite``, its progress in its audit
entry and on the console.

Checks: every failed record was retried (due now, tries 0, no status) and none other changed;
the report's and the audit entry's counts agree; progress was reported once per chunk; no
probe was lost, and the claims' p99 wait during the bulk action stays within
``max(1 s, 5 x before)`` (no claim starved); the worker wrote its registry document at most
once per 10 s (counted by the server's profiler on the registry collection, plus one write at
its start and one at its stop).

Run it as a module from the project root::

    python -m benchmarks.bulk_retry            # 1,000,000 records, 100,000 failed
    python -m benchmarks.bulk_retry --quick    # CI size: 20,000 records, 2,000 failed
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import anyio
from pymongo import MongoClient

from benchmarks.bulk_retry_jobs import jobs as probe_jobs
from benchmarks.support.cli import add_quick, add_uri, fill_sizes, new_parser
from benchmarks.support.report import (
    announce,
    command_line,
    fmt,
    new_console,
    print_table,
    problems_status,
)
from benchmarks.support.server import scratch_database, serving
from benchmarks.support.timing import percentile
from dogs_core.domain.bulk import BulkReport, bulk_selection
from dogs_core.domain.records import HistoryRecord, HistoryStatus, JobRecord, JobStatus, JobType
from dogs_core.ids import new_execution_id, new_record_id
from dogs_mongo import MongoJobStore
from dogs_mongo import queries as q
from dogs_mongo.container import DogsContainer
from dogs_mongo.queries.audit import DEFAULT_AUDIT_COLLECTION
from dogs_mongo.queries.registry import DEFAULT_WORKERS_COLLECTION

__all__ = ["main"]

LOAD_BATCH: Final = 10_000
FAILING: Final = "failing"
Document = dict[str, Any]


@dataclass(slots=True)
class Run:
    records: int
    failed: int
    load_seconds: float = 0.0
    report: BulkReport | None = None
    bulk_seconds: float = 0.0
    progress_calls: int = 0
    bulk_window: tuple[float, float] = (0.0, 0.0)
    waits: dict[str, list[float]] = field(default_factory=dict)
    probes_scheduled: int = 0
    probes_ran: int = 0
    registry_writes: int = 0
    worker_seconds: float = 0.0
    problems: list[str] = field(default_factory=list)


# -- the data ------------------------------------------------------------------------------------


def _documents(records: int, failed: int) -> Iterator[tuple[list[Document], list[HistoryRecord]]]:
    now = datetime.now(UTC)
    batch: list[Document] = []
    rows: list[HistoryRecord] = []
    for i in range(records):
        if i < failed:
            record = JobRecord(
                id=new_record_id(), job_name=FAILING, type=JobType.EVENT, priority=100,
                next_run_at=now - timedelta(hours=1), partition=0, params={"i": i}, tries=3,
                status=JobStatus.MAX_TRIES_REACHED, expires_at=now + timedelta(days=7),
                max_tries_reached_at=now - timedelta(minutes=30),
            )  # fmt: skip
            rows.append(_error_row(record, now))
        else:
            at = now + timedelta(days=1, seconds=(i * 7_919) % (30 * 86_400))
            record = JobRecord(
                id=new_record_id(), job_name=f"other-{i % 10}", type=JobType.EVENT, priority=100,
                next_run_at=at, partition=0, params={"i": i},
            )  # fmt: skip
        batch.append(q.document_from_record(record))
        if len(batch) == LOAD_BATCH:
            yield batch, rows
            batch, rows = [], []
    if batch:
        yield batch, rows


def _error_row(record: JobRecord, now: datetime) -> HistoryRecord:
    return HistoryRecord(
        execution_id=new_execution_id(), job_id=record.id, job_name=FAILING, type=JobType.EVENT,
        priority=100, tries=3, started_at=now - timedelta(minutes=31),
        ended_at=now - timedelta(minutes=30), status=HistoryStatus.ERROR,
        expires_at=now + timedelta(days=7), error_type="ConnectionRefusedError",
        error_message="SMTP server refused the connection",
    )  # fmt: skip


def _load(uri: str, database: str, run: Run) -> None:
    """The records and the failed ones' error rows, raw ``insert_many``; then the store's
    indexes (and the registry's and the audit's)."""
    began = time.perf_counter()
    client: MongoClient[Document] = MongoClient(uri, tz_aware=True)
    with client:
        records = client[database][q.DEFAULT_RECORDS_COLLECTION]
        for batch, rows in _documents(run.records, run.failed):
            records.insert_many(batch, ordered=False)
            if rows:
                client[database][q.DEFAULT_HISTORY_COLLECTION].insert_many(
                    [_row_document(row) for row in rows], ordered=False
                )
        store = MongoJobStore(client, database)
        store.setup()
        store.setup_registry()
        store.setup_audit()
    run.load_seconds = time.perf_counter() - began


def _row_document(row: HistoryRecord) -> Document:
    document = dict(q.history_update(row, new_record_id())["$setOnInsert"])
    return document


# -- the worker beside -----------------------------------------------------------------------------


def _start_worker(uri: str, database: str) -> subprocess.Popen[str]:
    command = [
        sys.executable, "-m", "dogs_cli", "worker", "benchmarks.bulk_retry_jobs:jobs",
        "--uri", uri, "--database", database, "--workers-count", "8", "--poll-interval", "100ms",
        "--log-level", "warning", "--grace", "5s",
    ]  # fmt: skip
    env = {**os.environ, "DOGS_MONGODB_URI": ""}
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def _profile_registry(client: MongoClient[Document], database: str, on: bool) -> None:
    """The profiler on for the registry collection only (level 1 with a filter: every
    operation on it, nothing else, so the capped profile collection keeps them all)."""
    db = client[database]
    if on:
        db.command("profile", 1, filter={"ns": f"{database}.{DEFAULT_WORKERS_COLLECTION}"})
    else:
        db.command("profile", 0)


def _registry_writes(client: MongoClient[Document], database: str) -> int:
    namespace = f"{database}.{DEFAULT_WORKERS_COLLECTION}"
    return int(
        client[database]["system.profile"].count_documents(
            {"ns": namespace, "command.findAndModify": {"$exists": True}}
        )
    )


# -- the run --------------------------------------------------------------------------------------


async def _worker_up(container: DogsContainer) -> None:
    """Until the worker's first probe ran (its start is not part of the measure)."""
    client = container.client(probe_jobs)
    outcome = await client.schedule("probe", {"due": time.time()})
    with anyio.fail_after(60):
        await client.wait_for(getattr(outcome, "id", ""), timeout=60)


async def _probe_loop(container: DogsContainer, every: float, stop: anyio.Event, run: Run) -> None:
    client = container.client(probe_jobs)
    while not stop.is_set():
        due = time.time()
        await client.schedule("probe", {"due": due})
        run.probes_scheduled += 1
        with anyio.move_on_after(every):
            await stop.wait()


async def _measure(
    container: DogsContainer, args: argparse.Namespace, run: Run, console: Any
) -> None:
    client = container.client()
    await _worker_up(container)
    stop = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(_probe_loop, container, args.probe_every, stop, run)
        await anyio.sleep(args.baseline)
        shown = [-1, -1]

        def progress(report: BulkReport) -> None:
            run.progress_calls += 1
            done = report.changed + report.skipped_total
            tenth = 10 if report.matched <= 0 else done * 10 // report.matched
            if tenth != shown[0] or (report.complete and done != shown[1]):
                shown[0], shown[1] = tenth, done
                console.print(
                    f"  retry: {done:,}/{report.matched:,} ({tenth * 10}%), chunk {report.chunks}, "
                    f"{report.elapsed.total_seconds():.1f} s"
                )

        began = time.time()
        run.report = await client.bulk(
            "retry",
            bulk_selection(job_name=FAILING, state="failed"),
            chunk_size=args.chunk_size,
            on_progress=progress,
        )
        ended = time.time()
        run.bulk_seconds = ended - began
        run.bulk_window = (began, ended)
        await anyio.sleep(args.after)
        stop.set()
    await anyio.sleep(1.0)  # the last probes run


async def _read_waits(container: DogsContainer, run: Run) -> None:
    client = container.client()
    rows: list[HistoryRecord] = []
    skip = 0
    while True:
        page = await client.get_executions("probe", limit=1000, skip=skip)
        rows += page
        skip += len(page)
        if len(page) < 1000:
            break
    began, ended = run.bulk_window
    waits: dict[str, list[float]] = {"before": [], "during": [], "after": []}
    for row in rows[:-1]:  # newest first: the last one is the warm-up probe
        due = float((row.params or {}).get("due", 0))
        wait = row.started_at.timestamp() - due
        phase = "before" if due < began else "during" if due <= ended else "after"
        waits[phase].append(max(wait, 0.0))
    run.waits = waits
    run.probes_ran = len(rows) - 1


def _check(uri: str, database: str, run: Run) -> None:
    client: MongoClient[Document] = MongoClient(uri, tz_aware=True)
    with client:
        records = client[database][q.DEFAULT_RECORDS_COLLECTION]
        left = records.count_documents({"jobName": FAILING, "status": "maxTriesReached"})
        revived = records.count_documents({"jobName": FAILING, "status": None, "tries": 0})
        audit = client[database][DEFAULT_AUDIT_COLLECTION].find_one({"action": "bulk_retry"})
    report = run.report
    if report is None:
        run.problems.append("the bulk action did not report")
        return
    if left or revived != run.failed or report.changed != run.failed:
        run.problems.append(
            f"retried {report.changed}, {revived} revived, {left} still failed, of {run.failed}"
        )
    if audit is None or audit.get("count") != report.changed or audit.get("outcome") != "done":
        run.problems.append(
            f"the audit entry says {audit and (audit.get('count'), audit.get('outcome'))}"
        )
    if run.progress_calls != report.chunks:
        run.problems.append(f"{run.progress_calls} progress reports for {report.chunks} chunks")
    if run.probes_ran != run.probes_scheduled:
        run.problems.append(f"{run.probes_scheduled} probes scheduled, {run.probes_ran} ran")
    before = run.waits.get("before") or [0.0]
    during = run.waits.get("during") or [0.0]
    bound = max(1.0, 5 * percentile(before, 0.99))
    if percentile(during, 0.99) > bound:
        run.problems.append(
            f"claims starved: p99 wait {percentile(during, 0.99):.3f} s during the bulk action "
            f"(bound {bound:.3f} s)"
        )
    allowed = 2 + int(run.worker_seconds // 10)
    if run.registry_writes > allowed:
        run.problems.append(
            f"{run.registry_writes} registry writes in {run.worker_seconds:.0f} s "
            f"(at most {allowed})"
        )


def _print(console: Any, run: Run) -> None:
    report = run.report
    assert report is not None
    rate = report.changed / run.bulk_seconds if run.bulk_seconds else None
    print_table(
        console,
        "Bulk retry",
        ["Records", "Failed", "Retried", "Chunks", "Progress", "Seconds", "Retried/s", "Load s"],
        [[f"{run.records:,}", f"{run.failed:,}", f"{report.changed:,}", str(report.chunks),
          str(run.progress_calls), fmt(run.bulk_seconds, ".1f"), fmt(rate, ",.0f"),
          fmt(run.load_seconds, ".1f")]],
    )  # fmt: skip
    rows = []
    for phase in ("before", "during", "after"):
        waits = run.waits.get(phase) or []
        cells = [
            fmt(percentile(waits, p) * 1000 if waits else None, ".0f") for p in (0.5, 0.95, 0.99)
        ]
        rows.append(
            [phase, str(len(waits)), *cells, fmt(max(waits) * 1000 if waits else None, ".0f")]
        )
    print_table(
        console,
        "Claim wait of the probes (ms, due -> claimed, by when they were due)",
        ["Phase", "Probes", "p50", "p95", "p99", "max"],
        rows,
    )
    allowed = 2 + int(run.worker_seconds // 10)
    print_table(
        console,
        "The worker's registry document (its writes, counted by the server's profiler)",
        ["Worker seconds", "Writes", "Allowed: 1 at start, 1 per 10 s, 1 at stop"],
        [[fmt(run.worker_seconds, ".1f"), str(run.registry_writes), str(allowed)]],
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = new_parser("bulk_retry", __doc__.splitlines()[0] if __doc__ else None)
    add_uri(parser)
    add_quick(parser, "20,000 records, 2,000 failed")
    parser.add_argument("--records", type=int, default=None, help="records (1,000,000)")
    parser.add_argument("--failed", type=int, default=None, help="failed ones retried (100,000)")
    parser.add_argument("--chunk-size", type=int, default=500, help="records per chunk (500)")
    parser.add_argument("--probe-every", type=float, default=0.02, help="seconds between probes")
    parser.add_argument("--baseline", type=float, default=None, help="seconds before the bulk")
    parser.add_argument("--after", type=float, default=None, help="seconds after the bulk")
    args = parser.parse_args(argv)
    fill_sizes(args, records=(20_000, 1_000_000), failed=(2_000, 100_000))
    fill_sizes(args, baseline=(2.0, 10.0), after=(1.0, 5.0))
    console = new_console()
    announce(console, command_line("benchmarks.bulk_retry", argv))
    run = Run(records=args.records, failed=args.failed)
    with serving(args.uri, console) as server:
        database = scratch_database("bulk_retry")
        container = DogsContainer(uri=server.uri, database=database)
        client: MongoClient[Document] = MongoClient(server.uri, tz_aware=True)
        try:
            with console.status(f"loading {run.records:,} records..."):
                _load(server.uri, database, run)
            _profile_registry(client, database, True)
            worker = _start_worker(server.uri, database)
            started = time.monotonic()
            try:
                anyio.run(_with_container, container, args, run, console, backend="asyncio")
            finally:
                worker.send_signal(signal.SIGTERM)
                worker.communicate(timeout=60)
                run.worker_seconds = time.monotonic() - started
            run.registry_writes = _registry_writes(client, database)
            _profile_registry(client, database, False)
            _check(server.uri, database, run)
            _print(console, run)
        finally:
            client.drop_database(database)
            client.close()
    console.print("Shared machine: other processes ran meanwhile; compare phases, not runs.")
    return problems_status(run.problems)


async def _with_container(
    container: DogsContainer, args: argparse.Namespace, run: Run, console: Any
) -> None:
    try:
        await _measure(container, args, run, console)
        await _read_waits(container, run)
    finally:
        await container.aclose()


if __name__ == "__main__":
    raise SystemExit(main())
