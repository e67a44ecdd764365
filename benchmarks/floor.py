"""The raw pymongo floors alone: Dogs' claim loop, inserts, single writes and the batched job
cycle on this server.

What each floor is and how it checks itself is in :mod:`benchmarks.support.floors`;
``claims``, ``throughput`` and ``scheduling`` measure the same floors beside their own rows.
Run it as a module from the project root::

    python -m benchmarks.floor                      # 10,000 jobs, 128 claimers, 1/8/32 partitions
    python -m benchmarks.floor --quick              # CI size
    python -m benchmarks.floor --uri mongodb://... --adapter async --partitions 8

A floor that fails a check is reported as FAILED and the exit status is 1.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import anyio
from rich.console import Console

from benchmarks.support.cli import add_quick, add_uri, fill_sizes, new_parser
from benchmarks.support.floors import (
    Adapter,
    claim_floor,
    insert_floor,
    job_cycle_floor,
    write_ceiling,
)
from benchmarks.support.report import (
    announce,
    command_line,
    exit_status,
    fmt,
    new_console,
    outcome,
    print_table,
)
from benchmarks.support.server import serving
from dogs_core.domain.records import NewJob
from dogs_core.ids import new_record_id
from dogs_mongo import queries as q

__all__ = ["main"]

Document = dict[str, Any]


def _documents(count: int) -> list[Document]:
    now = datetime.now(UTC)
    return [
        q.document_from_new_job(
            NewJob(new_record_id(), "floor", {"i": i}, now, priority=0, partition=i % 8)
        )
        for i in range(count)
    ]


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = new_parser(
        "floor", "The raw pymongo floors: Dogs' claim loop, inserts and single writes."
    )
    parser.add_argument("--jobs", type=int, default=None, help="records to claim (10000)")
    parser.add_argument("--claimers", type=int, default=None, help="concurrent claimers (128)")
    parser.add_argument(
        "--partitions", type=int, action="append", help="partition count (repeatable; 1, 8, 32)"
    )
    parser.add_argument("--adapter", choices=("async", "sync", "both"), default="both")
    parser.add_argument("--documents", type=int, default=None, help="documents inserted (10000)")
    add_uri(parser)
    add_quick(parser)
    args = parser.parse_args(argv)
    fill_sizes(args, jobs=(300, 10_000), claimers=(16, 128), documents=(500, 10_000))
    args.partitions = args.partitions or ([1, 8] if args.quick else [1, 8, 32])
    if min(args.jobs, args.claimers, args.documents, *args.partitions) < 1:
        parser.error("--jobs, --claimers, --partitions and --documents must be at least 1")
    return args


def _claim_rows(
    uri: str, args: argparse.Namespace, adapters: Sequence[Adapter], console: Console
) -> list[list[str]]:
    rows = []
    for partitions in args.partitions:
        for adapter in adapters:
            with console.status(f"claim floor: {adapter}, {partitions} partition(s)..."):
                floor = claim_floor(
                    uri, adapter, jobs=args.jobs, claimers=args.claimers, partitions=partitions
                )
            rows.append(
                [
                    f"findOneAndUpdate, {partitions} partition(s)",
                    adapter,
                    fmt(floor.seconds, ".2f"),
                    fmt(floor.claims_per_second, ",.0f"),
                    f"{floor.claim_calls:,}",
                    outcome(floor.failures),
                ]
            )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    console = new_console()
    adapters: list[Adapter] = ["async", "sync"] if args.adapter == "both" else [args.adapter]
    announce(console, command_line("benchmarks.floor", argv))
    failed = 0
    with serving(args.uri, console) as server:
        rows = _claim_rows(server.uri, args, adapters, console)
        failed += sum(1 for row in rows if row[-1] != "ok")
        title = (
            f"Claim floor: {args.jobs:,} jobs, {args.claimers} claimers, MongoDB {server.version}"
        )
        headers = ("Raw loop", "Adapter", "Time (s)", "Claims/s", "Claim calls", "Result")
        print_table(console, title, headers, rows)
        documents = _documents(args.documents)
        with console.status("insert floor..."):
            inserts = anyio.run(
                lambda: insert_floor(server.uri, documents, singles=documents), backend="asyncio"
            )
            ceiling = anyio.run(lambda: write_ceiling(server.uri, {}), backend="asyncio")
        failed += bool(inserts.failures)
        status = outcome(inserts.failures)
        print_table(
            console,
            f"Insert floor: {args.documents:,} Dogs documents, async client",
            ("Raw write", "Docs/s", "p50 (ms)", "p99 (ms)", "Result"),
            [
                [
                    "insert_many, unordered",
                    fmt(inserts.insert_many_per_second, ",.0f"),
                    "–",
                    "–",
                    status,
                ],
                [
                    "insert_one, one at a time",
                    fmt(inserts.insert_one_per_second, ",.0f"),
                    fmt(inserts.insert_one_p50_ms, ".2f"),
                    fmt(inserts.insert_one_p99_ms, ".2f"),
                    status,
                ],
                ["update_one ×32 concurrent (write ceiling)", fmt(ceiling, ",.0f"), "–", "–", "ok"],
            ],
        )
        cycles = _cycle_rows(server.uri, args, console)
        failed += sum(1 for row in cycles if row[-1] != "ok")
        print_table(
            console,
            f"Job-cycle floor: {args.jobs:,} no-op jobs (claim, history row, delete), async client",
            ("Raw loop", "Loops", "Batch", "Time (s)", "Jobs/s", "Round trips", "Result"),
            cycles,
        )
    return exit_status(console, failed, "floor")


def _cycle_rows(uri: str, args: argparse.Namespace, console: Console) -> list[list[str]]:
    """The job-cycle floor with the runtime's default claim sizes (8 claims of 32 jobs in
    flight) and one claim at a time (Node Dogs' shape, batches of one), over 8 partitions."""
    rows = []
    for loops, batch in ((8, 32), (args.claimers, 1)):
        with console.status(f"job-cycle floor: {loops} loops of {batch}..."):
            floor = anyio.run(
                functools.partial(
                    job_cycle_floor, uri, jobs=args.jobs, loops=loops, batch=batch, partitions=8
                ),
                backend="asyncio",
            )
        rows.append(
            [
                "find, bulkWrite lock, insert_many rows, deleteMany",
                str(loops),
                str(batch),
                fmt(floor.seconds, ".2f"),
                fmt(floor.jobs_per_second, ",.0f"),
                f"{floor.round_trips:,}",
                outcome(floor.failures),
            ]
        )
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
