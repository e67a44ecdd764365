"""The composition root: wires Dogs for Python with dependency-injector.

This is the only module of the project that imports ``dependency_injector``; the core classes
take their collaborators as constructor arguments and know nothing of it.

An async application::

    container = DogsContainer(uri="mongodb://localhost:27017/?replicaSet=rs0", database="app")
    client = container.client()                   # DogsClient (scheduling API)
    await client.schedule(send_welcome, Welcome(user_id=42), run_in=timedelta(minutes=5),
                          unique_key="welcome:42")
    async with container.workers(jobs, workers_count=32) as workers:
        await workers.serve()                     # until workers.stop(grace=...) or cancellation
    await container.aclose()                      # close the MongoDB client(s) it created

A sync application (a Django view schedules, a management command runs the workers) uses
``driver="sync"`` (PyMongo's ``MongoClient``) and the blocking facade::

    container = DogsContainer(uri=..., database="app", driver="sync")
    container.blocking_client().schedule(send_welcome, {"user_id": 42})
    with container.blocking_workers(jobs) as workers:
        workers.wait()                            # another thread calls workers.stop(grace=30)
    container.close()

Tests override the store (and the clock, under virtual time) and need no database::

    container.store.override(InMemoryJobStore())
    container.clock.override(LoopClock(datetime(2026, 1, 1, tzinfo=UTC)))

Configuration
    ``DogsContainer(**options)`` takes the configuration options below (and overrides of the
    ``store``, ``clock``, ``*mongo_client`` and ``*_store`` providers by name, such as
    ``store=InMemoryJobStore()``); they are validated at once and a
    bad one raises :class:`~dogs_core.errors.InvalidOptionError` naming it. The configuration
    can also be loaded afterwards with dependency-injector's API
    (``container.config.from_dict({...})``, ``container.config.uri.from_env("MONGODB_URI")``),
    before the first use of a provider; it is then validated when a provider is first used.

    ``uri``
        MongoDB connection string (required unless the store or client is overridden).
    ``database``
        Database name; by default the one named in the URI path (``mongodb://host/app``).
    ``records_collection``, ``history_collection``
        Collection names; Dogs' ``orionjs.jobs_dogs_records`` / ``orionjs.jobs_dogs_history``
        by default, so Python and Node workers can share a database.
    ``controls_collection``
        The collection of the fleet controls (pauses, global concurrency slots, rate windows,
        leases); ``orionjs.jobs_dogs_controls`` by default. Only Python workers use it (Node
        Dogs ignores it; docs/differences.md).
    ``unique_keys_collection``
        The holds of unique keys (``Unique(period=...)`` windows, throttles);
        ``orionjs.jobs_dogs_unique_keys`` by default. Only Python processes use it.
    ``driver``
        ``"async"`` (PyMongo ``AsyncMongoClient``, the default) or ``"sync"`` (``MongoClient``,
        the store's calls run in worker threads). ``blocking_workers`` needs ``"sync"``: an
        ``AsyncMongoClient`` belongs to the one event loop that used it first.
        ``blocking_client`` calls the sync store in the caller's thread with either driver
        (with ``"async"``, on a ``MongoClient`` of its own).
    ``n_partitions``
        Acquisition partitions, used by the scheduling client (partition at insert) and the
        workers; set it here so both agree (default 1).
    ``write_concern``
        Of claims and fenced writes: ``None`` (default: the client's, ``"majority"`` on a replica
        set; survives a failover), ``"majority"``, or a number of nodes such as ``1`` (faster;
        a claim rolled back by a failover can run a job twice).
    ``operation_timeout``
        How long ``schedule()`` and ``schedule_many()`` wait for an unreachable database in
        total, retries and backoff included (a duration, 15 s by default; ``None``: six
        attempts however long they take), before they raise
        :class:`~dogs_core.errors.StoreUnavailableError`. Workers keep retrying regardless.
    ``server_selection_timeout``
        How long one operation waits for a reachable server (a duration; by default a third
        of ``operation_timeout``, 5 s, or PyMongo's 30 s when that is ``None``).
    ``client_options``
        Extra keyword arguments of the PyMongo client (TLS, ``appname``...); ``tz_aware`` is
        always true.
    ``claim_path``
        ``"auto"`` (default), ``"sorted_update_one"`` (MongoDB 8) or ``"find_one_and_update"``.
    ``blocking_backend``
        Event loop of the blocking facade's thread: ``"asyncio"`` (default) or ``"trio"``.
    Worker options
        ``workers_count``, ``poll_interval``, ``default_lock_time``, ``max_tries``,
        ``max_tries_reached_retention``, ``on_max_tries_reached``, ``claim_concurrency``,
        ``claim_batch_size``,
        ``probe_interval``, ``probe_enabled``, ``reconcile_enabled``: defaults of
        :class:`~dogs_core.runtime.plumbing.settings.WorkerSettings` for ``workers(...)`` and
        ``blocking_workers(...)``, whose keyword arguments override them per call.

Providers
    ``config`` (Configuration), ``settings`` (the validated :class:`DogsSettings`),
    ``async_mongo_client`` / ``sync_mongo_client`` / ``mongo_client`` (the client of the
    driver), ``async_store`` (:class:`~dogs_mongo.AsyncMongoJobStore`), ``sync_store``
    (:class:`~dogs_mongo.MongoJobStore`), ``store`` (what the runtime uses: the async store, or
    the sync store in a :class:`~dogs_core.runtime.plumbing.wrappers.ThreadedJobStore`, by driver),
    ``clock`` (:class:`~dogs_core.runtime.plumbing.clock.SystemClock`), ``client(jobs=None)``
    (:class:`~dogs_core.DogsClient`), ``blocking_client(jobs=None)``
    (:class:`~dogs_core.BlockingDogsClient`), ``workers(jobs, **overrides)``
    (:class:`~dogs_core.Workers`), ``blocking_workers(jobs, **overrides)``
    (:class:`~dogs_core.BlockingWorkers`), and ``aclose()`` / ``close()``, which close the
    clients the container created and reset its singletons.

Note that, as with any dependency-injector declarative container, ``DogsContainer(...)``
returns a ``DynamicContainer`` holding copies of the providers (not an instance of the class).
"""

