"""pytest fixtures giving tests a real MongoDB (see :mod:`dogs_mongo.mongod`).

Register them in a ``conftest.py`` with ``pytest_plugins = ["dogs_mongo.testing"]`` (or import
them by name):

``local_mongod`` (session)
    The :class:`~dogs_mongo.mongod.MongodProcess` started for the session, or ``None`` when
    ``$DOGS_TEST_MONGODB_URI`` is set.
``mongodb_uri`` (session)
    ``$DOGS_TEST_MONGODB_URI`` when set, otherwise the URI of a mongod 6.0.5 single-node replica
    set started for the session (:func:`~dogs_mongo.mongod.start_local_mongod`, with test
    commands such as the ``failCommand`` fail point enabled) and stopped at its end, also when
    the session fails. A mongod that cannot start is an **error** of every
    test that needs it, never a skip. Under pytest-xdist every worker is a session of its own,
    so each starts its own mongod (own port and data directory) and the tests that set fail
    points or read server-wide counters have their server to themselves. A server named by
    ``$DOGS_TEST_MONGODB_URI`` is shared by every worker: run such a suite on one process.
``mongo_database_name`` (function)
    A fresh database name per test; the database is dropped after the test.
``sync_mongo_client`` (session) and ``async_mongo_client`` (function)
    Clients of ``mongodb_uri`` (``tz_aware``). The async one is per test because an
    ``AsyncMongoClient`` belongs to one event loop; it needs anyio's ``anyio_backend`` fixture
    (``"asyncio"``: PyMongo's async API runs on asyncio only).

This is the only module of ``dogs_mongo`` allowed to import ``dogs_testing``.
"""

from __future__ import annotations

import os
import uuid
import warnings
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest
from pymongo import AsyncMongoClient, MongoClient

from dogs_mongo.mongod import (
    MongodError,
    MongodNotFoundError,
    MongodProcess,
    find_mongod_binary,
    start_local_mongod,
)

__all__ = [
    "ENV_TEST_URI",
    "MongodError",
    "MongodNotFoundError",
    "MongodProcess",
    "async_mongo_client",
    "find_mongod_binary",
    "local_mongod",
    "mongo_database_name",
    "mongodb_uri",
    "start_local_mongod",
    "sync_mongo_client",
]

ENV_TEST_URI = "DOGS_TEST_MONGODB_URI"


# ----------------------------------------------------------------------------------------------
# pytest fixtures
# ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def local_mongod() -> Iterator[MongodProcess | None]:
    """The mongod started for this session (stopped at its end, also on failure), or ``None``
    when ``$DOGS_TEST_MONGODB_URI`` names a server to use instead."""
    if os.environ.get(ENV_TEST_URI):
        yield None
        return
    # A start failure raises: an error of every test that needs the server, never a skip.
    instance = start_local_mongod(None, test_commands=True)
    try:
        yield instance
    finally:
        instance.stop()


@pytest.fixture(scope="session")
def mongodb_uri(local_mongod: MongodProcess | None) -> str:
    """``$DOGS_TEST_MONGODB_URI``, or the URI of the mongod started for this session."""
    if local_mongod is None:
        return os.environ[ENV_TEST_URI]
    return local_mongod.uri


@pytest.fixture(scope="session")
def sync_mongo_client(mongodb_uri: str) -> Iterator[MongoClient[dict[str, Any]]]:
    client: MongoClient[dict[str, Any]] = MongoClient(mongodb_uri, tz_aware=True)
    try:
        yield client
    finally:
        client.close()


class _DatabaseDropper:
    """Drops the databases of finished tests in background threads, so that the ~0.1 s a
    ``dropDatabase`` takes on a replica set overlaps with the next test. At the end of the
    session it waits for every drop, except on a throw-away mongod of the session's own, where
    drops not started yet are discarded with the server."""

    def __init__(self, client: MongoClient[dict[str, Any]], *, throw_away: bool) -> None:
        self._client = client
        self._throw_away = throw_away
        self._executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="dogs-drop-db")
        self._pending: list[Future[None]] = []

    def drop(self, name: str) -> None:
        self._pending.append(self._executor.submit(self._client.drop_database, name))

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=self._throw_away)
        for future in self._pending:
            error = None if future.cancelled() else future.exception()
            if error is not None:
                warnings.warn(f"a test database could not be dropped: {error}", stacklevel=1)
        self._pending.clear()


@pytest.fixture(scope="session")
def _dogs_database_dropper(
    sync_mongo_client: MongoClient[dict[str, Any]], local_mongod: MongodProcess | None
) -> Iterator[_DatabaseDropper]:
    dropper = _DatabaseDropper(sync_mongo_client, throw_away=local_mongod is not None)
    try:
        yield dropper
    finally:
        dropper.close()


@pytest.fixture
def mongo_database_name(_dogs_database_dropper: _DatabaseDropper) -> Iterator[str]:
    """A fresh database name for one test; the database is dropped after the test."""
    name = f"dogs_test_{uuid.uuid4().hex[:16]}"
    try:
        yield name
    finally:
        _dogs_database_dropper.drop(name)


@pytest.fixture
async def async_mongo_client(
    mongodb_uri: str, anyio_backend: object
) -> AsyncIterator[AsyncMongoClient[dict[str, Any]]]:
    """An ``AsyncMongoClient`` for one test (it belongs to that test's event loop)."""
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(mongodb_uri, tz_aware=True)
    try:
        yield client
    finally:
        await client.close()
