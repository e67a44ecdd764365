"""The stats role of the MongoDB store: ``status_counts`` (one aggregation of the records by
state) and ``job_stats``: two aggregations of the history over a window, each one scan of
the window's rows in Dogs' index ``{jobName: 1, startedAt: 1}``
(:mod:`dogs_mongo.queries.stats`).

Part of the async adapter (the source of truth): ``scripts/generate_sync.py`` generates
``_sync/stats.py`` from this module. :class:`MongoStats` is a base of the store class and uses
its records and history collections.

What a read costs: the summary fetches every row of the window (keys and documents examined
are the rows of the window) and keeps one duration (and the failure type of each error row) per
row in memory to sort them; the per-minute counts are a covered scan of the same keys. The
window is at most :data:`~dogs_core.domain.stats.MAX_STATS_WINDOW`; a name's pushed durations
must fit in a ``$group``'s 100 MB (a few million rows of one name in one window). When the index
is missing, the reads are sent again without the hint and a warning names it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import OperationFailure

from dogs_core.domain.records import NameStatus
from dogs_core.domain.stats import JobStats, check_stats_names, check_stats_window
from dogs_mongo import queries as q
from dogs_mongo._async.feeds import _resolve
from dogs_mongo.errors import read_without_missing_hint, translate_errors

__all__ = ["MongoStats"]


Document = dict[str, Any]


class MongoStats:
    """The counts of the store (``dogs status``, ``dogs stats``, ``client.stats``, the
    dashboard)."""

    _records: AsyncCollection[Document]
    _history: AsyncCollection[Document]

    async def status_counts(self, *, now: datetime) -> list[NameStatus]:
        with translate_errors("status_counts", write=False):
            cursor = await _resolve(self._records.aggregate(q.status_counts_pipeline(now)))
            rows: list[Document] = await cursor.to_list(None)
        return [
            NameStatus(
                job_name=str(row["_id"]),
                due=int(row["due"]),
                scheduled_later=int(row["later"]),
                running=int(row["running"]),
                stale=int(row["stale"]),
                terminal=int(row["terminal"]),
                oldest_due_at=row.get("oldestDueAt"),
                held=int(row.get("held", 0)),
            )
            for row in rows
        ]

    _missing_hints: set[str]

    async def job_stats(
        self, *, since: datetime, until: datetime, job_names: Sequence[str] | None = None
    ) -> list[JobStats]:
        """The summary pipeline, then the per-minute one, both hinted to the index
        (:func:`~dogs_mongo.queries.stats_summary_pipeline`,
        :func:`~dogs_mongo.queries.stats_minutes_pipeline`)."""
        start, end = check_stats_window(since, until)
        names = check_stats_names(job_names)
        if names == ():
            return []
        summary = q.stats_summary_pipeline(since=start, until=end, job_names=names)
        minutes = q.stats_minutes_pipeline(since=start, until=end, job_names=names)
        with translate_errors("job_stats", write=False):
            summaries = await self._aggregate(summary)
            counts = await self._aggregate(minutes) if summaries else []
        return q.stats_from_documents(summaries, counts, since=start, until=end)

    async def _aggregate(self, pipeline: list[Document]) -> list[Document]:
        try:
            return await self._run(pipeline, q.STATS_HINT)
        except OperationFailure as error:
            history = self._history.name
            seen = self._missing_hints
            read_without_missing_hint(error, q.STATS_HINT, collection=history, seen=seen)
            return await self._run(pipeline, None)

    async def _run(
        self, pipeline: list[Document], hint: Mapping[str, int] | None
    ) -> list[Document]:
        options: dict[str, Any] = {} if hint is None else {"hint": dict(hint)}
        cursor = await _resolve(self._history.aggregate(pipeline, **options))
        rows: list[Document] = await cursor.to_list(None)
        return rows
