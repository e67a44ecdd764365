"""Unit tests of the pure query builders, against the documents @orion-js/dogs 4.6.8 sends.

The expected documents are copied from ``reference/dogs-schema.json`` (listIndexes, the commands
seen by the profiler, the stored examples): the adapters must send the same documents so that
Python and Node workers can share a database. No server is needed.
"""

from __future__ import annotations

import dataclasses
import math
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import bson
import pytest

from dogs_core.domain.batches import check_claim_requests
from dogs_core.domain.records import (
    ClaimRequest,
    HistoryRecord,
    HistoryStatus,
    JobRecord,
    JobStatus,
    JobType,
    NewJob,
    Owner,
    PreviousAttempt,
)
from dogs_core.errors import InvalidOptionError
from dogs_mongo import queries as q

NOW = datetime(2026, 11, 30, 1, 16, 42, 374_000, tzinfo=UTC)
NAMES = ["noop", "echo", "sleep"]

# ---------------------------------------------------------------------------------------------
# listIndexes of Dogs 4.6.8 on mongod 6.0.5 (dogs-schema.json), without `_id_`
# ---------------------------------------------------------------------------------------------

DOGS_RECORD_INDEXES: list[dict[str, Any]] = [
    {
        "v": 2,
        "key": {"partition": 1, "priority": -1, "nextRunAt": 1},
        "name": "jobs_dogs_records_partition_priority_next_run",
    },
    {
        "v": 2,
        "key": {"partition": 1, "jobName": 1, "priority": -1, "nextRunAt": 1},
        "name": "jobs_dogs_records_partition_job_name_priority_next_run",
    },
    {
        "v": 2,
        "key": {"uniqueIdentifier": 1},
        "name": "uniqueIdentifier_1",
        "unique": True,
        "sparse": True,
    },
    {
        "v": 2,
        "key": {"expiresAt": 1},
        "name": "jobs_dogs_records_expires_at_ttl",
        "expireAfterSeconds": 0,
    },
    {"v": 2, "key": {"lockId": 1}, "name": "jobs_dogs_records_lock_id", "sparse": True},
    {
        "v": 2,
        "key": {"jobName": 1},
        "name": "jobName_1",
        "unique": True,
        "partialFilterExpression": {"type": "recurrent"},
    },
]

DOGS_HISTORY_INDEXES: list[dict[str, Any]] = [
    {"v": 2, "key": {"executionId": 1}, "name": "executionId_1"},
    {"v": 2, "key": {"jobName": 1, "startedAt": 1}, "name": "jobName_1_startedAt_1"},
    {"v": 2, "key": {"expiresAt": 1}, "name": "expiresAt_1", "expireAfterSeconds": 0},
]

# The index we add to Dogs' records indexes (docs/differences.md): the failed records only.
ADDITIVE_RECORD_INDEXES: list[dict[str, Any]] = [
    {
        "v": 2,
        "key": {"status": 1, "jobName": 1, "_id": 1},
        "name": "jobs_dogs_records_failed",
        "partialFilterExpression": {"status": "maxTriesReached"},
    },
    # Issue 27 (docs/differences.md): partial, so records without the field are in neither.
    {
        "v": 2,
        "key": {"tags": 1, "_id": 1},
        "name": "jobs_dogs_records_tags",
        "partialFilterExpression": {"tags": {"$exists": True}},
    },
    {
        "v": 2,
        "key": {"schedule.job": 1, "nextRunAt": 1},
        "name": "jobs_dogs_records_schedules",
        "partialFilterExpression": {"schedule.job": {"$exists": True}},
    },
    # Issue 40: a workflow step's record staged by its release (sparse: no other record).
    {
        "v": 2,
        "key": {"workflow.stagedAt": 1},
        "name": "jobs_dogs_records_workflow_staged",
        "sparse": True,
    },
]

# The indexes we add to Dogs' (docs/differences.md): the history of one job id, newest first;
# then the inspection role's three, partial (a success row without a unique key enters none).
ADDITIVE_HISTORY_INDEXES: list[dict[str, Any]] = [
    {"v": 2, "key": {"jobId": 1, "startedAt": -1}, "name": "jobId_1_startedAt_-1"},
    {
        "v": 2,
        "key": {
            "status": 1,
            "startedAt": -1,
            "errorType": 1,
            "errorMessage": 1,
            "jobName": 1,
            "executionId": 1,
        },
        "name": "jobs_dogs_history_unsuccessful",
        "partialFilterExpression": {"status": {"$in": ["error", "stale", "cancelled", "snoozed"]}},
    },
    {
        "v": 2,
        "key": {"errorType": 1, "startedAt": -1},
        "name": "jobs_dogs_history_errors_by_type",
        "partialFilterExpression": {"status": "error"},
    },
    {
        "v": 2,
        "key": {"uniqueIdentifier": 1, "startedAt": -1},
        "name": "jobs_dogs_history_unique_identifier",
        "partialFilterExpression": {"uniqueIdentifier": {"$exists": True}},
    },
]


def _selector(now: datetime, partition: int = 2) -> dict[str, Any]:
    """The claim/probe selector exactly as Dogs sends it (findAndModify / explain)."""
    return {
        "partition": partition,
        "jobName": {"$in": NAMES},
        "nextRunAt": {"$lte": now},
        "$and": [
            {"$or": [{"lockedUntil": {"$exists": False}}, {"lockedUntil": {"$lte": now}}]},
            {"$or": [{"type": {"$ne": "event"}}, {"status": {"$ne": "maxTriesReached"}}]},
        ],
    }


def _request(hint: str = "byJobName", partition: int = 2) -> ClaimRequest:
    return ClaimRequest(
        job_names=tuple(NAMES),
        partition=partition,
        hint=hint,
        now=NOW + timedelta(microseconds=999),  # truncated to the millisecond when stored
        locked_until=NOW + timedelta(seconds=30),
        lock_id="BEwq9RsrPe4g5DvEe",
    )


