"""Fixtures of the MongoDB adapter tests: stores on a fresh database per test (for the contract
tests, an emptied set-up one: :class:`DatabasePool`), and the server of the MongoDB 8 dialect
that tests/mongo/test_mongodb8.py runs on."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest
from pymongo import AsyncMongoClient, MongoClient
from pymongo.errors import PyMongoError

from dogs_mongo import AsyncMongoJobStore, MongoJobStore
from dogs_mongo.mongod import MongodProcess


@pytest.fixture
def anyio_backend() -> str:
    """PyMongo's async client runs on asyncio only."""
    return "asyncio"


@pytest.fixture
async def async_store(
    async_mongo_client: AsyncMongoClient[dict[str, Any]], mongo_database_name: str
) -> AsyncIterator[AsyncMongoJobStore]:
    store = AsyncMongoJobStore(async_mongo_client, mongo_database_name)
    await store.setup()
    yield store
    await store.close()


@pytest.fixture
def sync_store(
    sync_mongo_client: MongoClient[dict[str, Any]], mongo_database_name: str
) -> Iterator[MongoJobStore]:
    store = MongoJobStore(sync_mongo_client, mongo_database_name)
    store.setup()
    yield store
    store.close()


# ----------------------------------------------------------------------------------------------
# Set-up databases for the contract tests, reused
# ----------------------------------------------------------------------------------------------

#: Per collection: its options and its indexes (name and every option), as the server lists them.
Schema = dict[str, tuple[str, list[str]]]

