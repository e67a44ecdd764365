"""Steering on the real mongod, beyond the contract suite: the stored shape of the additive
fields (``lockOwner``, ``lockReleasedAt``, ``staleAttempt``), Node Dogs 4.6.8's own commands
run on records our claims and operators wrote, the query plan of ``find_jobs`` for every state,
hinted reads without their index, ties in the history, and the state filters against
:meth:`JobRecord.state` on generated documents.

Node's commands are copied from ``reference/dogs-schema.json`` (``commandsSeenByProfiler``: the
``findAndModify`` claim, the fenced reschedule, the fenced ``remove``, the history upsert), as
``test_queries.py`` copies Dogs' documents: what a Node worker sends, byte for byte but for the
ids and times.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from benchmarks import explain_find_jobs as explain
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pymongo import MongoClient, ReturnDocument
from pymongo.collection import Collection

from dogs_core.domain.records import (
    ClaimRequest,
    HistoryRecord,
    HistoryStatus,
    JobRecord,
    JobState,
    JobType,
    NewJob,
    Owner,
    PreviousAttempt,
)
from dogs_core.domain.steering import JobChange, retry_now_change
from dogs_core.domain.steps import RecordedStep
from dogs_core.ids import new_execution_id, new_record_id
from dogs_mongo import AsyncMongoJobStore, MongoJobStore
from dogs_mongo import queries as q
from dogs_testing.settling import released, rescheduled, settle_one_sync, terminal

pytestmark = [pytest.mark.mongo]

T0 = datetime(2100, 1, 1, tzinfo=UTC)
_S = timedelta(seconds=1)
_MIN = timedelta(minutes=1)
W1 = Owner(host="host-a", pid=4242, instance_id="w1")
W2 = Owner(host="host-b", pid=7, instance_id="w2")

Document = dict[str, Any]


def _job(name: str = "echo", *, at: datetime = T0 - _S, partition: int = 0) -> NewJob:
    return NewJob(
        id=new_record_id(),
        job_name=name,
        params={"n": 1},
        next_run_at=at,
        priority=100,
        partition=partition,
    )


def _request(
    *, now: datetime = T0, lock_for: timedelta = _MIN, owner: Owner | None = W1, partition: int = 0
) -> ClaimRequest:
    return ClaimRequest(
        job_names=("echo", "tick"),
        partition=partition,
        hint="byJobName",
        now=now,
        locked_until=now + lock_for,
        lock_id=new_execution_id(),
        owner=owner,
    )


def _types(collection: Collection[Document], document_id: str) -> dict[str, Any]:
    """The BSON type of every field of a stored document (one level into objects)."""
    document = collection.find_one({"_id": document_id})
    assert document is not None
    projection: dict[str, Any] = {}
    for field, value in document.items():
        if isinstance(value, Mapping) and field != "params":
            for sub in value:
                projection[f"{field}.{sub}"] = {"$type": f"${field}.{sub}"}
        else:
            projection[field] = {"$type": f"${field}"}
    pipeline = [{"$match": {"_id": document_id}}, {"$project": _nested(projection)}]
    [types] = collection.aggregate(pipeline).to_list(None)
    return _flat(types)


def _nested(projection: Mapping[str, Any]) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for path, value in projection.items():
        head, _, tail = path.partition(".")
        if tail:
            nested.setdefault(head, {})[tail] = value
        else:
            nested[head] = value
    return nested


def _flat(types: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in types.items():
        if isinstance(value, Mapping):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


# ---------------------------------------------------------------------------------------------
# The stored shape of the additive lock fields
# ---------------------------------------------------------------------------------------------

_PENDING_TYPES = {  # examples.pendingEventScheduleJob (no uniqueIdentifier)
    "_id": "string",
    "jobName": "string",
    "type": "string",
    "priority": "int",
    "nextRunAt": "date",
    "partition": "int",
    "params": "object",
}
_LOCKED_TYPES = {  # examples.lockedEvent
    **_PENDING_TYPES,
    "lastRunAt": "date",
    "lockId": "string",
    "lockedUntil": "date",
    "tries": "int",
}
_OWNER_TYPES = {
    "lockOwner.host": "string",
    "lockOwner.pid": "int",
    "lockOwner.instanceId": "string",
    "lockOwner.lockId": "string",
}


def test_pipeline_claims_write_the_owner_the_release_and_the_attempt_they_took_over(
    sync_store: MongoJobStore,
) -> None:
    records = sync_store.records_collection
    job = _job()
    sync_store.insert_job(job)
    [first] = sync_store.claim_many([_request(lock_for=10 * _S)])
    assert (first.owner, first.was_stale, first.previous_attempt) == (W1, False, None)
    # claimWasStale false, no staleAttempt, no lockReleasedAt ($$REMOVE writes nothing).
    assert _types(records, job.id) == {**_LOCKED_TYPES, "claimWasStale": "bool", **_OWNER_TYPES}

    assert settle_one_sync(sync_store, job.id, first.lock_id, released(T0 + _S))
    stored = records.find_one({"_id": job.id})
    assert stored is not None
    assert stored["lockReleasedAt"] == stored["lockedUntil"] == T0 + _S
    kept = {"host": "host-a", "pid": 4242, "instanceId": "w1", "lockId": first.lock_id}
    assert stored["lockOwner"] == kept
    assert _types(records, job.id)["lockReleasedAt"] == "date"

    # A claim of the released record is no recovery: nothing was killed.
    [second] = sync_store.claim_many([_request(now=T0 + 2 * _S, lock_for=10 * _S, owner=W2)])
    assert (second.was_stale, second.previous_attempt, second.owner) == (False, None, W2)
    stored = records.find_one({"_id": job.id})
    assert stored is not None
    assert "lockReleasedAt" not in stored
    assert "staleAttempt" not in stored
    assert stored["claimWasStale"] is False

    # Its lock expires unreleased (the worker died): the next claim takes over its attempt.
    later = T0 + 2 * _MIN
    [third] = sync_store.claim_many([_request(now=later, owner=None)])
    previous = PreviousAttempt(
        execution_id=second.lock_id,
        started_at=T0 + 2 * _S,
        locked_until=T0 + 12 * _S,
        tries=2,
        owner=W2,
    )
    assert (third.was_stale, third.previous_attempt, third.owner) == (True, previous, None)
    assert _types(records, job.id) == {
        **_LOCKED_TYPES,
        "claimWasStale": "bool",
        "staleAttempt.executionId": "string",
        "staleAttempt.startedAt": "date",
        "staleAttempt.lockedUntil": "date",
        "staleAttempt.tries": "int",
        "staleAttempt.owner": "object",
    }  # no lockOwner: this claim had none

    # The classic claim (findOneAndUpdate on MongoDB < 8) reads the attempt from its
    # before-image and removes the pipeline's staleAttempt.
    assert sync_store.capabilities().claim_path == "find_one_and_update"
    fourth = sync_store.claim(_request(now=later + 2 * _MIN))
    assert fourth is not None
    assert fourth.previous_attempt == PreviousAttempt(
        execution_id=third.lock_id, started_at=later, locked_until=later + _MIN, tries=3
    )
    assert _types(records, job.id) == {**_LOCKED_TYPES, **_OWNER_TYPES, "claimWasStale": "bool"}

    # The end of a lock removes every lock field, ours too: Dogs' examples.pendingEvent again
    # (with the tries of the attempts).
    assert settle_one_sync(sync_store, job.id, fourth.lock_id, rescheduled(T0, tries=3))
    assert _types(records, job.id) == {**_PENDING_TYPES, "lastRunAt": "date", "tries": "int"}
    record = sync_store.get_record(job.id)
    assert record is not None
    assert (record.lock_owner, record.lock_released_at, record.tries) == (None, None, 3)


def test_a_terminal_mark_and_unlock_all_remove_our_lock_fields(sync_store: MongoJobStore) -> None:
    records = sync_store.records_collection
    jobs = [_job(partition=p) for p in (0, 1)]
    sync_store.insert_jobs(jobs)
    failed = sync_store.claim(_request(partition=0))
    assert failed is not None
    assert settle_one_sync(sync_store, jobs[0].id, failed.lock_id, terminal(T0))
    assert set(_types(records, jobs[0].id)) == {
        *_PENDING_TYPES,
        "lastRunAt",
        "tries",
        "status",
        "maxTriesReachedAt",
    }  # examples.maxTriesReached without expiresAt
    given_back = sync_store.claim(_request(partition=1))
    assert given_back is not None
    assert settle_one_sync(sync_store, jobs[1].id, given_back.lock_id, released(T0))
    assert sync_store.release_all_locks() == 1
    stored = records.find_one({"_id": jobs[1].id})
    assert stored is not None
    assert not {"lockId", "lockedUntil", "lockOwner", "lockReleasedAt"} & set(stored)


# ---------------------------------------------------------------------------------------------
# Node Dogs 4.6.8's commands on what we wrote
# ---------------------------------------------------------------------------------------------


def _node_claim(
    records: Collection[Document],
    *,
    now: datetime,
    names: tuple[str, ...] = ("echo", "tick"),
    partition: int = 0,
    lock_for: timedelta = 30 * _S,
) -> tuple[str, Document | None]:
    """Dogs' claim (``findAndModify``, ``new: false``): its lock id and the before-image."""
    lock_id = new_execution_id()
    before = records.find_one_and_update(
        {
            "partition": partition,
            "jobName": {"$in": list(names)},
            "nextRunAt": {"$lte": now},
            "$and": [
                {"$or": [{"lockedUntil": {"$exists": False}}, {"lockedUntil": {"$lte": now}}]},
                {"$or": [{"type": {"$ne": "event"}}, {"status": {"$ne": "maxTriesReached"}}]},
            ],
        },
        {
            "$set": {"lockId": lock_id, "lockedUntil": now + lock_for, "lastRunAt": now},
            "$inc": {"tries": 1},
        },
        sort=[("priority", -1), ("nextRunAt", 1)],
        hint={"partition": 1, "jobName": 1, "priority": -1, "nextRunAt": 1},
        return_document=ReturnDocument.BEFORE,
    )
    return lock_id, before