def test_record_indexes_are_dogs_indexes_in_creation_order_then_one_additive_index() -> None:
    assert [spec.as_list_indexes_entry() for spec in q.RECORD_INDEXES] == [
        *DOGS_RECORD_INDEXES,
        *ADDITIVE_RECORD_INDEXES,
    ]
    assert q.RECORD_INDEXES[-4].name == q.FAILED_INDEX_NAME
    for entry in [*DOGS_RECORD_INDEXES, *ADDITIVE_RECORD_INDEXES]:
        assert list(next(s for s in q.RECORD_INDEXES if s.name == entry["name"]).keys) == list(
            entry["key"].items()
        )  # key order matters


def test_history_indexes_are_dogs_indexes_then_the_additive_ones() -> None:
    assert [spec.as_list_indexes_entry() for spec in q.HISTORY_INDEXES] == [
        *DOGS_HISTORY_INDEXES,
        *ADDITIVE_HISTORY_INDEXES,
    ]
    by_job = q.HISTORY_INDEXES[len(DOGS_HISTORY_INDEXES)]
    assert by_job.name == q.HISTORY_JOB_ID_INDEX_NAME
    assert list(by_job.keys) == [("jobId", 1), ("startedAt", -1)]  # key order


def test_index_models_carry_names_and_options() -> None:
    documents = [spec.as_index_model().document for spec in q.RECORD_INDEXES]
    assert documents[2] == {
        "key": {"uniqueIdentifier": 1},
        "name": "uniqueIdentifier_1",
        "unique": True,
        "sparse": True,
    }
    assert documents[5]["partialFilterExpression"] == {"type": "recurrent"}


def test_index_spec_matches_index_information_entries() -> None:
    unique = q.RECORD_INDEXES[2]
    assert unique.matches({"key": [("uniqueIdentifier", 1)], "unique": True, "sparse": True})
    assert not unique.matches({"v": 2, "key": [("uniqueIdentifier", 1)], "sparse": True})
    assert not unique.matches({"v": 2, "key": [("uniqueIdentifier", -1)], "unique": True})
    ttl = q.RECORD_INDEXES[3]
    assert ttl.matches({"key": {"expiresAt": 1}, "expireAfterSeconds": 0.0})
    assert not ttl.matches({"key": {"expiresAt": 1}, "expireAfterSeconds": 3600})
    assert not ttl.matches({"key": {"expiresAt": 1}})
    assert not ttl.matches({"name": "no key"})
    claim = q.RECORD_INDEXES[0]
    assert claim.matches({"key": [("partition", 1), ("priority", -1), ("nextRunAt", 1)]})
    assert not claim.matches({"key": [("partition", 1), ("nextRunAt", 1), ("priority", -1)]})
    assert claim.matches({"key": {"partition": 1.0, "priority": -1.0, "nextRunAt": 1.0}})


def test_default_collection_names() -> None:
    assert q.DEFAULT_RECORDS_COLLECTION == "orionjs.jobs_dogs_records"
    assert q.DEFAULT_HISTORY_COLLECTION == "orionjs.jobs_dogs_history"


# ---------------------------------------------------------------------------------------------
# Hints and the selector
# ---------------------------------------------------------------------------------------------


def test_hint_spec_names_and_aliases() -> None:
    by_name = {"partition": 1, "jobName": 1, "priority": -1, "nextRunAt": 1}
    global_priority = {"partition": 1, "priority": -1, "nextRunAt": 1}
    assert q.hint_spec("byJobName") == by_name
    assert q.hint_spec("globalPriority") == global_priority
    assert q.hint_spec("jobs_dogs_records_partition_job_name_priority_next_run") == by_name
    assert q.hint_spec("global_priority") == global_priority
    assert list(q.hint_spec("byJobName")) == ["partition", "jobName", "priority", "nextRunAt"]
    with pytest.raises(ValueError, match="unknown acquisition hint 'nope'"):
        q.hint_spec("nope")


def test_eligible_filter_is_dogs_selector() -> None:
    assert q.eligible_filter(NAMES, 2, NOW) == _selector(NOW)
    assert list(q.eligible_filter(NAMES, 2, NOW)) == ["partition", "jobName", "nextRunAt", "$and"]


# ---------------------------------------------------------------------------------------------
# Claims
# ---------------------------------------------------------------------------------------------


OWNER = Owner(host="web-1", pid=4242, instance_id="i-7f3a")
OWNER_DOCUMENT = {"host": "web-1", "pid": 4242, "instanceId": "i-7f3a"}


def test_find_one_and_update_claim_is_dogs_find_and_modify_plus_the_owner() -> None:
    command = q.find_one_and_update_claim(dataclasses.replace(_request(), owner=OWNER))
    assert command.filter == _selector(NOW)
    dogs_set = {
        "lockId": "BEwq9RsrPe4g5DvEe",
        "lockedUntil": NOW + timedelta(seconds=30),
        "lastRunAt": NOW,
    }
    assert command.update == {
        # Dogs' $set, then ours: the owner names the lock it owns
        "$set": {**dogs_set, "lockOwner": {**OWNER_DOCUMENT, "lockId": "BEwq9RsrPe4g5DvEe"}},
        "$inc": {"tries": 1},
        "$unset": {"lockReleasedAt": "", "staleAttempt": ""},  # additive fields only
    }
    assert list(command.update["$set"])[:3] == list(dogs_set)
    assert command.sort == {"priority": -1, "nextRunAt": 1}
    assert list(command.sort) == ["priority", "nextRunAt"]
    assert command.hint == {"partition": 1, "jobName": 1, "priority": -1, "nextRunAt": 1}
    # Without an owner, the owner of an earlier claim is removed.
    ownerless = q.claim_update(_request())
    assert ownerless["$set"] == dogs_set
    assert ownerless["$unset"] == {"lockReleasedAt": "", "staleAttempt": "", "lockOwner": ""}
    bson.encode(command.update)


_RELEASED = {
    "$and": [
        {"$eq": [{"$type": "$lockReleasedAt"}, "date"]},
        {"$gte": ["$lockReleasedAt", "$lockedUntil"]},
    ]
}
_STALE = {"$and": [{"$eq": [{"$type": "$lockedUntil"}, "date"]}, {"$not": [_RELEASED]}]}


