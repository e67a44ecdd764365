"""No workflow lost, stepped twice or held by a dead worker: workers SIGKILLed *inside* releases.

The workflow mode of the crash benchmark (issue 40, items 2 and 9), from outside: ``--workflows``
(300) workflows ``A -> B1..B5 -> C -> D`` of steps of 10-60 ms with 2 s locks, served and
released by ``--workers`` (2) worker processes (``benchmarks/crash_workflows_worker.py``) with
a ``--sweep`` (1 s) workflow sweep. Each process kills itself with SIGKILL between the writes
of a release (its step's record staged, or the step released with its record still staged) at
random until ``--kills`` (42) kills are reached; each killed process is started again at once.
Then the script checks, and prints:

- **lost**: a workflow that did not succeed, or a step that never ran (must be 0);
- **steps with two success rows** (must be 0);
- **steps run twice**: the at-least-once case (a kill between a handler's end and its row);
- **the longest hold after the last kill**: for each step after the first, the time from its
  dependencies' end (their rows' ``endedAt``), or from the last kill when they ended before it
  (kills close together may leave no live releaser for a while), to its record becoming due
  (the release, or the repair of a release a kill cut); and **held past the bound**: steps held
  so longer than the sweep interval plus the lock time, plus ``--slack`` (5 s: a restarted
  process's start, a loaded machine) (must be 0);
- the staged records left at the end (must be 0).

Exit 1 when a check fails. Run it as a module from the project root::

    python -m benchmarks.crash_workflows                 # 300 workflows, 42 kills
    python -m benchmarks.crash_workflows --quick         # CI size: 8 workflows, 3 kills
    python -m benchmarks.crash_workflows --uri mongodb://localhost:27017/?replicaSet=rs0
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pymongo import MongoClient

from benchmarks.crash_workflows_worker import LOCK_SECONDS, RUNS, jobs
from benchmarks.support.cli import add_quick, add_uri, new_parser
from benchmarks.support.report import announce, command_line, new_console, print_table
from benchmarks.support.server import mongo_server, scratch_database
from dogs_core.domain.workflows import Workflow
from dogs_core.runtime import SyncDogsClient
from dogs_mongo import MongoJobStore
from dogs_mongo.queries import workflows as qw

__all__ = ["WorkflowCrashReport", "main", "run_workflow_fleet"]

ROOT = Path(__file__).resolve().parent.parent
Document = dict[str, Any]
#: Releases per workflow (A's dependents, C, D): what the kill chance is drawn against.
_RELEASES_PER_WORKFLOW = 3


@dataclass
class WorkflowCrashReport:
    """What the run found (see the module docstring)."""

    workflows: int
    steps: int
    bound: float
    kills: int = 0
    last_kill: float = 0.0
    """The wall time of the last kill (0: none)."""
    lost_workflows: int = 0
    lost_steps: int = 0
    two_success_rows: int = 0
    ran_twice: int = 0
    longest_hold: float = 0.0
    held_past_bound: int = 0
    staged_left: int = 0
    seconds: float = 0.0
    states: Counter[str] | None = None

    @property
    def ok(self) -> bool:
        return not (
            self.lost_workflows
            or self.lost_steps
            or self.two_success_rows
            or self.held_past_bound
            or self.staged_left
        )


class WorkerProcess:
    """One worker process of ``crash_workflows_worker``; its output goes to a file."""

    def __init__(self, uri: str, database: str, log_dir: Path, sweep: float, chance: float) -> None:
        self.chance = chance
        self.log = log_dir / f"worker-{time.monotonic_ns()}.log"
        command = [
            sys.executable, "-m", "benchmarks.crash_workflows_worker",
            uri, database, str(sweep), str(chance),
        ]  # fmt: skip
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=out)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _start(uri: str, database: str, workflows: int, rng: random.Random) -> list[str]:
    client: MongoClient[Document] = MongoClient(uri, tz_aware=True)
    try:
        dogs = SyncDogsClient(MongoJobStore(client, database), jobs())
        built = []
        for n in range(workflows):
            wf = Workflow(f"crash-{n}")

            def ms() -> dict[str, int]:
                return {"ms": rng.randint(10, 60)}

            a = wf.add("step", ms(), name="A")
            bs = [wf.add("step", ms(), name=f"B{k}", after=[a]) for k in range(1, 6)]
            c = wf.add("step", ms(), name="C", after=bs)
            wf.add("step", ms(), name="D", after=[c])
            built.append(wf)
        return [started.id for started in dogs.start_workflows(built)]
    finally:
        client.close()


def _running(client: MongoClient[Document], database: str) -> int:
    workflows = client[database][qw.DEFAULT_WORKFLOWS_COLLECTION]
    return workflows.count_documents({"state": "running"})


def run_workflow_fleet(
    uri: str,
    database: str,
    *,
    workflows: int,
    workers: int,
    kills: int,
    sweep: float,
    slack: float,
    seed: int,
    deadline: float = 600.0,
) -> WorkflowCrashReport:
    """Start the workflows, run the fleet with its kills until they end, and check."""
    rng = random.Random(seed)
    log_dir = Path(os.environ.get("TMPDIR", "/tmp")) / f"dogs-crash-wf-{uuid.uuid4().hex[:8]}"
    log_dir.mkdir(parents=True)
    ids = _start(uri, database, workflows, rng)
    bound = sweep + LOCK_SECONDS
    report = WorkflowCrashReport(workflows=len(ids), steps=len(ids) * 8, bound=bound)
    # Each fault point of a release draws: about the kills asked for over the whole run.
    chance = min(0.5, 1.5 * kills / (2 * _RELEASES_PER_WORKFLOW * max(1, workflows)))
    client: MongoClient[Document] = MongoClient(uri, tz_aware=True)
    started = time.monotonic()
    fleet = [
        WorkerProcess(uri, database, log_dir, sweep, chance if kills else 0.0)
        for _ in range(workers)
    ]
    try:
        while _running(client, database) and time.monotonic() - started < deadline:
            time.sleep(0.1)
            for index, worker in enumerate(fleet):
                code = worker.process.poll()
                if code is None:
                    if worker.chance and report.kills >= kills:
                        worker.stop()  # enough kills: the rest of the run without them
                        fleet[index] = WorkerProcess(uri, database, log_dir, sweep, 0.0)
                    continue
                if code == -signal.SIGKILL:
                    report.kills += 1
                    report.last_kill = time.time()
                    print(
                        f"kill {report.kills} at {time.monotonic() - started:.1f} s: "
                        f"{_running(client, database)} workflows running",
                        flush=True,
                    )
                left = chance if report.kills < kills else 0.0
                fleet[index] = WorkerProcess(uri, database, log_dir, sweep, left)
        report.seconds = time.monotonic() - started
        # The fleet's sweeps repair what the last kill left (an orphan staged record): a few rounds.
        time.sleep(2 * sweep)
    finally:
        for worker in fleet:
            worker.stop()
    try:
        _check(client[database], ids, report, slack)
    finally:
        client.drop_database(database)
        client.close()
    return report


def _check(database: Any, ids: list[str], report: WorkflowCrashReport, slack: float) -> None:
    workflows = list(database[qw.DEFAULT_WORKFLOWS_COLLECTION].find({"_id": {"$in": ids}}))
    report.states = Counter(str(doc["state"]) for doc in workflows)
    report.lost_workflows = len(ids) - report.states.get("succeeded", 0)
    steps = {doc["_id"]: doc for doc in database[qw.DEFAULT_WORKFLOW_STEPS_COLLECTION].find()}
    runs = {doc["_id"]: doc for doc in database[RUNS].find()}
    successes: Counter[str] = Counter(
        str(row["jobId"])
        for row in database["orionjs.jobs_dogs_history"].find({"status": "success"})
    )
    for step_id, step in steps.items():
        run = runs.get(step_id)
        report.lost_steps += run is None or step.get("state") != "succeeded"
        record_id = step.get("recordId")
        report.two_success_rows += record_id is not None and successes[str(record_id)] > 1
        report.ran_twice += run is not None and int(run["runs"]) > 1
        parents = [steps[parent] for parent in step.get("after") or ()]
        ends = [p.get("outcome", {}).get("endedAt") for p in parents]
        if run is None or not ends or not all(isinstance(end, datetime) for end in ends):
            continue
        hold = run["due"].timestamp() - max(max(ends).timestamp(), report.last_kill)
        report.longest_hold = max(report.longest_hold, hold)
        report.held_past_bound += hold > report.bound + slack
    report.staged_left = database["orionjs.jobs_dogs_records"].count_documents(qw.staged_filter())


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = new_parser("crash_workflows", __doc__)
    add_uri(parser)
    parser.add_argument("--workflows", type=int, default=300)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--kills", type=int, default=42)
    parser.add_argument("--sweep", type=float, default=1.0, help="workflow sweep interval (s)")
    parser.add_argument("--slack", type=float, default=5.0, help="seconds over the bound allowed")
    parser.add_argument("--seed", type=int, default=40)
    add_quick(parser, "8 workflows, 3 kills")
    args = parser.parse_args(argv)
    if args.quick:
        args.workflows, args.workers, args.kills = 8, 2, 3
    if min(args.workflows, args.workers) < 1 or args.kills < 0 or args.sweep <= 0:
        parser.error("--workflows and --workers must be >= 1, --kills >= 0, --sweep > 0")
    if args.slack < 0:
        parser.error("--slack must be >= 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    console = new_console()
    announce(console, command_line("benchmarks.crash_workflows", argv))
    with mongo_server(args.uri, console) as server:
        report = run_workflow_fleet(
            server.uri,
            scratch_database("crash_workflows"),
            workflows=args.workflows,
            workers=args.workers,
            kills=args.kills,
            sweep=args.sweep,
            slack=args.slack,
            seed=args.seed,
        )
    print_table(
        console,
        f"{args.workers} worker processes, {report.workflows:,} workflows A -> B1..B5 -> C -> D "
        f"({report.steps:,} steps), {report.kills} SIGKILLs inside releases, "
        f"{report.seconds:.0f} s",
        ["Check", "Count", "Must be"],
        [
            ["lost (workflows not succeeded)", str(report.lost_workflows), "0"],
            ["lost (steps never run to success)", str(report.lost_steps), "0"],
            ["steps with two success rows", str(report.two_success_rows), "0"],
            ["steps run twice", str(report.ran_twice), "explained by a kill"],
            [
                f"steps held past {report.bound:g} s + {args.slack:g} s",
                str(report.held_past_bound),
                "0",
            ],
            ["staged records left", str(report.staged_left), "0"],
        ],
    )
    console.print(
        "Longest hold after the last kill (a step's dependencies' end to its record due): "
        f"{report.longest_hold:.2f} s "
        f"(bound: sweep {args.sweep:g} s + lock {LOCK_SECONDS:g} s)"
    )
    console.print(f"Workflow states: {dict(report.states or {})}")
    console.print("Result: " + ("ok" if report.ok else "FAILED"))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
