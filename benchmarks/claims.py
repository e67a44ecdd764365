"""The contention benchmark of @orion-js/dogs (``scripts/stress-job-acquisition.test.ts``).

It seeds N due event records and lets C concurrent claimers drain them through the store's real
``claim`` method, then checks that every job was claimed exactly once. Per scenario (claim path
and partition count) and adapter (async store with C asyncio tasks, sync store with C threads)
it reports the wall time, claims per second, claim latency and the delta of the server's
``serverStatus.metrics.operation.writeConflicts``.

Seed: N records, 32 job names round robin, priority 100, strictly increasing ``nextRunAt`` in the
past, ``partition = i mod P``, bulk-inserted as Dogs documents (``insert_many`` of batches of
1,000). Claimers: each keeps its own :class:`~dogs_core.domain.partitions.PartitionRotation`
(its own seeded ``random.Random``), claims with the ``globalPriority`` hint and a 30-minute lock,
and stops after P consecutive misses. The claim path is forced through the store's
``claim_path`` option; sorted ``updateOne`` scenarios need MongoDB 8 and are reported as
skipped on older servers.

Run it as a module from the project root::

    python -m benchmarks.claims                     # full size: 10,000 jobs, 128 claimers
    python -m benchmarks.claims --quick             # CI size: 300 jobs, 16 claimers
    python -m benchmarks.claims --uri mongodb://... --scenario sorted32 --adapter async

A scenario that fails a correctness check is reported as FAILED and the exit status is 1.
"""

from __future__ import annotations

import argparse
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, Final

import anyio
from pymongo import AsyncMongoClient, MongoClient
from pymongo.write_concern import WriteConcern
from rich.progress import Progress, TaskID

from benchmarks.claims_report import (
    HEADERS,
    SKIP_NOTE,
    ScenarioResult,
    markdown_report,
    summarize,
    table_rows,
    targets,
    write_chart,
)
from benchmarks.support.claiming import (
    JOB_NAMES,
    ClaimDrain,
    claim_requests,
    drain_by_claims,
    seed_due_records,
)
from benchmarks.support.cli import (
    add_no_floor,
    add_out,
    add_quick,
    add_repeat,
    add_uri,
    add_write_concern,
    fill_sizes,
    new_parser,
    write_concern,
)
from benchmarks.support.floors import Adapter, ClaimFloor, claim_floor
from benchmarks.support.report import (
    announce,
    command_line,
    exit_status,
    machine_summary,
    new_console,
    new_progress,
    print_table,
    write_results,
)
from benchmarks.support.server import MongoServer, scratch_database, serving, write_conflicts
from benchmarks.support.timing import difference, median, percentile
from dogs_core.domain.partitions import PartitionRotation
from dogs_core.domain.records import ClaimedJob, ClaimRequest
from dogs_mongo import AsyncMongoJobStore, MongoJobStore
from dogs_mongo import queries as q
from dogs_mongo._async.store import CLAIM_PATH_FIND_ONE_AND_UPDATE, CLAIM_PATH_SORTED_UPDATE_ONE

__all__ = ["SCENARIOS", "Scenario", "main"]

HINT: Final = "globalPriority"
CLAIM_BATCH: Final = 16  # jobs per claim_many call in the batch scenarios


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    path: str
    partitions: int
    batch: int = 1  # jobs per claim call: 1 calls claim(), more calls claim_many()

    @property
    def label(self) -> str:
        kind = (
            "sorted updateOne" if self.path == CLAIM_PATH_SORTED_UPDATE_ONE else "findOneAndUpdate"
        )
        if self.batch > 1:
            kind = f"claim_many ×{self.batch}"
        plural = "partition" if self.partitions == 1 else "partitions"
        return f"{kind}, {self.partitions} {plural}"