def test_sorted_update_one_claim_command_documents() -> None:
    """MongoDB 8 (wire >= 25): updateOne(filter, pipeline, {sort, hint})."""
    request = dataclasses.replace(_request(hint="globalPriority", partition=5), owner=OWNER)
    command = q.sorted_update_one_claim(request)
    assert command.filter == _selector(NOW, partition=5)
    assert command.update == [
        {
            "$set": {
                "lockId": {"$literal": "BEwq9RsrPe4g5DvEe"},
                "lockedUntil": NOW + timedelta(seconds=30),
                "lastRunAt": NOW,
                "tries": {"$add": [{"$ifNull": ["$tries", 0]}, 1]},
                # Stale: a lock was left that was not released at shutdown.
                "claimWasStale": _STALE,
                "staleAttempt": {
                    "$cond": [
                        _STALE,
                        {
                            "executionId": "$lockId",
                            "startedAt": "$lastRunAt",
                            "lockedUntil": "$lockedUntil",
                            "tries": {"$ifNull": ["$tries", 0]},
                            "owner": "$lockOwner",
                        },
                        "$$REMOVE",
                    ]
                },
                "lockOwner": {"$literal": {**OWNER_DOCUMENT, "lockId": "BEwq9RsrPe4g5DvEe"}},
                "lockReleasedAt": "$$REMOVE",
            }
        }
    ]
    assert command.sort == {"priority": -1, "nextRunAt": 1}
    assert command.hint == {"partition": 1, "priority": -1, "nextRunAt": 1}
    assert q.lock_id_filter("BEwq9RsrPe4g5DvEe") == {"lockId": "BEwq9RsrPe4g5DvEe"}
    # Every literal of the pipeline is encodable (a pipeline update is a BSON array).
    bson.encode({"u": command.update})
    ownerless = q.claim_update_pipeline(_request())
    assert ownerless[0]["$set"]["lockOwner"] == "$$REMOVE"
    assert q.released_expression() == _RELEASED
    assert q.stale_lock_expression() == _STALE


def _before_image(**fields: Any) -> dict[str, Any]:
    return {
        "_id": "01a22a06-8e4b-7354-ac27-5fd6a8ccc894",
        "jobName": "sleep",
        "type": "event",
        "priority": 100.0,  # a double written by some other client is read as an int
        "nextRunAt": NOW - timedelta(hours=1),
        "partition": 3,
        "params": {"ms": 2500},
        **fields,
    }


def test_claim_from_before_image_counts_the_try_and_staleness() -> None:
    request = dataclasses.replace(_request(), owner=OWNER)
    old_owner = {"host": "web-0", "pid": 7, "instanceId": "i-dead"}
    before = _before_image(
        lastRunAt=NOW - timedelta(seconds=31),
        lockedUntil=NOW - timedelta(seconds=1),
        lockId="old",
        lockOwner=old_owner,
        tries=2,
    )
    claimed = q.claim_from_before_image(request, before)
    assert (claimed.job_id, claimed.job_name, claimed.type) == (
        before["_id"],
        "sleep",
        JobType.EVENT,
    )
    assert (claimed.tries, claimed.was_stale, claimed.priority, claimed.partition) == (
        3,
        True,
        100,
        3,
    )
    assert type(claimed.priority) is int
    assert claimed.execution_id == claimed.lock_id == request.lock_id
    assert claimed.locked_until == NOW + timedelta(seconds=30)
    assert claimed.last_run_at == NOW
    assert claimed.owner == OWNER
    assert claimed.previous_attempt == PreviousAttempt(
        execution_id="old",
        started_at=NOW - timedelta(seconds=31),
        locked_until=NOW - timedelta(seconds=1),
        tries=2,
        owner=Owner(host="web-0", pid=7, instance_id="i-dead"),
    )
    claimed = q.claim_from_before_image(request, _before_image())
    assert (claimed.tries, claimed.was_stale, claimed.params) == (1, False, {"ms": 2500})
    assert claimed.previous_attempt is None


def test_a_released_lock_is_not_stale_on_the_before_image_path() -> None:
    request = _request()
    released = _before_image(
        lockedUntil=NOW - timedelta(seconds=5),
        lockReleasedAt=NOW - timedelta(seconds=5),
        lockId="gone",
        tries=1,
    )
    claimed = q.claim_from_before_image(request, released)
    assert (claimed.was_stale, claimed.previous_attempt, claimed.tries) == (False, None, 2)
    # A later claim (a Node worker's) moved lockedUntil past the release: stale again.
    reclaimed = {**released, "lockedUntil": NOW - timedelta(seconds=1)}
    claimed = q.claim_from_before_image(request, reclaimed)
    assert claimed.was_stale
    assert claimed.previous_attempt is not None
    assert (claimed.previous_attempt.execution_id, claimed.previous_attempt.owner) == (
        "gone",
        None,
    )
    # A lock without a lockId (a pre-4.6 Node worker's) is stale, with no attempt to name.
    lockless = _before_image(lockedUntil=NOW - timedelta(seconds=1))
    claimed = q.claim_from_before_image(request, lockless)
    assert (claimed.was_stale, claimed.previous_attempt) == (True, None)
    assert q.was_stale_before({"lockedUntil": NOW, "lockReleasedAt": None})
    assert not q.was_stale_before({"lockReleasedAt": NOW})


