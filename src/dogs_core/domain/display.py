"""What views say about a job, decided once for ``dogs jobs`` and the dashboard (pure).

:func:`record_moments`: the times worth showing for a record in its state, each named for what
it means then (a running job's ``next_run_at`` is when it was due, not a next run; a failed one
has none). :func:`execution_timing`: a row's start and duration, or that the job never ran (an
operator cancelled it before any execution started). :func:`params_preview`: params as indented
JSON, cut at a size a page or a terminal can show, saying how large they are in all.
:func:`step_lines`: a durable job's recorded steps as a view lists them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from dogs_core.domain.records import HistoryRecord, JobRecord, JobState

__all__ = [
    "PARAMS_PREVIEW_CHARS",
    "ExecutionTiming",
    "Moment",
    "ParamsPreview",
    "StepLine",
    "execution_timing",
    "params_preview",
    "record_moments",
    "step_lines",
]

#: How much of a job's params a view shows before it offers the rest.
PARAMS_PREVIEW_CHARS: Final = 4_000

#: How much of a step's result a list of steps shows.
STEP_RESULT_CHARS: Final = 80


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


@dataclass(frozen=True, slots=True)
class StepLine:
    """One recorded step as a view lists it: its number (from 1), name, when it was recorded
    and how long its function ran, its result's stored size and a one-line preview, and the
    try that recorded it (``None`` when no history row of that execution is at hand: the run
    is still going, or its row expired)."""

    number: int
    name: str
    recorded_at: datetime
    duration_ms: int
    size_label: str
    result: str
    tries: int | None


def step_lines(record: JobRecord, rows: Sequence[HistoryRecord] = ()) -> tuple[StepLine, ...]:
    """The steps recorded on ``record``, in order; ``rows`` (its history) name the try of
    each step's execution."""
    tries = {row.execution_id: row.tries for row in rows}
    lines = []
    for number, step in enumerate(record.steps, start=1):
        text = json.dumps(step.result, sort_keys=True, ensure_ascii=False, default=str)
        if len(text) > STEP_RESULT_CHARS:
            text = text[: STEP_RESULT_CHARS - 1] + "…"
        lines.append(
            StepLine(
                number=number,
                name=step.name,
                recorded_at=step.recorded_at,
                duration_ms=step.duration_ms,
                size_label=_size(step.size),
                result=text,
                tries=tries.get(step.execution_id),
            )
        )
    return tuple(lines)