def _scenarios() -> dict[str, Scenario]:
    found: dict[str, Scenario] = {}
    for partitions in (1, 8, 32, 64, 128):
        found[f"fam{partitions}"] = Scenario(
            f"fam{partitions}", CLAIM_PATH_FIND_ONE_AND_UPDATE, partitions
        )
    for partitions in (1, 8, 32, 64, 128):
        found[f"sorted{partitions}"] = Scenario(
            f"sorted{partitions}", CLAIM_PATH_SORTED_UPDATE_ONE, partitions
        )
    for partitions in (1, 8, 32, 64, 128):
        # Batch claims (what Workers sends while it has free slots) work on every server.
        found[f"batch{partitions}"] = Scenario(
            f"batch{partitions}", CLAIM_PATH_FIND_ONE_AND_UPDATE, partitions, CLAIM_BATCH
        )
    return found


SCENARIOS: Final = _scenarios()
ALIASES: Final = {"legacy": "fam1"}  # Dogs' name for findOneAndUpdate with 1 partition
#: The order of a full run: Dogs' default set first, then the wider sweeps.
DEFAULT_ORDER: Final = (
    "fam1",
    "sorted1",
    "sorted8",
    "sorted32",
    "sorted64",
    "sorted128",
    "fam8",
    "fam32",
    "fam64",
    "fam128",
    "batch1",
    "batch8",
    "batch32",
    "batch64",
    "batch128",
)
QUICK_ORDER: Final = ("fam1", "sorted1", "sorted8", "fam8", "batch8")


@dataclass(slots=True)
class _Run:
    """What the claimers of one scenario produced."""

    claimed: list[ClaimedJob]
    latencies: list[float]
    seconds: float
    conflicts: int
    sweep_claims: int
    cpu_seconds: float
    server_cpu_seconds: float | None


def _requests(partition: int, count: int = 1) -> list[ClaimRequest]:
    return claim_requests(JOB_NAMES, partition, HINT, count)


# -- the claimers ----------------------------------------------------------------------------------


async def _run_async(
    uri: str,
    database: str,
    scenario: Scenario,
    claimers: int,
    write_concern: WriteConcern | None,
    read_conflicts: Callable[[], int],
    on_claim: Callable[[int], None],
    server_cpu: Callable[[], float | None],
) -> _Run:
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        uri, tz_aware=True, maxPoolSize=max(claimers, 10)
    )
    store = AsyncMongoJobStore(
        client, database, claim_path=scenario.path, write_concern=write_concern
    )
    try:
        await store.setup()
        await store.capabilities()
        await client.admin.command("ping")
        drain = ClaimDrain()

        async def report() -> None:
            while True:
                on_claim(len(drain.claimed))
                await anyio.sleep(0.1)

        conflicts_before = read_conflicts()
        server_cpu_before = server_cpu()
        cpu_before = time.process_time()
        async with anyio.create_task_group() as outer:
            outer.start_soon(report)
            await drain_by_claims(
                store,
                claimers=claimers,
                partitions=scenario.partitions,
                job_names=JOB_NAMES,
                hint=HINT,
                batch=scenario.batch,
                drain=drain,
            )
            cpu = time.process_time() - cpu_before
            outer.cancel_scope.cancel()
        server_cpu_used = difference(server_cpu_before, server_cpu())
        conflicts = read_conflicts() - conflicts_before
        on_claim(len(drain.claimed))
        sweep = 0
        for partition in range(scenario.partitions):
            if await store.claim(_requests(partition)[0]) is not None:
                sweep += 1
        return _Run(
            drain.claimed, drain.latencies, drain.seconds, conflicts, sweep, cpu, server_cpu_used
        )
    finally:
        await store.close()
        await client.close()


