"""What views say about a job, decided once for ``dogs jobs`` and the dashboard (pure).

:func:`record_moments`: the times worth showing for a record in its state, each named for what
it means then (a running job's ``next_run_at`` is when it was due, not a next run; a failed one
has none). :func:`execution_timing`: a row's start and duration, or that the job never ran (an
operator cancelled it before any execution started). :func:`params_preview`: params as indented
JSON, cut at a size a page or a terminal can show, saying how large they are in all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from dogs_core.domain.records import HistoryRecord, JobRecord, JobState

__all__ = [
    "PARAMS_PREVIEW_CHARS",
    "ExecutionTiming",
    "Moment",
    "ParamsPreview",
    "execution_timing",
    "params_preview",
    "record_moments",
]

#: How much of a job's params a view shows before it offers the rest.
PARAMS_PREVIEW_CHARS: Final = 4_000


@dataclass(frozen=True, slots=True)
class Moment:
    """A labelled time of a record (``at`` may be ``None``: not known) and an optional note."""

    label: str
    at: datetime | None
    note: str = ""


def record_moments(record: JobRecord, now: datetime) -> tuple[Moment, ...]:
    """The times of ``record`` that mean something in its state at ``now``."""
    state = record.state(now)
    if state is JobState.RUNNING:
        return (
            Moment("Running since", record.last_run_at),
            Moment("Lock until", record.locked_until, "renewed while it runs"),
        )
    if state is JobState.FAILED:
        return (Moment("Failed at", record.max_tries_reached_at, "no run is scheduled"),)
    if state is JobState.STALE:
        return (
            Moment("Started", record.last_run_at),
            Moment("Lock expired", record.locked_until, "waits for a worker to recover it"),
        )
    holding = record.holding
    if state is JobState.HELD and holding is not None:
        reason = f"refused by its {holding.reason.value} limit"
        return (
            Moment("Held until", holding.until, reason),
            Moment("Waiting since", holding.since),
        )
    if state is JobState.SLEEPING:
        return (
            Moment("Sleeping until", record.next_run_at, "ctx.sleep: a retry wakes it now"),
            Moment("Last run", record.last_run_at),
        )
    if record.next_run_at <= now:
        moments = [Moment("Due since", record.waiting_since())]
    else:
        moments = [Moment("Next run", record.next_run_at)]
    if record.last_run_at is not None:
        moments.append(Moment("Last run", record.last_run_at))
    return tuple(moments)


@dataclass(frozen=True, slots=True)
class ExecutionTiming:
    """How a row's run is shown: its start and duration, or that it never ran."""

    ran: bool
    started_at: datetime | None
    duration_ms: int | None


def execution_timing(row: HistoryRecord) -> ExecutionTiming:
    """A cancelled row of a job that never ran has neither a start nor a duration (its times are
    the cancel's); every other row has both."""
    if not row.ran:
        return ExecutionTiming(False, None, None)
    return ExecutionTiming(True, row.started_at, row.duration_ms)


@dataclass(frozen=True, slots=True)
class ParamsPreview:
    """Params as indented JSON: ``text`` (cut when ``truncated``), and ``size``, the length of
    the whole text in characters."""

    text: str
    size: int
    truncated: bool

    @property
    def size_label(self) -> str:
        """``812 B``, ``120.3 KB``."""
        return _size(self.size)


def params_preview(params: Any, limit: int = PARAMS_PREVIEW_CHARS) -> ParamsPreview:
    """``params`` as indented JSON (sorted keys, non-JSON values as text), cut at the last line
    that fits in ``limit`` characters (at ``limit`` when a single line is longer)."""
    text = json.dumps(params, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    if len(text) <= limit:
        return ParamsPreview(text, len(text), False)
    cut = text.rfind("\n", 0, limit)
    kept = text[: cut if cut > limit // 2 else limit]
    return ParamsPreview(kept, len(text), True)


def _size(characters: int) -> str:
    if characters < 1000:
        return f"{characters} B"
    if characters < 1_000_000:
        return f"{characters / 1000:.1f} KB"
    return f"{characters / 1_000_000:.1f} MB"