def _node_complete(records: Collection[Document], job_id: str, lock_id: str) -> bool:
    """Dogs' fenced delete of a finished event job (``remove``, limit 1)."""
    return (
        records.delete_one({"_id": job_id, "type": "event", "lockId": lock_id}).deleted_count == 1
    )


def _node_reschedule(
    records: Collection[Document], job_id: str, lock_id: str, next_run_at: datetime
) -> bool:
    """Dogs' fenced reschedule of a recurrent job (``update``, ``$set`` + ``$unset``)."""
    result = records.update_one(
        {"_id": job_id, "lockId": lock_id},
        {
            "$set": {"nextRunAt": next_run_at, "priority": 100, "tries": 0},
            "$unset": {"lockId": "", "lockedUntil": "", "claimWasStale": ""},
        },
    )
    return result.matched_count == 1


def test_node_claims_and_runs_a_job_a_python_worker_released(sync_store: MongoJobStore) -> None:
    records = sync_store.records_collection
    job = _job()
    sync_store.insert_job(job)
    ours = sync_store.claim(_request())
    assert ours is not None
    assert settle_one_sync(sync_store, job.id, ours.lock_id, released(T0 + _S))
    [record] = sync_store.find_records(state=JobState.RETRYING, now=T0 + _S)  # waiting, not stale
    assert (record.id, record.lock_released, record.lock_owner) == (job.id, True, W1)

    lock_id, before = _node_claim(records, now=T0 + _S)
    assert before is not None
    assert before["_id"] == job.id
    # While Node runs it, it is running (Node's lock is later than the release)...
    [running] = sync_store.find_records(state=JobState.RUNNING, now=T0 + 2 * _S)
    assert (running.lock_id, running.lock_released, running.tries) == (lock_id, False, 2)
    # ...and stale when Node's lock expires: a Node claim over a release is a live lock.
    assert [r.id for r in sync_store.find_records(state=JobState.STALE, now=T0 + _MIN)] == [job.id]
    assert _node_complete(records, job.id, lock_id)
    assert sync_store.get_record(job.id) is None
    assert not _node_complete(records, job.id, ours.lock_id)  # the released execution is fenced


