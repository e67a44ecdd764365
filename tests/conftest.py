"""Fixtures shared by the whole test suite, and the environment the tests' subprocesses see."""

from __future__ import annotations

import os
import signal
from typing import Final

import pytest

# The real-mongod fixtures: mongodb_uri (session; DOGS_TEST_MONGODB_URI or a mongod started for
# the session, one per pytest-xdist worker), mongo_database_name, sync_mongo_client and
# async_mongo_client.
pytest_plugins = ["dogs_mongo.testing"]

# pytest imports readline (capture's _readline_workaround), and GNU readline exports COLUMNS and
# LINES (80x24 without a terminal) into the C environment, where os.environ does not see them but
# every subprocess inherits them: an xdist worker would then print `dogs` tables cut at 80
# columns. Take them out again unless the caller set them.
for _name in ("COLUMNS", "LINES"):
    if _name not in os.environ:
        os.unsetenv(_name)

# A shell without job control starts background commands with SIGINT ignored, and an ignored
# signal stays ignored across exec: the CLIs the tests start and stop with SIGINT would never
# see it. Python then installs no KeyboardInterrupt handler either; put it back.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

#: Set by ``coverage run`` with ``patch = ["subprocess"]`` (pyproject.toml) so that the xdist
#: workers measure themselves from their first line.
_COVERAGE_SUBPROCESS_ENV = "COVERAGE_PROCESS_CONFIG"


def pytest_configure(config: pytest.Config) -> None:
    """Only the xdist workers need coverage in their subprocesses: in a process that runs tests
    the variable is dropped, so the scripts, CLIs and crash workers the tests start are not
    traced (that made a virtual-time example four times slower) and stay as they were before
    the suite ran on workers."""
    is_worker = "PYTEST_XDIST_WORKER" in os.environ
    starts_workers = bool(config.getoption("numprocesses", default=None))
    if is_worker or not starts_workers:
        os.environ.pop(_COVERAGE_SUBPROCESS_ENV, None)


#: The tests that took 8 s or more under coverage on a 2-core machine. On xdist workers they
#: run first (with the ``slow`` ones), so that none starts last and keeps one worker busy alone
#: at the end while the other steals the short tests. Only the order changes: an entry that goes
#: stale costs some balance, never a result.
_LONG_TESTS: Final = frozenset(
    {
        "tests/reliability/test_crash_history.py::test_random_kills_of_two_workers_lose_no_job_and_no_row",
        "tests/reliability/test_chaos.py::test_chaos",
        "tests/runtime/test_controls_stateful.py::TestControlsMachine::runTest",
        "tests/domain/test_renewal.py::TestRenewalInterleavings::runTest",
        "tests/domain/test_pacing.py::TestPacerMachine::runTest",
    }
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker, the long tests first (every worker sorts its collection alike)."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return

    def later(item: pytest.Item) -> bool:
        return not (item.nodeid in _LONG_TESTS or item.get_closest_marker("slow") is not None)

    items.sort(key=later)  # stable: the rest keeps its order
