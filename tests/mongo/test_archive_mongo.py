"""The archive on a real mongod (dogs_mongo/_async/archive.py, through the generated sync store):
the batch reads walk existing indexes (explain: IXSCAN, no in-memory sort, no collection scan),
the archive collections have no TTL, an archived document keeps every field plus
``archivedAt``, Node-written and legacy shapes, and the archive collection names."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pymongo import MongoClient

from dogs_core.domain.archiving import ArchiveKind
from dogs_core.domain.records import ClaimRequest, NewJob
from dogs_core.errors import InvalidOptionError
from dogs_core.ids import new_execution_id, new_record_id
from dogs_mongo import MongoJobStore
from dogs_mongo import queries as q
from dogs_mongo.queries import archive as qa
from dogs_testing.settling import settle_one_sync, terminal

pytestmark = pytest.mark.mongo

NOW = datetime(2100, 1, 1, tzinfo=UTC)
CUTOFF = NOW - timedelta(days=30)
H = ArchiveKind.HISTORY
F = ArchiveKind.FAILED_RECORDS


@pytest.fixture
def store(
    sync_mongo_client: MongoClient[dict[str, Any]], mongo_database_name: str
) -> MongoJobStore:
    store = MongoJobStore(sync_mongo_client, mongo_database_name)
    store.setup()
    store.setup_archive()
    return store


def _node_history_row(n: int, days: float) -> dict[str, Any]:
    """A history row as Node Dogs 4.6.8 writes it (its fields, its order), ``days`` old."""
    started = NOW - timedelta(days=days)
    return {
        "_id": new_record_id(),
        "status": "success",
        "jobId": f"j{n}",
        "executionId": f"e{n}",
        "jobName": f"name{n % 3}",
        "type": "event",
        "priority": 100,
        "tries": 1,
        "startedAt": started,
        "endedAt": started + timedelta(milliseconds=7),
        "duration": 7,
        "expiresAt": NOW + timedelta(days=400),
        "errorMessage": None,
        "params": {"user": n},
        "result": {"ok": True},
    }


def _failed(store: MongoJobStore, days: float) -> str:
    moment = NOW - timedelta(days=days)
    job = NewJob(
        id=new_record_id(),
        job_name="f",
        params={"x": 1},
        next_run_at=moment - timedelta(seconds=1),
        priority=100,
        partition=0,
    )
    store.insert_job(job)
    claimed = store.claim(
        ClaimRequest(
            job_names=("f",),
            partition=0,
            hint="byJobName",
            now=moment,
            locked_until=moment + timedelta(minutes=1),
            lock_id=new_execution_id(),
        )
    )
    assert claimed is not None
    assert settle_one_sync(store, job.id, claimed.execution_id, terminal(moment))
    return job.id


def _stages(plan: Any) -> list[str]:
    """Every stage name of an explain plan, depth first."""
    if isinstance(plan, dict):
        found = [plan["stage"]] if isinstance(plan.get("stage"), str) else []
        for value in plan.values():
            found += _stages(value)
        return found
    if isinstance(plan, list):
        return [stage for item in plan for stage in _stages(item)]
    return []


@pytest.mark.parametrize("kind", [H, F])
def test_the_batch_read_walks_an_existing_index(store: MongoJobStore, kind: ArchiveKind) -> None:
    store.history_collection.insert_many([_node_history_row(n, 40 + n) for n in range(20)])
    for days in (40, 41, 5):
        _failed(store, days)
    source = store.history_collection if kind is H else store.records_collection
    explain = (
        source.find(qa.batch_filter(kind, CUTOFF))
        .sort(list(qa.BATCH_SORTS[kind]))
        .hint(qa.BATCH_HINTS[kind])
        .limit(5)
        .explain()
    )
    stages = _stages(explain["queryPlanner"]["winningPlan"])
    assert "IXSCAN" in stages, stages
    assert "COLLSCAN" not in stages
    assert "SORT" not in stages  # the index gives the order
    assert qa.BATCH_HINTS[kind] in str(explain["queryPlanner"]["winningPlan"])


def test_archive_collections_have_no_ttl_and_index_the_cutoff_field(store: MongoJobStore) -> None:
    for kind, field in ((H, "startedAt"), (F, "maxTriesReachedAt")):
        indexes = store.archive_collection(kind).index_information()
        assert all("expireAfterSeconds" not in index for index in indexes.values()), indexes
        assert any(index["key"][0] == (field, 1) for index in indexes.values()), indexes
    assert store.archive_collection(H).name == q.DEFAULT_HISTORY_COLLECTION + "_archive"
    assert store.archive_collection(F).name == q.DEFAULT_RECORDS_COLLECTION + "_archive"


def test_an_archived_document_keeps_every_field_plus_archived_at(store: MongoJobStore) -> None:
    row = _node_history_row(1, 40)
    store.history_collection.insert_one(dict(row))
    record_id = _failed(store, 40)
    record = store.records_collection.find_one({"_id": record_id})
    assert record is not None
    archived_at = NOW.replace(microsecond=123456)
    assert store.archive_history(cutoff=CUTOFF, batch_size=10, archived_at=archived_at) == 1
    assert store.archive_failed_records(cutoff=CUTOFF, batch_size=10, archived_at=archived_at) == 1
    stamp = NOW.replace(microsecond=123000)
    copy = store.archive_collection(H).find_one({"_id": row["_id"]})
    assert copy == {**row, "archivedAt": stamp}
    assert list(copy) == [*row, "archivedAt"]  # the field order kept
    assert store.archive_collection(F).find_one({"_id": record_id}) == {
        **record,
        "archivedAt": stamp,
    }
    assert store.history_collection.count_documents({}) == 0
    assert store.records_collection.count_documents({}) == 0


def test_a_legacy_recurrent_record_in_the_failed_status_stays(store: MongoJobStore) -> None:
    old = NOW - timedelta(days=90)
    store.records_collection.insert_one(
        {
            "_id": "legacy",
            "jobName": "cron",
            "type": "recurrent",
            "priority": 100,
            "nextRunAt": old,
            "partition": 0,
            "status": "maxTriesReached",
            "maxTriesReachedAt": old,
        }
    )
    assert store.count_archivable(F, cutoff=CUTOFF) == 0
    assert store.archive_failed_records(cutoff=CUTOFF, batch_size=10, archived_at=NOW) == 0
    assert store.records_collection.count_documents({"_id": "legacy"}) == 1


def test_archive_collections_by_name(store: MongoJobStore) -> None:
    store.history_collection.insert_one(_node_history_row(1, 40))
    store.use_archive_collections(history="cold_history", records="cold_records")
    store.setup_archive()
    assert store.archive_history(cutoff=CUTOFF, batch_size=10, archived_at=NOW) == 1
    database = store.history_collection.database
    assert database["cold_history"].count_documents({}) == 1
    assert store.count_archived(H) == 1
    with pytest.raises(InvalidOptionError, match="live collection"):
        store.use_archive_collections(history=q.DEFAULT_HISTORY_COLLECTION)
    with pytest.raises(InvalidOptionError, match="records"):
        store.use_archive_collections(records="  ")


def test_a_pending_copy_left_by_a_crash_is_settled_without_a_second_copy(
    store: MongoJobStore,
) -> None:
    store.history_collection.insert_many([_node_history_row(n, 40) for n in range(3)])
    assert store.copy_batch(H, cutoff=CUTOFF, batch_size=10, archived_at=NOW) == 3
    archive = store.archive_collection(H)
    assert archive.count_documents(dict(qa.PENDING_FILTER)) == 3
    assert store.archive_history(cutoff=CUTOFF, batch_size=10, archived_at=NOW) == 3
    assert archive.count_documents({}) == 3
    assert archive.count_documents({qa.PENDING_FIELD: {"$exists": True}}) == 0
    assert store.history_collection.count_documents({}) == 0
