"""The claims role of the in-memory store: claims walk the per-``(partition, job_name)`` claim
index (see :mod:`dogs_testing.memory` for the order and the cost), the lock extension is
fenced, and the probe counts the index entries a claim examines.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime

from dogs_core.domain.batches import check_claim_requests
from dogs_core.domain.records import ClaimedJob, ClaimRequest, to_millis
from dogs_testing._memory_state import MemoryState

__all__ = ["MemoryClaims"]


class MemoryClaims(MemoryState):
    """Taking due records and keeping their locks."""

    def claim(self, request: ClaimRequest) -> ClaimedJob | None:
        with self._state():
            now = to_millis(request.now)
            record_id, _ = self._walk(request.partition, request.job_names, now)
            if record_id is None:
                return None
            return self._take(record_id, request, now, to_millis(request.locked_until))

    def claim_many(self, requests: Sequence[ClaimRequest]) -> list[ClaimedJob]:
        """Exactly ``len(requests)`` claims in a row, under one lock: the best eligible records,
        the i-th locked for the i-th request."""
        checked = check_claim_requests(requests)
        if not checked or not checked[0].job_names:
            return []
        first = checked[0]
        now = to_millis(first.now)
        locked_until = to_millis(first.locked_until)
        with self._state():
            ids = self._walk_many(first.partition, first.job_names, now, len(checked))
            return [
                self._take(record_id, request, now, locked_until)
                for record_id, request in zip(ids, checked, strict=False)
            ]

    def extend_lock(self, job_id: str, lock_id: str, locked_until: datetime) -> bool:
        with self._state():
            old = self._fenced(job_id, lock_id)
            if old is None:
                return False
            self._put(old, dataclasses.replace(old, locked_until=to_millis(locked_until)))
            return True

    def probe(self, *, hint: str, job_names: Sequence[str], partition: int, now: datetime) -> float:
        """The number of index entries the claim would examine (the hint changes nothing)."""
        with self._state():
            return float(self._walk(partition, job_names, to_millis(now))[1])
