"""A thin blocking facade for sync applications, over the one async runtime.

:class:`BlockingWorkers`, like APScheduler 4, runs the async core in an anyio ``BlockingPortal``
(an event loop in a background thread) instead of maintaining a second, threaded runtime. A
sync store (:class:`~dogs_core.ports.JobStore`) is adapted with
:class:`~dogs_core.runtime.threaded.ThreadedJobStore`; an async store is used as is, inside the
portal's loop.

:class:`BlockingDogsClient` needs no event loop over a sync store: it is the generated
:class:`~dogs_core.runtime._sync.client.SyncDogsClient`, which calls the store in the caller's
thread. Only an async store sends its calls through a portal.
"""

from __future__ import annotations

import contextlib
import inspect
import random
import threading
from collections.abc import Callable, Iterator
from functools import partial
from types import TracebackType
from typing import Any, Self, cast

from anyio.from_thread import BlockingPortal, start_blocking_portal

from dogs_core.domain.clock_offset import DEFAULT_CLOCK_SYNC_INTERVAL
from dogs_core.errors import ChangeFeedUnavailableError, WorkersStateError
from dogs_core.jobs import Jobs
from dogs_core.ports import AsyncJobStore, Clock, JobStore, Role, store_roles
from dogs_core.runtime._sync.client import SyncDogsClient
from dogs_core.runtime.outage import DEFAULT_OPERATION_TIMEOUT
from dogs_core.runtime.settings import DurationLike, WorkerSettings
from dogs_core.runtime.telemetry import Telemetry
from dogs_core.runtime.threaded import ThreadedJobStore
from dogs_core.runtime.workers import Workers

__all__ = ["BlockingDogsClient", "BlockingWorkers", "as_async_store"]


def as_async_store(store: AsyncJobStore | JobStore) -> AsyncJobStore:
    """Return ``store`` as an async store, running a sync store's calls in worker threads."""
    if _is_async_store(store):
        return store  # type: ignore[return-value]
    if isinstance(store, JobStore):
        return ThreadedJobStore(store)
    raise TypeError(f"{store!r} implements neither AsyncJobStore nor JobStore")


def _is_async_store(store: object) -> bool:
    return inspect.iscoroutinefunction(getattr(store, "claim", None))


class _PortalOwner:
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


class BlockingWorkers:
    """Workers for a sync application: ``start()`` returns at once, ``stop()`` drains.

    ::

        workers = BlockingWorkers(MongoJobStore(client, "app"), jobs, workers_count=8)
        workers.start()
        ...
        workers.stop(grace=30)

    or ``with BlockingWorkers(...) as workers: workers.wait()``.
    """

    def __init__(
        self,
        store: AsyncJobStore | JobStore,
        jobs: Jobs,
        settings: WorkerSettings | None = None,
        *,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        backend: str = "asyncio",
        telemetry: Telemetry | None = None,
        **options: Any,
    ) -> None:
        # Validate in the caller's thread so bad options fail here, before any thread starts.
        self.settings = settings if settings is not None else WorkerSettings(**options)
        self._telemetry = telemetry
        self._store = as_async_store(store)
        self._jobs = jobs
        self._clock = clock
        self._rng = rng
        self._owner = _PortalOwner(backend)
        self._workers: Workers | None = None
        self._context: contextlib.AbstractContextManager[Workers] | None = None

    @property
    def workers(self) -> Workers:
        if self._workers is None:
            raise WorkersStateError("the workers are not started; call start() first")
        return self._workers

    @property
    def running(self) -> bool:
        return self._workers is not None and self._workers.running

    @property
    def running_executions(self) -> int:
        return 0 if self._workers is None else self._workers.running_executions

    def start(self) -> None:
        if self._workers is not None:
            raise WorkersStateError("these workers were already started")
        portal = self._owner.portal()

        def build() -> Workers:
            return Workers(
                self._store,
                self._jobs,
                self.settings,
                clock=self._clock,
                rng=self._rng,
                telemetry=self._telemetry,
            )

        workers = portal.call(build)
        context = portal.wrap_async_context_manager(workers)
        try:
            context.__enter__()
        except BaseException:
            self._owner.close()
            raise
        self._workers = workers
        self._context = context

    def wait(self) -> None:
        """Block until the workers stop (another thread called :meth:`stop`)."""
        self._owner.portal().call(self.workers.serve)

    def stop(self, grace: DurationLike | None = None) -> None:
        """Stop claiming, let running jobs finish within ``grace``, then cancel and release."""
        workers, context = self._workers, self._context
        if workers is None or context is None:
            return
        try:
            self._owner.portal().call(workers.stop, grace)
            context.__exit__(None, None, None)
        finally:
            self._context = None
            self._owner.close()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop(grace=0 if exc_type is not None else None)


class BlockingDogsClient(SyncDogsClient):
    """The scheduling client for sync code (a Django view, a script, a CLI).

    Over a sync store (:class:`~dogs_core.ports.JobStore`, such as ``MongoJobStore``) it is the
    :class:`~dogs_core.runtime._sync.client.SyncDogsClient`: every call runs in the caller's thread
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
        self._owner = _PortalOwner(backend)
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
        if _is_async_store(store):
            return cast(JobStore, _PortalJobStore(cast(AsyncJobStore, store), self._owner))
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


class _PortalJobStore:
    """The sync face of an async store: each method call runs in the portal's event loop thread,
    and the caller's thread waits for its result."""

    def __init__(self, store: AsyncJobStore, owner: _PortalOwner) -> None:
        self._store = store
        self._owner = owner

    @property
    def roles(self) -> frozenset[Role]:
        """The roles of the async store (:func:`~dogs_core.ports.store_roles`)."""
        return store_roles(self._store)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._store, name)
        if name.startswith("watch_") and callable(method):
            return _no_feed  # an async feed does not cross the portal: the caller polls
        if not inspect.iscoroutinefunction(method):
            raise AttributeError(name)

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._owner.portal().call(partial(method, *args, **kwargs))

        return call


def _no_feed(*args: Any, **kwargs: Any) -> Iterator[list[Any]]:
    """The feeds of an async store seen through the portal: unavailable (its first ``next()``
    says so), so a blocking client reads every poll interval instead."""
    raise ChangeFeedUnavailableError(
        "the change feeds of an async store are not available through a blocking client; "
        "it polls instead (pass a sync store, such as MongoJobStore, to watch)"
    )
    yield []