def test_claim_from_read_back_takes_tries_and_staleness_from_the_document() -> None:
    request = dataclasses.replace(_request(), owner=OWNER)
    after = {
        "_id": "r1",
        "jobName": "tick",
        "type": "recurrent",
        "priority": 5,
        "nextRunAt": NOW,
        "partition": 1,
        "params": None,
        "lockId": request.lock_id,
        "lockedUntil": NOW + timedelta(seconds=30),
        "lockOwner": OWNER_DOCUMENT,
        "tries": 4,
        "claimWasStale": True,
        "staleAttempt": {
            "executionId": "old",
            "startedAt": NOW - timedelta(minutes=1),
            "lockedUntil": NOW - timedelta(seconds=30),
            "tries": 3,
        },
    }
    claimed = q.claim_from_read_back(request, after)
    assert (claimed.type, claimed.tries, claimed.was_stale, claimed.params) == (
        JobType.RECURRENT,
        4,
        True,
        None,
    )
    assert claimed.owner == OWNER
    assert claimed.previous_attempt == PreviousAttempt(
        execution_id="old",
        started_at=NOW - timedelta(minutes=1),
        locked_until=NOW - timedelta(seconds=30),
        tries=3,
        owner=None,
    )
    fresh = {k: v for k, v in after.items() if k != "staleAttempt"}
    claimed = q.claim_from_read_back(request, {**fresh, "claimWasStale": False})
    assert (claimed.was_stale, claimed.previous_attempt) == (False, None)


# ---------------------------------------------------------------------------------------------
# Batch claims
# ---------------------------------------------------------------------------------------------


def _batch(count: int) -> list[ClaimRequest]:
    return [dataclasses.replace(_request(), lock_id=f"L{i}") for i in range(count)]


def test_claim_many_candidate_scan_is_the_claim_query_with_a_limit() -> None:
    query = q.claim_candidates_query(_request(hint="globalPriority", partition=5), 16)
    assert query.filter == _selector(NOW, partition=5)
    assert query.sort == [("priority", -1), ("nextRunAt", 1)]
    assert query.hint == {"partition": 1, "priority": -1, "nextRunAt": 1}
    assert query.limit == 16
    with pytest.raises(ValueError, match="limit"):
        q.claim_candidates_query(_request(), 0)


def test_claim_many_updates_lock_each_candidate_only_as_it_was_read() -> None:
    requests = _batch(3)
    read = NOW - timedelta(minutes=1)
    candidates = [
        {"_id": "c0", "jobName": "a", "nextRunAt": read, "priority": 5, "partition": 0},
        {
            "_id": "c1",
            "jobName": "a",
            "nextRunAt": read,
            "priority": 5,
            "partition": 0,
            "tries": 2,
            "lockId": "old",
            "lockedUntil": read,
            "type": "event",
        },
    ]
    updates = q.claim_many_updates(candidates, requests)
    # Every changing field as read (None: still missing), so the claim is the before-image's.
    assert updates[0][0] == {
        "_id": "c0",
        "lockId": None,
        "lockedUntil": None,
        "lockReleasedAt": None,
        "tries": None,
        "nextRunAt": read,
        "priority": 5,
        "status": None,
        "type": None,
        "partition": 0,
    }
    assert updates[1][0]["lockId"] == "old"
    assert updates[1][0]["tries"] == 2
    # What the sorted claim's pipeline would compute from each, as plain values.
    fresh, stale = (update for _, update in updates)
    assert fresh["$set"]["lockId"] == "L0"
    assert fresh["$set"]["claimWasStale"] is False
    assert fresh["$inc"] == {"tries": 1}
    assert "staleAttempt" in fresh["$unset"]
    assert stale["$set"]["claimWasStale"] is True
    assert stale["$set"]["staleAttempt"] == {"executionId": "old", "lockedUntil": read, "tries": 2}
    assert q.claim_many_updates([], requests) == []
    with pytest.raises(ValueError, match="3 candidates for 2 requests"):
        q.claim_many_updates([{"_id": "a"}, {"_id": "b"}, {"_id": "c"}], requests[:2])
    assert q.CLAIM_MANY_UPDATE_HINT == {"_id": 1}
    assert q.lock_ids_filter(["L0", "L1"]) == {"lockId": {"$in": ["L0", "L1"]}}
    bson.encode({"updates": [{"q": f, "u": u} for f, u in updates]})


def test_claims_from_read_back_follow_the_request_order() -> None:
    requests = _batch(3)
    documents = [
        {"_id": f"r{i}", "jobName": "echo", "priority": 1, "nextRunAt": NOW, "lockId": f"L{i}"}
        for i in (2, 0)
    ]
    claimed = q.claims_from_read_back(requests, documents)
    assert [(job.job_id, job.lock_id) for job in claimed] == [("r0", "L0"), ("r2", "L2")]
    assert claimed[0] == q.claim_from_read_back(requests[0], documents[1])
    assert q.claims_from_read_back(requests, []) == []


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("job_names", ("echo",)),
        ("partition", 3),
        ("hint", "globalPriority"),
        ("now", NOW + timedelta(seconds=1)),
        ("locked_until", NOW + timedelta(seconds=31)),
    ],
)
def test_checked_claim_requests_refuses_requests_that_disagree(field: str, value: Any) -> None:
    requests = _batch(3)
    requests[2] = dataclasses.replace(requests[2], **{field: value})
    with pytest.raises(InvalidOptionError, match=f"^requests: request 2 has {field}=") as refused:
        check_claim_requests(requests)
    assert (refused.value.field, refused.value.value) == (f"requests[2].{field}", value)


def test_checked_claim_requests_refuses_a_repeated_lock_id() -> None:
    requests = _batch(3)
    assert check_claim_requests(requests) == requests
    assert check_claim_requests([]) == []
    with pytest.raises(InvalidOptionError, match="lock_id 'L0' is repeated") as refused:
        check_claim_requests([*requests, requests[0]])
    assert (refused.value.field, refused.value.value) == ("requests[3].lock_id", "L0")


# ---------------------------------------------------------------------------------------------
# Fenced writes
# ---------------------------------------------------------------------------------------------


def test_fenced_filters() -> None:
    assert q.fenced_filter("j", "l") == {"_id": "j", "lockId": "l"}
    # Dogs' remove of a finished event job
    assert q.complete_filter("j", "l") == {"_id": "j", "type": "event", "lockId": "l"}
    assert q.mark_max_tries_filter("j", "l") == {"_id": "j", "lockId": "l", "type": "event"}


