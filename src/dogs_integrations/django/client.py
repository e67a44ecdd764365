"""The container and the blocking client of a Django process, and scheduling that commits with
the caller's write.

``schedule_on_commit(job, params, ...)`` is Celery's ``delay_on_commit``, with one more case:

- Inside ``django_mongodb_backend.transaction.atomic()`` on the database Dogs shares
  (``DOGS['USING']``), the job is written **in that MongoDB transaction**, through the session
  the backend keeps on its connection (``connection.session``): the job exists exactly when the
  transaction commits, and ``outcome`` is known at once. Mode ``"transaction"``.
- Inside Django's ``transaction.atomic()`` on a SQL database (or a MongoDB transaction on a
  client Dogs does not share), the job is written by ``transaction.on_commit`` after the commit,
  and never when it rolls back. Between the commit and that write a crash loses the job (the
  same window as Celery's). Mode ``"on_commit"``; ``outcome`` is set once written.
- Outside any transaction (Django's ``transaction.atomic()`` on ``django_mongodb_backend`` is
  not a transaction at all: the backend does not support it), the job is written at once.
  Mode ``"now"``.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from django.db import DEFAULT_DB_ALIAS, connections, transaction

from dogs_core.domain import validation
from dogs_core.domain.definitions import EventJobDefinition, validate_params
from dogs_core.domain.records import ScheduleOutcome
from dogs_core.errors import InvalidOptionError
from dogs_core.jobs import Jobs
from dogs_core.runtime.client.blocking import BlockingDogsClient
from dogs_integrations.django.conf import dogs_settings
from dogs_integrations.django.discovery import discover_jobs
from dogs_mongo.container import DogsContainer

__all__ = ["CommitSchedule", "get_client", "get_container", "get_jobs", "schedule_on_commit"]

logger = logging.getLogger("dogs.django")

_lock = threading.Lock()
_container: DogsContainer | None = None
_client: BlockingDogsClient | None = None


def get_jobs() -> Jobs:
    """The jobs of the installed apps (see :mod:`dogs_integrations.django.discovery`)."""
    return discover_jobs()


def get_container() -> DogsContainer:
    """The process's container, of ``DOGS``; with ``USING``, its sync client is the Django
    database's ``MongoClient`` (never closed by Dogs)."""
    global _container
    with _lock:
        if _container is None:
            checked = dogs_settings()
            overrides: dict[str, Any] = {}
            if checked.using is not None:
                connection = connections[checked.using]
                connection.ensure_connection()
                overrides["sync_mongo_client"] = connection.connection
            _container = DogsContainer(**checked.options, **overrides)
        return _container


def get_client() -> BlockingDogsClient:
    """The process's blocking client (for views, commands, signals): each call runs in the
    caller's thread on PyMongo's ``MongoClient``."""
    global _client
    container = get_container()
    with _lock:
        if _client is None:
            _client = container.blocking_client(get_jobs())
        return _client


def reset() -> None:
    """Close and forget the process's container and client (tests that change ``DOGS``)."""
    global _container, _client
    with _lock:
        container, _container, _client = _container, None, None
    if container is not None:
        container.close()


@dataclass
class CommitSchedule:
    """What :func:`schedule_on_commit` did: ``mode`` (``"transaction"``, ``"on_commit"`` or
    ``"now"``; see the module documentation) and the ``outcome`` (``Scheduled`` or
    ``Duplicate``; ``None`` until an ``"on_commit"`` job is written)."""

    mode: Literal["transaction", "on_commit", "now"]
    outcome: ScheduleOutcome | None = None


def _mongo_session(alias: str) -> object | None:
    """The session of an open ``django_mongodb_backend`` transaction on ``alias``, when the
    container shares that database's ``MongoClient``; else ``None``."""
    connection = connections[alias]
    if connection.vendor != "mongodb" or not getattr(connection, "in_atomic_block_mongo", False):
        return None
    session: object | None = getattr(connection, "session", None)
    if session is None:
        return None
    if get_container().sync_mongo_client() is not connection.connection:
        logger.debug("a MongoDB transaction on another client: the job waits for its commit")
        return None
    return session


def _event_job(job: EventJobDefinition | str) -> EventJobDefinition:
    definition = get_jobs().get(job) if isinstance(job, str) else job
    if not isinstance(definition, EventJobDefinition):
        raise InvalidOptionError("job", job, "must be an event job (or the name of one)")
    return definition


def schedule_on_commit(
    job: EventJobDefinition | str,
    params: object = None,
    *,
    run_in: timedelta | int | float | str | None = None,
    run_at: datetime | None = None,
    priority: int | None = None,
    unique_key: str | None = None,
    using: str | None = None,
) -> CommitSchedule:
    """Schedule one run of an event job so that it commits with the caller's write on the
    Django database ``using`` (the default one by default): in the same MongoDB transaction,
    after the commit, or at once (see the module documentation for which, and why). Checks
    the job and its params before anything is written or deferred."""
    definition = _event_job(job)
    validate_params(definition, params)
    if run_in is not None:
        validation.duration("run_in", run_in)
    if priority is not None:
        validation.priority("priority", priority)
    validation.optional_text("unique_key", unique_key)
    alias = validation.text("using", using) if using is not None else DEFAULT_DB_ALIAS
    if alias not in connections:
        raise InvalidOptionError("using", using, "not a database of DATABASES")
    options: dict[str, Any] = {"run_in": run_in, "run_at": run_at, "priority": priority}
    options["unique_key"] = unique_key
    client = get_client()
    session = _mongo_session(alias)
    if session is not None:
        outcome = client.schedule(definition, params, session=session, **options)
        return CommitSchedule("transaction", outcome)
    pending = CommitSchedule("on_commit")

    def write() -> None:
        pending.outcome = client.schedule(definition, params, **options)

    transaction.on_commit(write, using=alias)
    if pending.outcome is not None:  # no transaction was open: on_commit ran it at once
        pending.mode = "now"
    return pending