def test_node_leaves_a_sleeping_job_alone_until_it_wakes(sync_store: MongoJobStore) -> None:
    """A durable sleep is a future ``nextRunAt``: Dogs' claim filter does not match it before
    its time, and does at its time (a Node worker defining the name would run it again)."""
    records = sync_store.records_collection
    job = _job()
    sync_store.insert_job(job)
    claimed = sync_store.claim(_request())
    assert claimed is not None
    step = RecordedStep("sleep:1", None, T0, claimed.lock_id)
    wake = T0 + timedelta(hours=1)
    assert sync_store.record_step(job.id, claimed.lock_id, 0, step, sleep_until=wake)
    assert settle_one_sync(sync_store, job.id, claimed.lock_id, rescheduled(wake, tries=0))
    stored = records.find_one({"_id": job.id})
    assert stored is not None
    assert (stored["nextRunAt"], stored["sleepingUntil"]) == (wake, wake)
    assert _types(records, job.id)["sleepingUntil"] == "date"
    [sleeping] = sync_store.find_records(state=JobState.SLEEPING, now=T0 + _MIN)
    assert sleeping.id == job.id
    assert _node_claim(records, now=wake - _S)[1] is None
    lock_id, before = _node_claim(records, now=wake)
    assert before is not None
    assert before["_id"] == job.id
    assert _node_complete(records, job.id, lock_id)