# Dogs' three lock fields, then ours (who held the lock, its release, the attempt it took over).
_LOCK_UNSET = {
    "lockId": "",
    "lockedUntil": "",
    "claimWasStale": "",
    "lockOwner": "",
    "lockReleasedAt": "",
    "staleAttempt": "",
}


def test_reschedule_update_is_dogs_recurrent_reschedule_plus_our_lock_fields() -> None:
    next_run = datetime(2026, 11, 30, 1, 16, 42, 880_123, tzinfo=UTC)
    update = q.reschedule_update(next_run_at=next_run, priority=100, reset_tries=True)
    assert update == {
        "$set": {
            "nextRunAt": datetime(2026, 11, 30, 1, 16, 42, 880_000, tzinfo=UTC),
            "priority": 100,
            "tries": 0,
        },
        # a reset of the tries starts a new run: the ended run's durable steps go with it
        "$unset": {**_LOCK_UNSET, "steps": ""},
    }
    assert list(update["$unset"])[:3] == ["lockId", "lockedUntil", "claimWasStale"]  # Dogs'
    assert q.reschedule_update(next_run_at=NOW, priority=None, reset_tries=False) == {
        "$set": {"nextRunAt": NOW},
        "$unset": _LOCK_UNSET,
    }
    # A snoozed run gives its try back: the count is set (and wins over reset_tries).
    for reset in (False, True):
        snoozed = q.reschedule_update(next_run_at=NOW, priority=None, reset_tries=reset, tries=2)
        assert snoozed["$set"] == {"nextRunAt": NOW, "tries": 2}
    with pytest.raises(TypeError, match="tries must be an int"):
        q.reschedule_update(next_run_at=NOW, priority=None, reset_tries=False, tries=1.5)  # type: ignore[arg-type]


def test_mark_max_tries_update() -> None:
    expires = NOW + timedelta(days=7)
    assert q.mark_max_tries_update(now=NOW, expires_at=expires) == {
        "$set": {"status": "maxTriesReached", "maxTriesReachedAt": NOW, "expiresAt": expires},
        "$unset": _LOCK_UNSET,
    }
    assert q.mark_max_tries_update(now=NOW, expires_at=None) == {
        "$set": {"status": "maxTriesReached", "maxTriesReachedAt": NOW},
        "$unset": {**_LOCK_UNSET, "expiresAt": ""},
    }


def test_small_updates() -> None:
    assert q.extend_lock_update(NOW) == {"$set": {"lockedUntil": NOW}}
    assert q.demote_stale_update() == {"$set": {"priority": 0}}
    # The release keeps lockId and lockOwner; lockReleasedAt says it was given back.
    assert q.release_lock_update(NOW + timedelta(microseconds=700)) == {
        "$set": {"lockedUntil": NOW, "lockReleasedAt": NOW}
    }
    assert q.unlock_all_update() == {"$unset": _LOCK_UNSET}


# ---------------------------------------------------------------------------------------------
# Scheduling
# ---------------------------------------------------------------------------------------------


def test_document_from_new_job_has_dogs_fields_order_and_int_types() -> None:
    job = NewJob(
        id="01a22a06-8e36-756e-929d-2609ee76e868",
        job_name="echo",
        params={"kind": "pending-single-unique", "n": 1.5, "tags": ["a", "b"]},
        next_run_at=datetime(2026, 11, 30, 2, 16, 42, 422_700, tzinfo=UTC),
        priority=7,
        partition=0,
        unique_identifier="dump-unique-1",
    )
    document = q.document_from_new_job(job)
    assert list(document) == [
        "_id",
        "jobName",
        "type",
        "priority",
        "uniqueIdentifier",
        "nextRunAt",
        "partition",
        "params",
    ]
    assert document["nextRunAt"] == datetime(2026, 11, 30, 2, 16, 42, 422_000, tzinfo=UTC)
    assert document["type"] == "event"
    decoded = bson.decode(bson.encode(document))
    assert type(decoded["priority"]) is int  # BSON int32, not a double
    assert type(decoded["partition"]) is int
    no_params = q.document_from_new_job(
        NewJob(id="x", job_name="noop", params=None, next_run_at=NOW, priority=0, partition=3)
    )
    assert no_params["params"] is None  # Dogs stores null
    assert "uniqueIdentifier" not in no_params
    assert no_params["priority"] == 0  # priority 0 can be scheduled


def test_upsert_unique_update_puts_every_field_in_set_on_insert() -> None:
    job = NewJob(
        id="01a22a06-8e38-713e-adc9-df87e12b43f5",
        job_name="noop",
        params={"kind": "pending-bulk-unique"},
        next_run_at=NOW,
        priority=50,
        partition=2,
        unique_identifier="dump-unique-2",
    )
    assert q.unique_identifier_filter("dump-unique-2") == {"uniqueIdentifier": "dump-unique-2"}
    assert q.upsert_unique_update(q.document_from_new_job(job)) == {
        "$setOnInsert": {
            "_id": "01a22a06-8e38-713e-adc9-df87e12b43f5",
            "jobName": "noop",
            "type": "event",
            "priority": 50,
            "uniqueIdentifier": "dump-unique-2",
            "nextRunAt": NOW,
            "partition": 2,
            "params": {"kind": "pending-bulk-unique"},
        }
    }


def test_ints_are_never_stored_as_doubles() -> None:
    with pytest.raises(TypeError, match="priority must be an int"):
        q.document_from_new_job(
            NewJob(id="x", job_name="a", params=None, next_run_at=NOW, priority=1.5, partition=0)  # type: ignore[arg-type]
        )
    with pytest.raises(TypeError, match="partition must be an int"):
        q.document_from_new_job(
            NewJob(id="x", job_name="a", params=None, next_run_at=NOW, priority=1, partition=True)
        )
    document = q.document_from_new_job(
        NewJob(id="x", job_name="a", params=None, next_run_at=NOW, priority=3.0, partition=1)  # type: ignore[arg-type]
    )
    assert type(document["priority"]) is int


