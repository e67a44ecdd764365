"""Which job names one ``Workers`` instance leaves out of its claims, fleet-wide decisions seen
locally: names paused in the store and names held back for a while after a fleet limit refused
one of their jobs (:mod:`dogs_core.runtime.execution.gates`).

Pauses are read again every poll interval, and at once when the store's pause feed
(``watch_pauses``: MongoDB change streams) reports a change, where it has one."""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable, Sequence

import anyio

from dogs_core.domain.capacity import CapacityLedger
from dogs_core.domain.controls import EVERY_JOB
from dogs_core.errors import ChangeFeedUnavailableError
from dogs_core.ports import AsyncJobStore
from dogs_core.runtime.plumbing.loop import Signal
from dogs_core.runtime.plumbing.watching import without_heartbeats

__all__ = ["FleetHolds"]

logger = logging.getLogger("dogs.workers")

_FIRST_REOPEN_DELAY = 0.5
_MAX_REOPEN_DELAY = 30.0


class FleetHolds:
    """Keeps the ledger's blocked names: paused ones, and held-back ones until their time."""

    def __init__(
        self,
        store: AsyncJobStore,
        ledger: CapacityLedger,
        names: Sequence[str],
        *,
        refresh_interval: float,
        on_reopen: Callable[[], None],
        watch: bool = False,
    ) -> None:
        self._store = store
        self._ledger = ledger
        self._names = tuple(names)
        self._refresh_interval = refresh_interval
        self._on_reopen = on_reopen
        self._watch = watch
        self._paused: frozenset[str] = frozenset()
        self._held_until: dict[str, float] = {}
        self._changed = Signal()
        self._quiet = False

    @property
    def paused(self) -> frozenset[str]:
        """The names of this instance that are paused (as last read)."""
        return self._paused

    @property
    def quiet(self) -> bool:
        """Every name is left out of claims for good (:meth:`go_quiet`)."""
        return self._quiet

    def go_quiet(self) -> bool:
        """Leave every name out of claims from now on (a worker told to quiet: what runs
        finishes). Returns whether it was not quiet yet."""
        if self._quiet:
            return False
        self._quiet = True
        self._apply()
        return True

    def hold_back(self, name: str, until: float) -> None:
        """Leave ``name`` out of claims until loop time ``until``."""
        self._held_until[name] = max(until, self._held_until.get(name, -math.inf))
        self._apply()
        self._changed.notify()

    def slot_freed(self, name: str) -> None:
        """An execution of ``name`` here gave its concurrency slot back: try it again now."""
        if self._held_until.pop(name, None) is not None:
            self._apply()

    async def refresh(self) -> None:
        """Read the paused names once."""
        paused = await self._store.paused_names()
        self._paused = (
            frozenset(self._names) if EVERY_JOB in paused else frozenset(paused) & set(self._names)
        )
        self._apply()

    async def run(self) -> None:
        """Refresh the pauses every interval (and when the feed reports a change) and end holds
        on time, until cancelled."""
        async with anyio.create_task_group() as group:
            if self._watch:
                group.start_soon(self._follow_feed)
            await self._keep_time()

    async def _follow_feed(self) -> None:
        delay = _FIRST_REOPEN_DELAY
        while True:
            feed = self._store.watch_pauses()
            try:
                async with contextlib.aclosing(feed):
                    # No deadline is checked between batches (_keep_time has its own timer).
                    with without_heartbeats():
                        async for batch in feed:
                            delay = _FIRST_REOPEN_DELAY
                            if batch:
                                await self.refresh()
            except ChangeFeedUnavailableError:
                return  # no feed here: the poll interval it is
            except Exception as error:
                logger.warning("pause feed failed, reopening in %.1fs: %r", delay, error)
            await anyio.sleep(delay)
            delay = min(delay * 2, _MAX_REOPEN_DELAY)

    async def _keep_time(self) -> None:
        next_refresh = anyio.current_time()
        while True:
            now = anyio.current_time()
            if now >= next_refresh:
                next_refresh = now + self._refresh_interval
                try:
                    await self.refresh()
                except Exception as error:
                    logger.warning("could not read the paused job names: %r", error)
            expired = [name for name, until in self._held_until.items() if until <= now]
            for name in expired:
                del self._held_until[name]
            if expired:
                self._apply()
            wake_at = min([next_refresh, *self._held_until.values()])
            await self._changed.wait(max(wake_at - anyio.current_time(), 0.0))

    def _apply(self) -> None:
        if self._quiet:
            self._ledger.set_blocked(self._names)
            return
        if self._ledger.set_blocked(self._paused | self._held_until.keys()):
            self._on_reopen()
