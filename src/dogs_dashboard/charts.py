"""The throughput chart: a server-rendered inline SVG of executions started per minute.

No JavaScript chart library: the chart is a row of bars, one per minute of the stats window
(``JobStats.throughput``), scaled to the busiest minute, each with a ``<title>`` tooltip.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from markupsafe import Markup, escape

__all__ = ["throughput_svg"]


def throughput_svg(
    points: Sequence[tuple[datetime, int]],
    *,
    width: int = 240,
    height: int = 36,
    label: str = "throughput",
) -> Markup:
    """Bars of ``points`` (minute start, runs started), oldest left. An empty series gives an
    empty frame, so rows of the overview keep their height."""
    if width <= 0 or height <= 0:
        raise ValueError(f"chart size must be positive, got {width}x{height}")
    parts = [
        f'<svg class="chart" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" aria-label="{escape(label)}">',
        f'<rect class="chart-frame" x="0" y="0" width="{width}" height="{height}"/>',
    ]
    peak = max((count for _, count in points), default=0)
    if points and peak > 0:
        step = width / len(points)
        bar = max(step - 1.0, 1.0)
        for index, (minute, count) in enumerate(points):
            if count <= 0:
                continue
            tall = max(1.0, (height - 2) * count / peak)
            x = index * step
            tip = f"{minute:%H:%M} UTC: {count} started"
            parts.append(
                f'<rect class="chart-bar" x="{x:.2f}" y="{height - tall:.2f}" '
                f'width="{bar:.2f}" height="{tall:.2f}"><title>{escape(tip)}</title></rect>'
            )
    parts.append("</svg>")
    return Markup("".join(parts))
