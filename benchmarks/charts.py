"""The charts of docs/benchmarks.md, drawn from the JSON results of one sitting.

``python -m benchmarks.charts RESULTS DOCS_ASSETS`` reads ``RESULTS/throughput.json`` (the
default run, with ``--watch-changes both``), ``RESULTS/wide/throughput.json`` and
``RESULTS/batch1/throughput.json`` and draws ``throughput.png``: the best end-to-end jobs/s of
each store and handler (change feed on), the raw claim-loop floor beside each MongoDB row, and
the wide and one-at-a-time configurations; it copies ``RESULTS/claims.png`` (drawn by
``benchmarks.claims``) beside it. A missing input is skipped with a note; it exits 1 when there
is nothing to draw.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _best(path: Path) -> list[dict[str, Any]]:
    """The best ok row of each (store, handler, watch_changes) of one throughput.json."""
    if not path.exists():
        print(f"skipped: {path} is missing")
        return []
    rows = json.loads(path.read_text())["results"]
    best: dict[tuple[str, str, object], dict[str, Any]] = {}
    for row in rows:
        if row.get("status") != "ok" or not row.get("jobs_per_second"):
            continue
        key = (row["store"], row["handler"], row.get("watch_changes"))
        if key not in best or row["jobs_per_second"] > best[key]["jobs_per_second"]:
            best[key] = row
    return list(best.values())


def draw_throughput(results: Path, target: Path) -> bool:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    defaults = [
        r for r in _best(results / "throughput.json") if r.get("watch_changes") is not False
    ]
    extra = [("128 slots,\nbatch 32", r) for r in _best(results / "wide" / "throughput.json")] + [
        ("batch 1", r) for r in _best(results / "batch1" / "throughput.json")
    ]
    if not defaults:
        return False
    fig, (ax_mongo, ax_memory) = plt.subplots(
        1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [3, 1]}
    )
    mongo = [r for r in defaults if r["store"] != "memory"]
    mongo += [dict(r, label=label) for label, r in extra if r["store"] != "memory"]
    memory = [r for r in defaults if r["store"] == "memory"]
    for ax, rows, title in ((ax_mongo, mongo, "MongoDB 6.0.5"), (ax_memory, memory, "in memory")):
        labels = [r.get("label") or f"{r['store']}\n{r['handler']} handler" for r in rows]
        labels = [
            label if "label" not in r else f"{r['store']} {r['handler']}\n{label}"
            for label, r in zip(labels, rows, strict=True)
        ]
        xs = range(len(rows))
        ax.bar(xs, [r["jobs_per_second"] for r in rows], color="#4878a8", label="Dogs for Python")
        floors = [(x, r.get("floor_claims_per_second")) for x, r in zip(xs, rows, strict=True)]
        floors = [(x, f) for x, f in floors if f]
        if floors:
            ax.scatter(
                [x for x, _ in floors],
                [f for _, f in floors],
                marker="_",
                s=900,
                color="#c44e52",
                linewidths=3,
                label="floor: Dogs' claim loop, raw pymongo",
                zorder=3,
            )
        ax.set_xticks(list(xs), labels, fontsize=8)
        ax.set_ylabel("no-op jobs/s, end to end")
        ax.set_title(title)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    fig.suptitle("One worker process, workers_count 32, 8 partitions, majority writes (best run)")
    fig.tight_layout()
    target.mkdir(parents=True, exist_ok=True)
    fig.savefig(target / "throughput.png", dpi=120)
    plt.close(fig)
    print(f"wrote {target / 'throughput.png'}")
    return True


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: python -m benchmarks.charts RESULTS_DIR ASSETS_DIR", file=sys.stderr)
        return 2
    results, target = Path(args[0]), Path(args[1])
    drew = draw_throughput(results, target)
    claims = results / "claims.png"
    if claims.exists():
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(claims, target / "claims.png")
        print(f"copied {claims} to {target / 'claims.png'}")
        drew = True
    else:
        print(f"skipped: {claims} is missing")
    return 0 if drew else 1


if __name__ == "__main__":
    raise SystemExit(main())
