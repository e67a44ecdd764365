"""The stats role: counts of the records by state and of the history by outcome."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from dogs_core.domain.records import NameStatus
from dogs_core.domain.stats import JobStats

__all__ = ["AsyncStatsStore"]


@runtime_checkable
class AsyncStatsStore(Protocol):
    """Counts of records and of history."""

    async def status_counts(self, *, now: datetime) -> list[NameStatus]:
        """Per job name, each record counted once by :meth:`JobRecord.state`: ``due`` (due and
        retrying records whose ``next_run_at <= now``), ``scheduled_later`` (the rest of
        scheduled and retrying), ``running``, ``stale``, ``terminal`` (failed), and
        ``oldest_due_at``: the oldest ``next_run_at`` of the due and stale records."""
        ...

    async def job_stats(
        self, *, since: datetime, until: datetime, job_names: Sequence[str] | None = None
    ) -> list[JobStats]:
        """Per job name (of ``job_names`` when given), what its history rows whose
        ``started_at`` is in ``[since, until)`` did (:class:`~dogs_core.domain.stats.JobStats`),
        sorted by name; a name without a row in the window is absent. The window is checked by
        :func:`~dogs_core.domain.stats.check_stats_window` (at most
        :data:`~dogs_core.domain.stats.MAX_STATS_WINDOW`, ``InvalidOptionError``); the counts
        follow :mod:`dogs_core.domain.stats` (nearest-rank percentiles, UTC minutes)."""
        ...
