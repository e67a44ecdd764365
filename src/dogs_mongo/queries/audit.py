"""The audit trail on MongoDB (:mod:`dogs_core.domain.audit`): one document per operator
action in an additive collection that Node Dogs never reads, keyed by a UUIDv7 (newest first
is descending ``_id``), removed by a TTL on ``expiresAt``."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from dogs_core.domain.audit import (
    Actor,
    AuditEntry,
    AuditOutcome,
    AuditQuery,
    BulkProgress,
)
from dogs_core.domain.records import to_millis
from dogs_mongo.queries.indexes import IndexSpec

__all__ = [
    "AUDIT_INDEXES",
    "DEFAULT_AUDIT_COLLECTION",
    "audit_document",
    "audit_filter",
    "entry_from_document",
    "take_over_filter",
]

#: The audit's collection (additive: docs/differences.md).
DEFAULT_AUDIT_COLLECTION: Final = "orionjs.jobs_dogs_audit"

AUDIT_INDEXES: Final = (
    IndexSpec("jobs_dogs_audit_expires_at_ttl", (("expiresAt", 1),), {"expireAfterSeconds": 0}),
    # The entries that list a job (its page: who cancelled or deleted it), chunks included.
    IndexSpec(
        "jobs_dogs_audit_job_ids",
        (("jobIds", 1), ("_id", -1)),
        {"partialFilterExpression": {"jobIds": {"$exists": True}}},
    ),
    # One action's or one actor's entries, newest first.
    IndexSpec("jobs_dogs_audit_action", (("action", 1), ("_id", -1))),
    IndexSpec("jobs_dogs_audit_actor", (("actor.name", 1), ("_id", -1))),
)


def _bulk_document(bulk: BulkProgress) -> dict[str, Any]:
    return {
        "selection": dict(bulk.selection),
        "to": None if bulk.to is None else dict(bulk.to),
        "matched": int(bulk.matched),
        "chunkSize": int(bulk.chunk_size),
        "examined": int(bulk.examined),
        "changed": int(bulk.changed),
        "skipped": {str(key): int(count) for key, count in bulk.skipped.items()},
        "chunks": int(bulk.chunks),
        "cursor": bulk.cursor,
        "runner": bulk.runner,
    }


def audit_document(entry: AuditEntry) -> dict[str, Any]:
    document: dict[str, Any] = {
        "_id": entry.id,
        "at": to_millis(entry.at),
        "actor": {"name": entry.actor.name, "source": entry.actor.source, "host": entry.actor.host},
        "action": entry.action,
        "target": entry.target,
        "outcome": entry.outcome.value,
        "count": int(entry.count),
        "details": dict(entry.details),
    }
    if entry.job_ids:
        document["jobIds"] = list(entry.job_ids)
    if entry.parent_id is not None:
        document["parentId"] = entry.parent_id
    if entry.bulk is not None:
        document["bulk"] = _bulk_document(entry.bulk)
    if entry.error is not None:
        document["error"] = entry.error
    if entry.updated_at is not None:
        document["updatedAt"] = to_millis(entry.updated_at)
    if entry.expires_at is not None:
        document["expiresAt"] = to_millis(entry.expires_at)
    return document


def entry_from_document(document: Mapping[str, Any]) -> AuditEntry:
    actor = document.get("actor") or {}
    bulk = document.get("bulk")
    return AuditEntry(
        id=str(document["_id"]),
        at=document["at"],
        actor=Actor(
            name=str(actor.get("name", "")),
            source=str(actor.get("source", "api")),
            host=actor.get("host"),
        ),
        action=str(document.get("action", "")),
        target=str(document.get("target", "")),
        outcome=AuditOutcome(document.get("outcome", AuditOutcome.DONE.value)),
        count=int(document.get("count", 0)),
        job_ids=tuple(str(one) for one in document.get("jobIds") or ()),
        details=dict(document.get("details") or {}),
        parent_id=document.get("parentId"),
        bulk=None
        if bulk is None
        else BulkProgress(
            selection=dict(bulk.get("selection") or {}),
            matched=int(bulk.get("matched", 0)),
            chunk_size=int(bulk.get("chunkSize", 0)),
            to=bulk.get("to"),
            examined=int(bulk.get("examined", 0)),
            changed=int(bulk.get("changed", 0)),
            skipped={str(k): int(v) for k, v in (bulk.get("skipped") or {}).items()},
            chunks=int(bulk.get("chunks", 0)),
            cursor=bulk.get("cursor"),
            runner=bulk.get("runner"),
        ),
        error=document.get("error"),
        updated_at=document.get("updatedAt"),
        expires_at=document.get("expiresAt"),
    )


def audit_filter(query: AuditQuery) -> dict[str, Any]:
    filter_: dict[str, Any] = {}
    if query.before is not None:
        filter_["_id"] = {"$lt": query.before}
    if query.action is not None:
        filter_["action"] = query.action
    if query.actor is not None:
        filter_["actor.name"] = query.actor
    if query.job_id is not None:
        filter_["jobIds"] = query.job_id
    if query.top_level:
        filter_["parentId"] = None
    return filter_


def take_over_filter(entry_id: str, stalled_before: datetime) -> dict[str, Any]:
    """A bulk entry that may be taken over: resumable and not running, or running but not
    updated since ``stalled_before``."""
    return {
        "_id": entry_id,
        "bulk": {"$exists": True},
        "$or": [
            {"outcome": {"$in": [AuditOutcome.STOPPED.value, AuditOutcome.FAILED.value]}},
            {
                "outcome": AuditOutcome.RUNNING.value,
                "updatedAt": {"$lt": to_millis(stalled_before)},
            },
        ],
    }