def test_node_runs_a_failed_job_revived_by_retry_now(sync_store: MongoJobStore) -> None:
    records = sync_store.records_collection
    job = _job()
    sync_store.insert_job(job)
    claimed = sync_store.claim(_request())
    assert claimed is not None
    assert settle_one_sync(
        sync_store, job.id, claimed.lock_id, terminal(T0, expires_at=T0 + timedelta(days=7))
    )
    assert _node_claim(records, now=T0 + _MIN)[1] is None  # terminal: Node leaves it alone
    failed = sync_store.get_record(job.id)
    assert failed is not None
    revived = sync_store.modify_record(job.id, retry_now_change(failed, T0 + _MIN), now=T0 + _MIN)
    assert revived is not None
    assert (revived.status, revived.expires_at, revived.tries) == (None, None, 0)
    lock_id, before = _node_claim(records, now=T0 + _MIN)
    assert before is not None
    assert before["tries"] == 0
    assert _node_complete(records, job.id, lock_id)


def test_node_never_claims_a_cancelled_or_deleted_job(sync_store: MongoJobStore) -> None:
    records = sync_store.records_collection
    jobs = [_job(), _job(), _job(at=T0 + _MIN), _job()]
    sync_store.insert_jobs(jobs)
    assert sync_store.delete_record(jobs[0].id, unless_running_at=T0) is not None
    assert sync_store.delete_records(job_name="echo", state=JobState.DUE, now=T0) == 2
    assert sync_store.delete_records(job_name=None, state=JobState.SCHEDULED, now=T0) == 1
    assert sync_store.find_records() == []
    for moment in (T0, T0 + 2 * _MIN):
        assert _node_claim(records, now=moment)[1] is None


