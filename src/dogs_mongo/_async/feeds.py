"""The feeds role of the MongoDB store: one change stream per feed, resumed by token.

Part of the async adapter (the source of truth): ``scripts/generate_sync.py`` generates
``_sync/feeds.py`` from this module. :class:`MongoFeeds` is a base of the store class; it
uses the store's records, history and controls collections (the pause feed). The pipelines and
the mapping of events are in :mod:`dogs_mongo.queries.changes`.

A feed opens its change stream at its first ``__anext__`` (which yields ``[]`` once it is open:
a change made after that is reported), then yields a batch per ``getMore`` that brought events,
and ``[]`` for one that did not (``maxAwaitTimeMS`` of
:data:`~dogs_mongo.queries.CHANGE_STREAM_MAX_AWAIT_MS`: the heartbeat). Each round trip runs
under ``pymongo.timeout`` (:data:`OPERATION_TIMEOUT`), so that no ``next()`` of the sync feed
blocks for long, even when the server is unreachable.

Errors. PyMongo resumes a change stream once by itself after a resumable error; when that
fails too, the feed reopens the stream after its last resume token (``startAfter``), up to
:data:`MAX_REOPENS` times in a row (yielding ``[]`` between attempts), then raises
:class:`~dogs_core.errors.TransientStoreError`. A token the server no longer has (the oplog
moved on) or a stream invalidated (the collection dropped) reopens without a token: the changes
in between are missed, which a notification may do. A standalone server (code 40573) or a user
without the permission (code 13) raises :class:`~dogs_core.errors.ChangeFeedUnavailableError`;
a transient failure of the first open raises ``TransientStoreError`` (:func:`translate_errors`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any, TypeVar

import pymongo
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import PyMongoError

from dogs_core.domain.feeds import check_feed_names, check_optional_feed_names
from dogs_core.domain.records import HistoryRecord
from dogs_core.domain.wakeups import RecordChange
from dogs_core.errors import ChangeFeedUnavailableError
from dogs_mongo import queries as q
from dogs_mongo.errors import (
    give_up_unless_resumable,
    is_unavailable,
    resume_point,
    translate_errors,
)
from dogs_mongo.queries.changes import MAX_BATCH, OPERATION_TIMEOUT, buffered
from dogs_mongo.shielding import shielded

__all__ = ["MongoFeeds"]

log = logging.getLogger("dogs.mongo.store")

T = TypeVar("T")
Document = dict[str, Any]


class MongoFeeds:
    """The feeds of the store (``watch_records``, ``watch_history``, ``watch_pauses``)."""

    _records: AsyncCollection[Document]
    _history: AsyncCollection[Document]
    _controls: AsyncCollection[Document]

    def watch_records(self, job_names: Sequence[str]) -> AsyncGenerator[list[RecordChange], None]:
        """Inserts of ``job_names``, and the updates that may make any record claimable
        (their job name unknown): see :mod:`dogs_mongo.queries.changes`."""
        return _feed(
            "watch_records",
            self._records,
            lambda: q.record_changes_pipeline(check_feed_names("job_names", job_names)),
            q.record_change,
        )

    def watch_history(
        self, *, job_ids: Sequence[str] | None = None, job_names: Sequence[str] | None = None
    ) -> AsyncGenerator[list[HistoryRecord], None]:
        """History rows as first written (the insert of their first upsert)."""
        return _feed(
            "watch_history",
            self._history,
            lambda: q.history_changes_pipeline(
                job_ids=check_optional_feed_names("job_ids", job_ids),
                job_names=check_optional_feed_names("job_names", job_names),
            ),
            q.history_change,
        )

    def watch_pauses(self) -> AsyncGenerator[list[str], None]:
        """The names paused or resumed: the inserts and deletes of pause documents in the
        controls collection (its slots, rate windows and leases are not watched)."""
        return _feed("watch_pauses", self._controls, q.pause_changes_pipeline, q.pause_change)


async def _feed(
    operation: str,
    collection: AsyncCollection[Document],
    pipeline_of: Callable[[], list[dict[str, Any]]],
    convert: Callable[[Mapping[str, Any]], T | None],
) -> AsyncGenerator[list[T], None]:
    """The loop of one feed (see the module documentation)."""
    pipeline = pipeline_of()
    with translate_errors(operation, write=False):
        stream: Any = await _open(operation, collection, pipeline, None)
    token = stream.resume_token
    failures = 0
    try:
        yield []
        while True:
            try:
                if stream is None:
                    stream = await _open(operation, collection, pipeline, token)
                batch = await _next_batch(stream, convert)
            except PyMongoError as error:
                failures += 1
                token = resume_point(error, stream, token)
                await _close(stream)
                stream = None
                give_up_unless_resumable(operation, error, failures)
                log.info("dogs: %s: reopening the change stream (%s)", operation, error)
                yield []
                continue
            failures = 0
            token = stream.resume_token or token
            if not stream.alive:  # invalidated (the collection was dropped or renamed)
                await _close(stream)
                stream = token = None
            yield batch
    finally:
        await _close(stream)


async def _open(
    operation: str,
    collection: AsyncCollection[Document],
    pipeline: list[dict[str, Any]],
    token: Mapping[str, Any] | None,
) -> Any:
    """A change stream of ``pipeline`` after ``token`` (from now when ``None``)."""
    try:
        with pymongo.timeout(OPERATION_TIMEOUT):
            return await _resolve(
                collection.watch(
                    pipeline,
                    start_after=token,
                    max_await_time_ms=q.CHANGE_STREAM_MAX_AWAIT_MS,
                )
            )
    except PyMongoError as error:
        if is_unavailable(error):
            raise ChangeFeedUnavailableError(
                f"{operation}: this MongoDB deployment cannot open change streams "
                f"({type(error).__name__}: {error}); a replica set (even of one node) and the "
                "changeStream privilege are needed"
            ) from error
        raise


async def _next_batch(stream: Any, convert: Callable[[Mapping[str, Any]], T | None]) -> list[T]:
    """The events of one ``getMore`` (those already received, without waiting for more)."""
    batch: list[T] = []
    with pymongo.timeout(OPERATION_TIMEOUT):
        event = await stream.try_next()
        while event is not None:
            item = convert(event)
            if item is not None:
                batch.append(item)
            if len(batch) >= MAX_BATCH or not buffered(stream):
                break
            event = await stream.try_next()
    return batch


async def _close(stream: Any) -> None:
    """Close ``stream`` (if any), whatever happens."""
    if stream is None:
        return
    with shielded():
        try:
            await stream.close()
        except PyMongoError as error:
            log.debug("dogs: closing a change stream failed: %s", error)


async def _resolve(value: Any) -> Any:
    """PyMongo's async ``watch`` is a coroutine; the sync twin's returns the stream directly."""
    if hasattr(value, "__await__"):
        return await value
    return value
