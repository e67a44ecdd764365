"""Index setup of the MongoDB job store: create what is missing, recreate what conflicts.

Part of the async adapter (the source of truth): ``scripts/generate_sync.py`` generates
``_sync/indexes.py`` from this module.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import OperationFailure, PyMongoError

from dogs_mongo import queries as q
from dogs_mongo.errors import is_transient, translate_errors

__all__ = ["ensure_indexes"]

log = logging.getLogger("dogs.mongo.store")

_INDEX_OPTIONS_CONFLICT: Final = 85
_INDEX_KEY_SPECS_CONFLICT: Final = 86

Document = dict[str, Any]


async def ensure_indexes(
    collection: AsyncCollection[Document], specs: Sequence[q.IndexSpec]
) -> bool:
    """Create the indexes ``specs`` on ``collection`` that are missing or differ (failures are
    logged, not raised). Returns false when a transient error means it should be retried.

    Only a transient failure to list the indexes is raised (as ``TransientStoreError``): the
    server is unreachable, so the caller's retry policy decides how long to wait for it,
    where going on would wait a server selection timeout for every collection and index."""
    try:
        with translate_errors(f"setup: list the indexes of {collection.name}", write=False):
            existing: Mapping[str, Any] = await collection.index_information()
    except PyMongoError as error:  # not transient (authorization...): logged, setup goes on
        log.warning("dogs: cannot list the indexes of %s: %s", collection.name, error)
        return True
    complete = True
    missing = [
        spec for spec in specs if spec.name not in existing or not spec.matches(existing[spec.name])
    ]
    if len(missing) > 1 and not set(existing) - {"_id_"}:
        # A new collection: one createIndexes for all (falls back to one by one).
        try:
            await collection.create_indexes([spec.as_index_model() for spec in missing])
            missing = []
        except PyMongoError as error:
            log.debug("dogs: batched index creation on %s failed: %s", collection.name, error)
    for spec in missing:
        try:
            await _create_index(collection, spec, existing)
        except PyMongoError as error:
            log.error(
                "dogs: index %s on %s could not be created: %s",
                spec.name,
                collection.name,
                error,
            )
            complete = complete and not is_transient(error)
    declared = {spec.name for spec in specs} | {"_id_"}
    undeclared = sorted(set(existing) - declared)
    if undeclared:
        log.warning(
            "dogs: %s has indexes Dogs does not declare: %s",
            collection.name,
            ", ".join(undeclared),
        )
    return complete


async def _create_index(
    collection: AsyncCollection[Document],
    spec: q.IndexSpec,
    existing: Mapping[str, Any],
) -> None:
    try:
        await collection.create_index(list(spec.keys), **spec.create_options())
        return
    except OperationFailure as error:
        if error.code not in (_INDEX_OPTIONS_CONFLICT, _INDEX_KEY_SPECS_CONFLICT):
            raise
        conflicting = _conflicting_index(spec, existing)
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


def _conflicting_index(spec: q.IndexSpec, existing: Mapping[str, Any]) -> str | None:
    """The existing index that blocks ``spec``: same name, else same key pattern."""
    if spec.name in existing:
        return spec.name
    for name, info in existing.items():
        keys = info.get("key")
        if keys is not None and [(str(k), int(v)) for k, v in keys] == list(spec.keys):
            return str(name)
    return None