def test_node_deleting_a_job_our_operator_deleted_under_it_matches_nothing(
    sync_store: MongoJobStore,
) -> None:
    """An operator's cancel of a job a Node worker runs: the record is gone, Node's completion
    matches nothing (Node treats the execution as stale), and no other worker claims it."""
    records = sync_store.records_collection
    job = _job()
    sync_store.insert_job(job)
    lock_id, _ = _node_claim(records, now=T0)
    deleted = sync_store.delete_record(job.id)
    assert deleted is not None
    assert deleted.lock_id == lock_id
    assert not _node_complete(records, job.id, lock_id)
    assert _node_claim(records, now=T0 + _MIN)[1] is None


def test_node_claims_a_snoozed_job_with_its_try_given_back(sync_store: MongoJobStore) -> None:
    records = sync_store.records_collection
    job = _job()
    sync_store.insert_job(job)
    claimed = sync_store.claim(_request())
    assert claimed is not None
    assert claimed.tries == 1
    assert settle_one_sync(sync_store, job.id, claimed.lock_id, rescheduled(T0 + _S, tries=0))
    assert [r.id for r in sync_store.find_records(state=JobState.SCHEDULED, now=T0)] == [job.id]
    lock_id, before = _node_claim(records, now=T0 + _S)
    assert before is not None
    assert before["tries"] == 0
    assert not {"lockOwner", "lockReleasedAt", "staleAttempt"} & set(before)
    assert _node_complete(records, job.id, lock_id)


def test_our_claims_take_over_the_attempt_of_a_node_worker_that_died(
    sync_store: MongoJobStore,
) -> None:
    records = sync_store.records_collection
    jobs = [_job(partition=p) for p in (0, 1)]
    sync_store.insert_jobs(jobs)
    node_locks = [_node_claim(records, now=T0, partition=p)[0] for p in (0, 1)]
    later = T0 + _MIN
    # Both claim paths see a stale claim and name Node's attempt (Node writes no owner).
    [batch] = sync_store.claim_many([_request(now=later, partition=0)])
    single = sync_store.claim(_request(now=later, partition=1))
    assert single is not None
    for claimed, lock_id in zip((batch, single), node_locks, strict=True):
        assert claimed.was_stale
        assert claimed.previous_attempt == PreviousAttempt(
            execution_id=lock_id, started_at=T0, locked_until=T0 + 30 * _S, tries=1, owner=None
        )
        assert claimed.tries == 2


def test_our_claim_after_a_node_reschedule_is_no_recovery(sync_store: MongoJobStore) -> None:
    records = sync_store.records_collection
    sync_store.ensure_recurrent("tick", priority=100, partition=0, now=T0 - _S)
    ours = sync_store.claim(_request())
    assert ours is not None
    assert settle_one_sync(sync_store, ours.job_id, ours.lock_id, released(T0))
    lock_id, before = _node_claim(records, now=T0)
    assert before is not None
    assert _node_reschedule(records, ours.job_id, lock_id, T0 + _S)
    record = sync_store.get_record(ours.job_id)
    assert record is not None
    assert record.state(T0 + _S) is JobState.DUE
    [again] = sync_store.claim_many([_request(now=T0 + _S, owner=W2)])
    assert (again.job_id, again.was_stale, again.previous_attempt) == (ours.job_id, False, None)
    stored = records.find_one({"_id": ours.job_id})
    assert stored is not None
    assert stored["lockOwner"]["instanceId"] == "w2"
    assert "lockReleasedAt" not in stored  # our claim cleared what Node's left behind


def _row(execution_id: str, status: HistoryStatus, **fields: Any) -> HistoryRecord:
    return HistoryRecord(
        execution_id=execution_id,
        job_id="j",
        job_name="echo",
        type=JobType.EVENT,
        priority=100,
        tries=1,
        started_at=T0,
        ended_at=T0 + 5 * _S,
        status=status,
        expires_at=T0 + timedelta(days=7),
        **fields,
    )


