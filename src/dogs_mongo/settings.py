"""The container's configuration: connection options, and the workers' defaults as a
:class:`~dogs_core.runtime.plumbing.settings.WorkerSettings`.

:class:`DogsSettings` validates the connection options itself (the generic checks come from
:mod:`dogs_core.domain.validation`, the MongoDB naming rules are here) and leaves the worker
options to ``WorkerSettings``, the one description of them: it never re-validates them.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Final, Literal

from pymongo.write_concern import WriteConcern

from dogs_core.domain import validation as v
from dogs_core.errors import InvalidOptionError
from dogs_core.runtime.plumbing import settings as worker_settings
from dogs_core.runtime.plumbing.settings import WorkerSettings
from dogs_mongo import queries as q
from dogs_mongo.queries import uniqueness as qu

__all__ = ["CONFIG_KEYS", "CONNECTION_DEFAULTS", "DogsSettings", "Driver"]

Driver = Literal["async", "sync"]

logger = logging.getLogger("dogs.container")

_BLOCKING_BACKENDS: Final = ("asyncio", "trio")
_BAD_DATABASE_CHARS: Final = frozenset('/\\. "$\x00')


@dataclass(frozen=True, slots=True)
class DogsSettings:
    """The container's configuration, validated (see :mod:`dogs_mongo.container` for each
    option).

    ``workers`` holds the workers' defaults, built from ``worker_options`` (the worker options
    the configuration gave); ``n_partitions`` is theirs, so the client and the workers agree.
    """

    uri: str | None = None
    database: str | None = None
    records_collection: str = q.DEFAULT_RECORDS_COLLECTION
    history_collection: str = q.DEFAULT_HISTORY_COLLECTION
    controls_collection: str = q.DEFAULT_CONTROLS_COLLECTION
    #: The holds of unique keys (windows, throttles; issue 27).
    unique_keys_collection: str = qu.DEFAULT_UNIQUE_KEYS_COLLECTION
    driver: Driver = "async"
    #: Claims, fenced writes, operators' writes and controls: majority unless configured (a
    #: ``w`` in the URI does not lower it; ``None`` keeps the client's).
    write_concern: WriteConcern | None = field(default_factory=lambda: WriteConcern(w="majority"))
    history_write_concern: WriteConcern | None = None
    server_selection_timeout: timedelta | None = None
    operation_timeout: timedelta | None = timedelta(seconds=15)
    client_options: Mapping[str, Any] = field(default_factory=dict)
    claim_path: str = q.CLAIM_PATH_AUTO
    blocking_backend: str = "asyncio"
    worker_options: Mapping[str, Any] = field(default_factory=dict)
    workers: WorkerSettings = field(default_factory=WorkerSettings)

    @property
    def n_partitions(self) -> int:
        """Acquisition partitions of the client and (by default) of the workers."""
        return self.workers.n_partitions

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None) -> DogsSettings:
        """Validate a configuration mapping; raises :class:`InvalidOptionError` naming the
        first bad option."""
        if config is None:
            config = {}
        if not isinstance(config, Mapping):
            raise InvalidOptionError("config", config, "must be a mapping of options")
        unknown = sorted((key for key in config if key not in CONFIG_KEYS), key=str)
        if unknown:
            raise InvalidOptionError(
                str(unknown[0]),
                config[unknown[0]],
                f"unknown DogsContainer option; expected one of {', '.join(sorted(CONFIG_KEYS))}",
            )
        values = {**CONNECTION_DEFAULTS, **config}
        worker_options = {
            key: value for key, value in config.items() if key in worker_settings.ACCEPTED_NAMES
        }
        return cls(
            uri=v.optional_text("uri", values["uri"]),
            database=_database_name(values["database"]),
            records_collection=_collection_name("records_collection", values["records_collection"]),
            history_collection=_collection_name("history_collection", values["history_collection"]),
            controls_collection=_collection_name(
                "controls_collection", values["controls_collection"]
            ),
            unique_keys_collection=_collection_name(
                "unique_keys_collection", values["unique_keys_collection"]
            ),
            driver=_driver(values["driver"]),
            write_concern=_write_concern(values["write_concern"]),
            history_write_concern=_write_concern(
                values["history_write_concern"], field="history_write_concern"
            ),
            server_selection_timeout=v.optional(v.positive_duration)(
                "server_selection_timeout", values["server_selection_timeout"]
            ),
            operation_timeout=v.optional(v.positive_duration)(
                "operation_timeout", values["operation_timeout"]
            ),
            client_options=v.str_mapping(
                "client_options", values["client_options"], what="PyMongo client keyword arguments"
            ),
            claim_path=v.choice("claim_path", values["claim_path"], q.CLAIM_PATHS),
            blocking_backend=v.choice(
                "blocking_backend", values["blocking_backend"], _BLOCKING_BACKENDS
            ),
            worker_options=worker_options,
            workers=WorkerSettings(**worker_options),
        )

    def worker_settings(self, **overrides: Any) -> WorkerSettings:
        """The :class:`WorkerSettings` of these defaults with ``overrides`` applied (validated
        first; then a warning when ``n_partitions`` differs from the client's)."""
        worker_settings.check_names(overrides, "unknown worker option")
        if not overrides:
            return self.workers
        settings = WorkerSettings(**{**self.worker_options, **overrides})
        if settings.n_partitions != self.n_partitions:
            logger.warning(
                "workers use n_partitions=%r but the container's client uses %r: set "
                "n_partitions in the container configuration so that both agree",
                settings.n_partitions,
                self.n_partitions,
            )
        return settings

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of the PyMongo client."""
        kwargs: dict[str, Any] = dict(self.client_options)
        kwargs["tz_aware"] = True
        selection = self.selection_timeout()
        if selection is not None:
            kwargs["serverSelectionTimeoutMS"] = max(1, math.ceil(selection.total_seconds() * 1000))
        return kwargs

    def selection_timeout(self) -> timedelta | None:
        """How long one operation waits for a reachable server: ``server_selection_timeout``,
        else a third of ``operation_timeout`` (so that two attempts and their backoff fit in
        it), else ``None`` (PyMongo's 30 s)."""
        if self.server_selection_timeout is not None:
            return self.server_selection_timeout
        if self.operation_timeout is not None:
            return self.operation_timeout / 3
        return None

    def operation_seconds(self) -> float | None:
        """``operation_timeout`` in seconds, for the scheduling clients' retry deadline."""
        timeout = self.operation_timeout
        return None if timeout is None else timeout.total_seconds()

    def store_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of the Mongo stores (besides the client and database)."""
        return {
            "records_collection": self.records_collection,
            "history_collection": self.history_collection,
            "controls_collection": self.controls_collection,
            "unique_keys_collection": self.unique_keys_collection,
            "write_concern": self.write_concern,
            "history_write_concern": self.history_write_concern,
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


#: The defaults of the connection options (the worker options default to ``WorkerSettings``'s).
CONNECTION_DEFAULTS: Final[Mapping[str, Any]] = {
    spec.name: spec.default_factory() if callable(spec.default_factory) else spec.default
    for spec in dataclasses.fields(DogsSettings)
    if spec.name not in ("worker_options", "workers")
}
#: Every option a container configuration accepts.
CONFIG_KEYS: Final = frozenset(CONNECTION_DEFAULTS) | worker_settings.ACCEPTED_NAMES


def _database_name(value: object) -> str | None:
    name = v.optional_text("database", value)
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
    return "sync" if v.choice("driver", value, ("async", "sync")) == "sync" else "async"


def _write_concern(value: object, *, field: str = "write_concern") -> WriteConcern | None:
    if value is None:
        return None
    if isinstance(value, WriteConcern):
        if not value.acknowledged:
            raise InvalidOptionError(field, value, "needs an acknowledged concern (w >= 1)")
        return value
    if value == "majority":
        return WriteConcern(w="majority")
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise InvalidOptionError(field, value, "must be at least 1: writes are checked")
        return WriteConcern(w=value)
    raise InvalidOptionError(
        field, value, "must be None (the client's), 'majority' or a number of nodes >= 1"
    )
