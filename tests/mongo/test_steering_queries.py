"""Unit tests of the builders of what an operator reads and changes: the filter of each
:class:`JobState` (:mod:`dogs_mongo.queries.states`), ``find_jobs``' page query and its index,
the bulk delete, the compare-and-set of ``modify_job``, ``delete_job``'s conditions, the status
counts, the ordering of ``get_executions`` pages, and the reading of additive fields. No server
is needed: ``test_steering_mongo.py`` runs the same queries on a real mongod.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import bson
import pytest

from dogs_core.domain.records import HistoryStatus, JobState, Owner
from dogs_core.domain.steering import JobChange
from dogs_mongo import queries as q

from .test_queries import _RELEASED, _STALE, NOW

# ---------------------------------------------------------------------------------------------
# Operators' writes
# ---------------------------------------------------------------------------------------------


def test_modify_job_is_a_compare_and_set_on_the_lock() -> None:
    not_running = {"lockedUntil": {"$not": {"$gt": NOW}}}
    assert q.modify_job_filter("j", NOW + timedelta(microseconds=5)) == {"_id": "j", **not_running}
    change = JobChange(next_run_at=NOW + timedelta(microseconds=5), priority=7, tries=0)
    assert q.modify_job_update(change) == {"$set": {"nextRunAt": NOW, "priority": 7, "tries": 0}}
    assert q.modify_job_update(JobChange(next_run_at=NOW, tries=0, revive=True)) == {
        "$set": {"nextRunAt": NOW, "tries": 0},
        "$unset": {"status": "", "maxTriesReachedAt": "", "expiresAt": ""},
    }
    assert q.modify_job_update(JobChange()) == {}  # nothing to write: the store reads instead
    with pytest.raises(TypeError, match="priority must be an int"):
        q.modify_job_update(JobChange(priority=True))


def test_delete_job_filter() -> None:
    failed = {"status": "maxTriesReached", "type": {"$ne": "recurrent"}}
    assert q.delete_job_filter("j", unless_running_at=None, unless_failed=False) == {"_id": "j"}
    assert q.delete_job_filter("j", unless_running_at=NOW, unless_failed=True) == {
        "_id": "j",
        "lockedUntil": {"$not": {"$gt": NOW}},
        "$nor": [failed],
    }


# ---------------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------------


def test_a_malformed_owner_reads_as_none() -> None:
    base = {"_id": "x", "jobName": "a", "type": "event", "priority": 1, "nextRunAt": NOW}
    for owner in (
        "web-1",
        {"host": "web-1", "pid": "1", "instanceId": "i"},
        {"host": "web-1", "pid": True, "instanceId": "i"},
        {"host": "web-1", "pid": math.inf, "instanceId": "i"},
        {"host": 1, "pid": 1, "instanceId": "i"},
        {"pid": 1, "instanceId": "i"},
    ):
        assert q.record_from_document({**base, "lockOwner": owner}).lock_owner is None, owner
    double_pid = {"host": "h", "pid": 12.0, "instanceId": "i"}
    assert q.record_from_document({**base, "lockOwner": double_pid}).lock_owner == Owner(
        "h", 12, "i"
    )
    assert q.record_from_document({**base, "lockReleasedAt": "soon"}).lock_released_at is None


# ---------------------------------------------------------------------------------------------
# Operators' reads: find_jobs by state, status counts, executions
# ---------------------------------------------------------------------------------------------

_FAILED = {"status": "maxTriesReached", "type": {"$ne": "recurrent"}}
_NOT_FAILED = {"$nor": [_FAILED]}
_NOT_LOCKED = {
    "$or": [
        {"lockedUntil": None},
        {"$and": [{"lockedUntil": {"$lte": NOW}}, {"$expr": _RELEASED}]},
    ]
}


def test_state_filters_repeat_the_negation_of_every_earlier_state() -> None:
    later = NOW + timedelta(microseconds=900)  # truncated to the millisecond
    held = {"nextRunAt": {"$gt": NOW}, "$expr": {"$eq": ["$heldBack.until", "$nextRunAt"]}}
    sleeping = {"nextRunAt": {"$gt": NOW}, "$expr": {"$eq": ["$sleepingUntil", "$nextRunAt"]}}
    assert q.state_filter(JobState.FAILED, later) == [_FAILED]
    assert q.state_filter(JobState.RUNNING, later) == [
        _NOT_FAILED,
        {"lockId": {"$exists": True}},
        {"lockedUntil": {"$gt": NOW}},
    ]
    assert q.state_filter(JobState.STALE, later) == [
        _NOT_FAILED,
        {"lockId": {"$exists": True}},
        {"lockedUntil": {"$lte": NOW}},
        {"$expr": {"$not": [_RELEASED]}},
    ]
    assert q.state_filter(JobState.RETRYING, later) == [
        _NOT_FAILED,
        _NOT_LOCKED,
        {"$nor": [held]},
        {"$nor": [sleeping]},
        {"tries": {"$gte": 1}},
    ]
    assert q.state_filter(JobState.DUE, later) == [
        _NOT_FAILED,
        _NOT_LOCKED,
        {"$nor": [{"tries": {"$gte": 1}}]},
        {"nextRunAt": {"$lte": NOW}},
    ]
    assert q.state_filter(JobState.SCHEDULED, later) == [
        _NOT_FAILED,
        _NOT_LOCKED,
        {"$nor": [held]},
        {"$nor": [sleeping]},
        {"$nor": [{"tries": {"$gte": 1}}]},
        {"$nor": [{"nextRunAt": {"$lte": NOW}}]},
    ]
    assert q.state_filter(JobState.HELD, later) == [_NOT_FAILED, _NOT_LOCKED, held]
    assert q.state_filter(JobState.SLEEPING, later) == [
        _NOT_FAILED,
        _NOT_LOCKED,
        {"$nor": [held]},
        sleeping,
    ]
    assert set(q.STATE_FILTERS) == set(JobState)


@pytest.mark.parametrize(
    ("state", "hint"),
    [
        (None, {"_id": 1}),
        (JobState.SCHEDULED, {"_id": 1}),
        (JobState.DUE, {"_id": 1}),
        (JobState.RETRYING, {"_id": 1}),
        (JobState.RUNNING, {"lockId": 1}),
        (JobState.STALE, {"lockId": 1}),
        (JobState.FAILED, {"status": 1, "jobName": 1, "_id": 1}),
    ],
)
def test_find_jobs_query_pages_by_id_through_the_index_of_its_state(
    state: JobState | None, hint: dict[str, int]
) -> None:
    query = q.find_jobs_query(
        job_name="echo", state=state, unique_identifier=None, after="01a2", limit=50, now=NOW
    )
    conditions = [] if state is None else q.state_filter(state, NOW)
    expected: dict[str, Any] = {"jobName": "echo", "_id": {"$gt": "01a2"}}
    if conditions:
        expected["$and"] = conditions
    assert query == q.FindJobsQuery(filter=expected, sort=[("_id", 1)], hint=hint, limit=50)
    assert q.state_hint(state) == hint
    bson.encode(query.filter)


def test_find_jobs_query_by_unique_key_uses_its_index() -> None:
    query = q.find_jobs_query(
        job_name=None, state=None, unique_identifier="k", after=None, limit=1, now=None
    )
    assert (query.filter, query.hint) == ({"uniqueIdentifier": "k"}, {"uniqueIdentifier": 1})
    everything = q.find_jobs_query(
        job_name=None, state=None, unique_identifier=None, after=None, limit=100, now=None
    )
    assert (everything.filter, everything.hint) == ({}, {"_id": 1})
    with pytest.raises(ValueError, match="needs now"):
        q.find_jobs_query(
            job_name=None, state=JobState.DUE, unique_identifier=None, after=None, limit=1, now=None
        )


def test_delete_jobs_query_never_matches_a_live_lock() -> None:
    failed, hint = q.delete_jobs_query(job_name="a", state=JobState.FAILED, now=NOW)
    assert failed == {"jobName": "a", "$and": [_FAILED, {"lockedUntil": {"$not": {"$gt": NOW}}}]}
    assert hint == {"status": 1, "jobName": 1, "_id": 1}
    stale, hint = q.delete_jobs_query(job_name=None, state=JobState.STALE, now=NOW)
    assert (stale, hint) == ({"$and": q.state_filter(JobState.STALE, NOW)}, {"lockId": 1})
    with pytest.raises(ValueError, match="never deleted"):
        q.delete_jobs_query(job_name=None, state=JobState.RUNNING, now=NOW)


def test_status_counts_pipeline_shape() -> None:
    pipeline = q.status_counts_pipeline(NOW + timedelta(microseconds=1))
    assert [next(iter(stage)) for stage in pipeline] == ["$project", "$group", "$sort"]
    group = pipeline[1]["$group"]
    assert set(group) == {
        "_id", "due", "later", "running", "stale", "terminal", "held", "oldestDueAt"
    }  # fmt: skip
    branches = pipeline[0]["$project"]["state"]["$switch"]["branches"]
    states = [branch["then"] for branch in branches]
    assert states == ["terminal", "running", "stale", "due", "held"]
    assert branches[2]["case"] == _STALE  # a released lock is not stale
    assert branches[1]["case"]["$and"][1] == {"$gt": ["$lockedUntil", NOW]}
    # The oldest waiting work: due records, stale ones (waiting for recovery) and held ones
    # (given back by a fleet limit: waiting since they were first due).
    assert group["oldestDueAt"] == {
        "$min": {"$cond": [{"$in": ["$state", ["due", "stale", "held"]]}, "$since", None]}
    }


def test_get_executions_filter_and_sort() -> None:
    assert q.get_executions_filter("a", None) == {"jobName": "a"}
    assert q.get_executions_filter(None, "j", HistoryStatus.CANCELLED) == {
        "jobId": "j",
        "status": "cancelled",
    }
    assert q.get_executions_sort() == [("startedAt", -1)]


def _row(started_s: int, ended_s: int) -> dict[str, Any]:
    return {
        "startedAt": NOW + timedelta(seconds=started_s),
        "endedAt": NOW + timedelta(seconds=ended_s),
        "n": (started_s, ended_s),
    }


def test_executions_page_orders_ties_by_ended_at_and_spots_cut_ties() -> None:
    # Read in startedAt order; a lead row, three page rows (two tied), one row after.
    rows = [_row(9, 9), _row(5, 6), _row(5, 8), _row(3, 3), _row(1, 1)]
    page = q.executions_page(rows, lead=1, limit=3)
    assert page is not None
    assert [row["n"] for row in page] == [(5, 8), (5, 6), (3, 3)]
    assert q.executions_page(rows, lead=0, limit=2) is None  # the tie at 5 crosses the edge
    assert q.executions_page(rows[1:], lead=1, limit=2) is None  # ... the top edge
    assert q.executions_page(rows, lead=1, limit=10) is not None
    assert q.executions_page(rows[:1], lead=1, limit=3) == []
    newer, window = q.executions_window_filters({"jobName": "a"}, rows[1:3])
    assert newer == {"$and": [{"jobName": "a"}, {"startedAt": {"$gt": NOW + timedelta(seconds=5)}}]}
    assert window == {
        "$and": [
            {"jobName": "a"},
            {
                "startedAt": {
                    "$gte": NOW + timedelta(seconds=5),
                    "$lte": NOW + timedelta(seconds=5),
                }
            },
        ]
    }
    assert [row["n"] for row in q.executions_in_order(rows)] == [
        (9, 9),
        (5, 8),
        (5, 6),
        (3, 3),
        (1, 1),
    ]
