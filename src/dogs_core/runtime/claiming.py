"""Sending one claim of the pacer to the store: the requests, then ``claim`` or ``claim_many``."""

from __future__ import annotations

from datetime import timedelta

from dogs_core.domain.pacing import Claim
from dogs_core.domain.records import ClaimedJob, ClaimRequest, Owner
from dogs_core.ids import new_execution_id
from dogs_core.ports import AsyncJobStore, Clock

__all__ = ["send_claim"]


async def send_claim(
    store: AsyncJobStore,
    claim: Claim,
    *,
    hint: str,
    clock: Clock,
    lock_time: timedelta,
    owner: Owner | None = None,
) -> list[ClaimedJob]:
    """Claim up to ``len(claim.reservations)`` jobs, each locked for ``lock_time`` under a lock
    id of its own (the id of the execution that will run it); best first."""
    now = clock.now()
    locked_until = now + lock_time
    requests = [
        ClaimRequest(
            job_names=claim.names,
            partition=claim.partition,
            hint=hint,
            now=now,
            locked_until=locked_until,
            lock_id=new_execution_id(),
            owner=owner,
        )
        for _ in claim.reservations
    ]
    if claim.batch:
        return await store.claim_many(requests)
    job = await store.claim(requests[0])
    return [] if job is None else [job]
