"""An execution's way through its job's fleet limits: a concurrency slot and a rate token
taken before the handler starts, the slot renewed with every lock write and freed at the end.

:func:`~dogs_core.domain.controls.admission` says what a job needs; :class:`FleetGate` takes it
with the store's atomic writes. Refused, the job is given back as it was (its try not counted,
due when the limit should allow it) and its name is held back from this instance's claims
until then, so a full limit costs one refused claim per instance and window, not a busy loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import anyio

from dogs_core.domain.controls import Admission, RateLimit, admission
from dogs_core.domain.definitions import EventJobDefinition, JobDefinition, load_params
from dogs_core.domain.outcome import Defer
from dogs_core.domain.records import ClaimedJob, Hold, HoldReason
from dogs_core.domain.settle import Settlement
from dogs_core.runtime.execution.services import ExecutionServices
from dogs_core.runtime.plumbing._async.retry import retry_transient
from dogs_core.runtime.plumbing.lock import ProgressRider, RenewWrite, job_lock_write
from dogs_core.runtime.plumbing.outage import log_store_failure

__all__ = ["FleetGate", "SlotHold", "gate_for"]

logger = logging.getLogger("dogs.execution")

KeyFunction = Callable[[Any], object]


@dataclass(frozen=True, slots=True)
class SlotHold:
    """The concurrency slot an execution holds."""

    job_name: str
    key: str
    index: int
    holder: str


class FleetGate:
    """The fleet limits of one execution: :meth:`enter` before the handler, :meth:`renew` with
    every lock write, :meth:`leave` once the job's outcome is written (or it went stale)."""

    def __init__(
        self, services: ExecutionServices, job: ClaimedJob, definition: EventJobDefinition
    ) -> None:
        self._services = services
        self._job = job
        self._definition = definition
        self._hold: SlotHold | None = None

    @property
    def hold(self) -> SlotHold | None:
        return self._hold

    async def enter(self, lock_time: timedelta) -> bool:
        """Take what the job needs; ``False`` when refused (the job was given back)."""
        services, job = self._services, self._job
        now = services.clock.now()
        needs = self._needs(now)
        soon = now + _retry_after(self._services)
        try:
            if needs.slot_key is not None and not await self._take_slot(needs, now + lock_time):
                return await self._give_back(soon, HoldReason.CONCURRENCY)
            if needs.rate_key is not None and not await self._take_token(needs):
                await self.leave()
                assert needs.window_end is not None
                return await self._give_back(needs.window_end, HoldReason.RATE)
        except Exception as error:
            # The store kept failing (after the retries): the job waits as if refused, rather
            # than sit locked until its lock expires and come back as a stale attempt.
            logger.warning("fleet limit of %s (%s) unreachable, retrying: %r", *_ids(job), error)
            await self.leave()
            return await self._give_back(soon, HoldReason.UNREACHABLE)
        return True

    def _needs(self, now: datetime) -> Admission:
        job, definition = self._job, self._definition

        def needs(key: KeyFunction | None, rate_limit: RateLimit | None, params: Any) -> Admission:
            return admission(
                job_name=job.job_name,
                global_concurrency=definition.global_concurrency,
                concurrency_key=key,
                rate_limit=rate_limit,
                params=params,
                now=now,
            )

        try:
            params = load_params(definition, job.params)
            return needs(definition.concurrency_key, definition.rate_limit, params)
        except Exception:
            # Params that no longer load, or a key function that fails: the handler would fail
            # on them too; the whole name's limit applies instead of none.
            logger.exception("limit key of %s (%s) failed; using its name", *_ids(job))
            rate_limit = definition.rate_limit
            return needs(None, None if rate_limit is None else replace(rate_limit, key=None), None)

    async def renew(self, until: datetime) -> bool:
        """Move the slot's expiry with the job's lock; ``False`` when it was taken away."""
        hold = self._hold
        if hold is None:
            return True
        store = self._services.store
        return await store.renew_slot(
            hold.job_name, hold.key, hold.index, holder=hold.holder, until=until
        )

    def lock_write(self, rider: ProgressRider | None = None) -> RenewWrite:
        """The job's renewal write: its lock (carrying ``rider``'s progress), then its slot (a
        lost slot is a lost lock)."""
        job_write = job_lock_write(self._job, self._services.store, rider)

        async def write(until: datetime) -> bool:
            return await job_write(until) and await self.renew(until)

        return write

    async def leave(self) -> None:
        """Free the slot (a crashed worker's slot lapses with its lock instead)."""
        hold, self._hold = self._hold, None
        if hold is None:
            return
        store = self._services.store
        try:
            with anyio.CancelScope(shield=True), anyio.fail_after(10):
                await retry_transient(
                    lambda: store.release_slot(
                        hold.job_name, hold.key, hold.index, holder=hold.holder
                    ),
                    what=f"release slot of {hold.job_name}",
                )
        except Exception as error:
            log_store_failure(
                logger,
                f"could not free the slot of {hold.job_name}; it lapses with its lock",
                error,
            )

    async def _take_slot(self, needs: Admission, until: datetime) -> bool:
        job, store = self._job, self._services.store
        assert needs.slot_key is not None
        key = needs.slot_key
        index = await retry_transient(
            lambda: store.acquire_slot(
                job.job_name,
                key,
                limit=needs.slots,
                holder=job.lock_id,
                until=until,
                now=self._services.clock.now(),
            ),
            what=f"take a slot of {job.job_name}",
        )
        if index is not None:
            self._hold = SlotHold(job.job_name, key, index, job.lock_id)
        return index is not None

    async def _take_token(self, needs: Admission) -> bool:
        job, store = self._job, self._services.store
        assert needs.rate_key is not None
        assert needs.window_start is not None
        assert needs.window_end is not None
        start, end, key = needs.window_start, needs.window_end, needs.rate_key
        # Retried even after an ambiguous error: a token counted twice only delays a start.
        return await retry_transient(
            lambda: store.take_rate_token(
                job.job_name, key, limit=needs.rate, window_start=start, window_end=end
            ),
            what=f"take a rate token of {job.job_name}",
        )

    async def _give_back(self, retry_at: datetime, reason: HoldReason) -> bool:
        job, services = self._job, self._services
        logger.debug(
            "%s (%s) waits for its fleet limit (%s) until %s",
            job.job_name,
            job.job_id,
            reason.value,
            retry_at,
        )
        # Held since it was first refused: the due time it was claimed at, or the start of the
        # hold it was already under.
        since = job.held_since or job.next_run_at or services.clock.now()
        hold = Hold(reason, since=since, until=retry_at)
        command = Defer(retry_at, tries=max(job.tries - 1, 0), hold=hold)
        settlement = Settlement(job.job_id, job.lock_id, command)
        await services.settler.settle(settlement, what=f"give back a limited {job.job_name}")
        wait = (retry_at - services.clock.now()).total_seconds()
        services.host.hold_back(job.job_name, anyio.current_time() + max(wait, 0.0))
        return False


def gate_for(
    services: ExecutionServices, job: ClaimedJob, definition: JobDefinition
) -> FleetGate | None:
    """The gate of a job with fleet limits, ``None`` for every other job (no extra writes)."""
    if not isinstance(definition, EventJobDefinition):
        return None
    if definition.global_concurrency is None and definition.rate_limit is None:
        return None
    return FleetGate(services, job, definition)


def _retry_after(services: ExecutionServices) -> timedelta:
    """How long a job refused a concurrency slot waits: one poll interval (a slot freed here
    wakes this instance's lanes sooner)."""
    return services.settings.poll_interval


def _ids(job: ClaimedJob) -> tuple[str, str]:
    return job.job_name, job.job_id