def test_node_history_upsert_after_our_first_row_keeps_our_status(
    sync_store: MongoJobStore,
) -> None:
    history = sync_store.history_collection
    cancelled = _row("node-exec", HistoryStatus.CANCELLED, error_message="cancelled by an operator")
    sync_store.write_history_many([cancelled])
    # Node's row of the same execution (it went stale once its record was deleted).
    history.update_one(
        {"executionId": "node-exec"},
        {
            "$setOnInsert": {"_id": new_record_id(), "status": "stale"},
            "$set": {
                "jobId": "j",
                "executionId": "node-exec",
                "jobName": "echo",
                "type": "event",
                "priority": 100,
                "tries": 1,
                "startedAt": T0,
                "endedAt": T0 + 9 * _S,
                "duration": 9000,
                "expiresAt": T0 + timedelta(days=7),
                "errorMessage": None,
                "result": None,
            },
        },
        upsert=True,
    )
    [row] = sync_store.read_history(job_id="j")
    assert row.status is HistoryStatus.CANCELLED  # Node's $setOnInsert wrote nothing
    assert row.ended_at == T0 + 9 * _S  # ... but its $set did (docs/differences.md)
    # The other way round: a row Node wrote first is left whole by ours.
    sync_store.write_history_many([_row("node-exec", HistoryStatus.SUCCESS, was_stale=True)])
    assert sync_store.read_history(job_id="j") == [row]
    assert history.count_documents({}) == 1


# ---------------------------------------------------------------------------------------------
# find_jobs: the plan of every state, and hinted reads without their index
# ---------------------------------------------------------------------------------------------

_EXPECTED_INDEX = {
    JobState.SCHEDULED: "_id_",
    JobState.DUE: "_id_",
    JobState.RETRYING: "_id_",
    JobState.RUNNING: q.LOCK_ID_INDEX_NAME,
    JobState.STALE: q.LOCK_ID_INDEX_NAME,
    JobState.FAILED: q.FAILED_INDEX_NAME,
    JobState.HELD: "_id_",
    JobState.SLEEPING: "_id_",
}


