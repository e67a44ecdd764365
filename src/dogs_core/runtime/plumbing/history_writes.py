"""The history writer: executions' rows, written by one group commit that retries each batch
itself (``write_history_many`` is an upsert of whole rows: repeating it is safe) and never fails
its submitters, so a finished job can queue its row without waiting for it. The settle writer
(:mod:`dogs_core.runtime.execution.settle`) flushes the rows queued before each of its batches,
which keeps
the order every job needs (its row is stored before its record is settled, see
:mod:`dogs_core.runtime.execution.arrival`).
"""

from __future__ import annotations

import logging

import anyio

from dogs_core.domain.records import HistoryRecord
from dogs_core.ports import AsyncJobStore
from dogs_core.runtime.plumbing._async.retry import retry_transient
from dogs_core.runtime.plumbing.outage import log_gave_up

__all__ = ["HISTORY_WRITE_TIMEOUT", "write_history_batch"]

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
