"""Jobs claimed ahead of the free worker slots, waiting for one (see
:mod:`dogs_core.domain.lookahead`, which decides how many slots are claimed ahead)."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable

from dogs_core.domain.capacity import CapacityLedger
from dogs_core.domain.lookahead import Lookahead
from dogs_core.domain.outcome import Defer
from dogs_core.domain.records import ClaimedJob
from dogs_core.domain.settle import Settlement
from dogs_core.ports import Clock
from dogs_core.runtime.execution import Settler
from dogs_core.runtime.plumbing.settings import WorkerSettings

__all__ = ["ClaimedAhead", "give_back"]

logger = logging.getLogger("dogs.workers")

Start = Callable[[ClaimedJob, float], None]
"""Starts the execution of a claimed job whose claim was requested at the given loop time."""


class ClaimedAhead:
    """Starts claimed jobs while fewer than ``workers_count`` run, queues the others until a
    slot frees, and keeps the ledger's slots claimed ahead at what the lookahead says."""

    __slots__ = ("_closed", "_ledger", "_lookahead", "_queue", "_running", "_start", "_workers")

    def __init__(
        self, workers_count: int, ledger: CapacityLedger, lookahead: Lookahead, start: Start
    ) -> None:
        self._workers = workers_count
        self._ledger = ledger
        self._lookahead = lookahead
        self._start = start
        self._queue: deque[tuple[ClaimedJob, float]] = deque()
        self._running = 0
        self._closed = False

    @classmethod
    def of(cls, settings: WorkerSettings, ledger: CapacityLedger, start: Start) -> ClaimedAhead:
        """The jobs claimed ahead of one ``Workers``: up to three batches' worth of slots
        beyond ``workers_count`` while the batch size is adaptive (none when it is fixed)."""
        adaptive = "claim_batch_size" in settings.adaptive_claims
        lookahead = Lookahead(3 * settings.claim_batch_size if adaptive else 0)
        return cls(settings.workers_count, ledger, lookahead, start)

    def __len__(self) -> int:
        """Jobs waiting for a slot."""
        return len(self._queue)

    @property
    def lookahead(self) -> Lookahead:
        return self._lookahead

    def offer(self, job: ClaimedJob, requested_at: float) -> None:
        """A claim brought ``job``: start it now if a worker slot is free, else queue it."""
        if self._running < self._workers:
            self._running += 1
            self._start(job, requested_at)
        else:
            self._queue.append((job, requested_at))

    def freed(self, seconds: float) -> None:
        """A started job freed its slot; its handler ran ``seconds``: start the next one."""
        self._running -= 1
        self._lookahead.job_took(seconds)
        self._follow_lookahead()
        if self._queue and not self._closed:
            self._running += 1
            self._start(*self._queue.popleft())

    def claim_took(self, seconds: float) -> None:
        """A claim came back ``seconds`` after it was sent."""
        self._lookahead.claim_took(seconds)
        self._follow_lookahead()

    def _follow_lookahead(self) -> None:
        extra = self._lookahead.extra_slots
        if extra != self._ledger.extra_slots and not self._closed:
            self._ledger.set_extra_slots(extra)

    def close(self) -> list[ClaimedJob]:
        """The workers stop without running what waits (their grace is over): no slot starts a
        queued job any more; the queued jobs are returned, to be given back."""
        self._closed = True
        self._ledger.set_extra_slots(0)
        queued = [job for job, _ in self._queue]
        self._queue.clear()
        return queued


async def give_back(settler: Settler, clock: Clock, jobs: list[ClaimedJob]) -> None:
    """Give back claimed jobs that never started: due now, their try not counted, unlocked
    (the fenced ``Defer`` a fleet limit gives a job back with); failures are logged (the lock
    then expires)."""
    for job in jobs:
        command = Defer(clock.now(), tries=max(job.tries - 1, 0))
        settlement = Settlement(job.job_id, job.lock_id, command)
        try:
            await settler.settle(settlement, what=f"give back {job.job_name}")
        except Exception as error:
            logger.error("could not give back %s (%s): %s", job.job_name, job.job_id, error)
    if jobs:
        logger.warning("stop: gave back %d job(s) claimed ahead that had not started", len(jobs))
