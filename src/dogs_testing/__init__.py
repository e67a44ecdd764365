"""The testing kit of Dogs for Python: test jobs and stores without a database.

:class:`InMemoryJobStore` (async) and :class:`SyncInMemoryJobStore`
    A store with the semantics of the MongoDB adapter, for tests and demos.
:class:`StoreContract` (and :class:`JobStoreContract`, its required roles only)
    The adapter contract suite, one entry point: subclass it in a test module to check a store,
    every part its roles call for (needs pytest; imported on first use so that the rest of the
    kit does not).
:func:`run_job_inline`, :func:`run_job_inline_sync`, :class:`FakeJobContext`
    Call one handler with a fake context; no store, no workers.
:class:`JobsHarness`
    The real workers and client over an in-memory store on a loop clock (virtual time).
:class:`ManualClock`
    A clock moved by hand.

A pytest plugin (``dogs_testing.pytest_plugin``, registered automatically) adds the fixtures
``dogs_memory_store``, ``dogs_virtual_clock`` and ``dogs_harness_factory``. Example::

    from dogs_testing import JobsHarness, run_job_inline

    @pytest.fixture
    def anyio_backend(dogs_virtual_clock):  # trio on a virtual clock
        return ("trio", {"clock": dogs_virtual_clock})

    @pytest.mark.anyio
    async def test_welcome() -> None:
        run = await run_job_inline(send_welcome, {"user_id": 42})
        assert run.ok
        async with JobsHarness(jobs) as harness:
            await harness.schedule(send_welcome, {"user_id": 42})
            await harness.run_until_idle()
            harness.assert_ran(send_welcome, times=1, status="success")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dogs_testing.harness import (
    DEFAULT_START,
    FakeJobContext,
    HarnessFactory,
    InlineRun,
    JobsHarness,
    LockExtension,
    ManualClock,
    run_job_inline,
    run_job_inline_sync,
)
from dogs_testing.memory import InMemoryJobStore, SyncInMemoryJobStore
from dogs_testing.wrapper import JobStoreWrapper

if TYPE_CHECKING:
    from dogs_testing.contract import JobStoreContract, StoreContract

__all__ = [
    "DEFAULT_START",
    "FakeJobContext",
    "HarnessFactory",
    "InMemoryJobStore",
    "InlineRun",
    "JobStoreContract",
    "JobStoreWrapper",
    "JobsHarness",
    "LockExtension",
    "ManualClock",
    "StoreContract",
    "SyncInMemoryJobStore",
    "run_job_inline",
    "run_job_inline_sync",
]


def __getattr__(name: str) -> Any:
    # The contract suite imports pytest: load it only when asked for.
    if name in ("JobStoreContract", "StoreContract"):
        from dogs_testing import contract

        return getattr(contract, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
