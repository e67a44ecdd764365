"""Leases: a distributed lock for application code, kept in the job store.

``async with client.lock("nightly-cleanup", ttl="30s") as lease:`` takes the lease (one atomic
store write: nobody holds it, or the holder's time ran out), renews it every third of ``ttl``
through the same single-flight :class:`~dogs_core.domain.renewal.RenewalMachine` that keeps job
locks (performed by a :class:`~dogs_core.runtime.plumbing.lock.LockKeeper`), and gives it back on
exit.
``lease.token`` is a fencing token that grows with every acquisition of the name: pass it to the
systems you write to, so a holder that lost its lease (a long pause, a partition) is refused
there. ``lease.lost`` turns true once a renewal failed or the lease ran out locally: stop
working under it then (:meth:`LeaseHandle.raise_if_lost`).

``wait=None`` tries once and raises :class:`~dogs_core.errors.LockHeldError` when the lease is
held; ``wait=<duration>`` keeps trying for that long. The blocking clients offer the same with a
plain ``with``: the renewal then runs in a private event-loop thread.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from datetime import datetime, timedelta
from typing import Any

import anyio
import anyio.from_thread

from dogs_core.domain import validation
from dogs_core.domain.controls import MAX_KEY_LENGTH
from dogs_core.domain.renewal import StaleReason
from dogs_core.errors import DogsError, InvalidOptionError, LockHeldError, TransientStoreError
from dogs_core.ids import new_execution_id
from dogs_core.ports import AsyncJobStore, Clock, JobStore
from dogs_core.runtime.plumbing.clock import ServerClock
from dogs_core.runtime.plumbing.deadlines import Deadlines
from dogs_core.runtime.plumbing.lock import LockKeeper
from dogs_core.runtime.plumbing.settings import DurationLike
from dogs_core.runtime.plumbing.wrappers import ThreadedJobStore

__all__ = ["AsyncLeases", "LeaseHandle", "SyncLeases", "hold_lease"]

_MIN_TTL = timedelta(seconds=1)
_ATTEMPTS = 5

logger = logging.getLogger("dogs.client")


class LeaseHandle:
    """A held lease: its ``name``, ``owner``, fencing ``token``, ``expires_at`` (as last
    renewed) and ``lost``."""

    def __init__(self, name: str, owner: str, token: int, expires_at: datetime) -> None:
        self.name = name
        self.owner = owner
        self.token = token
        self.expires_at = expires_at
        self.lost = False
        self.lost_reason: StaleReason | None = None

    def raise_if_lost(self) -> None:
        """Raise :class:`~dogs_core.errors.DogsError` once the lease is lost."""
        if self.lost:
            raise DogsError(
                f"lease {self.name!r} (token {self.token}) was lost: {self.lost_reason}"
            )

    def __repr__(self) -> str:
        state = "lost" if self.lost else f"until {self.expires_at.isoformat()}"
        return f"LeaseHandle({self.name!r}, token={self.token}, {state})"


def _check(name: object, ttl: object, wait: object) -> tuple[str, timedelta, float | None]:
    text = validation.text("name", name)
    if len(text) > MAX_KEY_LENGTH:
        raise InvalidOptionError("name", name, f"must be at most {MAX_KEY_LENGTH} characters")
    lease_time = validation.positive_duration("ttl", ttl)
    if lease_time < _MIN_TTL:
        raise InvalidOptionError("ttl", ttl, "must be at least 1 second")
    seconds = None if wait is None else validation.duration("wait", wait).total_seconds()
    return text, lease_time, seconds


async def _acquire(
    store: AsyncJobStore, clock: Clock, name: str, ttl: timedelta, wait: float | None
) -> LeaseHandle:
    owner = f"{socket.gethostname()}:{os.getpid()}:{new_execution_id()}"
    give_up = None if wait is None else anyio.current_time() + wait
    errors = 0
    pause = min(0.5, ttl.total_seconds() / 10)
    while True:
        now = clock.now()
        until = now + ttl
        try:
            token = await store.acquire_lease(name, owner=owner, until=until, now=now)
        except TransientStoreError as error:
            # Not the retry helper (it lives beside the generated clients, which import this
            # module): the same bounded, logged retry, within ``wait`` or five attempts.
            errors += 1
            if errors >= _ATTEMPTS and (give_up is None or anyio.current_time() >= give_up):
                raise
            logger.warning("lease %s hit a transient store error, retrying: %s", name, error)
            await anyio.sleep(pause)
            continue
        if token is not None:
            return LeaseHandle(name, owner, token, until)
        if give_up is None or anyio.current_time() >= give_up:
            held = await store.get_lease(name)
            raise LockHeldError(name, held)
        await anyio.sleep(min(pause, max(give_up - anyio.current_time(), 0.0)))


@contextlib.asynccontextmanager
async def hold_lease(
    store: AsyncJobStore, clock: Clock, name: object, *, ttl: object, wait: object
) -> AsyncIterator[LeaseHandle]:
    """Hold the lease ``name`` for the body of the ``async with``, renewed automatically."""
    async with _hold(store, clock, *_check(name, ttl, wait)) as lease:
        yield lease


@contextlib.asynccontextmanager
async def _hold(
    store: AsyncJobStore,
    clock: Clock,
    text: str,
    lease_time: timedelta,
    wait_s: float | None,
    prepare: Callable[[], Awaitable[object]] | None = None,
) -> AsyncIterator[LeaseHandle]:
    """:func:`hold_lease` of arguments already checked (by :func:`_check`); ``prepare`` is
    awaited first (the client's clock measurement, when due)."""
    if prepare is not None:
        await prepare()
    lease = await _acquire(store, clock, text, lease_time, wait_s)

    def lose(reason: StaleReason) -> None:
        lease.lost, lease.lost_reason = True, reason

    async def renew(until: datetime) -> bool:
        renewed = await store.renew_lease(
            text, owner=lease.owner, token=lease.token, until=until, now=clock.now()
        )
        if renewed:
            lease.expires_at = until
        return renewed

    async with anyio.create_task_group() as group:

        def spawn(func: Callable[..., Coroutine[Any, Any, None]], *args: object) -> None:
            group.start_soon(func, *args)

        deadlines = Deadlines()
        group.start_soon(deadlines.run)
        keeper = LockKeeper(
            clock=clock,
            lock_time=lease_time,
            deadlines=deadlines,
            spawn=spawn,
            on_stale=lose,
            write=renew,
            label=f"lease {text!r}",
        )
        keeper.start()
        group.start_soon(_beat, keeper, lease_time.total_seconds())
        try:
            yield lease
        finally:
            keeper.finish()
            group.cancel_scope.cancel()
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await store.release_lease(text, owner=lease.owner, token=lease.token)


async def _beat(keeper: LockKeeper, seconds: float) -> None:
    while True:
        await anyio.sleep(seconds / 3)
        try:
            if not await keeper.extend(seconds):
                return
        except Exception:
            return  # the keeper reported the lease lost


class AsyncLeases:
    """The async client's ``lock``."""

    store: AsyncJobStore
    clock: ServerClock

    async def _ensure_clock(self) -> bool:
        """Measure the clock when due (the client implements it)."""
        raise NotImplementedError

    def lock(
        self, name: str, *, ttl: DurationLike = 30, wait: DurationLike | None = None
    ) -> contextlib.AbstractAsyncContextManager[LeaseHandle]:
        """``async with client.lock(name, ttl="30s", wait=None) as lease:`` (see the module
        documentation): raises :class:`~dogs_core.errors.LockHeldError` when the lease is held
        (after ``wait``), and ``InvalidOptionError`` for a bad name, ttl or wait."""
        return _hold(self.store, self.clock, *_check(name, ttl, wait), self._ensure_clock)


class SyncLeases:
    """The blocking clients' ``lock``: the renewal runs in a private event-loop thread."""

    store: JobStore
    clock: ServerClock

    def _ensure_clock(self) -> bool:
        """Measure the clock when due (the client implements it)."""
        raise NotImplementedError

    @contextlib.contextmanager
    def lock(
        self, name: str, *, ttl: DurationLike = 30, wait: DurationLike | None = None
    ) -> Iterator[LeaseHandle]:
        """``with client.lock(name, ttl="30s", wait=None) as lease:``, as the async client's."""
        checked = _check(name, ttl, wait)  # before a thread is started for nothing
        self._ensure_clock()  # lease times are on the store's clock
        store = ThreadedJobStore(self.store)
        with anyio.from_thread.start_blocking_portal() as portal:
            held = _hold(store, self.clock, *checked)
            with portal.wrap_async_context_manager(held) as lease:
                yield lease
