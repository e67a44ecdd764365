"""The inspection role of the in-memory store (:class:`~dogs_core.ports.InspectionStore`): the
operators' searches read under the state's lock, each query read by its own ``matches``
(:mod:`dogs_core.domain.finding`), so both stores answer the same. A scan of every row: no
bound is needed for the few rows a test store holds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Final, TypeVar

from dogs_core.domain.archiving import ArchiveKind
from dogs_core.domain.finding import (
    Archived,
    ErrorScan,
    ExecutionCursor,
    ExecutionQuery,
    RawErrorGroup,
    RecordQuery,
)
from dogs_core.domain.records import HistoryRecord, HistoryStatus, JobRecord, to_millis
from dogs_core.errors import InvalidOptionError
from dogs_testing._memory_archive import MemoryArchive
from dogs_testing._memory_controls import MemoryControls
from dogs_testing._memory_state import _history_row, _out

__all__ = ["MemoryInspection", "check_inspection_limit"]

#: The most ids ``latest_errors`` takes, and the largest page of a search.
MAX_IDS: Final = 1000
MAX_PAGE: Final = 1001  # a client's page of 1000 and one more, to know there is a next

T = TypeVar("T")


def check_inspection_limit(limit: object, *, field: str = "limit", maximum: int = MAX_PAGE) -> int:
    """A page size: an integer from 1 to ``maximum``."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= maximum:
        raise InvalidOptionError(field, limit, f"must be an integer from 1 to {maximum}")
    return limit


def _newest_first(row: HistoryRecord) -> tuple[datetime, str]:
    return row.started_at, row.execution_id


class MemoryInspection(MemoryControls, MemoryArchive):
    """The searches of the sync face."""

    def find_executions(
        self, query: ExecutionQuery, *, limit: int, before: ExecutionCursor | None = None
    ) -> list[HistoryRecord]:
        check_inspection_limit(limit)
        with self._state():
            rows = list(self._history.values())
        return [_history_row(row) for row in _page(rows, query, limit, before)]

    def find_matching_records(
        self, query: RecordQuery, *, now: datetime, limit: int, after: str | None = None
    ) -> list[JobRecord]:
        check_inspection_limit(limit)
        at = to_millis(now)
        with self._state():
            found = [
                record
                for record in self._records.values()
                if (after is None or record.id > after) and query.matches(record, at)
            ]
        return [_out(record) for record in sorted(found, key=lambda r: r.id)[:limit]]

    def latest_errors(self, job_ids: Sequence[str]) -> dict[str, HistoryRecord]:
        wanted = _ids(job_ids)
        newest: dict[str, HistoryRecord] = {}
        with self._state():
            for row in self._history.values():
                if row.job_id not in wanted or row.status is not HistoryStatus.ERROR:
                    continue
                known = newest.get(row.job_id)
                if known is None or _newest_first(row) > _newest_first(known):
                    newest[row.job_id] = row
        return {job_id: _history_row(row) for job_id, row in newest.items()}

    def error_groups(
        self, *, since: datetime, until: datetime, job_name: str | None, max_rows: int
    ) -> ErrorScan:
        check_inspection_limit(max_rows, field="max_rows", maximum=10_000_000)
        query = ExecutionQuery(job_name=job_name, status=HistoryStatus.ERROR)
        with self._state():
            rows = [
                row
                for row in self._history.values()
                if query.matches(row) and since <= row.started_at < until
            ]
        rows.sort(key=_newest_first, reverse=True)
        kept = rows[:max_rows]
        return ErrorScan(_exact_groups(kept), len(kept), len(rows) > max_rows)

    def find_archived_executions(
        self, query: ExecutionQuery, *, limit: int, before: ExecutionCursor | None = None
    ) -> list[Archived[HistoryRecord]]:
        check_inspection_limit(limit)
        copies = self._settled_copies(ArchiveKind.HISTORY, HistoryRecord)
        when = {row.execution_id: at for row, at in copies}
        page = _page([row for row, _ in copies], query, limit, before)
        return [Archived(_history_row(row), when[row.execution_id]) for row in page]

    def find_archived_records(
        self, query: RecordQuery, *, limit: int, after: str | None = None
    ) -> list[Archived[JobRecord]]:
        check_inspection_limit(limit)
        if query.state is not None:
            raise InvalidOptionError("state", query.state, "archived records have no state")
        copies = self._settled_copies(ArchiveKind.FAILED_RECORDS, JobRecord)
        found = [
            (record, at)
            for record, at in copies
            if (after is None or record.id > after) and query.matches(record, at)
        ]
        found.sort(key=lambda pair: pair[0].id)
        return [Archived(_out(record), at) for record, at in found[:limit]]

    def held_slot_holders(self, *, now: datetime) -> dict[str, frozenset[str]]:
        at = to_millis(now)
        holders: dict[str, set[str]] = {}
        with self._state():
            for (job_name, _), slots in self._slots.items():
                for slot in slots.values():
                    if slot.until > at:
                        holders.setdefault(job_name, set()).add(slot.holder)
        return {name: frozenset(held) for name, held in holders.items()}

    def _settled_copies(self, kind: ArchiveKind, of: type[T]) -> list[tuple[T, datetime]]:
        """The archive's settled copies (a pending one's original may still be live)."""
        with self._state():
            copies = list(self._archive(kind).values())
        return [
            (copy.item, copy.archived_at)
            for copy in copies
            if not copy.pending and isinstance(copy.item, of)
        ]


def _page(
    rows: Iterable[HistoryRecord],
    query: ExecutionQuery,
    limit: int,
    before: ExecutionCursor | None,
) -> list[HistoryRecord]:
    admitted: Callable[[HistoryRecord], bool] = (
        (lambda row: True) if before is None else before.admits
    )
    found = [row for row in rows if query.matches(row) and admitted(row)]
    return sorted(found, key=_newest_first, reverse=True)[:limit]


def _ids(job_ids: object) -> frozenset[str]:
    if isinstance(job_ids, str) or not isinstance(job_ids, Sequence):
        raise InvalidOptionError("job_ids", job_ids, "must be a sequence of job ids")
    if len(job_ids) > MAX_IDS or not all(isinstance(i, str) and i for i in job_ids):
        raise InvalidOptionError("job_ids", job_ids, f"must be at most {MAX_IDS} job ids")
    return frozenset(job_ids)


def _exact_groups(rows: Sequence[HistoryRecord]) -> tuple[RawErrorGroup, ...]:
    """``rows`` (newest first) per exact ``(error_type, message)``."""
    groups: dict[tuple[str | None, str | None], RawErrorGroup] = {}
    for row in rows:
        key = (row.error_type, row.error_message)
        known = groups.get(key)
        if known is None:
            groups[key] = RawErrorGroup(
                error_type=row.error_type,
                message=row.error_message,
                count=1,
                first_seen=row.started_at,
                last_seen=row.started_at,
                job_names=(row.job_name,),  # sorted once all are in
                newest_execution_id=row.execution_id,
                newest=_history_row(row),
            )
            continue
        names = (
            known.job_names if row.job_name in known.job_names else (*known.job_names, row.job_name)
        )
        groups[key] = dataclasses.replace(
            known,
            count=known.count + 1,
            first_seen=min(known.first_seen, row.started_at),
            job_names=names,
        )
    return tuple(
        dataclasses.replace(group, job_names=tuple(sorted(group.job_names)))
        for group in groups.values()
    )
