"""A bulk delete that keeps what it removes, interrupted between its steps on the real mongod:
copied (pending) but not deleted, or deleted but not settled. The next archive batch settles
either (:mod:`dogs_mongo._async.bulk`): a record left live keeps no copy, a deleted one stays
recoverable, once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dogs_core.domain.archiving import ArchiveKind
from dogs_core.domain.bulk import bulk_selection
from dogs_core.domain.records import NewJob
from dogs_core.ids import new_record_id
from dogs_mongo import MongoJobStore
from dogs_mongo.queries import archive as qa
from dogs_mongo.queries import bulk as qb

pytestmark = pytest.mark.mongo

NOW = datetime.now(UTC).replace(microsecond=0)


def _scheduled(store: MongoJobStore, count: int) -> list[str]:
    ids = []
    for _ in range(count):
        job = NewJob(
            id=new_record_id(),
            job_name="a",
            params=None,
            next_run_at=NOW + timedelta(hours=1),
            priority=100,
            partition=0,
        )
        store.insert_job(job)
        ids.append(job.id)
    return ids


def test_a_crash_after_the_copies_leaves_the_records_live_and_no_copy(
    sync_store: MongoJobStore,
) -> None:
    store = sync_store
    store.setup_archive()
    ids = _scheduled(store, 3)
    chunk = store.select_for_bulk(bulk_selection(all=True), now=NOW, after=None, limit=10)
    fences = [qb.bulk_fence(record, unless_running_at=NOW) for record in chunk.records]
    archive = store.archive_collection(ArchiveKind.FAILED_RECORDS)
    # the bulk delete dies after its copies: no delete, no settle
    store._copy_to_archive(archive, fences, NOW)
    assert archive.count_documents(qa.PENDING_FILTER) == 3
    assert store.archived_at(ids[0]) is None  # pending copies are not archived yet
    # the next archive batch settles them: the records are live, so the copies go
    store.archive_failed_records(cutoff=NOW, batch_size=100, archived_at=NOW)
    assert archive.count_documents({}) == 0
    assert all(store.get_record(job_id) is not None for job_id in ids)


def test_a_crash_after_the_deletes_is_settled_by_the_next_archive_batch(
    sync_store: MongoJobStore,
) -> None:
    store = sync_store
    store.setup_archive()
    ids = _scheduled(store, 3)
    chunk = store.select_for_bulk(bulk_selection(all=True), now=NOW, after=None, limit=10)
    fences = [qb.bulk_fence(record, unless_running_at=NOW) for record in chunk.records]
    archive = store.archive_collection(ArchiveKind.FAILED_RECORDS)
    store._copy_to_archive(archive, fences, NOW)
    # the deletes land, then the process dies before the settle
    store.records_collection.delete_many({"_id": {"$in": ids}})
    store.archive_failed_records(cutoff=NOW, batch_size=100, archived_at=NOW)
    assert archive.count_documents(qa.PENDING_FILTER) == 0
    assert sorted(store.archived_keys(ArchiveKind.FAILED_RECORDS)) == sorted(ids)
    assert all(store.archived_at(job_id) is not None for job_id in ids)
