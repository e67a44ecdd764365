"""Numbers the benchmarks take from their runs: percentiles, CPU seconds, resident memory."""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Sequence
from pathlib import Path

__all__ = ["difference", "median", "percentile", "process_cpu_seconds", "rss_mib"]


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (``fraction`` in [0, 1]); NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, math.ceil(fraction * len(ordered)) - 1))
    return ordered[rank]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def difference(before: float | None, after: float | None) -> float | None:
    """``after - before`` of a counter read twice (CPU seconds), or ``None`` when a read failed."""
    return None if before is None or after is None else after - before


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` (Linux ``/proc``); ``None`` elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / ticks
    except (OSError, ValueError, IndexError):
        return None


def rss_mib() -> float | None:
    """This process's resident memory in MiB (Linux ``/proc``); ``None`` elsewhere."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
