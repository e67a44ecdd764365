"""The settle role: every final or fenced write of an execution, in batches.

What each command writes, and how a read-back tells whether a write landed, is
:mod:`dogs_core.domain.settle`'s; the decision of which command follows an execution is
:mod:`dogs_core.domain.outcome`'s. The runtime sends one ``settle_many`` for the executions that
ended together, each settlement carrying its execution's history row (a row lands before its
record is settled: see docs/reliability.md, "History at a crash").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from dogs_core.domain.settle import Settlement

__all__ = ["AsyncSettleStore"]


@runtime_checkable
class AsyncSettleStore(Protocol):
    """The fenced writes that end executions."""

    async def settle_many(self, settlements: Sequence[Settlement]) -> list[bool]:
        """Write the history rows the settlements carry (``row``: as
        :meth:`~dogs_core.ports.history.AsyncHistoryStore.write_history_many` does, the first
        row of an execution winning whole), then apply each settlement's command to its record
        if the record still holds the settlement's lock id, atomically per record. A row is
        written whatever becomes of its settlement, and before any settlement of the call: no
        record is settled before its execution's row is stored. Once the call has returned, the
        rows are as durable as the settlements (a store may write them with a weaker write
        concern whose durability the settlements' confers).
        Returns one verdict per settlement, in order: ``True`` when this call applied it,
        ``False`` when it matched nothing (another claim holds the record, the lock was ended,
        the record is gone, or the command does not apply to it: a ``Delete`` or a
        ``MarkTerminal`` of a recurrent record). Empty input returns ``[]``. A record given
        twice, or an item that is not a :class:`~dogs_core.domain.settle.Settlement`, raises
        ``InvalidOptionError`` (:func:`~dogs_core.domain.settle.check_settlements`) and nothing
        is written.

        One leeway, for stores whose batched write reports only counts: when a count falls
        short, a store may judge each settlement of that kind by reading its record back with
        :func:`~dogs_core.domain.settle.settled_as_commanded`. A record that still holds the
        settlement's lock unchanged is always ``False``.

        A transient failure after part of the batch was written raises ``TransientStoreError``
        with ``write_may_have_applied``: retrying is safe (fenced writes repeat as no-ops once
        their lock is ended, and the runtime reads back what it cannot tell)."""
        ...
