"""A custom store adapter: a metrics wrapper around any async store, checked by the contract.

    python examples/custom_adapter.py                    # wraps the in-memory store
    python examples/custom_adapter.py --uri mongodb://localhost:27017/?replicaSet=rs0

:class:`MetricsJobStore` implements :class:`~dogs_core.ports.AsyncJobStore` by delegating every
call to another store and timing it: call counts, latency, slow-call warnings. It builds on
:class:`dogs_testing.wrapper.JobStoreWrapper`, which forwards each port method through one
``around`` hook (and reports the roles of the store it wraps); a new backend implements the
roles of ``dogs_core.ports`` itself, one module per role (scheduling, claims, settle, history,
feeds, steering, stats, controls, leases, maintenance, and optionally archive). The workers and
the client take it like any store. A store of your own (a wrapper like this, or a new backend)
proves it meets the port by passing the adapter contract suite, through its one entry point
``StoreContract``. In your tests::

    # tests/test_metrics_store.py
    import pytest
    from dogs_core.domain.records import JobRecord
    from dogs_testing import InMemoryJobStore, StoreContract

    class TestMetricsJobStore(StoreContract):  # the name must start with "Test"
        @pytest.fixture
        def store(self) -> MetricsJobStore:
            return MetricsJobStore(InMemoryJobStore())

        @pytest.fixture
        def archive(self, store):  # the archive part's test hooks are the wrapped store's
            return store.inner

        async def seed_record(self, store, record: JobRecord) -> None:  # optional
            await store.inner.insert_record(record)

That is some 250 tests, one part per role of the port (``SettleContract``, ``ClaimContract``...,
and the optional roles' parts), each run when the store lists its roles (this one reports the
roles of the store it wraps: all of them) and skipped, naming the role, when not: a backend being
written sees how much of the port it has so far. Claims, fencing, uniqueness, retention, the
archive, workflows and more (``tests/test_examples.py`` runs exactly this).

In the application the store is wired through the container: ``DogsContainer(store=...)``, or,
as ``run`` does here on the container :func:`dogs_mongo.run_example` built, an override of its
``store`` provider; the container's clients and workers then use it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio

from dogs_core import JobContext, Jobs, ScheduleItem
from dogs_core.ports import AsyncJobStore
from dogs_mongo import Example, run_example
from dogs_testing import InMemoryJobStore
from dogs_testing.wrapper import JobStoreWrapper

T = TypeVar("T")
logger = logging.getLogger("myapp.store")


@dataclass
class CallStats:
    calls: int = 0
    errors: int = 0
    total_seconds: float = 0.0
    max_seconds: float = 0.0

    @property
    def mean_ms(self) -> float:
        return 1000 * self.total_seconds / self.calls if self.calls else 0.0


class MetricsJobStore(JobStoreWrapper):
    """An :class:`~dogs_core.ports.AsyncJobStore` that times every call of ``inner``.

    ``stats`` maps a method name to its :class:`CallStats`; calls slower than ``slow`` seconds
    are logged as warnings. Errors are counted and re-raised unchanged (a
    :class:`~dogs_core.errors.TransientStoreError` must stay one, the runtime retries it).
    """

    def __init__(self, inner: AsyncJobStore, *, slow: float = 0.5) -> None:
        super().__init__(inner)
        self.slow = slow
        self.stats: dict[str, CallStats] = {}

    async def around(self, name: str, call: Callable[[], Awaitable[T]]) -> T:
        stats = self.stats.setdefault(name, CallStats())
        started = time.perf_counter()
        try:
            return await call()
        except Exception:
            stats.errors += 1
            raise
        finally:
            elapsed = time.perf_counter() - started
            stats.calls += 1
            stats.total_seconds += elapsed
            stats.max_seconds = max(stats.max_seconds, elapsed)
            if elapsed > self.slow:
                logger.warning("slow store call %s: %.0f ms", name, elapsed * 1000)

    def report(self) -> str:
        lines = [f"{'store call':<24}{'calls':>7}{'errors':>8}{'mean ms':>9}{'max ms':>9}"]
        for name, stats in sorted(self.stats.items(), key=lambda item: -item[1].calls):
            lines.append(
                f"{name:<24}{stats.calls:>7}{stats.errors:>8}"
                f"{stats.mean_ms:>9.2f}{stats.max_seconds * 1000:>9.2f}"
            )
        return "\n".join(lines)


# -- a small workload through the wrapper ---------------------------------------------------------

jobs = Jobs()


@jobs.event
async def thumbnail(params: dict[str, Any], ctx: JobContext) -> str:
    await anyio.sleep(0.005)
    return f"thumb-{params['image']}.jpg"


async def run(example: Example, count: int = 20) -> MetricsJobStore:
    # The only lines that change in the application: the container's store, wrapped.
    store = MetricsJobStore(example.store)
    example.container.store.override(store)
    client = example.client(jobs)
    await client.schedule_many(thumbnail, [ScheduleItem({"image": i}) for i in range(count)])
    async with example.workers(jobs, workers_count=8, poll_interval=0.1) as workers:
        while await client.find_jobs(thumbnail, limit=1):  # noqa: ASYNC110 - poll the store
            await anyio.sleep(0.02)
        await workers.stop()
    done = len(await client.get_executions(thumbnail, limit=count))
    print(f"{done} thumbnails made through {type(store).__name__}")
    print(store.report())
    return store


def main(argv: Sequence[str] | None = None) -> None:
    run_example(
        run,
        argv,
        name="custom_adapter",
        memory=InMemoryJobStore,
        description="A metrics wrapper as a custom store",
    )


if __name__ == "__main__":
    main()
