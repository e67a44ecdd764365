"""The claim benchmark's results and how they read: rows, the Markdown report, the targets and
the chart (:mod:`benchmarks.claims` measures, this reports; it imports nothing of claims).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from benchmarks.support.report import (
    best_runs,
    fmt,
    markdown_table,
    outcome,
    ratio,
    report_header,
    spread,
    targets_section,
)
from benchmarks.support.server import MongoServer
from dogs_mongo._async.store import CLAIM_PATH_FIND_ONE_AND_UPDATE, CLAIM_PATH_SORTED_UPDATE_ONE

__all__ = [
    "FLOOR_NOTE",
    "HEADERS",
    "SKIP_NOTE",
    "ScenarioResult",
    "markdown_report",
    "summarize",
    "table_rows",
    "targets",
    "write_chart",
]


@dataclass(slots=True)
class ScenarioResult:
    scenario: str
    label: str
    adapter: str
    path: str
    partitions: int
    jobs: int
    claimers: int
    status: str  # "ok", "FAILED", "skipped: ..."
    seconds: float | None = None
    claims_per_second: float | None = None
    write_conflicts: int | None = None
    claim_calls: int | None = None
    latency_p50_ms: float | None = None
    latency_p99_ms: float | None = None
    cpu_seconds: float | None = None
    server_cpu_seconds: float | None = None
    failures: list[str] = field(default_factory=list)
    run: int = 1
    batch: int = 1
    #: Filled by :func:`summarize`: claims/s of every ok run of this scenario and adapter.
    all_claims_per_second: list[float] = field(default_factory=list)
    #: The raw pymongo claim loop (:mod:`benchmarks.support.floors`) of this run, adapter and
    #: partition count; ``None`` with ``--no-floor``.
    floor_claims_per_second: float | None = None

    @property
    def floor_ratio(self) -> float | None:
        return ratio(self.claims_per_second, self.floor_claims_per_second)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def spread(self) -> str:
        return spread(self.all_claims_per_second)


def summarize(results: Sequence[ScenarioResult]) -> list[ScenarioResult]:
    """One row per scenario and adapter: the best run (highest claims/s), with the spread of all
    ok runs. A scenario with a FAILED run is reported by that run."""
    rows = best_runs(
        results,
        key=lambda r: (r.scenario, r.adapter),
        rate=lambda r: r.claims_per_second,
        failed=lambda r: r.status == "FAILED",
        ok=lambda r: r.ok,
    )
    for best, rates in rows:
        best.all_claims_per_second = rates
    return [best for best, _ in rows]


HEADERS: Final = (
    "Scenario",
    "Adapter",
    "Time (s)",
    "Claims/s",
    "Floor claims/s",
    "Ratio to floor",
    "Write conflicts",
    "Claim p50 (ms)",
    "Claim p99 (ms)",
    "CPU s: client / mongod",
    "Claims/s spread",
    "Result",
)


def table_rows(results: Sequence[ScenarioResult]) -> list[list[str]]:
    rows = []
    for r in results:
        rows.append(
            [
                r.label,
                r.adapter,
                fmt(r.seconds, ".2f"),
                fmt(r.claims_per_second, ",.0f"),
                fmt(r.floor_claims_per_second, ",.0f"),
                fmt(r.floor_ratio, ".2f"),
                fmt(r.write_conflicts, ","),
                fmt(r.latency_p50_ms, ".1f"),
                fmt(r.latency_p99_ms, ".1f"),
                f"{fmt(r.cpu_seconds, '.1f')} / {fmt(r.server_cpu_seconds, '.1f')}",
                r.spread,
                outcome(r.failures, r.status),
            ]
        )
    return rows


FLOOR_NOTE: Final = (
    "Floor: Dogs' own findOneAndUpdate claim loop sent straight from pymongo "
    "(benchmarks/support/floors.py: Node Dogs 4.6.8's query, sort, hint and update; the same "
    "seed, claimers and partitions; asyncio tasks for async, threads for sync), measured just "
    "before the scenarios of its partition count in the same run. Ratio: claims/s over the "
    "floor's; the claim_many rows are compared with the same single-claim floor."
)

SKIP_NOTE: Final = (
    "Sorted updateOne scenarios need MongoDB 8 (maxWireVersion >= 25); this server is MongoDB "
    "{server.version} (maxWireVersion {server.max_wire_version}). Pass --uri with a MongoDB 8 "
    "replica set to run them."
)


def markdown_report(
    results: Sequence[ScenarioResult], server: MongoServer, args: argparse.Namespace, command: str
) -> str:
    jobs, claimers = args.jobs, args.claimers
    best = f" Each row is the best of {args.repeat} runs." if args.repeat > 1 else ""
    lines = [
        *report_header("Claim contention benchmark", command, server),
        f"{jobs:,} jobs, {claimers} concurrent claimers, 32 job names, `globalPriority` hint, "
        f"write concern {args.write_concern}.{best}",
        "",
        FLOOR_NOTE if not args.no_floor else "No floors (--no-floor).",
        "",
        markdown_table(HEADERS, table_rows(results)),
        "",
    ]
    if not server.supports_sorted_update:
        lines += [SKIP_NOTE.format(server=server), ""]
    lines += targets_section(targets(results))
    return "\n".join(lines)


def targets(results: Sequence[ScenarioResult]) -> list[str]:
    """The 32-vs-1-partition targets (findOneAndUpdate, per adapter): met or not, never asserted."""
    lines = []
    by_key = {(r.adapter, r.path, r.partitions): r for r in results if r.ok and r.batch == 1}
    for adapter in ("async", "sync"):
        for path in (CLAIM_PATH_FIND_ONE_AND_UPDATE, CLAIM_PATH_SORTED_UPDATE_ONE):
            one, many = by_key.get((adapter, path, 1)), by_key.get((adapter, path, 32))
            if one is None or many is None:
                continue
            if not one.claims_per_second or not many.claims_per_second:
                continue
            speedup = many.claims_per_second / one.claims_per_second
            conflicts_one = one.write_conflicts or 0
            reduction = (
                1 - (many.write_conflicts or 0) / conflicts_one if conflicts_one else float("nan")
            )
            met = speedup >= 5 and reduction >= 0.9
            lines.append(
                f"{adapter}, {path}: 32 partitions give {speedup:.1f}x the claims/s of 1 "
                f"(target >= 5x) and {reduction:.0%} fewer write conflicts (target >= 90%): "
                f"{'met' if met else 'NOT met'}"
            )
    return lines


def write_chart(results: Sequence[ScenarioResult], path: Path, server: MongoServer) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_rate, ax_conflicts) = plt.subplots(1, 2, figsize=(11, 4.2))
    series: dict[tuple[str, str, int], list[ScenarioResult]] = {}
    for r in results:
        if r.ok:
            series.setdefault((r.adapter, r.path, r.batch), []).append(r)
    markers = {"async": "o", "sync": "s"}
    styles = {CLAIM_PATH_FIND_ONE_AND_UPDATE: "-", CLAIM_PATH_SORTED_UPDATE_ONE: "--"}
    for (adapter, claim_path, batch), points in sorted(series.items()):
        points.sort(key=lambda r: r.partitions)
        xs = [r.partitions for r in points]
        name = "findOneAndUpdate" if claim_path == CLAIM_PATH_FIND_ONE_AND_UPDATE else "sorted"
        if batch > 1:
            name = f"claim_many ×{batch}"
        label = f"{name}, {adapter}"
        linestyle = ":" if batch > 1 else styles.get(claim_path, "-")
        style = dict(marker=markers.get(adapter, "o"), linestyle=linestyle)
        ax_rate.plot(xs, [r.claims_per_second or 0 for r in points], label=label, **style)
        ax_conflicts.plot(
            xs, [max(r.write_conflicts or 0, 1) for r in points], label=label, **style
        )
    first = next((r for r in results if r.ok), None)
    for ax in (ax_rate, ax_conflicts):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("partitions")
        ax.grid(True, which="both", alpha=0.3)
        ticks = sorted({r.partitions for r in results if r.ok})
        if ticks:
            ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.legend()
    ax_rate.set_ylabel("claims/s")
    ax_rate.set_ylim(bottom=0)
    ax_conflicts.set_ylabel("write conflicts (log)")
    ax_conflicts.set_yscale("log")
    if first is not None:
        fig.suptitle(
            f"Claims: {first.jobs:,} jobs, {first.claimers} concurrent claimers, "
            f"MongoDB {server.version}"
        )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
