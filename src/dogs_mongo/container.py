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
    ``driver``
        ``"async"`` (PyMongo ``AsyncMongoClient``, the default) or ``"sync"`` (``MongoClient``,
        the store's calls run in worker threads). ``blocking_client`` and ``blocking_workers``
        need ``"sync"``: an ``AsyncMongoClient`` belongs to the one event loop that used it first.
    ``n_partitions``
        Acquisition partitions, used by the scheduling client (partition at insert) and the
        workers; set it here so both agree (default 1).
    ``write_concern``
        Of claims and fenced writes: ``None`` (default: the client's, ``"majority"`` on a replica
        set; survives a failover), ``"majority"``, or a number of nodes such as ``1`` (faster;
        a claim rolled back by a failover can run a job twice).
    ``server_selection_timeout``
        How long an operation waits for a reachable server (a duration; PyMongo's 30 s when
        ``None``).
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
        :class:`~dogs_core.runtime.settings.WorkerSettings` for ``workers(...)`` and
        ``blocking_workers(...)``, whose keyword arguments override them per call.

Providers
    ``config`` (Configuration), ``settings`` (the validated :class:`DogsSettings`),
    ``async_mongo_client`` / ``sync_mongo_client`` / ``mongo_client`` (the client of the
    driver), ``async_store`` (:class:`~dogs_mongo.AsyncMongoJobStore`), ``sync_store``
    (:class:`~dogs_mongo.MongoJobStore`), ``store`` (what the runtime uses: the async store, or
    the sync store in a :class:`~dogs_core.runtime.threaded.ThreadedJobStore`, by driver),
    ``clock`` (:class:`~dogs_core.runtime.clock.SystemClock`), ``client(jobs=None)``
    (:class:`~dogs_core.DogsClient`), ``blocking_client(jobs=None)``
    (:class:`~dogs_core.BlockingDogsClient`), ``workers(jobs, **overrides)``
    (:class:`~dogs_core.Workers`), ``blocking_workers(jobs, **overrides)``
    (:class:`~dogs_core.BlockingWorkers`), and ``aclose()`` / ``close()``, which close the
    clients the container created and reset its singletons.

Note that, as with any dependency-injector declarative container, ``DogsContainer(...)``
returns a ``DynamicContainer`` holding copies of the providers (not an instance of the class).
"""

from __future__ import annotations

import inspect
import logging
import math
import random
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Final, Literal

from dependency_injector import containers, providers
from pymongo import AsyncMongoClient, MongoClient
from pymongo.errors import ConfigurationError, InvalidURI, PyMongoError
from pymongo.write_concern import WriteConcern

from dogs_core.domain.partitions import validate_n_partitions
from dogs_core.domain.schedules import parse_duration
from dogs_core.errors import InvalidOptionError, ValidationError
from dogs_core.jobs import Jobs
from dogs_core.ports import AsyncJobStore, Clock
from dogs_core.runtime.blocking import BlockingDogsClient, BlockingWorkers
from dogs_core.runtime.client import DogsClient
from dogs_core.runtime.clock import SystemClock
from dogs_core.runtime.settings import WorkerSettings
from dogs_core.runtime.threaded import ThreadedJobStore
from dogs_core.runtime.workers import Workers
from dogs_mongo import queries as q
from dogs_mongo._async.store import AsyncMongoJobStore
from dogs_mongo._sync.store import MongoJobStore

__all__ = [
    "CONFIG_DEFAULTS",
    "WORKER_OPTIONS",
    "DogsContainer",
    "DogsSettings",
    "MongoClients",
    "redact_uri",
]

logger = logging.getLogger("dogs.container")

Driver = Literal["async", "sync"]

#: The worker options a container accepts (the keyword arguments of ``WorkerSettings``).
WORKER_OPTIONS: Final[frozenset[str]] = frozenset(
    name for name in inspect.signature(WorkerSettings.__init__).parameters if name != "self"
)

#: The configuration defaults (worker options default to ``WorkerSettings``'s own).
CONFIG_DEFAULTS: Final[Mapping[str, Any]] = {
    "uri": None,
    "database": None,
    "records_collection": q.DEFAULT_RECORDS_COLLECTION,
    "history_collection": q.DEFAULT_HISTORY_COLLECTION,
    "driver": "async",
    "n_partitions": 1,
    "write_concern": None,
    "server_selection_timeout": None,
    "client_options": {},
    "claim_path": "auto",
    "blocking_backend": "asyncio",
}

_CONFIG_KEYS: Final = frozenset(CONFIG_DEFAULTS) | WORKER_OPTIONS
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
    }
)
_CLAIM_PATHS: Final = ("auto", "sorted_update_one", "find_one_and_update")
_BAD_DATABASE_CHARS: Final = frozenset('/\\. "$\x00')


# ----------------------------------------------------------------------------------------------
# Validated settings
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DogsSettings:
    """The container's configuration, validated (see the module docstring for each option)."""

    uri: str | None = None
    database: str | None = None
    records_collection: str = q.DEFAULT_RECORDS_COLLECTION
    history_collection: str = q.DEFAULT_HISTORY_COLLECTION
    driver: Driver = "async"
    n_partitions: int = 1
    write_concern: WriteConcern | None = None
    server_selection_timeout: timedelta | None = None
    client_options: Mapping[str, Any] = field(default_factory=dict)
    claim_path: str = "auto"
    blocking_backend: str = "asyncio"
    worker_options: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None) -> DogsSettings:
        """Validate a configuration mapping; raises :class:`InvalidOptionError` naming the
        first bad option."""
        if config is None:
            config = {}
        if not isinstance(config, Mapping):
            raise InvalidOptionError("config", config, "must be a mapping of options")
        unknown = sorted(str(key) for key in config if key not in _CONFIG_KEYS)
        if unknown:
            raise InvalidOptionError(
                unknown[0],
                config[unknown[0]],
                f"unknown DogsContainer option; expected one of {', '.join(sorted(_CONFIG_KEYS))}",
            )
        values = {**CONFIG_DEFAULTS, **config}
        worker_options = {
            key: config[key] for key in WORKER_OPTIONS - {"n_partitions"} if key in config
        }
        n_partitions = validate_n_partitions(values["n_partitions"])
        # Validate the worker options now, so a bad one fails at configuration time.
        _worker_settings({**worker_options, "n_partitions": n_partitions})
        return cls(
            uri=_optional_text("uri", values["uri"]),
            database=_database_name(values["database"]),
            records_collection=_collection_name("records_collection", values["records_collection"]),
            history_collection=_collection_name("history_collection", values["history_collection"]),
            driver=_driver(values["driver"]),
            n_partitions=n_partitions,
            write_concern=_write_concern(values["write_concern"]),
            server_selection_timeout=_timeout(values["server_selection_timeout"]),
            client_options=_client_options(values["client_options"]),
            claim_path=_choice("claim_path", values["claim_path"], _CLAIM_PATHS),
            blocking_backend=_choice(
                "blocking_backend", values["blocking_backend"], ("asyncio", "trio")
            ),
            worker_options=worker_options,
        )

    def worker_settings(self, **overrides: Any) -> WorkerSettings:
        """The :class:`WorkerSettings` of these defaults with ``overrides`` applied."""
        unknown = sorted(set(overrides) - WORKER_OPTIONS)
        if unknown:
            raise InvalidOptionError(
                unknown[0],
                overrides[unknown[0]],
                f"unknown worker option; expected one of {', '.join(sorted(WORKER_OPTIONS))}",
            )
        options = {"n_partitions": self.n_partitions, **self.worker_options, **overrides}
        if options["n_partitions"] != self.n_partitions:
            logger.warning(
                "workers use n_partitions=%r but the container's client uses %r: set "
                "n_partitions in the container configuration so that both agree",
                options["n_partitions"],
                self.n_partitions,
            )
        return _worker_settings(options)

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of the PyMongo client."""
        kwargs: dict[str, Any] = dict(self.client_options)
        kwargs["tz_aware"] = True
        if self.server_selection_timeout is not None:
            kwargs["serverSelectionTimeoutMS"] = max(
                1, math.ceil(self.server_selection_timeout.total_seconds() * 1000)
            )
        return kwargs

    def store_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of the Mongo stores (besides the client and database)."""
        return {
            "records_collection": self.records_collection,
            "history_collection": self.history_collection,
            "write_concern": self.write_concern,
            "claim_path": self.claim_path,
        }

    def required_uri(self) -> str:
        if self.uri is None:
            raise InvalidOptionError(
                "uri",
                None,
                "a MongoDB URI is required: DogsContainer(uri=...) or "
                "container.config.uri.from_env('DOGS_MONGODB_URI')",
            )
        return self.uri


