"""The history role: the rows executions leave, and reading them back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from dogs_core.domain.records import HistoryRecord, HistoryStatus

__all__ = ["AsyncHistoryStore"]


@runtime_checkable
class AsyncHistoryStore(Protocol):
    """The rows executions leave."""

    async def write_history_many(self, records: Sequence[HistoryRecord]) -> None:
        """Insert each record keyed by ``execution_id``, in order, in one round trip where the
        store can (a single row is a one-record call): the row first written for an execution
        wins whole (a later row for it writes nothing), also between two records of one call.
        Empty input writes nothing."""
        ...

    async def supersede_history(self, row: HistoryRecord) -> bool:
        """Replace the ``stale`` row of execution ``row.execution_id`` with ``row`` (a
        ``superseded`` row: a success whose settlement was refused because the lock had moved
        on), keeping the stored row's ``superseded_by`` (the claimer that wrote the ``stale``
        row names itself there) and its place; atomically per row. ``True`` when it replaced
        one; ``False`` when the execution has no row, or its row is not ``stale`` (its own row
        won: the claimer read it and completed it, nothing ran again). The one change a stored
        row ever sees: a ``success`` row is never replaced."""
        ...

    async def read_history(
        self,
        job_name: str | None = None,
        *,
        job_id: str | None = None,
        status: HistoryStatus | None = None,
        limit: int = 20,
        skip: int = 0,
    ) -> list[HistoryRecord]:
        """History of one job name, or of one job (``job_id``), or of both filters at once,
        newest ``started_at`` first (ties: newest ``ended_at``), optionally of one ``status``.
        At least one of ``job_name`` and ``job_id`` is required (``InvalidOptionError``)."""
        ...
