"""Nothing lost at a crash, history included: ``dogs worker`` processes SIGKILLed at random.

The measurement of issue 16, item 10, from outside: ``--workers`` (3) ``dogs worker``
processes serve ``--jobs`` (6,000) jobs of 0.05-0.5 s with 2 s locks renewed by heartbeats
(``benchmarks/crash_fleet_jobs.py``); every ``--kill-every`` seconds (about 5) one of them, at
random, is killed with SIGKILL and started again, ``--kills`` (70) times, then the fleet drains
the rest and stops. Each handler records its start and its end in a side collection (majority
write concern: the record outlives the kill). Then the script checks, and prints:

- **lost**: a job whose record is gone without a success row (must be 0);
- **ran to the end without a row**: a handler that recorded its end, whose job record is gone,
  and which left no history row of any status (the defect: must be 0);
- **duplicate success rows**: a job with more than one ``success`` row (must be 0);
- **overlapping live executions**: two executions of one job whose start-to-end spans overlap,
  both in processes alive at the time (must be 0);
- **handlers run to the end twice**: the at-least-once case (a kill between a handler's return
  and its row), counted and explained: every such first run must be in a killed process;
- the reruns' ``tries`` and ``was_stale``.

Exit 1 when a check fails. Run it as a module from the project root::

    python -m benchmarks.crash_fleet                   # 6,000 jobs, 70 kills (about 7 min)
    python -m benchmarks.crash_fleet --quick           # CI size: 150 jobs, 3 kills
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

from benchmarks.crash_fleet_jobs import RUNS
from benchmarks.support.cli import add_quick, add_uri, new_parser
from benchmarks.support.report import announce, command_line, new_console, print_table
from benchmarks.support.server import mongo_server, scratch_database
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
    killed_pids: set[int] = field(default_factory=set)
    lost: int = 0
    ended_without_row: int = 0
    duplicate_success: int = 0
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
    uri: str, database: str, *, jobs: int, workers: int, kills: int, kill_every: float, seed: int
) -> FleetReport:
    """Schedule, run the fleet with its kills, drain, and check (see the module docstring)."""
    rng = random.Random(seed)
    log_dir = Path(os.environ.get("TMPDIR", "/tmp")) / f"dogs-crash-fleet-{uuid.uuid4().hex[:8]}"
    log_dir.mkdir(parents=True)
    _schedule(uri, database, jobs, rng)
    client: MongoClient[Document] = MongoClient(uri, tz_aware=True)
    report = FleetReport(jobs=jobs, kills=kills)
    started = time.monotonic()
    fleet = [WorkerProcess(uri, database, log_dir, i) for i in range(workers)]
    try:
        for number in range(kills):
            time.sleep(rng.uniform(0.5, 1.5) * kill_every)
            index = rng.randrange(workers)
            report.killed_pids.add(fleet[index].process.pid)
            fleet[index].kill()
            fleet[index] = WorkerProcess(uri, database, log_dir, index)
            print(
                f"kill {number + 1}/{kills}: {_remaining(client, database)} jobs left", flush=True
            )
        deadline = time.monotonic() + 600
        while _remaining(client, database) and time.monotonic() < deadline:
            time.sleep(1)
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
                e not in succeeded and run["done"]["pid"] not in report.killed_pids
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
    parser.add_argument("--seed", type=int, default=10)
    add_quick(parser, "150 jobs, 3 kills")
    args = parser.parse_args(argv)
    if args.quick:
        args.jobs, args.workers, args.kills, args.kill_every = 150, 2, 3, 1.0
    if min(args.jobs, args.workers) < 1 or args.kills < 0 or args.kill_every <= 0:
        parser.error("--jobs and --workers must be >= 1, --kills >= 0, --kill-every > 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    console = new_console()
    announce(console, command_line("benchmarks.crash_fleet", argv))
    with mongo_server(args.uri, console) as server:
        database = scratch_database("crash_fleet")
        report = run_fleet(
            server.uri,
            database,
            jobs=args.jobs,
            workers=args.workers,
            kills=args.kills,
            kill_every=args.kill_every,
            seed=args.seed,
        )
    reruns = ", ".join(
        f"{count} with tries {tries}{' (was_stale)' if stale else ''}"
        for (tries, stale), count in sorted(report.reruns.items())
    )
    print_table(
        console,
        f"{args.workers} dogs worker processes, {report.jobs:,} jobs of 0.05-0.5 s, 2 s locks, "
        f"{report.kills} SIGKILLs in {report.seconds:.0f} s",
        ["Check", "Count", "Must be"],
        [
            ["lost", str(report.lost), "0"],
            ["ran to the end, record gone, no history row", str(report.ended_without_row), "0"],
            ["jobs with two success rows", str(report.duplicate_success), "0"],
            ["overlapping live executions", str(report.overlapping), "0"],
            ["handlers run to the end twice", str(report.ran_twice), "explained"],
            ["... not explained by a kill", str(report.ran_twice_unexplained), "0"],
        ],
    )
    console.print(f"Reruns: {reruns or 'none'}")
    console.print("Result: " + ("ok" if report.ok else "FAILED"))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