def _worker_settings(options: Mapping[str, Any]) -> WorkerSettings:
    """``WorkerSettings(**options)``, every validation error as an :class:`InvalidOptionError`."""
    try:
        return WorkerSettings(**options)
    except InvalidOptionError:
        raise
    except ValidationError as error:  # a duration: InvalidScheduleError
        raise InvalidOptionError(error.field, error.value, error.reason) from None


def _optional_text(name: str, value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidOptionError(name, value, "must be a non-empty string")
    return value


def _database_name(value: object) -> str | None:
    name = _optional_text("database", value)
    if name is not None and _BAD_DATABASE_CHARS & set(name):
        raise InvalidOptionError(
            "database", value, 'a MongoDB database name cannot contain / \\ . space " $ or NUL'
        )
    return name


def _collection_name(option: str, value: object) -> str:
    if not isinstance(value, str) or not value or "$" in value or "\x00" in value:
        raise InvalidOptionError(option, value, "must be a non-empty collection name without $")
    if value.startswith("system."):
        raise InvalidOptionError(option, value, "the system. prefix is reserved by MongoDB")
    return value


def _driver(value: object) -> Driver:
    if value == "async":
        return "async"
    if value == "sync":
        return "sync"
    raise InvalidOptionError("driver", value, "must be 'async' or 'sync'")


def _choice(option: str, value: object, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise InvalidOptionError(option, value, f"must be one of {', '.join(choices)}")
    return value


def _write_concern(value: object) -> WriteConcern | None:
    if value is None:
        return None
    if isinstance(value, WriteConcern):
        if not value.acknowledged:
            raise InvalidOptionError(
                "write_concern", value, "claims and fenced writes need an acknowledged concern"
            )
        return value
    if value == "majority":
        return WriteConcern(w="majority")
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise InvalidOptionError(
                "write_concern", value, "must be at least 1: fencing needs acknowledged writes"
            )
        return WriteConcern(w=value)
    raise InvalidOptionError(
        "write_concern", value, "must be None (the client's), 'majority' or a number of nodes >= 1"
    )


def _timeout(value: object) -> timedelta | None:
    if value is None:
        return None
    if not isinstance(value, timedelta | int | float | str):
        raise InvalidOptionError(
            "server_selection_timeout", value, "must be a duration (seconds, '5s' or timedelta)"
        )
    duration = parse_duration(value, field="server_selection_timeout", error=InvalidOptionError)
    if duration <= timedelta(0):
        raise InvalidOptionError("server_selection_timeout", value, "must be greater than zero")
    return duration


def _client_options(value: object) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
        raise InvalidOptionError(
            "client_options", value, "must be a mapping of PyMongo client keyword arguments"
        )
    return dict(value)


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


def redact_uri(uri: str) -> str:
    """``uri`` with the password of its user info replaced by ``***`` (for messages and logs)."""
    return _USER_INFO.sub(lambda match: f"{match.group(1)}:***@", uri, count=1)


_USER_INFO: Final = re.compile(r"^((?:mongodb|mongodb\+srv)://[^:/@]*):[^/]*@")


def _create_client(kind: type[Any], uri: str, settings: DogsSettings) -> Any:
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
    rng: random.Random | None = None,
) -> DogsClient:
    return DogsClient(store, jobs, n_partitions=dogs_settings.n_partitions, clock=clock, rng=rng)


def _refuse_async_mongo_store(store: object, what: str) -> None:
    if isinstance(store, AsyncMongoJobStore):
        raise InvalidOptionError(
            "driver",
            "async",
            f"{what}() needs driver='sync': it runs the store in an event loop thread of its "
            "own, and an AsyncMongoClient belongs to the one event loop that used it first",
        )


def _make_blocking_client(
    jobs: Jobs | None = None,
    *,
    store: AsyncJobStore,
    clock: Clock,
    dogs_settings: DogsSettings,
    rng: random.Random | None = None,
) -> BlockingDogsClient:
    _refuse_async_mongo_store(store, "blocking_client")
    return BlockingDogsClient(
        store,
        jobs,
        n_partitions=dogs_settings.n_partitions,
        clock=clock,
        rng=rng,
        backend=dogs_settings.blocking_backend,
    )


def _make_workers(
    jobs: Jobs,
    *,
    store: AsyncJobStore,
    clock: Clock,
    dogs_settings: DogsSettings,
    rng: random.Random | None = None,
    **overrides: Any,
) -> Workers:
    return Workers(store, jobs, dogs_settings.worker_settings(**overrides), clock=clock, rng=rng)


def _make_blocking_workers(
    jobs: Jobs,
    *,
    store: AsyncJobStore,
    clock: Clock,
    dogs_settings: DogsSettings,
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

    config = providers.Configuration(default=dict(CONFIG_DEFAULTS))
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

    client = providers.Factory(_make_client, store=store, clock=clock, dogs_settings=settings)
    blocking_client = providers.Factory(
        _make_blocking_client, store=store, clock=clock, dogs_settings=settings
    )
    workers = providers.Factory(_make_workers, store=store, clock=clock, dogs_settings=settings)
    blocking_workers = providers.Factory(
        _make_blocking_workers, store=store, clock=clock, dogs_settings=settings
    )

    aclose = providers.Coroutine(_aclose, __self__, _clients)
    close = providers.Callable(_close, __self__, _clients)

    def __new__(cls, **options: Any) -> DogsContainer:
        """``DogsContainer(uri=..., database=..., **options)``: configuration options (validated
        now) and overrides of the store, clock and client providers (``store=InMemoryJobStore()``,
        ``clock=LoopClock(...)``)."""
        overrides = {name: options.pop(name) for name in list(options) if name in _OVERRIDABLE}
        unknown = sorted(name for name in options if name not in _CONFIG_KEYS)
        if unknown:
            name = unknown[0]
            reason = (
                f"not a configuration option; override that provider with "
                f"container.{name}.override(...)"
                if name in cls.providers
                else "unknown DogsContainer option; expected a configuration option "
                f"({', '.join(sorted(_CONFIG_KEYS))}) or one of {', '.join(sorted(_OVERRIDABLE))}"
            )
            raise InvalidOptionError(name, options[name], reason)
        DogsSettings.from_config(options)  # raises before anything is built
        container = super().__new__(cls, **overrides)
        if options:
            container.config.from_dict(options)
        return container
