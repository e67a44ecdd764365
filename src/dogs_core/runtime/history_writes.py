"""The batch writers behind an execution's last writes: its history row, then its completion.

Rows are written by one group commit that retries each batch itself (``write_history_many`` is
an upsert of whole rows: repeating it is safe) and never fails its submitters, so a finished
job can queue its row without waiting for it. The completion writer flushes the rows queued
before each batch of completions, which keeps the order every job needs (its row is stored
before its record is deleted, see :mod:`dogs_core.runtime.takeover`) at one wait per job.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import anyio

from dogs_core.domain.records import HistoryRecord
from dogs_core.ports import AsyncJobStore
from dogs_core.runtime.batching import GroupCommit
from dogs_core.runtime.outage import log_gave_up
from dogs_core.runtime.retry import retry_transient

__all__ = ["HISTORY_WRITE_TIMEOUT", "complete_after_rows", "write_history_batch"]

logger = logging.getLogger("dogs.execution")

HISTORY_WRITE_TIMEOUT = 30.0  # seconds; a batch of history rows that takes longer is dropped


async def write_history_batch(store: AsyncJobStore, records: list[HistoryRecord]) -> list[None]:
    """Write ``records``, retrying transient errors, within :data:`HISTORY_WRITE_TIMEOUT`;
    a batch that cannot be written is logged (one ERROR line) and dropped, never raised."""
    what = f"history of {len(records)} execution(s)"
    with anyio.move_on_after(HISTORY_WRITE_TIMEOUT) as scope:
        try:
            await retry_transient(lambda: store.write_history_many(records), what=what)
        except Exception as error:
            log_gave_up(logger, f"could not write the {what}", error)
    if scope.cancelled_caught:
        logger.error("could not write the %s within %g s", what, HISTORY_WRITE_TIMEOUT)
    return [None] * len(records)


async def complete_after_rows(
    store: AsyncJobStore,
    rows: GroupCommit[HistoryRecord, None],
    claims: list[tuple[str, str]],
) -> Sequence[bool]:
    """``complete_many(claims)`` once every history row queued before it is written."""
    await rows.flush()
    return await store.complete_many(claims)