def test_ensure_recurrent_update_is_dogs_bootstrap() -> None:
    assert q.ensure_recurrent_filter("cronTick") == {"jobName": "cronTick", "type": "recurrent"}
    assert q.ensure_recurrent_update(
        record_id="01a22a06-8df4-74ee-bb9e-19e50b77070d", priority=100, partition=3, now=NOW
    ) == {
        "$set": {"type": "recurrent", "priority": 100},
        "$unset": {"status": ""},
        "$setOnInsert": {
            "_id": "01a22a06-8df4-74ee-bb9e-19e50b77070d",
            "nextRunAt": NOW,
            "partition": 3,
        },
    }


# ---------------------------------------------------------------------------------------------
# Probe, reconciler, retention
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hint", "key"),
    [
        ("byJobName", {"partition": 1, "jobName": 1, "priority": -1, "nextRunAt": 1}),
        ("globalPriority", {"partition": 1, "priority": -1, "nextRunAt": 1}),
    ],
)
def test_probe_explain_command_is_dogs_explain(hint: str, key: dict[str, int]) -> None:
    command = q.probe_explain_command(
        "orionjs.jobs_dogs_records", hint=hint, job_names=NAMES, partition=2, now=NOW
    )
    assert command == {
        "explain": {
            "find": "orionjs.jobs_dogs_records",
            "filter": _selector(NOW),
            "sort": {"priority": -1, "nextRunAt": 1},
            "hint": key,
            "limit": 1,
            "maxTimeMS": 1000,
        },
        "verbosity": "executionStats",
    }
    assert next(iter(command)) == "explain"  # the command name must come first


def test_probe_execution_millis() -> None:
    assert q.probe_execution_millis({"executionStats": {"executionTimeMillis": 3}}) == 3.0
    assert q.probe_execution_millis({"executionStats": {"executionTimeMillis": 0.5}}) == 0.5
    bad_results: list[dict[str, Any]] = [
        {},
        {"executionStats": {}},
        {"executionStats": {"executionTimeMillis": None}},
        {"executionStats": {"executionTimeMillis": "3"}},
        {"executionStats": {"executionTimeMillis": True}},
        {"executionStats": {"executionTimeMillis": math.nan}},
        {"executionStats": {"executionTimeMillis": math.inf}},
        {"executionStats": {"executionTimeMillis": -1}},
        {"executionStats": 7},
    ]
    for bad in bad_results:
        with pytest.raises(ValueError, match="executionTimeMillis"):
            q.probe_execution_millis(bad)


def test_reconciler_scan_and_compare_and_set_are_dogs_documents() -> None:
    conditions = [
        {
            "$or": [
                {"partition": {"$exists": False}},
                {"partition": {"$lt": 0}},
                {"partition": {"$gte": 4}},
            ]
        },
        {"$or": [{"lockedUntil": {"$exists": False}}, {"lockedUntil": {"$lte": NOW}}]},
        {"$or": [{"type": {"$ne": "event"}}, {"status": {"$ne": "maxTriesReached"}}]},
    ]
    assert q.reconcile_select_filter(job_names=NAMES, n_partitions=4, now=NOW) == {
        "jobName": {"$in": NAMES},
        "$and": conditions,
    }
    assert dict(q.RECONCILE_PROJECTION) == {"_id": 1}
    assert q.reconcile_cas_filter("id1", n_partitions=4, now=NOW) == {
        "_id": "id1",
        "$and": conditions,
    }
    assert q.reconcile_update(1) == {"$set": {"partition": 1}}


def test_backfill_retention_is_dogs_pipeline() -> None:
    anchor = {"$ifNull": ["$maxTriesReachedAt", {"$ifNull": ["$lastRunAt", NOW]}]}
    assert q.backfill_retention_filter() == {"type": "event", "status": "maxTriesReached"}
    assert q.backfill_retention_update(retention=timedelta(days=7), now=NOW) == [
        {"$set": {"maxTriesReachedAt": anchor, "expiresAt": {"$add": [anchor, 604_800_000]}}}
    ]
    assert q.backfill_retention_update(retention=None, now=NOW) == {"$unset": {"expiresAt": ""}}
    with pytest.raises(ValueError, match="negative"):
        q.backfill_retention_update(retention=timedelta(seconds=-1), now=NOW)


# ---------------------------------------------------------------------------------------------
# History
# ---------------------------------------------------------------------------------------------


def _heartbeat_row(**fields: Any) -> HistoryRecord:
    started = datetime(2026, 11, 30, 1, 16, 42, 379_000, tzinfo=UTC)
    row = HistoryRecord(
        execution_id="BEwq9RsrPe4g5DvEe",
        job_id="01a22a06-8df4-74ee-bb9e-15fd5d373b86",
        job_name="heartbeat",
        type=JobType.RECURRENT,
        priority=100,
        tries=1,
        started_at=started,
        ended_at=started + timedelta(milliseconds=8),
        status=HistoryStatus.SUCCESS,
        expires_at=started + timedelta(days=7, milliseconds=8),
        result={"beat": 1796001402380},
    )
    return dataclasses.replace(row, **fields)


def test_history_update_is_dogs_row_inserted_whole_once() -> None:
    started = datetime(2026, 11, 30, 1, 16, 42, 379_000, tzinfo=UTC)
    record = _heartbeat_row()
    assert q.history_filter("BEwq9RsrPe4g5DvEe") == {"executionId": "BEwq9RsrPe4g5DvEe"}
    # Dogs sends {$setOnInsert: {_id, status}, $set: <the rest>}; the row is the same, all of
    # it on insert only, then our four additive fields.
    dogs_row = {
        "_id": "01a22a06-8e13-768f-a0fe-82ae8cd1ff31",
        "status": "success",
        "jobId": "01a22a06-8df4-74ee-bb9e-15fd5d373b86",
        "executionId": "BEwq9RsrPe4g5DvEe",
        "jobName": "heartbeat",
        "type": "recurrent",
        "priority": 100,
        "tries": 1,
        "startedAt": started,
        "endedAt": started + timedelta(milliseconds=8),
        "duration": 8,
        "expiresAt": started + timedelta(days=7, milliseconds=8),
        "errorMessage": None,
        "result": {"beat": 1796001402380},
    }
    update = q.history_update(record, "01a22a06-8e13-768f-a0fe-82ae8cd1ff31")
    assert update == {
        "$setOnInsert": {
            **dogs_row,
            "wasStale": False,
            "errorType": None,
            "errorTraceback": None,
            "owner": None,
        }
    }
    assert list(update["$setOnInsert"])[: len(dogs_row)] == list(dogs_row)


