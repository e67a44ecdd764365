"""One small runner for scripts (our examples, a user's demo or smoke check): in memory by
default, on MongoDB with ``--uri``, always wired through :class:`~dogs_mongo.DogsContainer`.

A script hands :func:`run_example` its ``main(example)`` and the factory of the store to use
without a database (``dogs_mongo`` never imports the testing kit, so the caller names it)::

    from dogs_mongo import Example, run_example
    from dogs_testing import InMemoryJobStore

    async def run(example: Example) -> None:
        client = example.client(jobs)
        await client.schedule(send_welcome, {"user_id": 42})
        async with example.workers(jobs, poll_interval="100ms") as workers:
            ...

    def main(argv: Sequence[str] | None = None) -> None:
        run_example(run, argv, name="quickstart", memory=InMemoryJobStore,
                    description="Dogs quickstart (async)")

``python script.py`` then runs on a chosen :class:`~dogs_testing.InMemoryJobStore`;
``python script.py --uri mongodb://localhost:27017/?replicaSet=rs0`` on a chosen database
``dogs_<name>_<8 hex>`` that is dropped at the end; ``--database NAME`` uses (and keeps) that
database instead. ``name=None`` uses the database named in the URI path, kept. Either way the
container, its clients and its workers are closed when ``main`` returns or raises.
:func:`run_blocking_example` is the same for a sync script (``driver="sync"``: the blocking
client and workers, ``memory`` a sync store such as :class:`~dogs_testing.SyncInMemoryJobStore`).

A script with options of its own passes a ``parser`` made by :func:`example_parser` (which holds
``--uri`` and ``--database``) with its arguments added; they are in ``example.args``.
"""

from __future__ import annotations

import argparse
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio

from dogs_core.errors import InvalidOptionError
from dogs_core.jobs import Jobs
from dogs_core.ports import AsyncJobStore, JobStore
from dogs_core.runtime.client._async.client import DogsClient
from dogs_core.runtime.client.blocking import BlockingDogsClient
from dogs_core.runtime.plumbing.wrappers import ThreadedJobStore
from dogs_core.runtime.worker.blocking import BlockingWorkers
from dogs_core.runtime.worker.workers import Workers
from dogs_mongo.container import DogsContainer