def _run_sync(
    uri: str,
    database: str,
    scenario: Scenario,
    claimers: int,
    write_concern: WriteConcern | None,
    read_conflicts: Callable[[], int],
    on_claim: Callable[[int], None],
    server_cpu: Callable[[], float | None],
) -> _Run:
    client: MongoClient[dict[str, Any]] = MongoClient(
        uri, tz_aware=True, maxPoolSize=max(claimers, 10)
    )
    store = MongoJobStore(client, database, claim_path=scenario.path, write_concern=write_concern)
    try:
        store.setup()
        store.capabilities()
        client.admin.command("ping")
        claimed: list[ClaimedJob] = []  # list.append is atomic under the GIL
        latencies: list[float] = []
        errors: list[BaseException] = []
        barrier = threading.Barrier(claimers + 1)

        def claimer(seed: int) -> None:
            rotation = PartitionRotation(scenario.partitions, random.Random(seed))
            try:
                barrier.wait()
                while True:
                    requests = _requests(rotation.next_partition(), scenario.batch)
                    began = time.perf_counter()
                    if scenario.batch == 1:
                        job = store.claim(requests[0])
                        jobs = [] if job is None else [job]
                    else:
                        jobs = store.claim_many(requests)
                    latencies.append(time.perf_counter() - began)
                    if not jobs:
                        if rotation.record_miss():
                            return
                    else:
                        rotation.record_hit()
                        claimed.extend(jobs)
            except BaseException as error:  # reported after the run
                errors.append(error)

        threads = [
            threading.Thread(target=claimer, args=(seed,), name=f"claimer-{seed}", daemon=True)
            for seed in range(claimers)
        ]
        for thread in threads:
            thread.start()
        conflicts_before = read_conflicts()
        server_cpu_before = server_cpu()
        cpu_before = time.process_time()
        barrier.wait()
        began = time.perf_counter()
        for thread in threads:
            while thread.is_alive():
                thread.join(0.1)
                on_claim(len(claimed))
        seconds = time.perf_counter() - began
        cpu = time.process_time() - cpu_before
        server_cpu_used = difference(server_cpu_before, server_cpu())
        conflicts = read_conflicts() - conflicts_before
        on_claim(len(claimed))
        if errors:
            raise errors[0]
        sweep = sum(
            1 for partition in range(scenario.partitions) if store.claim(_requests(partition)[0])
        )
        return _Run(claimed, latencies, seconds, conflicts, sweep, cpu, server_cpu_used)
    finally:
        store.close()
        client.close()


# -- checks ----------------------------------------------------------------------------------------


def _check(
    run: _Run, seeded: set[str], client: MongoClient[dict[str, Any]], database: str
) -> list[str]:
    """Dogs' correctness checks; returns what failed (nothing when all hold)."""
    jobs = len(seeded)
    failures: list[str] = []
    claimed_ids = [job.job_id for job in run.claimed]
    if len(claimed_ids) != jobs:
        failures.append(f"{len(claimed_ids)} claims for {jobs} jobs")
    if len(set(claimed_ids)) != len(claimed_ids):
        failures.append(f"{len(claimed_ids) - len(set(claimed_ids))} jobs were claimed twice")
    if set(claimed_ids) != seeded:
        failures.append(f"{len(seeded - set(claimed_ids))} jobs were never claimed")
    if len({job.execution_id for job in run.claimed}) != len(run.claimed):
        failures.append("execution ids are not unique")
    if len({job.lock_id for job in run.claimed}) != len(run.claimed):
        failures.append("lock ids are not unique")
    if any(job.tries != 1 for job in run.claimed):
        failures.append("a claim returned tries != 1")
    if any(job.was_stale for job in run.claimed):
        failures.append("a claim reported a stale lock")
    records = client[database][q.DEFAULT_RECORDS_COLLECTION]
    now = datetime.now(UTC)
    total = records.count_documents({})
    locked = records.count_documents(
        {"tries": 1, "lockId": {"$type": "string"}, "lockedUntil": {"$gt": now}}
    )
    if total != jobs or locked != jobs:
        failures.append(f"{locked} of {total} stored records are locked with tries == 1")
    distinct = len(records.distinct("lockId"))
    if distinct != jobs:
        failures.append(f"{distinct} distinct stored lockIds, expected {jobs}")
    stored = {
        str(doc["_id"]): str(doc["lockId"])
        for doc in records.find({}, {"lockId": 1})
        if "lockId" in doc
    }
    if any(stored.get(job.job_id) != job.lock_id for job in run.claimed):
        failures.append("a stored lockId differs from the claim's lock id")
    if run.sweep_claims:
        failures.append(f"the final sweep claimed {run.sweep_claims} job(s)")
    return failures


# -- one scenario --------------------------------------------------------------------------------


