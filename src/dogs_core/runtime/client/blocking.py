"""BlockingDogsClient: the scheduling client for sync code.

It needs no event loop over a sync store: it is the generated
:class:`~dogs_core.runtime.client._sync.client.SyncDogsClient`, which calls the store in the
caller's thread. Only an async store sends its calls through a portal
(:mod:`dogs_core.runtime.plumbing.portal`).
"""

from __future__ import annotations

import random
from types import TracebackType
from typing import Self, cast

from dogs_core.domain.clock_offset import DEFAULT_CLOCK_SYNC_INTERVAL
from dogs_core.jobs import Jobs
from dogs_core.ports import AsyncJobStore, Clock, JobStore
from dogs_core.runtime.client._sync.client import SyncDogsClient
from dogs_core.runtime.plumbing.outage import DEFAULT_OPERATION_TIMEOUT
from dogs_core.runtime.plumbing.portal import PortalJobStore, PortalOwner, is_async_store
from dogs_core.runtime.plumbing.settings import DurationLike
from dogs_core.runtime.plumbing.telemetry import Telemetry

__all__ = ["BlockingDogsClient"]


class BlockingDogsClient(SyncDogsClient):
    """The scheduling client for sync code (a Django view, a script, a CLI).

    Over a sync store (:class:`~dogs_core.ports.JobStore`, such as ``MongoJobStore``) it is the
    :class:`~dogs_core.runtime.client._sync.client.SyncDogsClient`: every call runs in the caller's
    thread
    (a ``schedule()`` is one store call), with no event loop and no other thread. An async
    store is adapted instead: each of its calls runs in a private event loop thread (an anyio
    ``BlockingPortal``, ``backend``), started on first use. :meth:`close` (or leaving the
    ``with`` block) stops that thread; the store itself is the caller's to close.
    """

    def __init__(
        self,
        store: AsyncJobStore | JobStore,
        jobs: Jobs | None = None,
        *,
        n_partitions: int = 1,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        backend: str = "asyncio",
        telemetry: Telemetry | None = None,
        operation_timeout: float | None = DEFAULT_OPERATION_TIMEOUT,
        clock_sync_interval: DurationLike | None = DEFAULT_CLOCK_SYNC_INTERVAL,
    ) -> None:
        self._owner = PortalOwner(backend)
        super().__init__(
            self._sync_face(store),
            jobs,
            n_partitions=n_partitions,
            clock=clock,
            rng=rng,
            telemetry=telemetry,
            operation_timeout=operation_timeout,
            clock_sync_interval=clock_sync_interval,
        )

    def _sync_face(self, store: AsyncJobStore | JobStore) -> JobStore:
        if is_async_store(store):
            return cast(JobStore, PortalJobStore(cast(AsyncJobStore, store), self._owner))
        if isinstance(store, JobStore):
            return store
        raise TypeError(f"{store!r} implements neither AsyncJobStore nor JobStore")

    def close(self) -> None:
        """Stop the event loop thread of an async store, if one was started."""
        self._owner.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