from __future__ import annotations

import logging
import random
import threading
from typing import Any, ClassVar, Final

from dependency_injector import containers, providers
from pymongo import AsyncMongoClient, MongoClient
from pymongo.errors import ConfigurationError, InvalidURI, PyMongoError

from dogs_core.errors import InvalidOptionError
from dogs_core.jobs import Jobs
from dogs_core.ports import AsyncJobStore, Clock, JobStore
from dogs_core.runtime.client._async.client import DogsClient
from dogs_core.runtime.client.blocking import BlockingDogsClient
from dogs_core.runtime.plumbing.clock import SystemClock
from dogs_core.runtime.plumbing.telemetry import TELEMETRY, Telemetry
from dogs_core.runtime.plumbing.wrappers import ThreadedJobStore
from dogs_core.runtime.worker.blocking import BlockingWorkers
from dogs_core.runtime.worker.workers import Workers
from dogs_core.uris import redact_uri
from dogs_mongo._async.store import AsyncMongoJobStore
from dogs_mongo._sync.store import MongoJobStore
from dogs_mongo.errors import name_uri
from dogs_mongo.settings import CONFIG_KEYS, CONNECTION_DEFAULTS, DogsSettings

__all__ = [
    "DogsContainer",
    "DogsSettings",
    "MongoClients",
    "redact_uri",
]

logger = logging.getLogger("dogs.container")

#: Providers that ``DogsContainer(...)`` overrides when given by name (others: ``.override``).
_OVERRIDABLE: Final = frozenset(
    {
        "store",
        "clock",
        "mongo_client",
        "async_mongo_client",
        "sync_mongo_client",
        "async_store",
        "sync_store",
        "telemetry",
    }
)


# ----------------------------------------------------------------------------------------------
# Factories the providers call
# ----------------------------------------------------------------------------------------------


class MongoClients:
    """Creates the PyMongo clients of a container lazily, and closes those it created."""

    def __init__(self, settings: DogsSettings) -> None:
        self._settings = settings
        self._lock = threading.Lock()
        self._async: AsyncMongoClient[dict[str, Any]] | None = None
        self._sync: MongoClient[dict[str, Any]] | None = None

    def async_client(self) -> AsyncMongoClient[dict[str, Any]]:
        with self._lock:
            if self._async is None:
                uri = self._settings.required_uri()
                self._async = _create_client(AsyncMongoClient, uri, self._settings)
            return self._async

    def sync_client(self) -> MongoClient[dict[str, Any]]:
        with self._lock:
            if self._sync is None:
                uri = self._settings.required_uri()
                self._sync = _create_client(MongoClient, uri, self._settings)
            return self._sync

    async def aclose(self) -> None:
        with self._lock:
            async_client, self._async = self._async, None
        if async_client is not None:
            await async_client.close()
        self.close()

    def close(self) -> None:
        """Close the sync client (an async client needs :meth:`aclose`)."""
        with self._lock:
            sync_client, self._sync = self._sync, None
            if self._async is not None:
                logger.warning(
                    "close() cannot close the AsyncMongoClient of the container: "
                    "await container.aclose() in its event loop"
                )
        if sync_client is not None:
            sync_client.close()


