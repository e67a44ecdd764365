"""Why an execution lost its lock, told from what the store shows afterwards (pure).

An execution learns only that a fenced write matched nothing, or that its watchdog fired. What
happened is read back (:func:`dogs_core.runtime.execution.ending.lock_loss`): the record, and
this
execution's own history row. The operators' actions and the other workers leave distinct
traces:

=========================================  ==============================================
What the store shows                       Why (:class:`LockLoss`)
=========================================  ==============================================
a ``cancelled`` row of this execution      ``CANCELLED``: an operator's cancel wrote it
a ``stale`` row of this execution          ``TAKEN_OVER``: the worker that claimed the job
                                           after the lock expired wrote it
the record, locked by another execution    ``TAKEN_OVER``
the record, still under this lock          ``EXPIRED``: the lock ran out (or a renewal
                                           failed) and nobody took the job yet
the record gone, and no row of this        ``REMOVED``: deleted (or cancelled, its row on
execution                                  the way); only an operator removes a record it
                                           does not hold
the record unreadable                      ``UNKNOWN``
=========================================  ==============================================

``CANCELLED`` and ``REMOVED`` stop the handler (even with ``cancel_on_stale=False``) and
write nothing more; the others are plain staleness: a ``stale`` row and a demotion.
"""

from __future__ import annotations

import enum

from dogs_core.domain.records import HistoryRecord, HistoryStatus, JobRecord

__all__ = ["LockLoss", "lock_loss_of"]


class LockLoss(enum.Enum):
    """Why an execution's lock was lost."""

    CANCELLED = "cancelled by an operator"
    REMOVED = "its record was deleted (by an operator's delete or cancel)"
    TAKEN_OVER = "another worker took the job over after the lock expired"
    EXPIRED = "the lock expired before a renewal landed; no other worker has the job yet"
    UNKNOWN = "the record could not be read back to tell why"

    @property
    def by_operator(self) -> bool:
        """An operator ended the job: the execution stops and writes nothing more."""
        return self in (LockLoss.CANCELLED, LockLoss.REMOVED)


def lock_loss_of(
    execution_id: str, record: JobRecord | None, own_row: HistoryRecord | None
) -> LockLoss:
    """Why execution ``execution_id`` lost its lock, from its record as read back (``None``:
    gone) and its own history row (``None``: none yet); see the module's table."""
    if own_row is not None and own_row.status is HistoryStatus.CANCELLED:
        return LockLoss.CANCELLED
    if own_row is not None and own_row.status is HistoryStatus.STALE:
        return LockLoss.TAKEN_OVER
    if record is None:
        return LockLoss.REMOVED
    if record.lock_id is not None and record.lock_id != execution_id:
        return LockLoss.TAKEN_OVER
    return LockLoss.EXPIRED
