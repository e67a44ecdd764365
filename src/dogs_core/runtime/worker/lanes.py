"""The claim lanes of one ``Workers`` instance: :class:`ClaimLanes`. Each lane performs the
steps of the instance's :class:`~dogs_core.domain.pacing.ClaimPacer` (claim, sleep until
woken, wait for capacity) and hands every job a claim found to the claimed-ahead queue
(:mod:`dogs_core.runtime.worker.ahead`), which starts its execution now or once a slot frees.
"""

from __future__ import annotations

import logging
from datetime import timedelta

import anyio

from dogs_core.domain.hints import HintSelector, claim_hint
from dogs_core.domain.pacing import Claim, ClaimPacer, Sleep
from dogs_core.domain.records import Owner
from dogs_core.ports import AsyncJobStore, Clock
from dogs_core.runtime.plumbing.loop import Signal
from dogs_core.runtime.plumbing.outage import log_store_failure
from dogs_core.runtime.plumbing.telemetry import Telemetry
from dogs_core.runtime.worker.ahead import ClaimedAhead
from dogs_core.runtime.worker.claiming import send_claim
from dogs_core.runtime.worker.host import WorkersHost

__all__ = ["ClaimLanes"]

logger = logging.getLogger("dogs.workers")


class ClaimLanes:
    """What every lane of one instance shares: the pacer, the hints, the claimed-ahead queue,
    the signals that wake lanes (``wake``: work may be due; ``capacity``: a slot or a claim
    came back; the instance notifies them too) and the instance's ``stopping`` event."""

    def __init__(
        self,
        store: AsyncJobStore,
        *,
        pacer: ClaimPacer,
        hints: HintSelector,
        ahead: ClaimedAhead,
        host: WorkersHost,
        clock: Clock,
        owner: Owner,
        telemetry: Telemetry,
        lock_time: timedelta,
        stopping: anyio.Event,
    ) -> None:
        self.store = store
        self.pacer, self.hints, self.ahead, self.host = pacer, hints, ahead, host
        self.clock, self.owner, self.telemetry, self.lock_time = clock, owner, telemetry, lock_time
        self.wake, self.capacity, self.stopping = Signal(), Signal(), stopping
        self.claims_succeeded = 0
        """Jobs claimed so far (each starts one execution)."""

    async def run_lane(self) -> None:
        """One lane, until the instance stops."""
        pacer = self.pacer
        while not self.stopping.is_set():
            step = pacer.next(anyio.current_time())
            if isinstance(step, Claim):
                await self.claim(step)
            elif isinstance(step, Sleep):
                await self.wake.wait(step.until - anyio.current_time())
            else:
                await self.capacity.wait()

    async def claim(self, claim: Claim) -> None:
        """Perform one claim of the pacer and hand on every job it found."""
        hint = str(claim_hint(self.hints.current, claim.names_filtered))
        requested_at = anyio.current_time()  # the lock runs from here, not from the reply
        try:
            jobs = await send_claim(
                self.store,
                claim,
                hint=hint,
                clock=self.clock,
                lock_time=self.lock_time,
                owner=self.owner,
                telemetry=self.telemetry,
            )
        except Exception as error:
            self.pacer.failed(claim, anyio.current_time())
            self.capacity.notify()
            return log_store_failure(logger, "claim failed; retrying at the poll interval", error)
        except BaseException:
            self.pacer.failed(claim, anyio.current_time())
            raise
        replied_at = self.host.loop_time()
        self.pacer.claimed(claim, [job.job_name for job in jobs], replied_at)
        self.ahead.claim_took(replied_at - requested_at)
        self.capacity.notify()
        if jobs:
            self.wake.notify()  # lanes put to sleep by misses meanwhile: there is work
        self.claims_succeeded += len(jobs)
        for job in jobs:
            self.ahead.offer(job, requested_at)  # started now, or once a slot frees
