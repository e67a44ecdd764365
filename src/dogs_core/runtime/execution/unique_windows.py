"""The window of a unique key, opened when its record ends (``Unique(period=...)``).

A record scheduled with a window carries it (``uniqueWindowMs``). When an execution's
settlement is about to remove the record, or mark it failed, :func:`open_window` first writes the
key's hold until ``now + window`` (the store's uniqueness role), so that the key is never free
between the record's deletion and its window: a scheduler that finds the key free in Dogs'
unique index finds the hold (:mod:`dogs_core.runtime.client._async.unique_scheduling`). A hold
written
for a settlement that then loses its lock is harmless: the record still holds the key, and its
next end extends the hold.

Only records with a window pay this write. A Node worker, an operator's cancel or delete, and a
record removed by TTL open no window (docs/differences.md).
"""

from __future__ import annotations

import logging
from datetime import datetime

from dogs_core.domain.outcome import Command, Delete, MarkTerminal
from dogs_core.domain.records import ClaimedJob
from dogs_core.ports import AsyncUniquenessStore, Role, has_role
from dogs_core.runtime.execution.services import ExecutionServices
from dogs_core.runtime.plumbing._async.retry import retry_transient
from dogs_core.runtime.plumbing.outage import log_gave_up

__all__ = ["ends_with_window", "open_window"]

logger = logging.getLogger("dogs.execution")


def ends_with_window(job: ClaimedJob, command: Command) -> bool:
    """Whether ``command`` ends a record whose unique key keeps a window."""
    return (
        job.unique_window is not None
        and job.unique_identifier is not None
        and isinstance(command, Delete | MarkTerminal)
    )


async def open_window(services: ExecutionServices, job: ClaimedJob, now: datetime) -> None:
    """Hold ``job``'s key until ``now`` plus its window, before its record goes. A store
    without the uniqueness role, or a write that keeps failing, is logged: the record ends
    anyway (a job is never held back by its window)."""
    store = services.store
    key, window = job.unique_identifier, job.unique_window
    if key is None or window is None:
        return
    if not has_role(store, Role.UNIQUENESS):
        logger.warning("%s (%s): the store has no uniqueness role: no window", job.job_name, key)
        return
    holds: AsyncUniquenessStore = store  # type: ignore[assignment]
    try:
        await retry_transient(
            lambda: holds.extend_unique_hold(key, job.job_id, until=now + window),
            what=f"open the window of {key!r}",
        )
    except Exception as error:
        log_gave_up(logger, f"could not open the window of unique key {key!r}", error)
