"""The stats role of the in-memory store: ``status_counts`` (each record counted once by its
state) and ``job_stats``: a scan of the history rows of the asked names (or of
all of them) under the state's lock, counted by :func:`dogs_core.domain.stats.stats_from_history`
(the definitions the MongoDB store's aggregation follows too). See :mod:`dogs_testing.memory`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from dogs_core.domain.records import HistoryRecord, JobState, NameStatus, to_millis
from dogs_core.domain.stats import (
    JobStats,
    check_stats_names,
    check_stats_window,
    stats_from_history,
)
from dogs_testing._memory_state import MemoryState

__all__ = ["MemoryStats"]

# The states counted as waiting to run, and those counted as later, by status_counts (a
# retrying record goes to one or the other by its next run).
_DUE_LIKE = frozenset({JobState.DUE, JobState.RETRYING})


class MemoryStats(MemoryState):
    """Counts of records and of history."""

    def status_counts(self, *, now: datetime) -> list[NameStatus]:
        """Per job name, each record counted once by its :meth:`JobRecord.state`: ``due``
        (due, and retrying with ``next_run_at <= now``), ``scheduled_later`` (scheduled, and
        the other retrying ones), ``running``, ``stale``, ``terminal`` (failed); the oldest
        next run of the due and stale records."""
        with self._state():
            at = to_millis(now)
            return [self._name_status(name, at) for name in sorted(self._by_name)]

    def _name_status(self, name: str, now: datetime) -> NameStatus:
        counts: dict[str, int] = dict.fromkeys(
            ("due", "scheduled_later", "running", "stale", "terminal", "held"), 0
        )
        oldest: datetime | None = None
        for record_id in self._by_name[name]:
            record = self._records[record_id]
            state = record.state(now)
            if state is JobState.FAILED:
                counts["terminal"] += 1
            elif state in (JobState.RUNNING, JobState.STALE, JobState.HELD):
                counts[state.value] += 1
            elif state in _DUE_LIKE and record.next_run_at <= now:
                counts["due"] += 1
            else:
                counts["scheduled_later"] += 1
            waiting = state in (JobState.STALE, JobState.HELD) or (
                state in _DUE_LIKE and record.next_run_at <= now
            )
            since = record.waiting_since()
            if waiting and (oldest is None or since < oldest):
                oldest = since
        return NameStatus(
            job_name=name,
            due=counts["due"],
            scheduled_later=counts["scheduled_later"],
            running=counts["running"],
            stale=counts["stale"],
            terminal=counts["terminal"],
            oldest_due_at=oldest,
            held=counts["held"],
        )

    def job_stats(
        self, *, since: datetime, until: datetime, job_names: Sequence[str] | None = None
    ) -> list[JobStats]:
        """The port's stats: ``O(rows of the names)``, not an index walk of the window (a test
        store holds few rows)."""
        start, end = check_stats_window(since, until)
        names = check_stats_names(job_names)
        with self._state():
            if names is None:
                rows: list[HistoryRecord] = list(self._history.values())
            else:
                rows = [
                    self._history[key]
                    for name in names
                    for key in self._history_by_name.get(name, {})
                ]
        return stats_from_history(rows, since=start, until=end)
