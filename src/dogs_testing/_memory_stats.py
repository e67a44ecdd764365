"""``job_stats`` of the in-memory store: a scan of the history rows of the asked names (or of
all of them) under the state's lock, counted by :func:`dogs_core.domain.stats.stats_from_history`
(the definitions the MongoDB store's aggregation follows too). See :mod:`dogs_testing.memory`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from dogs_core.domain.records import HistoryRecord
from dogs_core.domain.stats import (
    JobStats,
    check_stats_names,
    check_stats_window,
    stats_from_history,
)
from dogs_testing._memory_state import MemoryState

__all__ = ["MemoryStats"]


class MemoryStats(MemoryState):
    """The stats part of the port over :class:`MemoryState` (the store's sync face adds the
    rest)."""

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
