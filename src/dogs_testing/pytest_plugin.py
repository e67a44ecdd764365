"""pytest plugin of Dogs for Python (registered through the ``pytest11`` entry point).

Fixtures (all function-scoped and cheap; none requires a database):

``dogs_memory_store``
    A fresh, empty :class:`~dogs_testing.memory.InMemoryJobStore` (no TTL emulation).
``dogs_virtual_clock``
    A new trio ``MockClock(autojump_threshold=0)`` (needs ``trio``). It does not change anyio's
    ``anyio_backend``; opt in per module or in a ``conftest.py``::

        @pytest.fixture
        def anyio_backend(dogs_virtual_clock):
            return ("trio", {"clock": dogs_virtual_clock})

    Under it time only passes when every task waits, and then jumps to the next deadline, so
    polling, lock expiry, retries and cron schedules take no real time. (Sync handlers run in
    threads: see :mod:`dogs_testing.harness` about thread work and autojump.)
``dogs_harness_factory``
    A :class:`~dogs_testing.harness.HarnessFactory`: ``dogs_harness_factory(jobs, **options)``
    returns a :class:`~dogs_testing.harness.JobsHarness`; every harness of one test shares one
    in-memory store and one loop clock, like worker instances sharing a database::

        async def test_two_instances(dogs_harness_factory) -> None:
            async with dogs_harness_factory(jobs) as a, dogs_harness_factory(jobs) as b:
                await a.schedule(send_welcome, {"user_id": 1})
                await a.run_until_idle()
                b.assert_ran(send_welcome, times=1)

A real MongoDB for integration tests (a mongod started for the session, or
``$DOGS_TEST_MONGODB_URI``) is in ``dogs_mongo.testing``; this plugin never imports the Mongo
adapter. Enable those fixtures in a ``conftest.py`` with::

    pytest_plugins = ["dogs_mongo.testing"]
"""

from __future__ import annotations

from typing import Any

import pytest

from dogs_testing.harness import HarnessFactory
from dogs_testing.memory import InMemoryJobStore


@pytest.fixture
def dogs_memory_store() -> InMemoryJobStore:
    """A fresh, empty in-memory job store."""
    return InMemoryJobStore()


@pytest.fixture
def dogs_virtual_clock() -> Any:
    """A trio ``MockClock(autojump_threshold=0)``; pass it to ``anyio_backend`` (see above)."""
    try:
        import trio.testing
    except ImportError as error:  # pragma: no cover - trio is a dev dependency here
        raise RuntimeError("the dogs_virtual_clock fixture needs trio: pip install trio") from error
    return trio.testing.MockClock(autojump_threshold=0)


@pytest.fixture
def dogs_harness_factory() -> HarnessFactory:
    """Builds :class:`~dogs_testing.harness.JobsHarness` instances over one shared in-memory
    store and loop clock (use each with ``async with``)."""
    return HarnessFactory()
