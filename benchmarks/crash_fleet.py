"""Nothing lost at a crash, history included: ``dogs worker`` processes SIGKILLed at random.

The measurement of issue 16, item 10, from outside: ``--workers`` (3) ``dogs worker``
processes serve ``--jobs`` (6,000) jobs of 0.05-0.5 s with 2 s locks renewed by heartbeats
(``benchmarks/crash_fleet_jobs.py``); every ``--kill-every`` seconds (about 5) one of them, at
random, is killed with SIGKILL and started again, ``--kills`` (70) times; between them, at
random moments, the mongod itself is SIGKILLed ``--outages`` (6) times and started again on its
data after ``--outage-seconds`` (4 s, longer than the 2 s lock: every lock has expired when it
comes back, so a handler that ended during the outage finds its lock taken over). Then the
fleet drains the rest and stops. Each handler records its start and its end in a side
collection (majority write concern: the record outlives the kill). Then the script checks, and
prints:

- **lost**: a job whose record is gone without a success row (must be 0);
- **ran to the end without a row**: a handler that recorded its end, whose job record is gone,
  and which left no history row of any status (the defect: must be 0);
- **two counted successes**: a job with more than one ``success`` row (must be 0);
- **superseded rows**: an execution that ran to success after its lock had moved on to one
  that ran the job again (an outage longer than the lock): counted, never a second success;
- **left undrained**: a job still in the records ten minutes after the last fault (must be 0);
- **overlapping live executions**: two executions of one job whose start-to-end spans overlap,
  both in processes alive at the time (must be 0);
- **handlers run to the end twice**: the at-least-once case (a kill between a handler's return
  and its row, or a success superseded after an outage), counted and explained: every such
  first run must be in a killed process or have a ``superseded`` row;
- the reruns' ``tries`` and ``was_stale``.

Exit 1 when a check fails. Run it as a module from the project root::

    python -m benchmarks.crash_fleet                   # 6,000 jobs, 70 kills, 6 outages (~8 min)
    python -m benchmarks.crash_fleet --quick           # CI size: 150 jobs, 3 kills, 1 outage
    python -m benchmarks.crash_fleet --uri mongodb://localhost:27017/?replicaSet=rs0
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pymongo import MongoClient

from benchmarks.crash_fleet_jobs import LOCK_SECONDS, RUNS
from benchmarks.support.cli import add_quick, add_uri, new_parser
from benchmarks.support.report import announce, command_line, new_console, print_table
from benchmarks.support.server import MongoServer, mongo_server, scratch_database
from dogs_core.runtime import SyncDogsClient
from dogs_mongo import MongoJobStore
from dogs_mongo import queries as q

__all__ = ["FleetReport", "main", "run_fleet"]

ROOT = Path(__file__).resolve().parent.parent
Document = dict[str, Any]


@dataclass
class FleetReport:
    """What the run found (see the module docstring)."""

    jobs: int
    kills: int
    outages: int = 0
    killed_pids: set[int] = field(default_factory=set)
    lost: int = 0
    ended_without_row: int = 0
    duplicate_success: int = 0
    superseded: int = 0
    undrained: int = 0
    drain_seconds: float = 0.0
    overlapping: int = 0
    ran_twice: int = 0
    ran_twice_unexplained: int = 0
    reruns: Counter[tuple[int, bool]] = field(default_factory=Counter)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not (
            self.lost
            or self.ended_without_row
            or self.duplicate_success
            or self.undrained
            or self.overlapping
            or self.ran_twice_unexplained
        )


class WorkerProcess:
    """One ``dogs worker`` serving ``crash_fleet_jobs``; its log goes to a file."""

    def __init__(self, uri: str, database: str, log_dir: Path, index: int) -> None:
        env = dict(os.environ, DOGS_CRASH_URI=uri, DOGS_CRASH_DATABASE=database)
        self.log = log_dir / f"worker-{index}-{time.monotonic_ns()}.log"
        command = [
            sys.executable, "-m", "dogs_cli", "worker", "benchmarks.crash_fleet_jobs:jobs",
            "--uri", uri, "--database", database, "--workers-count", "8",
            "--poll-interval", "0.5", "--grace", "10s", "--log-level", "warning",
            # The claim's lock too (a worker killed between its claim and its first renewal).
            "--lock-time", f"{LOCK_SECONDS}s",
        ]  # fmt: skip
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=out)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


def _schedule(uri: str, database: str, jobs: int, rng: random.Random) -> None:
    client: MongoClient[Document] = MongoClient(uri, tz_aware=True)
    try:
        dogs = SyncDogsClient(MongoJobStore(client, database))
        from benchmarks.crash_fleet_jobs import work

        items = [{"params": {"seconds": rng.uniform(0.05, 0.5)}} for _ in range(jobs)]
        result = dogs.schedule_many(work, items)
        assert result.scheduled_count == jobs, result
    finally:
        client.close()


def _remaining(client: MongoClient[Document], database: str) -> int:
    return client[database][q.DEFAULT_RECORDS_COLLECTION].count_documents({"jobName": "work"})


def run_fleet(
    server: MongoServer,
    database: str,
    *,
    jobs: int,
    workers: int,
    kills: int,
    kill_every: float,
    seed: int,
    outages: int = 0,
    outage_seconds: float = 4.0,
) -> FleetReport:
    """Schedule, run the fleet with its kills and outages, drain, and check (see the module
    docstring). Outages need the mongod started here (``server.local``)."""
    if outages and server.local is None:
        raise ValueError("mongod outages need the benchmark's own mongod: run it without --uri")
    uri = server.uri
    rng = random.Random(seed)
    faults = ["worker"] * kills + ["mongod"] * outages
    rng.shuffle(faults)
    log_dir = Path(os.environ.get("TMPDIR", "/tmp")) / f"dogs-crash-fleet-{uuid.uuid4().hex[:8]}"
    log_dir.mkdir(parents=True)
    _schedule(uri, database, jobs, rng)
    client: MongoClient[Document] = MongoClient(uri, tz_aware=True)
    report = FleetReport(jobs=jobs, kills=kills, outages=outages)
    started = time.monotonic()
    fleet = [WorkerProcess(uri, database, log_dir, i) for i in range(workers)]
    try:
        for number, fault in enumerate(faults, start=1):
            time.sleep(rng.uniform(0.5, 1.5) * kill_every)
            if fault == "mongod":
                assert server.local is not None
                server.local.crash()
                time.sleep(outage_seconds)
                server.local.restart()
                what = f"mongod down {time.monotonic() - started:.0f} s in"
            else:
                index = rng.randrange(workers)
                report.killed_pids.add(fleet[index].process.pid)
                fleet[index].kill()
                fleet[index] = WorkerProcess(uri, database, log_dir, index)
                what = "worker killed"
            left = _remaining(client, database)
            print(f"fault {number}/{len(faults)} ({what}): {left} jobs left", flush=True)
        last_fault = time.monotonic()
        deadline = last_fault + 600
        while (left := _remaining(client, database)) and time.monotonic() < deadline:
            time.sleep(1)
        report.undrained = left
        report.drain_seconds = time.monotonic() - last_fault
        report.seconds = time.monotonic() - started
    finally:
        for worker in fleet:
            worker.stop()
    try:
        _check(client[database], report)
    finally:
        client.drop_database(database)
        client.close()
    return report


def _check(database: Any, report: FleetReport) -> None:
    records = {doc["_id"] for doc in database[q.DEFAULT_RECORDS_COLLECTION].find({}, {"_id": 1})}
    rows: dict[str, list[Document]] = defaultdict(list)
    for row in database[q.DEFAULT_HISTORY_COLLECTION].find({"jobName": "work"}):
        rows[row["jobId"]].append(row)
    runs: dict[str, dict[str, Document]] = defaultdict(dict)
    for run in database[RUNS].find():
        runs[run["job_id"]].setdefault(run["execution_id"], {})[run["phase"]] = run
    job_ids = set(runs) | set(rows) | records
    for job_id in job_ids:
        successes = [r for r in rows[job_id] if r["status"] == "success"]
        superseded = {r["executionId"] for r in rows[job_id] if r["status"] == "superseded"}
        report.superseded += len(superseded)
        report.lost += job_id not in records and not successes
        report.duplicate_success += len(successes) > 1
        row_ids = {r["executionId"] for r in rows[job_id]}
        done = {e: run for e, run in runs[job_id].items() if "done" in run}
        for execution_id in done:
            if execution_id not in row_ids and job_id not in records and not successes:
                report.ended_without_row += 1
        if len(done) > 1:
            report.ran_twice += 1
            succeeded = {r["executionId"] for r in successes}
            report.ran_twice_unexplained += any(
                e not in succeeded
                and e not in superseded
                and run["done"]["pid"] not in report.killed_pids
                for e, run in done.items()
            )
        spans = sorted((run["start"]["at"], run["done"]["at"]) for run in done.values())
        report.overlapping += any(b[0] < a[1] for a, b in itertools.pairwise(spans))
        for run in runs[job_id].values():
            start = run.get("start")
            if start is not None and start["tries"] > 1:
                report.reruns[(start["tries"], start["was_stale"])] += 1


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = new_parser("crash_fleet", __doc__)
    add_uri(parser)
    parser.add_argument("--jobs", type=int, default=6_000)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--kills", type=int, default=70)
    parser.add_argument("--kill-every", type=float, default=5.0, help="mean seconds between kills")
    parser.add_argument("--outages", type=int, default=6, help="mongod SIGKILLs (0: none)")
    parser.add_argument(
        "--outage-seconds", type=float, default=4.0, help="time mongod stays down (> the 2 s lock)"
    )
    parser.add_argument("--seed", type=int, default=10)
    add_quick(parser, "150 jobs, 3 kills, 1 outage of 3 s")
    args = parser.parse_args(argv)
    if args.quick:
        args.jobs, args.workers, args.kills, args.kill_every = 150, 2, 3, 1.0
        args.outages, args.outage_seconds = 1, 3.0
    if min(args.jobs, args.workers) < 1 or min(args.kills, args.outages) < 0:
        parser.error("--jobs and --workers must be >= 1, --kills and --outages >= 0")
    if args.kill_every <= 0 or args.outage_seconds <= LOCK_SECONDS:
        parser.error(f"--kill-every must be > 0 and --outage-seconds > the {LOCK_SECONDS} s lock")
    if args.outages and args.uri:
        parser.error("--outages crash the benchmark's own mongod: give --outages 0 with --uri")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    console = new_console()
    announce(console, command_line("benchmarks.crash_fleet", argv))
    with mongo_server(args.uri, console) as server:
        database = scratch_database("crash_fleet")
        report = run_fleet(
            server,
            database,
            jobs=args.jobs,
            workers=args.workers,
            kills=args.kills,
            kill_every=args.kill_every,
            seed=args.seed,
            outages=args.outages,
            outage_seconds=args.outage_seconds,
        )
    reruns = ", ".join(
        f"{count} with tries {tries}{' (was_stale)' if stale else ''}"
        for (tries, stale), count in sorted(report.reruns.items())
    )
    print_table(
        console,
        f"{args.workers} dogs worker processes, {report.jobs:,} jobs of 0.05-0.5 s, 2 s locks, "
        f"{report.kills} worker SIGKILLs and {report.outages} mongod SIGKILLs "
        f"({args.outage_seconds:g} s down each) in {report.seconds:.0f} s",
        ["Check", "Count", "Must be"],
        [
            ["lost", str(report.lost), "0"],
            ["ran to the end, record gone, no history row", str(report.ended_without_row), "0"],
            ["jobs with two counted successes", str(report.duplicate_success), "0"],
            [
                "superseded rows (ran to success after the lock moved on)",
                str(report.superseded),
                "counted",
            ],
            ["left undrained 10 min after the last fault", str(report.undrained), "0"],
            ["overlapping live executions", str(report.overlapping), "0"],
            ["handlers run to the end twice", str(report.ran_twice), "explained"],
            ["... not explained by a kill", str(report.ran_twice_unexplained), "0"],
        ],
    )
    console.print(f"Reruns: {reruns or 'none'}")
    console.print(f"Faults: {report.kills} worker kills, {report.outages} mongod outages")
    console.print(f"Drained {report.drain_seconds:.1f} s after the last fault")
    console.print("Result: " + ("ok" if report.ok else "FAILED"))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
