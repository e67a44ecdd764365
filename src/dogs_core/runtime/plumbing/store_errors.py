"""A store that tells telemetry about the errors of its calls (:class:`StoreErrored`).

Wrapped around the store by ``Workers`` and ``DogsClient`` only when their hub has a subscriber
at construction, so an unobserved store is called directly, with no layer in between.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from typing import Any, cast

from dogs_core.domain.events import StoreErrored
from dogs_core.errors import TransientStoreError
from dogs_core.ports import AsyncJobStore, JobStore
from dogs_core.runtime.plumbing.forwarding import ForwardingJobStore
from dogs_core.runtime.plumbing.telemetry import Telemetry

__all__ = ["ObservedJobStore", "ObservedSyncJobStore", "observed", "observed_sync"]


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
