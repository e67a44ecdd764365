"""An execution's hold on its job's lock: the
:class:`~dogs_core.runtime.plumbing.lock.LockKeeper` that
renews it and watches its deadline, started before the handler, or only once an async handler
without timeout or heartbeat suspends (most finish in their first step and never need one); and
the progress its renewals carry (:class:`~dogs_core.runtime.execution.progress.ProgressRelay`, made
at the
handler's first report).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from dogs_core.domain.progress import Progress
from dogs_core.domain.records import ClaimedJob
from dogs_core.domain.renewal import RefusalReason, StaleReason
from dogs_core.runtime.execution.invocation import HandlerResult, Suspended, first_step
from dogs_core.runtime.execution.services import ExecutionServices
from dogs_core.runtime.plumbing.lock import LockKeeper, RenewWrite, Spawn

if TYPE_CHECKING:
    from dogs_core.runtime.execution.progress import ProgressRelay

__all__ = ["JobLock"]

logger = logging.getLogger("dogs.execution")


class JobLock:
    """The lock one execution holds: its keeper, started on demand.

    ``locked_at`` is the loop time at which the stored ``lockedUntil`` was computed (the claim
    request, then the write of the job's own lock time): the watchdog counts the lock from
    there, so store latency eats into the lock instead of letting the execution outlive it.
    """

    __slots__ = (
        "_job",
        "_keeper",
        "_lazy",
        "_on_stale",
        "_services",
        "_spawn",
        "lock_time",
        "locked_at",
        "progress",
        "write",
    )

    def __init__(
        self,
        services: ExecutionServices,
        job: ClaimedJob,
        *,
        locked_at: float,
        spawn: Spawn,
        on_stale: Callable[[StaleReason], None],
    ) -> None:
        self._services = services
        self._job = job
        self._spawn = spawn
        self._on_stale = on_stale
        self._keeper: LockKeeper | None = None
        self._lazy = False  # inside a stepwise handler's first step: a renewal starts it
        self.locked_at = locked_at
        self.lock_time = services.settings.default_lock_time
        """The job's lock time (set once the execution knows it: before the handler)."""
        self.write: RenewWrite | None = None
        """The renewal write (``None``: the job's plain ``extend_lock``; the gate's renews the
        job's concurrency slot too)."""
        self.progress: ProgressRelay | None = None
        """The handler's progress, once it reported some (its renewals carry it)."""

    @property
    def kept(self) -> bool:
        """Whether a keeper was started (the handler suspended, or needed one from the start)."""
        return self._keeper is not None

    def expired(self, now: float) -> bool:
        """Whether the lock has run out at loop time ``now``."""
        return now >= self.locked_at + self.lock_time.total_seconds()

    def start(self) -> bool:
        """Start the keeper before the handler; ``False`` (and the stale handling started)
        when the lock ran out before the handler could start."""
        keeper = self.ensure_started()
        if keeper.check_deadline():
            return True
        keeper.finish()
        return False

    def ensure_started(self) -> LockKeeper:
        """The keeper, started if it was not: its watchdog counts from :attr:`locked_at`."""
        keeper = self._keeper
        if keeper is None:
            services = self._services
            keeper = self._keeper = LockKeeper(
                job=self._job,
                store=services.store,
                clock=services.clock,
                lock_time=self.lock_time,
                locked_at=self.locked_at,
                deadlines=services.deadlines,
                spawn=self._spawn,
                on_stale=self._on_stale,
                write=self.write,
                rider=self,
            )
            keeper.start()
        return keeper

    def first_step(self, call: Callable[[], Any]) -> HandlerResult | Suspended:
        """A stepwise handler's first step: a renewal or a watchdog clear made in it starts
        the keeper."""
        self._lazy = True
        try:
            return first_step(call)
        finally:
            self._lazy = False

    def _current(self) -> LockKeeper | None:
        if self._keeper is None and self._lazy:
            return self.ensure_started()
        return self._keeper

    async def renew(self, seconds: float) -> bool:
        """``lockedUntil = now + seconds`` through the keeper; ``False`` when the handler is
        not running (logged) or the lock was lost."""
        keeper = self._current()
        if keeper is None:
            logger.warning("extend_lock_time called while the handler is not running; ignored")
            return False
        return await keeper.extend(seconds)

    def pulse(self) -> RefusalReason | None:
        """A renewal for the lock time without waiting for it (it carries the progress); why
        it was refused (``FINISHED`` too when the handler is not running)."""
        keeper = self._current()
        if keeper is None:
            return RefusalReason.FINISHED
        return keeper.pulse(self.lock_time.total_seconds())

    def spawn(self, func: Callable[[], Awaitable[None]]) -> None:
        """Start ``func()`` as a task of the execution (its end waits for it)."""
        self._spawn(func)

    def take_progress(self) -> Progress | None:
        """The progress a renewal write starting now carries (:class:`ProgressRider`)."""
        relay = self.progress
        return None if relay is None else relay.take()

    def progress_written(self) -> None:
        relay = self.progress
        if relay is not None:
            relay.written()

    def clear(self) -> None:
        """Clear the watchdog (a handler that knows it is alive)."""
        keeper = self._current()
        if keeper is not None:
            keeper.clear()

    def finish(self) -> bool:
        """The handler ended: no more renewals or watchdog. Whether a keeper had run."""
        if self.progress is not None:
            self.progress.end()
        keeper = self._keeper
        if keeper is None:
            return False
        keeper.finish()
        return True

    def lost(self) -> None:
        """A fenced write after the handler matched nothing: someone else owns the job now."""
        if self._keeper is not None:
            self._keeper.mark_stale()
        else:
            self._on_stale(StaleReason.EXTERNAL)

    def drop(self) -> None:
        """Forget the keeper, the progress and the execution's callbacks (it ended: break the
        reference cycles, so reference counting frees it)."""
        self._keeper = None
        if self.progress is not None:
            self.progress.end()
            self.progress = None
        self._spawn = _spawn_nothing
        self._on_stale = _stale_nothing


def _spawn_nothing(*_: Any) -> None:
    """An ended execution starts no task."""


def _stale_nothing(_: StaleReason) -> None:
    """An ended execution goes stale no more."""
