"""The fleet of workers as the clients see it (``workers``, ``worker``) and steer it
(``quiet_worker``, ``stop_worker``), through the store's registry
(:class:`~dogs_core.ports.AsyncRegistryStore`, :mod:`dogs_core.domain.registry`).

A worker is named by its instance id or an unambiguous prefix of it (as the CLI and the
dashboard print them). A command is left in the worker's registry document; the worker reads
it with its next beat (within :data:`~dogs_core.domain.registry.BEAT_INTERVAL`) and obeys:
``quiet`` stops its claims, what runs finishes; ``stop`` drains it with the grace given, then
it stops (``dogs worker`` then exits 0).

This module is the source of truth; ``_sync/registry.py`` is generated from it.
"""

from __future__ import annotations

from datetime import timedelta

from dogs_core.domain import validation
from dogs_core.domain.audit import AuditAction
from dogs_core.domain.registry import (
    DEFAULT_STOP_GRACE,
    WorkerAction,
    WorkerInfo,
    check_instance_id,
    worker_command,
)
from dogs_core.domain.validation import DurationLike
from dogs_core.errors import InvalidOptionError
from dogs_core.ports import AsyncJobStore, Role
from dogs_core.ports.store import require_role
from dogs_core.runtime.client._async.audit import audited
from dogs_core.runtime.client.scheduling import ClientBase
from dogs_core.runtime.plumbing._async.retry import retry_transient
from dogs_core.runtime.plumbing.actors import current_actor

__all__ = ["RegistryClient"]


class RegistryClient(ClientBase):
    """See the workers sharing the store, and quiet or stop one of them."""

    store: AsyncJobStore
    operation_timeout: float | None

    async def _ensure_clock(self) -> bool:
        """Measure the clock when due (the client implements it)."""
        raise NotImplementedError

    async def workers(self) -> list[WorkerInfo]:
        """Every worker in the registry, newest first (use
        :func:`~dogs_core.domain.registry.liveness` to tell the lost ones)."""
        registry = require_role(self.store, Role.REGISTRY, "the workers' registry")
        return await retry_transient(
            registry.list_workers, what="list workers", deadline=self.operation_timeout
        )

    async def worker(self, instance_id: str) -> WorkerInfo | None:
        """The worker of ``instance_id``, or of the one instance id it starts with; ``None``
        when there is none. An ambiguous prefix raises ``InvalidOptionError`` naming them."""
        wanted = check_instance_id(instance_id)
        registry = require_role(self.store, Role.REGISTRY, "the workers' registry")
        found = await retry_transient(
            lambda: registry.get_worker(wanted), what="read worker", deadline=self.operation_timeout
        )
        if found is not None:
            return found
        matching = [info for info in await self.workers() if info.instance_id.startswith(wanted)]
        if len(matching) > 1:
            names = ", ".join(info.instance_id for info in matching)
            raise InvalidOptionError("instance_id", instance_id, f"is ambiguous: {names}")
        return matching[0] if matching else None

    @audited(AuditAction.WORKER_QUIET)
    async def quiet_worker(self, instance_id: str) -> WorkerInfo | None:
        """Ask the worker to stop claiming; what it runs finishes and it keeps beating. The
        worker's document after the command, ``None`` when there is no such live worker."""
        return await self._command(instance_id, WorkerAction.QUIET, None)

    @audited(AuditAction.WORKER_STOP)
    async def stop_worker(
        self, instance_id: str, *, grace: DurationLike = DEFAULT_STOP_GRACE
    ) -> WorkerInfo | None:
        """Ask the worker to stop: it claims nothing more, lets what runs finish for
        ``grace``, cancels the rest and releases their locks, then stops."""
        return await self._command(
            instance_id, WorkerAction.STOP, validation.duration("grace", grace)
        )

    async def _command(
        self, instance_id: str, action: WorkerAction, grace: timedelta | None
    ) -> WorkerInfo | None:
        target = await self.worker(instance_id)
        if target is None:
            return None
        await self._ensure_clock()
        now = self.clock.now()
        command = worker_command(
            action, requested_at=now, requested_by=str(current_actor()), grace=grace
        )
        registry = require_role(self.store, Role.REGISTRY, "the workers' registry")
        return await retry_transient(
            lambda: registry.command_worker(target.instance_id, command, now=now),
            what=f"{action} worker",
            deadline=self.operation_timeout,
        )
