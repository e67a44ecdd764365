"""Defaults against hand tuning: the claim pacer's batch sizes and claims in flight, measured.

Runs the end-to-end scenario of ``throughput`` (:func:`benchmarks.support.end_to_end.run_scenario`)
for three configurations, interleaved run by run on one server (so a shared machine's load falls
on all three alike):

- ``fixed``: ``claim_batch_size=min(workers_count, 16)`` and ``claim_concurrency=
  min(workers_count, 8)`` given explicitly: the defaults before they adapted (an explicit value
  stays fixed);
- ``defaults``: neither option given (what the runtime does on its own);
- ``tuned``: ``workers_count=128, claim_batch_size=32``, the hand tuning the defaults should match.

Beside jobs/s and the pickup lag it samples every instance's pacer while the backlog drains
(``--sample``, on by default): where the slots are (free, held by a claim in flight, running or
waiting for their outcome write), claims in flight, the batch sizes asked for and found (from the
``ClaimSwept`` telemetry), and per instance the share of samples in which it slept with free slots
while jobs were still waiting (an idle instance beside a backlog). Run it from the project root::

    python -m benchmarks.adaptive --store mongo --repeat 3
    python -m benchmarks.adaptive --store mongo --instances 4 --repeat 2
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Final

import anyio
from rich.progress import Progress

from benchmarks.support.cli import add_quick, add_uri, new_parser
from benchmarks.support.end_to_end import Options, ScenarioResult, StoreKind, run_scenario
from benchmarks.support.report import fmt, new_console, new_progress, outcome, print_table
from benchmarks.support.server import MongoServer, mongo_server
from benchmarks.support.timing import median
from dogs_core import Workers
from dogs_core.domain.events import ClaimSwept, Event
from dogs_core.runtime.plumbing.telemetry import TELEMETRY

__all__ = ["CONFIGS", "PacingSample", "main"]

#: name -> (workers_count, claim_batch_size, claim_concurrency); ``None``: the runtime's default,
#: 0 for workers_count: the ``--workers-count`` given.
CONFIGS: Final[dict[str, tuple[int, int | None, int | None]]] = {
    "fixed": (0, -16, -8),  # negative: min(workers_count, n), given explicitly
    "defaults": (0, None, None),
    "tuned": (128, 32, None),
}
SAMPLE_EVERY: Final = 0.002
BUCKETS: Final = ((1, 1), (2, 3), (4, 7), (8, 15), (16, 31), (32, 10**9))


@dataclass(slots=True)
class PacingSample:
    """What the sampler saw during one drain (sums over samples; divide by ``samples``)."""

    samples: int = 0
    free: float = 0.0
    reserved: float = 0.0
    active: float = 0.0
    in_flight: float = 0.0
    idle_with_backlog: list[int] = field(default_factory=list)
    requested: Counter[int] = field(default_factory=Counter)
    claimed: Counter[int] = field(default_factory=Counter)

    def mean(self, total: float) -> float:
        return total / self.samples if self.samples else float("nan")


class Sampler:
    """Samples the pacers of the instances of one scenario until ``jobs`` were claimed."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self.workers: list[Workers] = []
        self.result = PacingSample()
        self.done = False

    def started(self, workers: list[Workers]) -> None:
        self.workers = workers
        self.result.idle_with_backlog = [0] * len(workers)

    def on_event(self, event: Event) -> None:
        if isinstance(event, ClaimSwept) and event.error is None:
            self.result.requested[event.requested] += 1
            self.result.claimed[event.claimed] += 1

    async def run(self) -> None:
        r = self.result
        while not self.done:
            await anyio.sleep(SAMPLE_EVERY)
            if not self.workers:
                continue
            if sum(w.claims_succeeded for w in self.workers) >= self.jobs:
                self.done = True
                break
            r.samples += 1
            now = anyio.current_time()
            for index, workers in enumerate(self.workers):
                pacer = workers._pacer  # a benchmark's look inside
                ledger = pacer.ledger
                r.free += ledger.free_slots
                r.reserved += ledger.reserved
                r.active += ledger.active
                r.in_flight += pacer.claims_in_flight
                asleep = pacer.idle_until is not None and pacer.idle_until > now
                if asleep and ledger.free_slots > 0:
                    r.idle_with_backlog[index] += 1


