"""The blocking portal: an anyio event loop in a background thread, started lazily, closed
once, through which sync code drives the async runtime (APScheduler 4's way), and the sync face
of an async store seen through it. Shared by the blocking workers and the blocking client."""

from __future__ import annotations

import contextlib
import inspect
import threading
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from anyio.from_thread import BlockingPortal, start_blocking_portal

from dogs_core.errors import ChangeFeedUnavailableError
from dogs_core.ports import AsyncJobStore, JobStore, Role, store_roles
from dogs_core.runtime.plumbing.wrappers import ThreadedJobStore

__all__ = ["PortalJobStore", "PortalOwner", "as_async_store", "is_async_store"]


def as_async_store(store: AsyncJobStore | JobStore) -> AsyncJobStore:
    """Return ``store`` as an async store, running a sync store's calls in worker threads."""
    if is_async_store(store):
        return store  # type: ignore[return-value]
    if isinstance(store, JobStore):
        return ThreadedJobStore(store)
    raise TypeError(f"{store!r} implements neither AsyncJobStore nor JobStore")


def is_async_store(store: object) -> bool:
    return inspect.iscoroutinefunction(getattr(store, "claim", None))


class PortalOwner:
    """Owns one blocking portal (an event loop thread), started lazily, closed once."""

    def __init__(self, backend: str) -> None:
        self._backend = backend
        self._portal_cm: contextlib.AbstractContextManager[BlockingPortal] | None = None
        self._portal: BlockingPortal | None = None
        self._lock = threading.Lock()

    def portal(self) -> BlockingPortal:
        with self._lock:
            if self._portal is None:
                self._portal_cm = start_blocking_portal(self._backend)
                self._portal = self._portal_cm.__enter__()
            return self._portal

    def close(self) -> None:
        with self._lock:
            portal_cm, self._portal_cm, self._portal = self._portal_cm, None, None
        if portal_cm is not None:
            portal_cm.__exit__(None, None, None)


class PortalJobStore:
    """The sync face of an async store: each method call runs in the portal's event loop thread,
    and the caller's thread waits for its result."""

    def __init__(self, store: AsyncJobStore, owner: PortalOwner) -> None:
        self._store = store
        self._owner = owner

    @property
    def roles(self) -> frozenset[Role]:
        """The roles of the async store (:func:`~dogs_core.ports.store_roles`)."""
        return store_roles(self._store)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._store, name)
        if name.startswith("watch_") and callable(method):
            return no_feed  # an async feed does not cross the portal: the caller polls
        if not inspect.iscoroutinefunction(method):
            raise AttributeError(name)

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._owner.portal().call(partial(method, *args, **kwargs))

        return call


def no_feed(*args: Any, **kwargs: Any) -> Iterator[list[Any]]:
    """The feeds of an async store seen through the portal: unavailable (its first ``next()``
    says so), so a blocking client reads every poll interval instead."""
    raise ChangeFeedUnavailableError(
        "the change feeds of an async store are not available through a blocking client; "
        "it polls instead (pass a sync store, such as MongoJobStore, to watch)"
    )
    yield []
