"""The claim benchmark's targets and chart (:mod:`benchmarks.claims` measures, this reports)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks._common import MongoServer
from dogs_mongo._async.store import CLAIM_PATH_FIND_ONE_AND_UPDATE, CLAIM_PATH_SORTED_UPDATE_ONE

if TYPE_CHECKING:
    from benchmarks.claims import ScenarioResult

__all__ = ["targets", "write_chart"]


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
