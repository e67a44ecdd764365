"""The registry role, optional: one document per ``Workers`` instance, refreshed by its beats,
and the commands operators leave in it (:mod:`dogs_core.domain.registry`). A store that has it
lists :attr:`~dogs_core.ports.common.Role.REGISTRY` in its ``roles``.

Documents are keyed by ``instance_id``. A beat writes every field but ``command`` and returns
the command the document holds, in the same atomic step, so a worker learns of a command with
its next beat. A document whose ``expires_at`` has passed may disappear at any time (a TTL).
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, runtime_checkable

from dogs_core.domain.registry import WorkerCommand, WorkerInfo

__all__ = ["AsyncRegistryStore"]


@runtime_checkable
class AsyncRegistryStore(Protocol):
    """The workers' registry and their commands (optional)."""

    async def setup_registry(self) -> None:
        """Create what the registry needs (MongoDB: its TTL index). Idempotent."""
        ...

    async def beat_worker(self, info: WorkerInfo) -> WorkerCommand | None:
        """Write ``info`` (an upsert by ``info.instance_id``; its ``command`` is ignored: the
        stored one is kept) and return the command the document holds, in one atomic step."""
        ...

    async def list_workers(self) -> list[WorkerInfo]:
        """Every document, newest ``started_at`` first (expired ones may still be listed)."""
        ...

    async def get_worker(self, instance_id: str) -> WorkerInfo | None:
        """One document by instance id."""
        ...

    async def command_worker(
        self, instance_id: str, command: WorkerCommand, *, now: datetime
    ) -> WorkerInfo | None:
        """Leave ``command`` in the document of ``instance_id`` (replacing an earlier one)
        unless it is stopped or expired at ``now``; the document after it, ``None`` when there
        is no such live worker."""
        ...
