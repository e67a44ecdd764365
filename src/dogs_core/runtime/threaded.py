"""Adapt a sync :class:`~dogs_core.ports.JobStore` to the async port the runtime consumes."""

from __future__ import annotations

from functools import partial
from typing import Any

import anyio
import anyio.to_thread

from dogs_core.ports import JobStore
from dogs_core.runtime.forwarding import ForwardingJobStore

__all__ = ["ThreadedJobStore"]


class ThreadedJobStore(ForwardingJobStore):
    """An :class:`~dogs_core.ports.AsyncJobStore` that runs each call of a sync store in a worker
    thread (``anyio.to_thread.run_sync``).

    ``limiter`` bounds how many calls run at once (anyio's default thread limiter when ``None``).
    A call that has started is not abandoned when its caller is cancelled: it completes and its
    result is returned, the cancellation being delivered at the caller's next checkpoint, so a
    claim made in a thread is never lost.
    """

    def __init__(self, sync_store: JobStore, limiter: anyio.CapacityLimiter | None = None) -> None:
        self._store = sync_store
        self._limiter = limiter

    @property
    def sync_store(self) -> JobStore:
        """The wrapped sync store."""
        return self._store

    async def _forward(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        call = partial(getattr(self._store, method), *args, **kwargs)
        return await anyio.to_thread.run_sync(call, limiter=self._limiter)
