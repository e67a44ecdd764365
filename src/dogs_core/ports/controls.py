"""The controls role: fleet-wide pauses, concurrency slots and rate windows
(:mod:`dogs_core.domain.controls` decides what a job needs; these are the atomic writes that
take it). They bind Python workers only (docs/differences.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, runtime_checkable

__all__ = ["AsyncControlStore"]


@runtime_checkable
class AsyncControlStore(Protocol):
    """Fleet-wide pauses, concurrency slots and rate windows."""

    async def set_paused(self, job_name: str, paused: bool, *, now: datetime) -> bool:
        """Pause (``paused``) or resume ``job_name`` (``"*"``: every name) fleet-wide. Returns
        whether this call changed anything (pausing a paused name is ``False``)."""
        ...

    async def paused_names(self) -> frozenset[str]:
        """The paused job names (``"*"`` among them when every name is paused)."""
        ...

    async def acquire_slot(
        self,
        job_name: str,
        key: str,
        *,
        limit: int,
        holder: str,
        until: datetime,
        now: datetime,
    ) -> int | None:
        """Take one of the ``limit`` concurrency slots ``0 .. limit-1`` of ``(job_name, key)``
        for ``holder`` (an execution's lock id) until ``until``, atomically: a slot is free when
        nobody holds it or its holder's ``until`` is ``<= now``. Returns the slot's index, or
        ``None`` when all are held. Two calls never get one slot both; slots of a larger index
        (a limit lowered since) are never handed out. Taking a slot ``holder`` already holds
        returns it again."""
        ...

    async def renew_slot(
        self, job_name: str, key: str, index: int, *, holder: str, until: datetime
    ) -> bool:
        """Fenced by ``holder``: move the slot's ``until``. ``False`` when another holds it."""
        ...

    async def release_slot(self, job_name: str, key: str, index: int, *, holder: str) -> bool:
        """Fenced by ``holder``: free the slot. ``False`` when another holds it (or nobody)."""
        ...

    async def held_slots(self, *, now: datetime) -> dict[str, int]:
        """Per job name, how many slots are held at ``now`` (all keys together)."""
        ...

    async def take_rate_token(
        self,
        job_name: str,
        key: str,
        *,
        limit: int,
        window_start: datetime,
        window_end: datetime,
    ) -> bool:
        """Count one start of ``(job_name, key)`` in the window ``[window_start, window_end)``
        if fewer than ``limit`` were counted there, atomically; ``False`` when the window is
        full. A store may forget a window once it has ended."""
        ...
