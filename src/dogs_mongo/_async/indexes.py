"""Index setup of the MongoDB job store: create what is missing, recreate what conflicts, wait
for the builds (another process's too), and say so in the log.

``createIndexes`` returns when its build is done, so setup (and with it the first claim) waits
for every index it builds; on a big collection that is the slow part of a worker's start, so
each build on a non-empty collection is logged at INFO before it starts and when it is ready.
``listIndexes`` shows an index another process is still building like a ready one (MongoDB 6),
while a query hinting it fails until the build is done: the listing asks for the builds in
progress (``includeBuildUUIDs``) and setup waits for those too (a ``createIndexes`` of the same
spec joins the build in progress).

Part of the async adapter (the source of truth): ``scripts/generate_sync.py`` generates
``_sync/indexes.py`` from this module.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import OperationFailure, PyMongoError

from dogs_mongo import queries as q
from dogs_mongo.errors import (
    INDEX_KEY_SPECS_CONFLICT,
    INDEX_OPTIONS_CONFLICT,
    NAMESPACE_NOT_FOUND,
    is_transient,
    translate_errors,
)
from dogs_mongo.queries.indexes import IndexListing, conflicting_index

__all__ = ["ensure_indexes", "list_indexes"]

log = logging.getLogger("dogs.mongo.store")


Document = dict[str, Any]


async def list_indexes(collection: AsyncCollection[Document]) -> IndexListing:
    """The ready and in-progress indexes of ``collection`` (one ``listIndexes`` with
    ``includeBuildUUIDs``; a server that rejects the option gets a plain listing, every index
    in it taken as ready). A missing collection has none."""
    command = {"listIndexes": collection.name, "includeBuildUUIDs": True}
    try:
        reply = await collection.database.command(command)
    except OperationFailure as error:
        if error.code == NAMESPACE_NOT_FOUND:
            return IndexListing()
        if is_transient(error):
            raise
        log.debug("dogs: listIndexes with includeBuildUUIDs failed (%s); listing plainly", error)
        return IndexListing(ready=dict(await collection.index_information()))
    ready: dict[str, Mapping[str, Any]] = {}
    building: dict[str, Mapping[str, Any]] = {}
    for entry in reply["cursor"]["firstBatch"]:  # at most 64 indexes: one batch
        if "buildUUID" in entry and isinstance(entry.get("spec"), Mapping):
            building[str(entry["spec"]["name"])] = entry["spec"]
        else:
            ready[str(entry["name"])] = entry
    return IndexListing(ready=ready, building=building)


async def ensure_indexes(
    collection: AsyncCollection[Document], specs: Sequence[q.IndexSpec]
) -> bool:
    """Create the indexes ``specs`` on ``collection`` that are missing or differ, and wait for
    those another process is building (failures are logged, not raised). Returns false when a
    transient error means it should be retried.

    Only a transient failure to list the indexes is raised (as ``TransientStoreError``): the
    server is unreachable, so the caller's retry policy decides how long to wait for it,
    where going on would wait a server selection timeout for every collection and index."""
    try:
        with translate_errors(f"setup: list the indexes of {collection.name}", write=False):
            listing = await list_indexes(collection)
    except PyMongoError as error:  # not transient (authorization...): logged, setup goes on
        log.warning("dogs: cannot list the indexes of %s: %s", collection.name, error)
        return True
    existing = listing.ready
    missing = [
        spec for spec in specs if spec.name not in existing or not spec.matches(existing[spec.name])
    ]
    documents = await _document_count(collection) if missing else 0
    complete = True
    if len(missing) > 1 and not set(existing) - {"_id_"} and not listing.building:
        # A new collection: one createIndexes for all (falls back to one by one).
        began = _announce(collection, [spec.name for spec in missing], documents, listing)
        try:
            await collection.create_indexes([spec.as_index_model() for spec in missing])
            _report_ready(collection, [spec.name for spec in missing], documents, began)
            missing = []
        except PyMongoError as error:
            log.debug("dogs: batched index creation on %s failed: %s", collection.name, error)
    for spec in missing:
        began = _announce(collection, [spec.name], documents, listing)
        try:
            await _create_index(collection, spec, existing)
            _report_ready(collection, [spec.name], documents, began)
        except PyMongoError as error:
            log.error(
                "dogs: index %s on %s could not be created: %s",
                spec.name,
                collection.name,
                error,
            )
            complete = complete and not is_transient(error)
    _warn_undeclared(collection, specs, existing)
    return complete


async def _document_count(collection: AsyncCollection[Document]) -> int | None:
    """The collection's size from its metadata (no scan), ``None`` when it cannot be read."""
    try:
        return int(await collection.estimated_document_count())
    except PyMongoError as error:
        log.debug("dogs: cannot count the documents of %s: %s", collection.name, error)
        return None


def _announce(
    collection: AsyncCollection[Document],
    names: Sequence[str],
    documents: int | None,
    listing: IndexListing,
) -> float:
    """Log (INFO, on a non-empty collection) the build about to start or be waited for; the
    time it starts, for :func:`_report_ready`."""
    if documents != 0:
        size = "of unknown size" if documents is None else f"about {documents:,} documents"
        joined = ", ".join(names)
        if all(name in listing.building for name in names):
            log.info(
                "dogs: index %s on %s (%s) is being built by another process: "
                "claims start when it is ready",
                joined,
                collection.name,
                size,
            )
        else:
            log.info(
                "dogs: building index %s on %s (%s): claims start when it is ready",
                joined,
                collection.name,
                size,
            )
    return time.monotonic()


def _report_ready(
    collection: AsyncCollection[Document],
    names: Sequence[str],
    documents: int | None,
    began: float,
) -> None:
    if documents != 0:
        seconds = time.monotonic() - began
        log.info("dogs: index %s on %s ready in %.1f s", ", ".join(names), collection.name, seconds)


def _warn_undeclared(
    collection: AsyncCollection[Document],
    specs: Sequence[q.IndexSpec],
    existing: Mapping[str, Any],
) -> None:
    declared = {spec.name for spec in specs} | {"_id_"}
    undeclared = sorted(set(existing) - declared)
    if undeclared:
        log.warning(
            "dogs: %s has indexes Dogs does not declare: %s",
            collection.name,
            ", ".join(undeclared),
        )


async def _create_index(
    collection: AsyncCollection[Document],
    spec: q.IndexSpec,
    existing: Mapping[str, Any],
) -> None:
    """Create ``spec`` (joining a build of the same spec in progress); an index that blocks it
    (same name or same keys, other options) is dropped and the index created again."""
    try:
        await collection.create_index(list(spec.keys), **spec.create_options())
        return
    except OperationFailure as error:
        if error.code not in (INDEX_OPTIONS_CONFLICT, INDEX_KEY_SPECS_CONFLICT):
            raise
        conflicting = conflicting_index(spec, existing)
        log.warning(
            "dogs: index %s on %s conflicts with the existing index %s (%s); recreating it",
            spec.name,
            collection.name,
            conflicting,
            error,
        )
    if conflicting is not None:
        await collection.drop_index(conflicting)
    await collection.create_index(list(spec.keys), **spec.create_options())
