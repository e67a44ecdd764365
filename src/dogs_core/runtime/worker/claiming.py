"""Sending one claim of the pacer to the store: the requests, then ``claim`` or ``claim_many``;
and telling telemetry what came back (one :class:`ClaimSwept`, a :class:`JobClaimed` per job).
Also the pacer's :class:`ClaimSizing` from the worker settings (fixed or adaptive sizes)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from functools import partial
from random import Random

import anyio

from dogs_core.domain.capacity import CapacityLedger, caps_of
from dogs_core.domain.events import ClaimSwept, JobClaimed
from dogs_core.domain.pacing import Claim, ClaimPacer, ClaimSizing
from dogs_core.domain.partitions import PartitionRotation
from dogs_core.domain.records import ClaimedJob, ClaimRequest, Owner
from dogs_core.ids import new_execution_ids
from dogs_core.jobs import Jobs
from dogs_core.ports import AsyncJobStore, Clock
from dogs_core.runtime.plumbing.settings import WorkerSettings
from dogs_core.runtime.plumbing.telemetry import Telemetry

__all__ = ["claim_sizing", "pacer_for", "send_claim"]


def pacer_for(settings: WorkerSettings, jobs: Jobs, rng: Random) -> ClaimPacer:
    """The claim pacer of one ``Workers``: its capacity ledger (``workers_count``, the jobs'
    per-server caps), its partition rotation and its claim sizing."""
    return ClaimPacer(
        CapacityLedger(settings.workers_count, caps_of(jobs)),
        PartitionRotation(settings.n_partitions, rng),
        poll_interval=settings.poll_interval.total_seconds(),
        sizing=claim_sizing(settings),
    )


def claim_sizing(settings: WorkerSettings) -> ClaimSizing:
    """The batch size and claims in flight of ``settings``: a given value is fixed, one left
    out adapts up to the value the settings derived for it (its ceiling)."""
    adaptive = settings.adaptive_claims
    return ClaimSizing(
        settings.claim_batch_size,
        settings.claim_concurrency,
        adapt_batch="claim_batch_size" in adaptive,
        adapt_concurrency="claim_concurrency" in adaptive,
    )


async def send_claim(
    store: AsyncJobStore,
    claim: Claim,
    *,
    hint: str,
    clock: Clock,
    lock_time: timedelta,
    owner: Owner | None = None,
    telemetry: Telemetry | None = None,
) -> list[ClaimedJob]:
    """Claim up to ``len(claim.reservations)`` jobs, each locked for ``lock_time`` under a lock
    id of its own (the id of the execution that will run it); best first."""
    if telemetry is not None and telemetry.active:
        send = partial(_send, store, claim, hint, clock, lock_time, owner)
        return await _observed(telemetry, send, claim, hint, clock)
    return await _send(store, claim, hint, clock, lock_time, owner)


async def _send(
    store: AsyncJobStore,
    claim: Claim,
    hint: str,
    clock: Clock,
    lock_time: timedelta,
    owner: Owner | None,
) -> list[ClaimedJob]:
    now = clock.now()
    locked_until = now + lock_time
    names, partition = claim.names, claim.partition
    requests = [
        ClaimRequest(names, partition, hint, now, locked_until, lock_id, owner)
        for lock_id in new_execution_ids(len(claim.reservations))
    ]
    if claim.batch:
        return await store.claim_many(requests)
    job = await store.claim(requests[0])
    return [] if job is None else [job]


async def _observed(
    telemetry: Telemetry,
    send: Callable[[], Awaitable[list[ClaimedJob]]],
    claim: Claim,
    hint: str,
    clock: Clock,
) -> list[ClaimedJob]:
    started = anyio.current_time()
    swept = partial(ClaimSwept, claim.names, claim.partition, hint, len(claim.reservations))
    try:
        jobs = await send()
    except Exception as error:
        telemetry.emit(swept(0, anyio.current_time() - started, error))
        raise
    telemetry.emit(swept(len(jobs), anyio.current_time() - started))
    now = clock.now()
    for job in jobs:
        telemetry.emit(JobClaimed(job, pickup_lag=_lag(job.next_run_at, now)))
    return jobs


def _lag(due: datetime | None, now: datetime) -> float | None:
    return None if due is None else max((now - due).total_seconds(), 0.0)
