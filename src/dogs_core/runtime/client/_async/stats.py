"""Execution stats per job name over a recent window, as the clients offer them (``stats``):
one store read (:meth:`~dogs_core.ports.AsyncJobStore.job_stats`), retried when transient.

This module is the source of truth; ``_sync/stats.py`` is generated from it.
"""

from __future__ import annotations

from datetime import datetime

from dogs_core.domain.definitions import (
    JobDefinition,
)
from dogs_core.domain.filters import parse_window
from dogs_core.domain.stats import (
    DEFAULT_STATS_WINDOW,
    MAX_STATS_WINDOW,
    JobStats,
    check_stats_window,
)
from dogs_core.domain.validation import DurationLike
from dogs_core.errors import InvalidOptionError
from dogs_core.ports import AsyncJobStore
from dogs_core.runtime.client.calls import stats_name
from dogs_core.runtime.client.scheduling import ClientBase
from dogs_core.runtime.plumbing._async.retry import retry_transient

__all__ = ["StatsClient"]


class StatsClient(ClientBase):
    """Runs, success rate, failures by type, durations and throughput per job name."""

    store: AsyncJobStore
    operation_timeout: float | None
    """Seconds a call retries a store that keeps failing (see ``DogsClient``)."""

    async def _ensure_clock(self) -> bool:
        """Measure the clock when due (the client implements it)."""
        raise NotImplementedError

    async def stats(
        self,
        job: JobDefinition | str | None = None,
        *,
        window: DurationLike = DEFAULT_STATS_WINDOW,
        until: datetime | None = None,
    ) -> list[JobStats]:
        """What the executions of ``job`` (every job name when ``None``) did in the ``window``
        before ``until`` (now when ``None``): one :class:`~dogs_core.domain.stats.JobStats` per
        name with a history row started in ``[until - window, until)``, sorted by name.

        ``window`` is a timedelta, seconds or a string such as ``"15m"``, at most
        :data:`~dogs_core.domain.stats.MAX_STATS_WINDOW` (7 days): the read scans the window's
        rows, so the window bounds its cost. Raises
        :class:`~dogs_core.errors.InvalidOptionError` naming a bad argument."""
        names = None if job is None else [stats_name(job)]
        length = parse_window("window", window, MAX_STATS_WINDOW)
        if until is not None and not isinstance(until, datetime):
            raise InvalidOptionError("until", until, "must be a timezone-aware datetime or None")
        if until is None:
            await self._ensure_clock()
        end = self.clock.now() if until is None else until
        since, end = check_stats_window(end - length, end)
        return await retry_transient(
            lambda: self.store.job_stats(since=since, until=end, job_names=names),
            what="read stats",
            deadline=self.operation_timeout,
        )