def run_scenario(
    server: MongoServer,
    admin: MongoClient[dict[str, Any]],
    scenario: Scenario,
    adapter: Adapter,
    *,
    jobs: int,
    claimers: int,
    write_concern: WriteConcern | None,
    progress: Progress,
) -> ScenarioResult:
    result = ScenarioResult(
        scenario=scenario.name,
        label=scenario.label,
        adapter=adapter,
        path=scenario.path,
        partitions=scenario.partitions,
        jobs=jobs,
        claimers=claimers,
        status="ok",
        batch=scenario.batch,
    )
    if scenario.path == CLAIM_PATH_SORTED_UPDATE_ONE and not server.supports_sorted_update:
        result.status = "skipped: needs MongoDB 8"
        return result
    database = scratch_database("claims")
    task: TaskID = progress.add_task(f"{adapter:<5} {scenario.name:<10}", total=jobs)
    try:
        # The store creates Dogs' indexes before the seed, as a deployment would have them.
        MongoJobStore(admin, database).setup()
        progress.update(task, description=f"{adapter:<5} {scenario.name:<10} seeding")
        seeded = seed_due_records(admin, database, jobs=jobs, partitions=scenario.partitions)
        progress.update(task, description=f"{adapter:<5} {scenario.name:<10}")

        def read_conflicts() -> int:
            return write_conflicts(admin)

        def on_claim(count: int) -> None:
            progress.update(task, completed=count)

        if adapter == "async":
            run = anyio.run(
                _run_async,
                server.uri,
                database,
                scenario,
                claimers,
                write_concern,
                read_conflicts,
                on_claim,
                server.cpu_seconds,
                backend="asyncio",
            )
        else:
            run = _run_sync(
                server.uri,
                database,
                scenario,
                claimers,
                write_concern,
                read_conflicts,
                on_claim,
                server.cpu_seconds,
            )
        result.seconds = run.seconds
        result.claims_per_second = jobs / run.seconds if run.seconds > 0 else None
        result.write_conflicts = run.conflicts
        result.cpu_seconds = run.cpu_seconds
        result.server_cpu_seconds = run.server_cpu_seconds
        result.claim_calls = len(run.latencies)
        result.latency_p50_ms = median(run.latencies) * 1000
        result.latency_p99_ms = percentile(run.latencies, 0.99) * 1000
        result.failures = _check(run, seeded, admin, database)
        if result.failures:
            result.status = "FAILED"
    except Exception as error:  # a crashed scenario is a failed one; the others still run
        result.status = "FAILED"
        result.failures.append(f"{type(error).__name__}: {error}")
    finally:
        progress.update(task, visible=True)
        admin.drop_database(database)
    return result


# -- command line ----------------------------------------------------------------------------------


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = new_parser("claims", "Dogs' claim contention benchmark against a real MongoDB.")
    parser.add_argument("--jobs", type=int, default=None, help="records to claim (10000)")
    parser.add_argument("--claimers", type=int, default=None, help="concurrent claimers (128)")
    parser.add_argument(
        "--scenario",
        action="append",
        choices=sorted([*SCENARIOS, *ALIASES]),
        help="a scenario to run (repeatable; default: all)",
    )
    parser.add_argument("--adapter", choices=("async", "sync", "both"), default="both")
    add_uri(parser)
    add_write_concern(parser, "the claims")
    add_quick(parser, "300 jobs, 16 claimers, 1 and 8 partitions")
    add_repeat(parser)
    add_out(parser, "claims.md/.png/.json")
    add_no_floor(parser)
    args = parser.parse_args(argv)
    fill_sizes(args, jobs=(300, 10_000), claimers=(16, 128))
    if args.jobs < 1 or args.claimers < 1 or args.repeat < 1:
        parser.error("--jobs, --claimers and --repeat must be at least 1")
    return args


def _skipped(
    scenario: Scenario, adapters: Sequence[Adapter], args: argparse.Namespace
) -> ScenarioResult:
    return ScenarioResult(
        scenario=scenario.name,
        label=scenario.label,
        adapter=", ".join(adapters),
        path=scenario.path,
        partitions=scenario.partitions,
        jobs=args.jobs,
        claimers=args.claimers,
        status="skipped: needs MongoDB 8",
    )