__all__ = [
    "Example",
    "example_parser",
    "open_blocking_example",
    "open_example",
    "run_blocking_example",
    "run_example",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Example:
    """What a script runs on: its container (in memory or on MongoDB) and its arguments."""

    container: Any
    """The :class:`~dogs_mongo.DogsContainer` (its providers: ``store``, ``client``...)."""
    args: argparse.Namespace
    """The parsed command line (``uri``, ``database`` and the script's own options)."""
    database: str | None
    """The MongoDB database in use; ``None`` in memory."""

    @property
    def on_mongodb(self) -> bool:
        return self.database is not None

    @property
    def store(self) -> AsyncJobStore:
        """The store the runtime uses (the in-memory store, or the MongoDB one)."""
        store: AsyncJobStore = self.container.store()
        return store

    def client(self, jobs: Jobs | None = None) -> DogsClient:
        """A :class:`~dogs_core.DogsClient` of the container (``container.client(jobs)``)."""
        client: DogsClient = self.container.client(jobs)
        return client

    def workers(self, jobs: Jobs, **overrides: Any) -> Workers:
        """:class:`~dogs_core.Workers` of the container; ``overrides`` are worker options."""
        workers: Workers = self.container.workers(jobs, **overrides)
        return workers

    def blocking_client(self, jobs: Jobs | None = None) -> BlockingDogsClient:
        client: BlockingDogsClient = self.container.blocking_client(jobs)
        return client

    def blocking_workers(self, jobs: Jobs, **overrides: Any) -> BlockingWorkers:
        workers: BlockingWorkers = self.container.blocking_workers(jobs, **overrides)
        return workers


def example_parser(description: str | None = None) -> argparse.ArgumentParser:
    """An argument parser holding ``--uri`` and ``--database``; add a script's own options."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--uri", help="MongoDB URI (default: the in-memory store)")
    parser.add_argument(
        "--database", help="with --uri: this database, kept (default: a new one, dropped)"
    )
    return parser


def _database(args: argparse.Namespace, name: str | None) -> str | None:
    """The database to use, or ``None`` for the one in the URI path."""
    given: str | None = getattr(args, "database", None)
    if given is not None:
        return given
    return None if name is None else f"dogs_{name}_{uuid.uuid4().hex[:8]}"


def _check_name(name: str | None) -> None:
    if name is not None and (not name or not name.replace("_", "").isalnum()):
        raise InvalidOptionError("name", name, "letters, digits and underscores only")


def _drops(args: argparse.Namespace, name: str | None) -> bool:
    return name is not None and getattr(args, "database", None) is None


@asynccontextmanager
async def open_example(
    args: argparse.Namespace,
    *,
    name: str | None,
    memory: Callable[[], AsyncJobStore],
    **options: Any,
) -> AsyncIterator[Example]:
    """The :class:`Example` of ``args`` (``args.uri``: MongoDB, else ``memory()``), closed (and
    its chosen database dropped) on exit. ``options`` are more :class:`DogsContainer` options."""
    _check_name(name)
    uri: str | None = getattr(args, "uri", None)
    if not uri:
        container = DogsContainer(store=memory(), **options)
        try:
            yield Example(container, args, None)
        finally:
            await container.aclose()
        return
    chosen = _database(args, name)
    container = DogsContainer(uri=uri, database=chosen, **options)
    try:
        database = chosen or container.async_mongo_client().get_default_database().name
        yield Example(container, args, database)
    finally:
        try:
            if chosen is not None and _drops(args, name):
                await container.async_mongo_client().drop_database(chosen)
        finally:
            await container.aclose()


@contextmanager
def open_blocking_example(
    args: argparse.Namespace,
    *,
    name: str | None,
    memory: Callable[[], JobStore] | Callable[[], AsyncJobStore],
    driver: str = "sync",
    **options: Any,
) -> Iterator[Example]:
    """:func:`open_example` for a script without an event loop of its own: ``driver="sync"``
    and ``memory`` a sync store (run in threads) by default; ``driver="async"`` (``memory`` an
    async store) for an application whose framework runs the event loop, such as an ASGI app
    served or tested from a sync ``main``."""
    _check_name(name)
    uri: str | None = getattr(args, "uri", None)
    if not uri:
        made: Any = memory()
        store = ThreadedJobStore(made) if driver == "sync" else made
        container = DogsContainer(store=store, driver=driver, **options)
        try:
            yield Example(container, args, None)
        finally:
            container.close()
        return
    chosen = _database(args, name)
    container = DogsContainer(uri=uri, database=chosen, driver=driver, **options)
    try:
        database = chosen or container.sync_mongo_client().get_default_database().name
        yield Example(container, args, database)
    finally:
        try:
            if chosen is not None and _drops(args, name):
                # The sync client: the app may have closed the container's async one already.
                container.sync_mongo_client().drop_database(chosen)
        finally:
            container.close()


def run_example(
    main: Callable[[Example], Awaitable[T]],
    argv: Sequence[str] | None = None,
    *,
    name: str | None,
    memory: Callable[[], AsyncJobStore],
    description: str | None = None,
    parser: argparse.ArgumentParser | None = None,
    backend: str = "asyncio",
    **options: Any,
) -> T:
    """Parse ``argv`` (:func:`example_parser`, or ``parser``), open the :class:`Example`
    (:func:`open_example`) and run ``await main(example)`` on ``backend``; return its result."""
    args = (parser or example_parser(description)).parse_args(argv)

    async def run() -> T:
        async with open_example(args, name=name, memory=memory, **options) as example:
            return await main(example)

    return anyio.run(run, backend=backend)


def run_blocking_example(
    main: Callable[[Example], T],
    argv: Sequence[str] | None = None,
    *,
    name: str | None,
    memory: Callable[[], JobStore] | Callable[[], AsyncJobStore],
    description: str | None = None,
    parser: argparse.ArgumentParser | None = None,
    driver: str = "sync",
    **options: Any,
) -> T:
    """:func:`run_example` for a sync script: ``main(example)`` is called in this thread
    (:func:`open_blocking_example`: ``driver="sync"`` unless told otherwise)."""
    args = (parser or example_parser(description)).parse_args(argv)
    with open_blocking_example(args, name=name, memory=memory, driver=driver, **options) as example:
        return main(example)
