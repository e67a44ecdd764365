"""The store wrappers the runtime puts in place: ``ThreadedJobStore`` adapts a sync
:class:`~dogs_core.ports.JobStore` to the async port the runtime consumes (each call in a worker
thread), and ``ObservedJobStore`` (with its sync twin) tells telemetry about the errors of a
store's calls (:class:`~dogs_core.domain.events.StoreErrored`); ``Workers`` and ``DogsClient``
wrap the store in it only when their hub has a subscriber at construction, so an unobserved
store is called directly, with no layer in between. Both build on the generated
``ForwardingJobStore`` (``forwarding.py``).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Generator
from functools import partial
from typing import Any, Final, cast

import anyio
import anyio.to_thread

from dogs_core.domain.events import StoreErrored
from dogs_core.errors import TransientStoreError
from dogs_core.ports import AsyncJobStore, JobStore
from dogs_core.runtime.plumbing.forwarding import ForwardingJobStore
from dogs_core.runtime.plumbing.telemetry import Telemetry

__all__ = [
    "ObservedJobStore",
    "ObservedSyncJobStore",
    "ThreadedJobStore",
    "observed",
    "observed_sync",
]


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


class ObservedJobStore(ForwardingJobStore):
    """Forwards every call to ``inner``; a call that raises emits :class:`StoreErrored` (with
    the port method's name) before the error goes on to the caller, who retries it or not."""

    def __init__(self, inner: AsyncJobStore, telemetry: Telemetry) -> None:
        self.inner = inner
        self._telemetry = telemetry

    @property
    def _wrapped(self) -> object:
        return self.inner

    async def _forward(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        try:
            return await getattr(self.inner, method)(*args, **kwargs)
        except Exception as error:
            self._report(method, error)
            raise

    async def _forward_feed(
        self, method: str, /, *args: Any, **kwargs: Any
    ) -> AsyncGenerator[Any, None]:
        feed = getattr(self.inner, method)(*args, **kwargs)
        try:
            while True:
                try:
                    batch = await feed.__anext__()
                except StopAsyncIteration:
                    return
                except Exception as error:
                    self._report(method, error)
                    raise
                yield batch
        finally:
            await feed.aclose()

    def _report(self, method: str, error: Exception) -> None:
        telemetry = self._telemetry
        if telemetry.active:
            transient = isinstance(error, TransientStoreError)
            telemetry.emit(StoreErrored(operation=method, error=error, transient=transient))


def observed(store: AsyncJobStore, telemetry: Telemetry) -> AsyncJobStore:
    """``store``, wrapped in an :class:`ObservedJobStore` when ``telemetry`` has subscribers."""
    if not telemetry.active or isinstance(store, ObservedJobStore):
        return store
    return ObservedJobStore(store, telemetry)


class ObservedSyncJobStore:
    """The sync client's :class:`ObservedJobStore`: every method of the sync store ``inner``,
    emitting :class:`StoreErrored` when a call raises (a feed's errors while it is iterated
    are not seen)."""

    def __init__(self, inner: JobStore, telemetry: Telemetry) -> None:
        self.inner = inner
        self._telemetry = telemetry

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.inner, name)
        if not callable(attribute):
            return attribute
        telemetry = self._telemetry

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return cast(Callable[..., Any], attribute)(*args, **kwargs)
            except Exception as error:
                if telemetry.active:
                    transient = isinstance(error, TransientStoreError)
                    telemetry.emit(StoreErrored(operation=name, error=error, transient=transient))
                raise

        return call


def observed_sync(store: JobStore, telemetry: Telemetry) -> JobStore:
    """The sync twin of :func:`observed` (the generated sync client uses it)."""
    if not telemetry.active or isinstance(store, ObservedSyncJobStore):
        return store
    return cast(JobStore, ObservedSyncJobStore(store, telemetry))
