"""The claims role: taking due records, keeping their locks, and timing the claim query.

Which records a claim may take is :mod:`dogs_core.domain.records`' rule
(:meth:`~dogs_core.domain.records.JobRecord.is_eligible`): the requested partition and names,
due (``next_run_at <= now``), the lock missing or expired (``locked_until <= now``), and not an
event record at its attempt limit. The order is ``priority`` descending, then ``next_run_at``
ascending.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from dogs_core.domain.records import ClaimedJob, ClaimRequest

__all__ = ["AsyncClaimStore"]


@runtime_checkable
class AsyncClaimStore(Protocol):
    """Taking due records and keeping their locks."""

    async def claim(self, request: ClaimRequest) -> ClaimedJob | None:
        """Atomically take the first eligible record of ``request.partition`` in order: set
        ``lock_id``, ``locked_until``, ``last_run_at = now``, ``lock_owner = request.owner``
        (removed when ``None``), remove ``lock_released_at`` and increment ``tries``. ``None``
        when nothing is eligible (or the claim was ambiguous and has been dropped).

        The claimed job carries ``owner = request.owner`` and, when the claim took over a lock
        that was not released (``was_stale``), ``previous_attempt``: the lock id, ``last_run_at``,
        ``locked_until``, ``tries`` and ``lock_owner`` the record had just before (a store that
        cannot know them leaves it ``None``)."""
        ...

    async def claim_many(self, requests: Sequence[ClaimRequest]) -> list[ClaimedJob]:
        """Claim up to ``len(requests)`` jobs in one go: the best eligible records of the
        requests' partition, in claim order (priority desc, ``next_run_at`` asc), each locked
        under the lock id of a distinct request (a claimed job's ``execution_id``/``lock_id`` is
        that request's ``lock_id``). Returns the claimed jobs best first; fewer than asked (or
        ``[]``) when fewer were eligible or other claimers took some. The requests must agree on
        everything but ``lock_id`` (``job_names``, ``partition``, ``hint``, ``now``,
        ``locked_until``) and their lock ids must be distinct: otherwise ``ValueError`` and
        nothing is written. Empty input (or empty ``job_names``) returns ``[]``. Each claimed job
        is exactly what :meth:`claim` would have returned for it (``tries`` incremented,
        ``was_stale``, etc.)."""
        ...

    async def extend_lock(self, job_id: str, lock_id: str, locked_until: datetime) -> bool:
        """Fenced: set ``locked_until`` (a renewal, or a job's own lock time)."""
        ...

    async def probe(
        self, *, hint: str, job_names: Sequence[str], partition: int, now: datetime
    ) -> float:
        """Measure, in milliseconds, how long the claim query takes with ``hint`` (MongoDB:
        ``explain`` executionStats). Raise on failure or timeout."""
        ...