def _create_client(kind: type[Any], uri: str, settings: DogsSettings) -> Any:
    name_uri(uri, redact_uri(uri))  # an unreachable-server message names it
    try:
        return kind(uri, **settings.client_kwargs())
    except (ConfigurationError, TypeError, ValueError) as error:
        if isinstance(error, InvalidURI) or not settings.client_options:
            raise InvalidOptionError("uri", redact_uri(uri), str(error)) from None
        raise InvalidOptionError("client_options", settings.client_options, str(error)) from None


def _database_of(client: Any, settings: DogsSettings) -> str:
    if settings.database is not None:
        return settings.database
    try:
        name: str = client.get_default_database().name
    except (ConfigurationError, PyMongoError):
        raise InvalidOptionError(
            "database",
            None,
            "no database given and none in the URI path (such as mongodb://host/app)",
        ) from None
    return name


def _async_store(client: AsyncMongoClient[Any], settings: DogsSettings) -> AsyncMongoJobStore:
    return AsyncMongoJobStore(client, _database_of(client, settings), **settings.store_kwargs())


def _sync_store(client: MongoClient[Any], settings: DogsSettings) -> MongoJobStore:
    return MongoJobStore(client, _database_of(client, settings), **settings.store_kwargs())


def _make_client(
    jobs: Jobs | None = None,
    *,
    store: AsyncJobStore,
    clock: Clock,
    dogs_settings: DogsSettings,
    telemetry: Telemetry,
    rng: random.Random | None = None,
) -> DogsClient:
    n_partitions = dogs_settings.n_partitions
    return DogsClient(
        store,
        jobs,
        n_partitions=n_partitions,
        clock=clock,
        rng=rng,
        telemetry=telemetry,
        operation_timeout=dogs_settings.operation_seconds(),
    )


def _refuse_async_mongo_store(store: object, what: str) -> None:
    if isinstance(store, AsyncMongoJobStore):
        raise InvalidOptionError(
            "driver",
            "async",
            f"{what}() needs driver='sync': it runs the store in an event loop thread of its "
            "own, and an AsyncMongoClient belongs to the one event loop that used it first",
        )


def _blocking_store(
    store: providers.Provider[Any],
    async_store: providers.Provider[Any],
    sync_store: providers.Provider[Any],
    driver: str,
) -> AsyncJobStore | JobStore:
    """The store of a blocking client: a sync one, called in the caller's thread, wherever the
    container has one. With either driver that is the sync Mongo store (with ``"async"``, on a
    ``MongoClient`` of its own: an ``AsyncMongoClient`` cannot serve another thread); an
    override of ``store`` (or of ``async_store``) is used instead, unwrapped when it is a
    :class:`ThreadedJobStore` (an async one, such as ``InMemoryJobStore``, is then called
    through the blocking client's event loop thread)."""
    mongo: JobStore
    if driver == "async" and not store.overridden and not async_store.overridden:
        mongo = sync_store()
        return mongo
    chosen: AsyncJobStore | JobStore = store()
    if isinstance(chosen, ThreadedJobStore):
        return chosen.sync_store
    if isinstance(chosen, AsyncMongoJobStore):
        mongo = sync_store()
        return mongo
    return chosen


def _make_blocking_client(
    jobs: Jobs | None = None,
    *,
    store: providers.Provider[Any],
    async_store: providers.Provider[Any],
    sync_store: providers.Provider[Any],
    clock: Clock,
    dogs_settings: DogsSettings,
    telemetry: Telemetry,
    rng: random.Random | None = None,
) -> BlockingDogsClient:
    return BlockingDogsClient(
        _blocking_store(store, async_store, sync_store, dogs_settings.driver),
        jobs,
        n_partitions=dogs_settings.n_partitions,
        clock=clock,
        rng=rng,
        backend=dogs_settings.blocking_backend,
        telemetry=telemetry,
        operation_timeout=dogs_settings.operation_seconds(),
    )


