"""The fleet-wide pause of job names, as the clients offer it (``pause``, ``resume``,
``paused``): one store write or read each (see :mod:`dogs_core.domain.controls`).

This module is the source of truth; ``_sync/pausing.py`` is generated from it.
"""

from __future__ import annotations

import logging

from dogs_core.domain.audit import AuditAction
from dogs_core.domain.controls import EVERY_JOB
from dogs_core.domain.definitions import (
    JobDefinition,
)
from dogs_core.ports import AsyncJobStore
from dogs_core.runtime.client._async.audit import audited
from dogs_core.runtime.client.calls import control_name
from dogs_core.runtime.client.scheduling import ClientBase
from dogs_core.runtime.plumbing._async.retry import retry_transient

__all__ = ["PauseClient"]

logger = logging.getLogger("dogs.client")


class PauseClient(ClientBase):
    """Pause and resume job names for every Python worker sharing the store."""

    store: AsyncJobStore
    operation_timeout: float | None
    """Seconds a call retries a store that keeps failing (see ``DogsClient``)."""

    async def _ensure_clock(self) -> bool:
        """Measure the clock when due (the client implements it)."""
        raise NotImplementedError

    @audited(AuditAction.PAUSE)
    async def pause(self, job: JobDefinition | str | None = None) -> bool:
        """Stop every Python worker from claiming ``job`` (every job when ``None``); what runs
        finishes. Workers see it within one poll interval. Returns whether it changed anything.
        Node Dogs workers ignore pauses."""
        return await self._set_paused(job, True)

    @audited(AuditAction.RESUME)
    async def resume(self, job: JobDefinition | str | None = None) -> bool:
        """Undo :meth:`pause` of ``job`` (``None``: the pause of every job; a name paused on
        its own stays paused)."""
        return await self._set_paused(job, False)

    async def paused(self) -> frozenset[str]:
        """The paused job names (``"*"`` among them when every job is paused)."""
        return await retry_transient(
            self.store.paused_names, what="read pauses", deadline=self.operation_timeout
        )

    async def _set_paused(self, job: JobDefinition | str | None, paused: bool) -> bool:
        name = control_name(job)
        what = "pause" if paused else "resume"
        await self._ensure_clock()
        changed = await retry_transient(
            lambda: self.store.set_paused(name, paused, now=self.clock.now()),
            what=what,
            deadline=self.operation_timeout,
        )
        if changed:
            logger.warning("%sd %s", what, "every job" if name == EVERY_JOB else name)
        return changed