def test_history_round_trip() -> None:
    started = datetime(2026, 11, 30, 1, 16, 42, 651_000, tzinfo=UTC)
    record = HistoryRecord(
        execution_id="vNrmxyq7fPBjgSgrX",
        job_id="01a22a06-8ebb-737c-b16a-d8c87ff78cdf",
        job_name="fail",
        type=JobType.EVENT,
        priority=100,
        tries=1,
        started_at=started,
        ended_at=started + timedelta(milliseconds=4),
        status=HistoryStatus.ERROR,
        expires_at=started + timedelta(days=7),
        params={"kind": "fail"},
        error_message="intentional failure (fail job)",
        unique_identifier="u",
        was_stale=True,
        error_type="builtins.RuntimeError",
        error_traceback='Traceback (most recent call last):\n  File "x.py"\nRuntimeError: no',
        owner=OWNER,
    )
    document = q.history_update(record, "h1")["$setOnInsert"]
    assert document["params"] == {"kind": "fail"}
    assert document["uniqueIdentifier"] == "u"
    assert document["owner"] == OWNER_DOCUMENT
    assert q.history_from_document(document) == record
    bson.encode(document)
    # A row Dogs wrote has none of the additive fields.
    dogs_row = dict(document)
    for field in ("wasStale", "errorType", "errorTraceback", "owner"):
        dogs_row.pop(field)
    read = q.history_from_document(dogs_row)
    assert (read.was_stale, read.error_type, read.error_traceback, read.owner) == (
        False,
        None,
        None,
        None,
    )
    for status in ("cancelled", "snoozed"):
        assert q.history_from_document({**document, "status": status}).status == status


def test_history_many_updates_keep_the_first_row_of_each_execution_whole() -> None:
    ids = iter(f"h{i}" for i in range(10))
    first = _heartbeat_row(status=HistoryStatus.CANCELLED, error_message="cancelled")
    later = _heartbeat_row(status=HistoryStatus.SUCCESS, result={"late": True})
    other = _heartbeat_row(execution_id="other")
    updates = q.history_many_updates([first, other, later], lambda execution_id: next(ids))
    assert updates == [
        ({"executionId": first.execution_id}, q.history_update(first, "h0")),
        ({"executionId": "other"}, q.history_update(other, "h1")),
    ]
    with pytest.raises(TypeError, match="tries must be an int"):  # a dropped row is checked too
        q.history_many_updates([first, dataclasses.replace(later, tries=0.5)], lambda _: "x")  # type: ignore[arg-type]
    # By default an execution's row has one _id, a UUID named after it (Dogs' UUID strings).
    (default,) = q.history_many_updates([first])
    assert default[1]["$setOnInsert"]["_id"] == q.history_row_id(first.execution_id)
    assert str(uuid.UUID(q.history_row_id(first.execution_id))) == q.history_row_id(
        first.execution_id
    )
    assert q.history_row_id("other") != q.history_row_id(first.execution_id)


# ---------------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------------


def test_record_from_dogs_documents() -> None:
    terminal: dict[str, Any] = {
        "_id": "01a22a06-8ebb-737c-b16a-d8c87ff78cdf",
        "jobName": "fail",
        "type": "event",
        "priority": 100,
        "nextRunAt": NOW,
        "partition": 0,
        "params": {"kind": "fail"},
        "lastRunAt": NOW,
        "tries": 2,
        "expiresAt": NOW + timedelta(days=7),
        "maxTriesReachedAt": NOW,
        "status": "maxTriesReached",
    }
    assert q.record_from_document(terminal) == JobRecord(
        id=terminal["_id"],
        job_name="fail",
        type=JobType.EVENT,
        priority=100,
        next_run_at=NOW,
        partition=0,
        params={"kind": "fail"},
        last_run_at=NOW,
        tries=2,
        status=JobStatus.MAX_TRIES_REACHED,
        max_tries_reached_at=NOW,
        expires_at=NOW + timedelta(days=7),
    )
    unpartitioned = {"_id": "x", "jobName": "noop", "type": "event", "priority": 100.0}
    record = q.record_from_document({**unpartitioned, "nextRunAt": NOW})
    assert (record.partition, record.priority, record.status, record.params) == (
        None,
        100,
        None,
        None,
    )


def test_document_from_record_round_trips() -> None:
    record = JobRecord(
        id="r",
        job_name="tick",
        type=JobType.RECURRENT,
        priority=5,
        next_run_at=NOW,
        partition=1,
        last_run_at=NOW,
        locked_until=NOW + timedelta(seconds=30),
        lock_id="ehBoBJuNFzerjJXjd",
        claim_was_stale=False,
        tries=1,
        status=JobStatus.MAX_TRIES_REACHED,
    )
    document = q.document_from_record(record)
    assert "expiresAt" not in document
    assert "lockOwner" not in document
    assert document["params"] is None
    assert q.record_from_document(document) == record
    released = dataclasses.replace(record, lock_owner=OWNER, lock_released_at=NOW)
    document = q.document_from_record(released)
    owned = {**OWNER_DOCUMENT, "lockId": record.lock_id}
    assert (document["lockOwner"], document["lockReleasedAt"]) == (owned, NOW)
    assert list(document)[-2:] == ["lockOwner", "lockReleasedAt"]  # after Dogs' fields
    assert q.record_from_document(document) == released