def _make_workers(
    jobs: Jobs,
    *,
    store: AsyncJobStore,
    clock: Clock,
    dogs_settings: DogsSettings,
    telemetry: Telemetry,
    rng: random.Random | None = None,
    **overrides: Any,
) -> Workers:
    settings = dogs_settings.worker_settings(**overrides)
    return Workers(store, jobs, settings, clock=clock, rng=rng, telemetry=telemetry)


def _make_blocking_workers(
    jobs: Jobs,
    *,
    store: AsyncJobStore,
    clock: Clock,
    dogs_settings: DogsSettings,
    telemetry: Telemetry,
    rng: random.Random | None = None,
    **overrides: Any,
) -> BlockingWorkers:
    _refuse_async_mongo_store(store, "blocking_workers")
    if not isinstance(jobs, Jobs):
        raise InvalidOptionError("jobs", jobs, "must be a dogs_core.Jobs registry")
    if len(jobs) == 0:
        raise InvalidOptionError("jobs", jobs, "the registry has no jobs to run")
    return BlockingWorkers(
        store,
        jobs,
        dogs_settings.worker_settings(**overrides),
        clock=clock,
        rng=rng,
        backend=dogs_settings.blocking_backend,
        telemetry=telemetry,
    )


def _by_driver(
    async_provider: providers.Provider[Any], sync_provider: providers.Provider[Any]
) -> dict[str, providers.Provider[Any]]:
    return {"async": async_provider, "sync": sync_provider}


async def _aclose(container: containers.Container, clients: MongoClients) -> None:
    try:
        await clients.aclose()
    finally:
        container.reset_singletons()


def _close(container: containers.Container, clients: MongoClients) -> None:
    try:
        clients.close()
    finally:
        container.reset_singletons()


# ----------------------------------------------------------------------------------------------
# The container
# ----------------------------------------------------------------------------------------------


class DogsContainer(containers.DeclarativeContainer):
    """The dependency-injector container of Dogs for Python (see the module docstring)."""

    __self__ = providers.Self()

    config = providers.Configuration(default=dict(CONNECTION_DEFAULTS))
    settings = providers.Callable(DogsSettings.from_config, config)

    _clients = providers.Singleton(MongoClients, settings)
    async_mongo_client = providers.Callable(MongoClients.async_client, _clients)
    sync_mongo_client = providers.Callable(MongoClients.sync_client, _clients)
    mongo_client = providers.Selector(
        settings.provided.driver, **_by_driver(async_mongo_client, sync_mongo_client)
    )

    async_store = providers.Singleton(_async_store, async_mongo_client, settings)
    sync_store = providers.Singleton(_sync_store, sync_mongo_client, settings)
    store = providers.Selector(
        settings.provided.driver,
        **_by_driver(async_store, providers.Singleton(ThreadedJobStore, sync_store)),
    )

    clock = providers.Singleton(SystemClock)
    #: Where the clients' and workers' telemetry events go (the process-wide hub by default).
    telemetry = providers.Object(TELEMETRY)

    _common: ClassVar = {"clock": clock, "dogs_settings": settings, "telemetry": telemetry}
    client = providers.Factory(_make_client, store=store, **_common)
    blocking_client = providers.Factory(
        _make_blocking_client,
        store=store.provider,
        async_store=async_store.provider,
        sync_store=sync_store.provider,
        **_common,
    )
    workers = providers.Factory(_make_workers, store=store, **_common)
    blocking_workers = providers.Factory(_make_blocking_workers, store=store, **_common)

    aclose = providers.Coroutine(_aclose, __self__, _clients)
    close = providers.Callable(_close, __self__, _clients)

    def __new__(cls, **options: Any) -> DogsContainer:
        """``DogsContainer(uri=..., database=..., **options)``: configuration options (validated
        now) and overrides of the store, clock and client providers (``store=InMemoryJobStore()``,
        ``clock=LoopClock(...)``)."""
        overrides = {name: options.pop(name) for name in list(options) if name in _OVERRIDABLE}
        unknown = sorted(name for name in options if name not in CONFIG_KEYS)
        if unknown:
            name = unknown[0]
            reason = (
                f"not a configuration option; override that provider with "
                f"container.{name}.override(...)"
                if name in cls.providers
                else "unknown DogsContainer option; expected a configuration option "
                f"({', '.join(sorted(CONFIG_KEYS))}) or one of {', '.join(sorted(_OVERRIDABLE))}"
            )
            raise InvalidOptionError(name, options[name], reason)
        DogsSettings.from_config(options)  # raises before anything is built
        container = super().__new__(cls, **overrides)
        if options:
            container.config.from_dict(options)
        return container
