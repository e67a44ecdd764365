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
