"""Index specs of both collections, exactly as ``listIndexes`` shows them for Dogs 4.6.8, plus
one additive index on each: the failed records (:data:`FAILED_INDEX_NAME`) and the history of
one job (:data:`HISTORY_JOB_ID_INDEX_NAME`), both in docs/differences.md; and the two indexes of
the additive controls collection (:data:`CONTROL_INDEXES`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from pymongo import IndexModel

from dogs_mongo import queries as q
from dogs_mongo.queries.common import LOCK_ID_INDEX_NAME

# --------------------------------------------------------------------------------------------
# Index specs (exactly as `listIndexes` shows them for Dogs 4.6.8, in creation order)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IndexSpec:
    """One index: its name, its ordered key pattern and its options."""

    name: str
    keys: tuple[tuple[str, int], ...]
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key_document(self) -> dict[str, int]:
        return dict(self.keys)

    def as_index_model(self) -> IndexModel:
        """The ``IndexModel`` that ``create_indexes`` takes."""
        return IndexModel(list(self.keys), name=self.name, **dict(self.options))

    def create_options(self) -> dict[str, Any]:
        """Keyword arguments of ``create_index`` besides the keys."""
        return {"name": self.name, **dict(self.options)}

    def as_list_indexes_entry(self) -> dict[str, Any]:
        """What ``listIndexes`` returns for this index on MongoDB 6 to 8."""
        return {"v": 2, "key": self.key_document, "name": self.name, **dict(self.options)}

    def matches(self, info: Mapping[str, Any]) -> bool:
        """Whether an ``index_information()`` entry (or a ``listIndexes`` entry) is this index
        with the same key pattern and options."""
        raw_keys = info.get("key")
        if isinstance(raw_keys, Mapping):
            keys = tuple((str(k), _normalize_direction(v)) for k, v in raw_keys.items())
        elif raw_keys is None:
            return False
        else:
            keys = tuple((str(k), _normalize_direction(v)) for k, v in raw_keys)
        if keys != self.keys:
            return False
        ignored = {"v", "key", "name", "ns", "background"}
        present = {k: v for k, v in info.items() if k not in ignored}
        return _normalize_options(present) == _normalize_options(dict(self.options))


def _normalize_direction(value: Any) -> int:
    if isinstance(value, bool):
        raise TypeError(f"unexpected index direction {value!r}")
    if isinstance(value, int | float):
        return int(value)
    raise TypeError(f"unexpected index direction {value!r}")


def _normalize_options(options: Mapping[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in options.items():
        if key in ("unique", "sparse") and not value:
            continue  # `unique: false` is the same index as no `unique`
        if key == "expireAfterSeconds":
            value = int(value)
        result[key] = value
    return result


#: The one records index Dogs does not create: the failed (``maxTriesReached``) records by job
#: name and id, partial, so it holds only those. ``find_jobs(state=failed)`` pages over it and
#: a bulk delete of failed jobs finds them through it.
FAILED_INDEX_NAME: Final = "jobs_dogs_records_failed"

#: The tagged records by tag, then id (``find_jobs(tags=...)`` pages over it).
TAGS_INDEX_NAME: Final = "jobs_dogs_records_tags"
#: The runtime schedules by event job and next run (a worker's due schedules).
SCHEDULES_INDEX_NAME: Final = "jobs_dogs_records_schedules"
#: Workflow steps' records staged by a release (``queries.workflows.staged_filter``).
WORKFLOW_STAGED_INDEX_NAME: Final = "jobs_dogs_records_workflow_staged"

RECORD_INDEXES: Final[tuple[IndexSpec, ...]] = (
    IndexSpec(
        "jobs_dogs_records_partition_priority_next_run",
        (("partition", 1), ("priority", -1), ("nextRunAt", 1)),
    ),
    IndexSpec(
        "jobs_dogs_records_partition_job_name_priority_next_run",
        (("partition", 1), ("jobName", 1), ("priority", -1), ("nextRunAt", 1)),
    ),
    IndexSpec("uniqueIdentifier_1", (("uniqueIdentifier", 1),), {"unique": True, "sparse": True}),
    IndexSpec("jobs_dogs_records_expires_at_ttl", (("expiresAt", 1),), {"expireAfterSeconds": 0}),
    IndexSpec(LOCK_ID_INDEX_NAME, (("lockId", 1),), {"sparse": True}),
    IndexSpec(
        "jobName_1",
        (("jobName", 1),),
        {"unique": True, "partialFilterExpression": {"type": "recurrent"}},
    ),
    # Additive (not one of Dogs' indexes; docs/differences.md).
    IndexSpec(
        FAILED_INDEX_NAME,
        (("status", 1), ("jobName", 1), ("_id", 1)),
        {"partialFilterExpression": {"status": "maxTriesReached"}},
    ),
    # Additive, issue 27 (docs/differences.md): partial, so a record without the field (every
    # record a Node worker or an untagged schedule writes) is in neither, and costs no write.
    IndexSpec(
        TAGS_INDEX_NAME,
        (("tags", 1), ("_id", 1)),
        {"partialFilterExpression": {"tags": {"$exists": True}}},
    ),
    IndexSpec(
        SCHEDULES_INDEX_NAME,
        (("schedule.job", 1), ("nextRunAt", 1)),
        {"partialFilterExpression": {"schedule.job": {"$exists": True}}},
    ),
    # Additive, issue 40: a workflow step's record staged by its release (a few milliseconds,
    # unless a crash cut the release: the sweep's repair reads them). Sparse: no other record.
    IndexSpec(WORKFLOW_STAGED_INDEX_NAME, (("workflow.stagedAt", 1),), {"sparse": True}),
)

#: The tags index's keys: the hint of every read that selects by tags (``find_jobs``, bulk).
TAGS_INDEX_KEYS: Final = next(
    spec for spec in RECORD_INDEXES if spec.name == TAGS_INDEX_NAME
).key_document

#: The one index Dogs does not create: ``{jobId: 1, startedAt: -1}`` on the history.
HISTORY_JOB_ID_INDEX_NAME: Final = "jobId_1_startedAt_-1"

# The inspection role's history indexes (additive, docs/differences.md): partial, so that a
# ``success`` row without a unique key, the happy path, enters none of them.
#: Its error fields after the status and time make the error report a covered scan (no row read).
UNSUCCESSFUL_INDEX: Final = IndexSpec(
    "jobs_dogs_history_unsuccessful",
    (
        ("status", 1),
        ("startedAt", -1),
        ("errorType", 1),
        ("errorMessage", 1),
        ("jobName", 1),
        ("executionId", 1),
    ),
    {"partialFilterExpression": {"status": {"$in": ["error", "stale", "cancelled", "snoozed"]}}},
)
ERRORS_BY_TYPE_INDEX: Final = IndexSpec(
    "jobs_dogs_history_errors_by_type",
    (("errorType", 1), ("startedAt", -1)),
    {"partialFilterExpression": {"status": "error"}},
)
HISTORY_UNIQUE_KEY_INDEX: Final = IndexSpec(
    "jobs_dogs_history_unique_identifier",
    (("uniqueIdentifier", 1), ("startedAt", -1)),
    {"partialFilterExpression": {"uniqueIdentifier": {"$exists": True}}},
)
#: The additive history indexes of the inspection role (``dogs_mongo.queries.inspection``).
HISTORY_INSPECTION_INDEXES: Final = (
    UNSUCCESSFUL_INDEX,
    ERRORS_BY_TYPE_INDEX,
    HISTORY_UNIQUE_KEY_INDEX,
)

HISTORY_INDEXES: Final[tuple[IndexSpec, ...]] = (
    IndexSpec("executionId_1", (("executionId", 1),)),
    IndexSpec("jobName_1_startedAt_1", (("jobName", 1), ("startedAt", 1))),
    IndexSpec("expiresAt_1", (("expiresAt", 1),), {"expireAfterSeconds": 0}),
    # Additive (not one of Dogs' indexes; docs/differences.md): the history of one job id,
    # newest first (``get_executions(job_id=...)``, the history feed's consumers).
    IndexSpec(HISTORY_JOB_ID_INDEX_NAME, (("jobId", 1), ("startedAt", -1))),
    *HISTORY_INSPECTION_INDEXES,
)

#: The controls collection (additive, docs/differences.md): its documents' ``purgeAt`` (slots
#: and rate windows a day after their time; pauses and leases have none), and the documents of
#: one kind by job name (``paused_names``, ``held_slots``).
CONTROLS_PURGE_INDEX_NAME: Final = "jobs_dogs_controls_purge_at_ttl"
CONTROLS_KIND_INDEX_NAME: Final = "jobs_dogs_controls_kind_job_name"

CONTROL_INDEXES: Final[tuple[IndexSpec, ...]] = (
    IndexSpec(CONTROLS_PURGE_INDEX_NAME, (("purgeAt", 1),), {"expireAfterSeconds": 0}),
    IndexSpec(CONTROLS_KIND_INDEX_NAME, (("kind", 1), ("jobName", 1))),
)


@dataclass(frozen=True, slots=True)
class IndexListing:
    """The indexes of a collection by name: ``ready`` ones (a hint may name them) and those
    still ``building`` (``listIndexes`` entries, or their ``spec``; a hint on them fails)."""

    ready: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    building: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def conflicting_index(spec: q.IndexSpec, existing: Mapping[str, Any]) -> str | None:
    """The existing index that blocks ``spec``: same name, else same key pattern."""
    if spec.name in existing:
        return spec.name
    for name, info in existing.items():
        keys = info.get("key")
        if keys is None:
            continue
        pairs = keys.items() if isinstance(keys, Mapping) else keys
        if [(str(k), int(v)) for k, v in pairs] == list(spec.keys):
            return str(name)
    return None
