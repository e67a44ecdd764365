"""Pure builders of every MongoDB document the adapters send: filters, sorts, updates,
projections, explain commands and index specs, plus the mapping between the records of
:mod:`dogs_core.domain.records` and the camelCase documents of @orion-js/dogs.

Nothing here does I/O: both :class:`~dogs_mongo.AsyncMongoJobStore` and the generated
:class:`~dogs_mongo.MongoJobStore` build their commands from these functions, and the unit
tests check them against ``reference/dogs-schema.json`` (the commands Dogs 4.6.8 sends).

Stored types follow Dogs exactly: ``_id`` is a UUIDv7 string, ``priority``, ``partition``,
``tries`` and ``duration`` are BSON ints (Python ``int``, never ``float``), times are BSON dates
(timezone-aware UTC ``datetime``, truncated to the millisecond), ``params`` is ``null`` when a
job has none. Field order of inserted documents is the order Dogs uses.

The builders live in submodules by what they build (:mod:`~dogs_mongo.queries.indexes`,
``claims``, ``writes``, ``reads``, ``history``, ``documents``, ``common``); this package
re-exports all of them, so ``from dogs_mongo import queries as q`` gives every name.
"""

from __future__ import annotations

from dogs_mongo.queries.claims import (
    CLAIM_CANDIDATE_PROJECTION,
    CLAIM_MANY_UPDATE_HINT,
    HINT_BY_JOB_NAME,
    HINT_GLOBAL_PRIORITY,
    HINTS,
    CandidateQuery,
    ClaimCommand,
    claim_candidates_query,
    claim_from_before_image,
    claim_from_read_back,
    claim_many_updates,
    claim_update,
    claim_update_pipeline,
    claims_from_read_back,
    eligible_filter,
    find_one_and_update_claim,
    hint_spec,
    lock_id_filter,
    lock_ids_filter,
    sorted_update_one_claim,
)
from dogs_mongo.queries.common import (
    CLAIM_SORT,
    DEFAULT_HISTORY_COLLECTION,
    DEFAULT_RECORDS_COLLECTION,
    LOCK_ID_INDEX_NAME,
    MAX_BATCH_SIZE,
    MAX_BSON_DOCUMENT_SIZE,
    PROBE_MAX_TIME_MS,
)
from dogs_mongo.queries.documents import (
    record_from_document,
)
from dogs_mongo.queries.history import (
    history_filter,
    history_from_document,
    history_many_updates,
    history_update,
)
from dogs_mongo.queries.indexes import (
    HISTORY_INDEXES,
    RECORD_INDEXES,
    IndexSpec,
)
from dogs_mongo.queries.reads import (
    find_jobs_filter,
    find_jobs_sort,
    get_executions_sort,
    probe_execution_millis,
    probe_explain_command,
    status_counts_pipeline,
)
from dogs_mongo.queries.writes import (
    RECONCILE_PROJECTION,
    backfill_retention_filter,
    backfill_retention_update,
    batches,
    complete_filter,
    complete_many_filter,
    demote_stale_update,
    document_from_new_job,
    document_from_record,
    ensure_recurrent_filter,
    ensure_recurrent_update,
    extend_lock_update,
    fenced_filter,
    ids_filter,
    mark_max_tries_filter,
    mark_max_tries_update,
    partition_needs_repair,
    reconcile_cas_filter,
    reconcile_select_filter,
    reconcile_update,
    release_lock_update,
    reschedule_update,
    unique_identifier_filter,
    unlock_all_filter,
    unlock_all_update,
    upsert_unique_update,
)

__all__ = [
    "CLAIM_CANDIDATE_PROJECTION",
    "CLAIM_MANY_UPDATE_HINT",
    "CLAIM_SORT",
    "DEFAULT_HISTORY_COLLECTION",
    "DEFAULT_RECORDS_COLLECTION",
    "HINTS",
    "HINT_BY_JOB_NAME",
    "HINT_GLOBAL_PRIORITY",
    "HISTORY_INDEXES",
    "LOCK_ID_INDEX_NAME",
    "MAX_BATCH_SIZE",
    "MAX_BSON_DOCUMENT_SIZE",
    "PROBE_MAX_TIME_MS",
    "RECONCILE_PROJECTION",
    "RECORD_INDEXES",
    "CandidateQuery",
    "ClaimCommand",
    "IndexSpec",
    "backfill_retention_filter",
    "backfill_retention_update",
    "batches",
    "claim_candidates_query",
    "claim_from_before_image",
    "claim_from_read_back",
    "claim_many_updates",
    "claim_update",
    "claim_update_pipeline",
    "claims_from_read_back",
    "complete_filter",
    "complete_many_filter",
    "demote_stale_update",
    "document_from_new_job",
    "document_from_record",
    "eligible_filter",
    "ensure_recurrent_filter",
    "ensure_recurrent_update",
    "extend_lock_update",
    "fenced_filter",
    "find_jobs_filter",
    "find_jobs_sort",
    "find_one_and_update_claim",
    "get_executions_sort",
    "hint_spec",
    "history_filter",
    "history_from_document",
    "history_many_updates",
    "history_update",
    "ids_filter",
    "lock_id_filter",
    "lock_ids_filter",
    "mark_max_tries_filter",
    "mark_max_tries_update",
    "partition_needs_repair",
    "probe_execution_millis",
    "probe_explain_command",
    "reconcile_cas_filter",
    "reconcile_select_filter",
    "reconcile_update",
    "record_from_document",
    "release_lock_update",
    "reschedule_update",
    "sorted_update_one_claim",
    "status_counts_pipeline",
    "unique_identifier_filter",
    "unlock_all_filter",
    "unlock_all_update",
    "upsert_unique_update",
]
