"""BlockingWorkers: the workers for a sync application, over the one async runtime.

Like APScheduler 4, it runs the async core in an anyio ``BlockingPortal`` (an event loop in a
background thread) instead of maintaining a second, threaded runtime. A sync store
(:class:`~dogs_core.ports.JobStore`) is adapted with
:class:`~dogs_core.runtime.plumbing.wrappers.ThreadedJobStore`; an async store is used as is,
inside the portal's loop.
"""

from __future__ import annotations

import contextlib
import random
from types import TracebackType
from typing import Any, Self

from dogs_core.errors import WorkersStateError
from dogs_core.jobs import Jobs
from dogs_core.ports import AsyncJobStore, Clock, JobStore
from dogs_core.runtime.plumbing.portal import PortalOwner, as_async_store
from dogs_core.runtime.plumbing.settings import DurationLike, WorkerSettings
from dogs_core.runtime.plumbing.telemetry import Telemetry
from dogs_core.runtime.worker.workers import Workers

__all__ = ["BlockingWorkers"]


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
        self._owner = PortalOwner(backend)
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