def _floor(
    server: MongoServer,
    adapter: Adapter,
    partitions: int,
    args: argparse.Namespace,
    progress: Progress,
) -> ClaimFloor:
    """The raw claim loop for the scenarios of ``partitions`` (:mod:`benchmarks.support.floors`)."""
    task = progress.add_task(f"{adapter:<5} floor{partitions:<5}", total=args.jobs)
    floor = claim_floor(
        server.uri,
        adapter,
        jobs=args.jobs,
        claimers=args.claimers,
        partitions=partitions,
        write_concern=write_concern(args.write_concern),
    )
    progress.update(task, completed=args.jobs)
    return floor


def _run_all(
    args: argparse.Namespace,
    server: MongoServer,
    admin: MongoClient[dict[str, Any]],
    scenarios: Sequence[Scenario],
    adapters: Sequence[Adapter],
    progress: Progress,
) -> list[ScenarioResult]:
    """Every scenario, adapter and run; each run measures a floor per adapter and partition
    count just before the first scenario that needs it."""
    results: list[ScenarioResult] = []
    for run in range(1, args.repeat + 1):
        floors: dict[tuple[Adapter, int], ClaimFloor] = {}
        for scenario in scenarios:
            if scenario.path == CLAIM_PATH_SORTED_UPDATE_ONE and not server.supports_sorted_update:
                if run == 1:
                    results.append(_skipped(scenario, adapters, args))
                continue
            for adapter in adapters:
                key = (adapter, scenario.partitions)
                if not args.no_floor and key not in floors:
                    floors[key] = _floor(server, adapter, scenario.partitions, args, progress)
                result = run_scenario(
                    server,
                    admin,
                    scenario,
                    adapter,
                    jobs=args.jobs,
                    claimers=args.claimers,
                    write_concern=write_concern(args.write_concern),
                    progress=progress,
                )
                floor = floors.get(key)
                if floor is not None:
                    result.floor_claims_per_second = floor.claims_per_second
                    if floor.failures:
                        result.status = "FAILED"
                        result.failures += [f"floor: {f}" for f in floor.failures]
                result.run = run
                results.append(result)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    command = command_line("benchmarks.claims", argv)
    console = new_console()
    names = [ALIASES.get(name, name) for name in (args.scenario or [])]
    if not names:
        names = list(QUICK_ORDER if args.quick else DEFAULT_ORDER)
    scenarios = [SCENARIOS[name] for name in dict.fromkeys(names)]
    adapters: list[Adapter] = ["async", "sync"] if args.adapter == "both" else [args.adapter]
    with serving(args.uri, console) as server:
        announce(console)
        console.print(f"{args.jobs:,} jobs, {args.claimers} claimers")
        admin: MongoClient[dict[str, Any]] = MongoClient(server.uri, tz_aware=True)
        try:
            with new_progress(console) as progress:
                results = _run_all(args, server, admin, scenarios, adapters, progress)
        finally:
            admin.close()
        summary = summarize(results)
        title = f"Claims: {args.jobs:,} jobs, {args.claimers} claimers, MongoDB {server.version}"
        if args.repeat > 1:
            title += f", best of {args.repeat} runs"
        print_table(console, title, HEADERS, table_rows(summary))
        if not server.supports_sorted_update:
            console.print(SKIP_NOTE.format(server=server))
        for line in targets(summary):
            console.print(line)
        if args.out is not None:
            write_results(
                args.out,
                "claims",
                markdown_report(summary, server, args, command),
                {
                    "server": server.facts(),
                    "machine": machine_summary(),
                    "command": command,
                    "results": [asdict(r) for r in results],
                },
            )
            write_chart(summary, args.out / "claims.png", server)
            console.print(f"wrote {args.out / 'claims.md'}, claims.json and claims.png")
    failed = sum(1 for r in results if r.status == "FAILED")
    return exit_status(console, failed, "scenario")


if __name__ == "__main__":
    raise SystemExit(main())