@dataclass(slots=True)
class Row:
    config: str
    result: ScenarioResult
    pacing: PacingSample | None


def _options(base: Options, config: str) -> Options:
    workers_count, batch, concurrency = CONFIGS[config]
    count = workers_count or base.workers_count

    def given(value: int | None) -> int | None:
        return None if value is None else min(count, -value) if value < 0 else value

    return replace(
        base,
        workers_count=count,
        claim_batch_size=given(batch),
        claim_concurrency=given(concurrency),
    )


async def _run_one(
    store: StoreKind,
    jobs: int,
    server: MongoServer | None,
    options: Options,
    sample: bool,
    progress: Progress,
) -> tuple[ScenarioResult, PacingSample | None]:
    if not sample:
        result = await run_scenario(store, "async", jobs, server, options, progress)
        return result, None
    sampler = Sampler(jobs)
    unsubscribe = TELEMETRY.subscribe(sampler.on_event, ClaimSwept)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(sampler.run)
            options = replace(options, on_started=sampler.started)
            result = await run_scenario(store, "async", jobs, server, options, progress)
            sampler.done = True
    finally:
        unsubscribe()
    return result, sampler.result


def _histogram(counts: Counter[int]) -> str:
    total = sum(counts.values()) or 1
    parts = []
    for low, high in BUCKETS:
        n = sum(c for size, c in counts.items() if low <= size <= high)
        if n:
            label = f"{low}" if low == high else f"{low}+" if high > 10**6 else f"{low}-{high}"
            parts.append(f"{label}:{100 * n / total:.0f}%")
    return " ".join(parts) or "–"


HEADERS: Final = (
    "Config",
    "Store",
    "Run",
    "workers / batch / lanes",
    "Jobs/s",
    "CPU us/job client / mongod",
    "Claim calls",
    "Jobs per claim",
    "Batch asked (share of claims)",
    "Slots free / claiming / running+writing",
    "Claims in flight",
    "Pickup lag p50 / max (ms)",
    "Jobs per instance",
    "Idle with backlog (% samples)",
    "Result",
)


def _row(row: Row) -> list[str]:
    r, p = row.result, row.pacing

    def per_job(seconds: float | None) -> float | None:
        return None if seconds is None or not r.jobs else seconds / r.jobs * 1e6

    slots = lanes = asked = idle = "–"
    if p is not None and p.samples:
        slots = f"{p.mean(p.free):.1f} / {p.mean(p.reserved):.1f} / {p.mean(p.active):.1f}"
        lanes = f"{p.mean(p.in_flight):.1f}"
        asked = _histogram(p.requested)
        idle = " ".join(f"{100 * n / p.samples:.0f}" for n in p.idle_with_backlog)
    return [
        row.config,
        r.store,
        str(r.run),
        f"{r.workers_count} / {r.claim_batch_size} / {r.claim_concurrency}",
        fmt(r.jobs_per_second, ",.0f"),
        f"{fmt(per_job(r.cpu_seconds), '.0f')} / {fmt(per_job(r.server_cpu_seconds), '.0f')}",
        "–" if r.claim_calls is None else f"{r.claim_calls:,}",
        fmt(r.claim_hits / r.claim_calls if r.claim_calls and r.claim_hits else None, ".1f"),
        asked,
        slots,
        lanes,
        f"{median(r.lag_ms):.0f} / {max(r.lag_ms):.0f}" if r.lag_ms else "–",
        " ".join(f"{n:,}" for n in r.instance_jobs) if len(r.instance_jobs) > 1 else "–",
        idle,
        outcome(r.failures, r.status),
    ]


