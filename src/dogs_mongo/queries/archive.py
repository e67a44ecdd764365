"""The archive's MongoDB shape: which documents a batch reads, how it copies them, the fenced
deletes from the live collections and the indexes of the archive collections.

A batch (:class:`~dogs_mongo._async.archive.MongoArchiver`) reads up to N documents through an
index Dogs already has (no index is added to the live collections), upserts each into the
archive by ``_id`` with ``archivedAt`` and ``archivePending: true``, deletes the originals (a
failed record only while it is still the same failed record: :func:`failed_record_fence`), then
settles the copies: pending removed where the original is gone, the copy removed where the
original is still there. Every step is idempotent, so a crash anywhere is finished by the next
batch, which settles the pending copies first (:data:`PENDING_FILTER`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from dogs_core.domain.archiving import ArchiveKind
from dogs_mongo.queries.indexes import FAILED_INDEX_NAME, IndexSpec

__all__ = [
    "ARCHIVED_AT_FIELD",
    "ARCHIVE_HISTORY_INDEXES",
    "ARCHIVE_RECORD_INDEXES",
    "ARCHIVE_SUFFIX",
    "BATCH_HINTS",
    "BATCH_SORTS",
    "PENDING_FIELD",
    "PENDING_FILTER",
    "archive_collection_name",
    "archive_copy",
    "batch_filter",
    "confirm_update",
    "failed_record_fence",
    "ids_filter",
    "pending_copies_filter",
]

#: The default archive collection of a live collection is its name plus this suffix.
ARCHIVE_SUFFIX: Final = "_archive"
#: When the document was copied into the archive (a BSON date).
ARCHIVED_AT_FIELD: Final = "archivedAt"
#: Present (``true``) on a copy whose original may still be live; unset once settled.
PENDING_FIELD: Final = "archivePending"
PENDING_FILTER: Final[Mapping[str, Any]] = {PENDING_FIELD: True}

#: The batch reads walk these indexes (both created by the job store's ``setup``): the history
#: by ``{jobName: 1, startedAt: 1}`` (Dogs' own), the failed records by the partial
#: ``jobs_dogs_records_failed`` (``{status: 1, jobName: 1, _id: 1}``, failed records only).
BATCH_HINTS: Final[Mapping[ArchiveKind, str]] = {
    ArchiveKind.HISTORY: "jobName_1_startedAt_1",
    ArchiveKind.FAILED_RECORDS: FAILED_INDEX_NAME,
}
#: The order of a batch read: the hinted index's order (no in-memory sort).
BATCH_SORTS: Final[Mapping[ArchiveKind, Sequence[tuple[str, int]]]] = {
    ArchiveKind.HISTORY: [("jobName", 1), ("startedAt", 1)],
    ArchiveKind.FAILED_RECORDS: [("status", 1), ("jobName", 1), ("_id", 1)],
}

ARCHIVE_HISTORY_INDEXES: Final[tuple[IndexSpec, ...]] = (
    IndexSpec("archive_started_at", (("startedAt", 1),)),
    IndexSpec("archive_job_name_started_at", (("jobName", 1), ("startedAt", 1))),
    IndexSpec("archive_job_id", (("jobId", 1),)),
    IndexSpec("archive_pending", ((PENDING_FIELD, 1),), {"sparse": True}),
    # The inspection role's searches by unique key (dogs_mongo.queries.inspection).
    IndexSpec(
        "archive_history_unique_identifier",
        (("uniqueIdentifier", 1), ("startedAt", -1)),
        {"partialFilterExpression": {"uniqueIdentifier": {"$exists": True}}},
    ),
)
ARCHIVE_RECORD_INDEXES: Final[tuple[IndexSpec, ...]] = (
    IndexSpec("archive_max_tries_reached_at", (("maxTriesReachedAt", 1),)),
    IndexSpec("archive_job_name", (("jobName", 1),)),
    IndexSpec("archive_pending", ((PENDING_FIELD, 1),), {"sparse": True}),
    IndexSpec(
        "archive_record_unique_identifier",
        (("uniqueIdentifier", 1),),
        {"partialFilterExpression": {"uniqueIdentifier": {"$exists": True}}},
    ),
)


def archive_collection_name(source: str) -> str:
    """The default archive of the live collection ``source``."""
    return f"{source}{ARCHIVE_SUFFIX}"


def batch_filter(kind: ArchiveKind, cutoff: datetime) -> dict[str, Any]:
    """The documents of ``kind`` old enough to archive (:mod:`dogs_core.domain.archiving`):
    history rows started before ``cutoff``; failed event records marked before it. The failed
    filter names ``status`` so that the partial index can serve it, and ``type`` so that a
    legacy recurrent record in that status (still claimed) is never taken."""
    if kind is ArchiveKind.HISTORY:
        return {"startedAt": {"$lt": cutoff}}
    return {"status": "maxTriesReached", "type": "event", "maxTriesReachedAt": {"$lt": cutoff}}


def archive_copy(document: Mapping[str, Any], archived_at: datetime) -> dict[str, Any]:
    """The archived document: every field of ``document``, then ``archivedAt`` and pending."""
    copy = dict(document)
    copy[ARCHIVED_AT_FIELD] = archived_at
    copy[PENDING_FIELD] = True
    return copy


def failed_record_fence(copy: Mapping[str, Any]) -> dict[str, Any]:
    """The delete filter of the original of an archived failed record: the same id, still a
    failed event record, marked at the same moment. A record revived by ``retry_now`` (status
    gone), or failed again since (a new ``maxTriesReachedAt``), does not match."""
    return {
        "_id": copy["_id"],
        "status": "maxTriesReached",
        "type": "event",
        "maxTriesReachedAt": copy.get("maxTriesReachedAt"),
    }


def ids_filter(ids: Sequence[Any]) -> dict[str, Any]:
    return {"_id": {"$in": list(ids)}}


def pending_copies_filter(ids: Sequence[Any]) -> dict[str, Any]:
    """The pending copies among ``ids`` (a settled copy is never removed)."""
    return {"_id": {"$in": list(ids)}, PENDING_FIELD: True}


def confirm_update() -> dict[str, Any]:
    """A copy whose original is gone is settled: no longer pending."""
    return {"$unset": {PENDING_FIELD: ""}}