def test_find_jobs_of_every_state_is_served_by_an_index(
    sync_store: MongoJobStore,
    sync_mongo_client: MongoClient[Document],
    mongo_database_name: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    database = sync_mongo_client[mongo_database_name]
    seeded = explain.seed_mix(database, 3_000, T0)
    locked = sync_store.records_collection.count_documents({"lockId": {"$exists": True}})
    failed = sync_store.records_collection.count_documents({"status": "maxTriesReached"})
    plans = explain.explain_all(database, T0)
    with capsys.disabled():
        print(f"\nfind_jobs plans over {seeded} records")
    for plan in plans:
        with capsys.disabled():
            print(
                f"  {plan.state.value:<9} {plan.job_name or '*':<6} {plan.tree} "
                f"keys={plan.keys_examined} docs={plan.docs_examined} n={plan.returned}"
            )
        assert not plan.scans_collection, plan
        assert plan.indexes == (_EXPECTED_INDEX[plan.state],), plan
        found = sync_store.find_records(job_name=plan.job_name, state=plan.state, now=T0)
        assert plan.returned == len(found) > 0, plan
        if plan.state in (JobState.RUNNING, JobState.STALE):
            assert plan.docs_examined <= locked < seeded // 10, plan  # only locked records
        if plan.state is JobState.FAILED:
            assert plan.docs_examined <= failed < seeded // 10, plan  # only failed records


def test_reads_without_their_index_fall_back_and_say_so(
    sync_store: MongoJobStore, caplog: pytest.LogCaptureFixture
) -> None:
    jobs = [_job(partition=p) for p in (0, 1)]
    sync_store.insert_jobs(jobs)
    claimed = sync_store.claim(_request())
    assert claimed is not None
    assert settle_one_sync(sync_store, claimed.job_id, claimed.lock_id, terminal(T0))
    sync_store.records_collection.drop_index(q.FAILED_INDEX_NAME)  # a database Node set up
    with caplog.at_level(logging.WARNING, logger="dogs.mongo.store"):
        for _ in range(2):
            [failed] = sync_store.find_records(state=JobState.FAILED, now=T0)
            assert failed.id == claimed.job_id
        assert sync_store.delete_records(job_name=None, state=JobState.FAILED, now=T0, dry_run=True)
        assert sync_store.delete_records(job_name="echo", state=JobState.FAILED, now=T0) == 1
    warnings = [r for r in caplog.records if "is missing" in r.getMessage()]
    assert len(warnings) == 1  # once per index and store
    assert "status: 1, jobName: 1, _id: 1" in warnings[0].getMessage()
    assert [r.id for r in sync_store.find_records()] == [jobs[1].id]


# ---------------------------------------------------------------------------------------------
# get_executions: ties of startedAt across pages
# ---------------------------------------------------------------------------------------------


def test_get_executions_orders_ties_by_ended_at_on_every_page(sync_store: MongoJobStore) -> None:
    starts = [0, 5, 5, 5, 5, 5, 9, 9, 12]  # seconds after T0; two groups of ties
    rows = [
        dataclasses.replace(
            _row(new_execution_id(), HistoryStatus.SUCCESS),
            started_at=T0 + start * _S,
            ended_at=T0 + (start + 1 + (index * 7) % 5) * _S,
        )
        for index, start in enumerate(starts)
    ]
    sync_store.write_history_many(rows)
    full = sorted(rows, key=lambda r: (r.started_at, r.ended_at), reverse=True)
    assert sync_store.read_history(job_id="j", limit=100) == full
    for limit in range(1, 5):
        for skip in range(len(rows) + 1):
            page = sync_store.read_history("echo", limit=limit, skip=skip)
            assert page == full[skip : skip + limit], (limit, skip)


# ---------------------------------------------------------------------------------------------
# The state filters against JobRecord.state, on generated documents
# ---------------------------------------------------------------------------------------------

_OFFSETS = st.sampled_from([-3600, -60, -1, 0, 1, 60, 3600])


@st.composite
def _documents(draw: st.DrawFn) -> Document:
    """A record document as any writer may leave it: ours, Node's, an older Node's."""
    at = draw(_OFFSETS)
    document: Document = {
        "_id": new_record_id(),
        "jobName": draw(st.sampled_from(["echo", "mail"])),
        "priority": 100,
        "nextRunAt": T0 + at * _S,
        "partition": 0,
        "params": None,
    }
    kind = draw(st.sampled_from(["event", "recurrent", None]))
    if kind is not None:
        document["type"] = kind
    if kind == "recurrent":  # one record per recurrent name (a partial unique index)
        document["jobName"] = f"tick-{document['_id']}"
    tries = draw(st.sampled_from([None, 0, 1, 3, 0.0, 2.0]))
    if tries is not None:
        document["tries"] = tries
    if draw(st.booleans()):
        document["status"] = draw(st.sampled_from(["maxTriesReached", "pending"]))
    if draw(st.booleans()):  # a lock (every 4.6+ writer sets lockId with it)
        document["lockId"] = new_execution_id()
        document["lockedUntil"] = T0 + draw(_OFFSETS) * _S
        released = draw(st.sampled_from([None, "at", "before", "null"]))
        if released == "at":
            document["lockReleasedAt"] = document["lockedUntil"]
        elif released == "before":
            document["lockReleasedAt"] = document["lockedUntil"] - _S
        elif released == "null":
            document["lockReleasedAt"] = None
    elif draw(st.booleans()):  # what a Node reschedule leaves behind
        document["lockReleasedAt"] = T0 - _MIN
        document["lockOwner"] = {"host": "h", "pid": 1, "instanceId": "i"}
    return document


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(documents=st.lists(_documents(), min_size=1, max_size=12), at=_OFFSETS)
def test_state_filters_and_status_counts_agree_with_record_state(
    sync_store: MongoJobStore, documents: list[Document], at: int
) -> None:
    records = sync_store.records_collection
    records.delete_many({})
    records.insert_many(documents)
    now = T0 + at * _S
    stored = sorted(sync_store.find_records(limit=1000), key=lambda r: r.id)
    for state in JobState:
        wanted = [r.id for r in stored if r.state(now) is state]
        assert [r.id for r in sync_store.find_records(state=state, now=now)] == wanted, state
        if state is not JobState.RUNNING:
            # A bulk delete never takes a live lock (a failed record may hold one).
            deletable = [r for r in stored if r.id in wanted and not _live(r, now)]
            count = sync_store.delete_records(job_name=None, state=state, now=now, dry_run=True)
            assert count == len(deletable), state
    by_name = {s.job_name: s for s in sync_store.status_counts(now=now)}
    for name in {r.job_name for r in stored}:
        mine = [r for r in stored if r.job_name == name]
        states = [r.state(now) for r in mine]
        waiting = [
            r.next_run_at
            for r, s in zip(mine, states, strict=True)
            if s is JobState.STALE
            or (s in (JobState.DUE, JobState.RETRYING) and r.next_run_at <= now)
        ]
        counts = by_name[name]
        assert counts.running == states.count(JobState.RUNNING)
        assert counts.stale == states.count(JobState.STALE)
        assert counts.terminal == states.count(JobState.FAILED)
        assert (
            counts.due + counts.scheduled_later
            == len(mine) - counts.running - counts.stale - counts.terminal
        )
        assert counts.due == sum(
            1
            for r, s in zip(mine, states, strict=True)
            if s in (JobState.DUE, JobState.RETRYING) and r.next_run_at <= now
        )
        assert counts.oldest_due_at == (min(waiting) if waiting else None)


def _live(record: JobRecord, now: datetime) -> bool:
    return record.locked_until is not None and record.locked_until > now


def test_a_lock_without_a_lock_id_is_in_no_state_until_it_is_cleared(
    sync_store: MongoJobStore,
) -> None:
    """A pre-4.6 Node worker's lock (no ``lockId``): ``running`` and ``stale`` go through the
    sparse ``lockId`` index, so the record is found by no state (documented in
    :mod:`dogs_mongo.queries.states`), though ``status_counts`` counts it."""
    record_id = new_record_id()
    sync_store.records_collection.insert_one(
        {
            "_id": record_id,
            "jobName": "echo",
            "type": "event",
            "priority": 100,
            "nextRunAt": T0 - _MIN,
            "partition": 0,
            "params": None,
            "lockedUntil": T0 + _MIN,
            "tries": 1,
        }
    )
    assert [r.id for r in sync_store.find_records()] == [record_id]
    for state in JobState:
        assert sync_store.find_records(state=state, now=T0) == [], state
    [counts] = sync_store.status_counts(now=T0)
    assert counts.running == 1


@pytest.mark.anyio
async def test_the_async_store_steers_as_the_sync_one(async_store: AsyncMongoJobStore) -> None:
    job = _job()
    await async_store.insert_job(job)
    changed = await async_store.modify_record(job.id, JobChange(priority=5), now=T0)
    assert changed is not None
    assert changed.priority == 5
    [found] = await async_store.find_records(state=JobState.DUE, now=T0)
    assert found == changed
    assert await async_store.delete_records(job_name=None, state=JobState.DUE, now=T0, dry_run=True)
    deleted = await async_store.delete_record(job.id, unless_failed=True)
    assert deleted == changed
    assert await async_store.find_records() == []