_FAILED: Final = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item,
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Marks a test whose setup or call failed, so that its database is not reused: a failed
    test may have left work behind (a write in a thread that lands later)."""
    report = yield
    if report.failed:
        item.stash[_FAILED] = True
    return report


class DatabasePool:
    """The set-up databases of the contract tests, one pool per test class, reused.

    A contract test asks for a fresh, empty, set-up store and talks to it through the port only,
    so a database emptied after the previous test of its class (every document of every
    collection deleted) serves as well as a new one, without ``setup()``'s index builds: about
    0.15 s a test on a loaded replica set, 40 s of the suite. A database goes back to its pool
    only after a test that passed and left its collections and indexes exactly as ``setup()``
    made them (compared with the listing taken right after the class's first ``setup()``); any
    other is dropped."""

    def __init__(self, client: MongoClient[dict[str, Any]]) -> None:
        self._client = client
        self._free: dict[str, list[str]] = {}
        self._schemas: dict[str, Schema] = {}
        self._names: set[str] = set()

    def take(self, kind: str) -> str:
        free = self._free.setdefault(kind, [])
        if free:
            return free.pop()
        name = f"dogs_test_{uuid.uuid4().hex[:16]}"
        self._names.add(name)
        return name

    def set_up(self, kind: str, name: str) -> None:
        """``name`` was just set up: the first one of ``kind`` is the reference."""
        if kind not in self._schemas:
            self._schemas[kind] = self._schema(name)

    def give_back(self, kind: str, name: str, *, reusable: bool) -> None:
        database = self._client[name]
        if reusable and kind in self._schemas and self._schema(name) == self._schemas[kind]:
            for collection in database.list_collection_names():
                database[collection].delete_many({})
            self._free[kind].append(name)
            return
        self._names.discard(name)
        self._client.drop_database(name)

    def drop_all(self) -> None:
        for name in self._names:
            self._client.drop_database(name)
        self._names.clear()

    def _schema(self, name: str) -> Schema:
        database = self._client[name]
        return {
            info["name"]: (
                repr(sorted(info.get("options", {}).items())),
                sorted(repr(index) for index in database[info["name"]].list_indexes()),
            )
            for info in database.list_collections()
        }


@dataclass(frozen=True)
class PooledDatabase:
    """The database of one contract test: call :meth:`set_up` once the store is set up."""

    pool: DatabasePool
    kind: str
    name: str

    def set_up(self) -> None:
        self.pool.set_up(self.kind, self.name)


@pytest.fixture(scope="session")
def _database_pool(
    sync_mongo_client: MongoClient[dict[str, Any]], local_mongod: MongodProcess | None
) -> Iterator[DatabasePool]:
    pool = DatabasePool(sync_mongo_client)
    yield pool
    if local_mongod is None:  # a server of DOGS_TEST_MONGODB_URI keeps what is not dropped
        pool.drop_all()


@pytest.fixture
def pooled_database(
    request: pytest.FixtureRequest, _database_pool: DatabasePool
) -> Iterator[PooledDatabase]:
    """A database name for one contract test, of its class's pool (see :class:`DatabasePool`)."""
    kind = request.node.nodeid.split("::")[1]
    database = PooledDatabase(_database_pool, kind, _database_pool.take(kind))
    yield database
    failed = request.node.stash.get(_FAILED, False)
    _database_pool.give_back(kind, database.name, reusable=not failed)


# ----------------------------------------------------------------------------------------------
# A server of the MongoDB 8 dialect for tests/mongo/test_mongodb8.py
# ----------------------------------------------------------------------------------------------

#: A real MongoDB 8 (a replica set) to run test_mongodb8.py on instead of the emulator.
ENV_MONGODB8_URI = "DOGS_TEST_MONGODB8_URI"
#: SecantusDB's ``buildInfo.gitVersion``: no real mongod reports it.
EMULATOR_GIT_VERSION = "0" * 40
_SECANTUS_START_SECONDS = 30.0


@dataclass(frozen=True)
class MongoDB8Server:
    """Where the MongoDB-8 tests connect, and whether it is the SecantusDB emulator (whose
    sorted update is not atomic under concurrency, so no race may run on it)."""

    uri: str
    emulator: bool


class SecantusStartError(Exception):
    """``secantusd-py`` is missing, exited or did not answer ``hello`` in time."""


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _secantus_executable() -> str:
    """``secantusd-py`` of this interpreter's environment (the dev extra), else of ``$PATH``."""
    found = shutil.which("secantusd-py", path=str(Path(sys.executable).parent))
    found = found or shutil.which("secantusd-py")
    if found is None:
        raise SecantusStartError(
            "secantusd-py not found: install the dev extra (pip install -e '.[dev]')"
        )
    return found


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL: an in-memory store has nothing to keep (a SIGTERM shutdown takes 2 s), and its
    temporary files are under the session's directory, removed after it."""
    if process.poll() is None:
        process.kill()
    process.wait()


def _wait_for_hello(process: subprocess.Popen[bytes], uri: str, log: Path) -> None:
    """Until the server answers ``hello``; raises if it exits first or the time runs out."""
    deadline = time.monotonic() + _SECANTUS_START_SECONDS
    client: MongoClient[dict[str, Any]] = MongoClient(uri, serverSelectionTimeoutMS=250)
    try:
        while True:
            if process.poll() is not None:
                tail = log.read_text(errors="replace")[-2000:]
                raise SecantusStartError(f"secantusd-py exited ({process.returncode}): {tail}")
            try:
                client.admin.command("hello")
                return
            except PyMongoError:
                if time.monotonic() > deadline:
                    raise SecantusStartError(
                        f"secantusd-py did not answer hello in {_SECANTUS_START_SECONDS:.0f} s"
                    ) from None
    finally:
        client.close()


def _start_secantus(root: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``secantusd-py --storage-path :memory:`` on a free loopback port, answering ``hello``.
    Its config file is an empty one of ``root`` (no ``secantusd.toml`` of the machine is read)
    and its temporary files go under ``root``."""
    executable = _secantus_executable()
    config = root / "secantusd.toml"
    config.write_text("")
    log = root / "secantusd.log"
    port = _free_loopback_port()
    command = [executable, "--config", str(config), "--storage-path", ":memory:"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "WARNING"]
    env = {**os.environ, "TMPDIR": str(root)}
    with log.open("wb") as output:
        process = subprocess.Popen(
            command, cwd=root, env=env, stdout=output, stderr=subprocess.STDOUT
        )
    uri = f"mongodb://127.0.0.1:{port}/?directConnection=true"
    try:
        _wait_for_hello(process, uri, log)
    except BaseException:
        _stop(process)
        raise
    return process, uri


def _is_emulator(uri: str) -> bool:
    client: MongoClient[dict[str, Any]] = MongoClient(uri, serverSelectionTimeoutMS=10_000)
    try:
        return client.admin.command("buildInfo").get("gitVersion") == EMULATOR_GIT_VERSION
    finally:
        client.close()


@pytest.fixture(scope="session")
def mongodb8_server() -> Iterator[MongoDB8Server]:
    """``$DOGS_TEST_MONGODB8_URI``, or a SecantusDB started for this session (per xdist worker,
    only in a worker that runs a MongoDB-8 test) and stopped at its end, also on failure. One
    that cannot start is an error in CI (``CI=true``) and a skip with the reason elsewhere."""
    uri = os.environ.get(ENV_MONGODB8_URI)
    if uri:
        yield MongoDB8Server(uri, emulator=_is_emulator(uri))
        return
    with tempfile.TemporaryDirectory(prefix="dogs-secantus-") as root:
        try:
            process, uri = _start_secantus(Path(root))
        except SecantusStartError as error:
            reason = f"no MongoDB 8 server: SecantusDB could not start ({error})"
            if os.environ.get("CI", "").lower() == "true":
                pytest.fail(reason, pytrace=False)
            pytest.skip(f"{reason}; set {ENV_MONGODB8_URI} for a real MongoDB 8")
        try:
            yield MongoDB8Server(uri, emulator=_is_emulator(uri))
        finally:
            _stop(process)
