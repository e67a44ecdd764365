"""Fixtures shared by the whole test suite, and the environment the tests' subprocesses see."""

from __future__ import annotations

import os

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
