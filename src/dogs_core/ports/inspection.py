"""The inspection role, optional: the operators' searches beyond one job. Executions across
every job, newest first, by status, error type, owner, time range, unique key and params;
records by owner, creation time and params; the newest error of each of some jobs; the error
rows of a window grouped; the archive collections searched the same ways; and who holds each
fleet concurrency slot. A store that has it lists
:attr:`~dogs_core.ports.common.Role.INSPECTION` in its ``roles``; the dashboard's Executions,
Errors and Archive pages and ``dogs history``, ``dogs errors`` and ``dogs jobs find`` need it
(``client.find_executions`` and the others raise
:class:`~dogs_core.errors.MissingRoleError` without it).

Cost: each read is bounded. A query whose filters an index serves reads about ``limit`` rows
(which filters are indexed is the store's to say, and its documentation's); one with a filter no
index serves (an owner, a params path) reads rows in index order until the page is full, for at
most a few seconds, then raises :class:`~dogs_core.errors.QueryTooBroadError` naming those
filters. An error report groups at most ``max_rows`` rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from dogs_core.domain.finding import (
    Archived,
    ErrorScan,
    ExecutionCursor,
    ExecutionQuery,
    RecordQuery,
)
from dogs_core.domain.records import HistoryRecord, JobRecord

__all__ = ["AsyncInspectionStore"]


@runtime_checkable
class AsyncInspectionStore(Protocol):
    """The operators' searches (optional)."""

    async def find_executions(
        self, query: ExecutionQuery, *, limit: int, before: ExecutionCursor | None = None
    ) -> list[HistoryRecord]:
        """At most ``limit`` history rows matching ``query``, newest ``started_at`` first,
        after the page ``before`` ended (:meth:`ExecutionCursor.admits`)."""
        ...

    async def find_matching_records(
        self, query: RecordQuery, *, now: datetime, limit: int, after: str | None = None
    ) -> list[JobRecord]:
        """At most ``limit`` records matching ``query`` (its state at ``now``), in ascending id
        order, ids greater than ``after``."""
        ...

    async def latest_errors(self, job_ids: Sequence[str]) -> dict[str, HistoryRecord]:
        """The newest ``error`` row of each of ``job_ids`` that has one (at most 1000 ids)."""
        ...

    async def error_groups(
        self, *, since: datetime, until: datetime, job_name: str | None, max_rows: int
    ) -> ErrorScan:
        """The ``error`` rows started in ``[since, until)`` (of ``job_name`` when given), at
        most the newest ``max_rows`` of them, counted per exact ``(error_type, message)``, each
        with its newest row's execution id; the row itself at least for the newest exact group
        of each group by type and fingerprint, of the most frequent ones
        (:func:`~dogs_core.domain.finding.newest_to_read`)."""
        ...

    async def find_archived_executions(
        self, query: ExecutionQuery, *, limit: int, before: ExecutionCursor | None = None
    ) -> list[Archived[HistoryRecord]]:
        """:meth:`find_executions` over the history's archive (rows ``dogs archive`` moved)."""
        ...

    async def find_archived_records(
        self, query: RecordQuery, *, limit: int, after: str | None = None
    ) -> list[Archived[JobRecord]]:
        """:meth:`find_matching_records` over the archive of failed records (``query.state``
        must be ``None``: every archived record was failed)."""
        ...

    async def held_slot_holders(self, *, now: datetime) -> dict[str, frozenset[str]]:
        """Per job name, the lock ids holding one of its fleet concurrency slots at ``now``."""
        ...