def test_an_owner_of_an_earlier_lock_is_no_owner() -> None:
    # A Node Dogs claim replaces lockId and leaves our lockOwner: it no longer names the holder.
    document = {
        "_id": "r1",
        "jobName": "mail",
        "type": "event",
        "priority": 100,
        "nextRunAt": NOW,
        "lockId": "node-lock",
        "lockedUntil": NOW + timedelta(seconds=30),
        "lockOwner": {**OWNER_DOCUMENT, "lockId": "our-old-lock"},
    }
    assert q.record_from_document(document).lock_owner is None
    document["lockOwner"] = {**OWNER_DOCUMENT, "lockId": "node-lock"}
    assert q.record_from_document(document).lock_owner == OWNER


# ---------------------------------------------------------------------------------------------
# The controls collection (additive: Node Dogs never reads it)
# ---------------------------------------------------------------------------------------------


def test_controls_indexes_are_the_ttl_and_kind_by_job_name() -> None:
    assert q.DEFAULT_CONTROLS_COLLECTION == "orionjs.jobs_dogs_controls"
    assert [spec.as_list_indexes_entry() for spec in q.CONTROL_INDEXES] == [
        {
            "v": 2,
            "key": {"purgeAt": 1},
            "name": "jobs_dogs_controls_purge_at_ttl",
            "expireAfterSeconds": 0,
        },
        {"v": 2, "key": {"kind": 1, "jobName": 1}, "name": "jobs_dogs_controls_kind_job_name"},
    ]


def test_control_ids_keep_their_field_order() -> None:
    """An embedded ``_id`` equals another only with the same fields in the same order."""
    assert list(q.slot_id("echo", "k", 2)) == ["slot", "key", "i"]
    assert list(q.rate_id("echo", "k", NOW)) == ["rate", "key", "w"]
    assert q.pause_id("*") == {"pause": "*"}
    assert q.lease_id("nightly") == {"lease": "nightly"}
    encoded = bson.encode({"_id": q.slot_id("echo", "k", 2)})
    assert bson.decode(encoded)["_id"]["i"] == 2


def test_acquire_slot_filter_and_update() -> None:
    until = NOW + timedelta(minutes=1, microseconds=999)
    assert q.acquire_slot_filter("echo", "", limit=2, holder="h", now=NOW) == {
        "_id": {"$in": [q.slot_id("echo", "", 0), q.slot_id("echo", "", 1)]},
        "$or": [{"holder": None}, {"until": {"$lte": NOW}}, {"holder": "h"}],
    }
    assert q.acquire_slot_update("h", until) == {
        "$set": {
            "holder": "h",
            "until": NOW + timedelta(minutes=1),
            "purgeAt": NOW + timedelta(days=1, minutes=1),
        }
    }
    assert q.ACQUIRE_SLOT_SORT == (("until", -1),)
    [(filter_, update)] = q.create_slot_upserts("echo", "k", limit=1, now=NOW)
    assert filter_ == {"_id": q.slot_id("echo", "k", 0)}
    assert update["$setOnInsert"]["holder"] is None
    assert update["$setOnInsert"]["until"] == datetime(1970, 1, 1, tzinfo=UTC)
    assert update["$setOnInsert"]["purgeAt"] == NOW + timedelta(days=1)
    assert q.release_slot_update() == {
        "$set": {"holder": None, "until": datetime(1970, 1, 1, tzinfo=UTC)}
    }


def test_rate_token_is_one_conditional_increment() -> None:
    end = NOW + timedelta(minutes=1)
    assert q.take_rate_token_filter("echo", "k", limit=5, window_start=NOW) == {
        "_id": {"rate": "echo", "key": "k", "w": NOW},
        "count": {"$lt": 5},
    }
    assert q.take_rate_token_update("echo", "k", window_end=end) == {
        "$inc": {"count": 1},
        "$setOnInsert": {
            "kind": "rate",
            "jobName": "echo",
            "key": "k",
            "purgeAt": end + timedelta(days=1),
        },
    }


def test_lease_filters_fence_by_owner_and_token() -> None:
    update = q.acquire_lease_update("o", NOW)
    assert update == {"$set": {"kind": "lease", "owner": "o", "until": NOW}, "$inc": {"token": 1}}
    assert isinstance(update["$inc"]["token"], bson.Int64)  # the token is a long from the start
    assert q.acquire_lease_filter("n", NOW) == {
        "_id": {"lease": "n"},
        "$or": [{"owner": None}, {"until": {"$lte": NOW}}],
    }
    assert q.renew_lease_filter("n", "o", 3, NOW) == {
        "_id": {"lease": "n"},
        "owner": "o",
        "token": 3,
        "until": {"$gt": NOW},
    }
    assert q.lease_from_document("n", None) is None
    assert q.lease_from_document("n", {"owner": None, "token": 2, "until": NOW}) is None
    lease = q.lease_from_document("n", {"owner": "o", "token": bson.Int64(2), "until": NOW})
    assert lease is not None
    assert (lease.owner, lease.token, lease.expires_at) == ("o", 2, NOW)
    assert type(lease.token) is int


def test_held_slots_pipeline_counts_live_holders_by_name() -> None:
    assert q.held_slots_pipeline(NOW) == [
        {"$match": {"kind": "slot", "holder": {"$ne": None}, "until": {"$gt": NOW}}},
        {"$group": {"_id": "$jobName", "held": {"$sum": 1}}},
    ]
    assert q.held_slots_from_rows([{"_id": "echo", "held": 2}, {"_id": None, "held": 1}]) == {
        "echo": 2
    }


def test_a_holder_looks_at_its_own_window_of_slots_first() -> None:
    assert q.slot_window(5, "h") == [0, 1, 2, 3, 4]  # a small limit: every slot at once
    window = q.slot_window(1000, "holder-1")
    assert len(window) == q.SLOT_WINDOW == len(set(window))
    assert all(0 <= index < 1000 for index in window)
    assert q.slot_window(1000, "holder-1") == window  # asking again looks at the same slots
    starts = {q.slot_window(1000, f"holder-{n}")[0] for n in range(200)}
    assert len(starts) > 150  # different holders aim at different slots
    assert q.acquire_slot_filter("echo", "", limit=1000, holder="h", now=NOW, indices=[7, 8])[
        "_id"
    ] == {"$in": [q.slot_id("echo", "", 7), q.slot_id("echo", "", 8)]}
