"""Adapt a sync :class:`~dogs_core.ports.JobStore` to the async port the runtime consumes."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Generator
from functools import partial
from typing import Any, Final

import anyio
import anyio.to_thread

from dogs_core.ports import JobStore
from dogs_core.runtime.plumbing.forwarding import ForwardingJobStore

__all__ = ["ThreadedJobStore"]

_END: Final = object()


class ThreadedJobStore(ForwardingJobStore):
    """An :class:`~dogs_core.ports.AsyncJobStore` that runs each call of a sync store in a worker
    thread (``anyio.to_thread.run_sync``).

    ``limiter`` bounds how many calls run at once (anyio's default thread limiter when ``None``).
    A call that has started is not abandoned when its caller is cancelled: it completes and its
    result is returned, the cancellation being delivered at the caller's next checkpoint, so a
    claim made in a thread is never lost.

    A change feed is the sync store's iterator advanced by one ``next()`` per batch, each in a
    worker thread under the same limiter; the sync feeds' heartbeats (``[]`` about every
    second) keep each ``next()`` short, so a cancelled consumer waits at most that long. When the
    async feed is closed (``aclose``, or a consumer leaving its loop), the sync iterator is
    closed in a thread too, shielded from cancellation.
    """

    def __init__(self, sync_store: JobStore, limiter: anyio.CapacityLimiter | None = None) -> None:
        self._store = sync_store
        self._limiter = limiter

    @property
    def sync_store(self) -> JobStore:
        """The wrapped sync store."""
        return self._store

    @property
    def _wrapped(self) -> object:
        return self._store

    async def _forward(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        call = partial(getattr(self._store, method), *args, **kwargs)
        return await anyio.to_thread.run_sync(call, limiter=self._limiter)

    async def _forward_feed(
        self, method: str, /, *args: Any, **kwargs: Any
    ) -> AsyncGenerator[Any, None]:
        opened = partial(getattr(self._store, method), *args, **kwargs)
        iterator: Generator[Any, None, None] = await anyio.to_thread.run_sync(
            opened, limiter=self._limiter
        )
        try:
            while True:
                batch = await anyio.to_thread.run_sync(next, iterator, _END, limiter=self._limiter)
                if batch is _END:
                    return
                yield batch
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(iterator.close, limiter=self._limiter)