def _summary(rows: Sequence[Row]) -> list[list[str]]:
    out = []
    for config in dict.fromkeys(row.config for row in rows):
        for store in dict.fromkeys(row.result.store for row in rows):
            rates = [
                row.result.jobs_per_second
                for row in rows
                if row.config == config and row.result.store == store
                if row.result.jobs_per_second and row.result.status == "ok"
            ]
            if rates:
                spread = f"{min(rates):,.0f}–{max(rates):,.0f}"
                out.append(
                    [config, store, f"{statistics.median(rates):,.0f}", spread, str(len(rates))]
                )
    return out


async def _run_all(args: argparse.Namespace, server: MongoServer | None) -> list[Row]:
    base = Options(
        workers_count=args.workers_count,
        n_partitions=args.n_partitions,
        claim_concurrency=None,
        poll_interval=args.poll_interval,
        lag_samples=args.lag_samples,
        claim_batch_size=None,
        history=True,
        profile_dir=None,
        instances=args.instances,
    )
    rows = []
    with new_progress(new_console()) as progress:
        for run in range(1, args.repeat + 1):
            for store in args.store:
                jobs = args.memory_jobs if store == "memory" else args.mongo_jobs
                for config in args.config:
                    options = _options(base, config)
                    result, pacing = await _run_one(
                        store, jobs, server, options, not args.no_sample, progress
                    )
                    result.run = run
                    rows.append(Row(config, result, pacing))
    return rows


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = new_parser("adaptive", __doc__)
    parser.add_argument("--store", action="append", choices=("memory", "mongo"))
    parser.add_argument("--config", action="append", choices=tuple(CONFIGS))
    parser.add_argument(
        "--try",
        dest="tries",
        action="append",
        default=[],
        metavar="W:B:L",
        help="one more configuration: workers_count:claim_batch_size:claim_concurrency",
    )
    parser.add_argument("--workers-count", type=int, default=32)
    parser.add_argument("--n-partitions", type=int, default=8)
    parser.add_argument("--instances", type=int, default=1)
    parser.add_argument("--memory-jobs", type=int, default=None)
    parser.add_argument("--mongo-jobs", type=int, default=None)
    parser.add_argument("--poll-interval", type=float, default=1.0)
    parser.add_argument("--lag-samples", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=2)
    add_quick(parser)
    parser.add_argument("--no-sample", action="store_true", help="no pacer sampling")
    add_uri(parser)
    args = parser.parse_args(argv)
    args.store = list(dict.fromkeys(args.store or ["memory", "mongo"]))
    args.config = list(dict.fromkeys(args.config or ([] if args.tries else CONFIGS)))
    for text in args.tries:
        try:
            w, b, c = (int(part) for part in text.split(":"))
        except ValueError:
            parser.error(f"--try {text!r}: expected three integers W:B:L")
        if min(w, b, c) < 1:
            parser.error(f"--try {text!r}: every number must be >= 1")
        CONFIGS[text] = (w, b, c)
        args.config.append(text)
    if args.memory_jobs is None:
        args.memory_jobs = 500 if args.quick else 20_000
    if args.mongo_jobs is None:
        args.mongo_jobs = 200 if args.quick else 5_000
    if args.quick:
        args.poll_interval, args.lag_samples = 0.1, 1
    if min(args.workers_count, args.n_partitions, args.instances, args.repeat) < 1:
        parser.error("--workers-count, --n-partitions, --instances and --repeat must be >= 1")
    if min(args.memory_jobs, args.mongo_jobs) < 1 or args.poll_interval <= 0:
        parser.error("job counts must be >= 1 and --poll-interval > 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    console = new_console()
    with contextlib.ExitStack() as stack:
        server = None
        if "mongo" in args.store:
            server = stack.enter_context(mongo_server(args.uri, console))
        rows = anyio.run(_run_all, args, server, backend="asyncio")
    title = f"Claim pacing: instances={args.instances}, n_partitions={args.n_partitions}"
    print_table(console, title, HEADERS, [_row(row) for row in rows])
    summary = ("Config", "Store", "Jobs/s median", "Spread", "Runs")
    print_table(console, "Jobs/s by configuration", summary, _summary(rows))
    return 1 if any(row.result.status != "ok" for row in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
