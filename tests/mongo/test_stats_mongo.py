"""``job_stats`` on the real mongod beyond the contract: the plans (an index scan of the
window, the per-minute counts covered), the fallback without Dogs' index, the async store
agreeing with the sync one, and the pipeline builders' shape."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from benchmarks.explain_stats import NAMES, explain_stats, seed_history
from pymongo import MongoClient

from dogs_mongo import AsyncMongoJobStore, MongoJobStore
from dogs_mongo import queries as q

NOW = datetime(2100, 1, 8, tzinfo=UTC)
_HOUR = timedelta(hours=1)


@pytest.fixture
def seeded(sync_store: MongoJobStore, sync_mongo_client: MongoClient[dict[str, Any]]) -> int:
    return seed_history(sync_mongo_client[sync_store.database_name], 1_000, NOW)


@pytest.mark.parametrize("names", [None, (NAMES[0],), NAMES[:3]])
@pytest.mark.parametrize("pipeline", [q.stats_summary_pipeline, q.stats_minutes_pipeline])
def test_each_pipeline_scans_only_the_window_of_the_index(
    sync_store: MongoJobStore,
    sync_mongo_client: MongoClient[dict[str, Any]],
    seeded: int,
    names: tuple[str, ...] | None,
    pipeline: Any,
) -> None:
    database = sync_mongo_client[sync_store.database_name]
    plan = explain_stats(database, pipeline, window=("1d", 24 * _HOUR), job_names=names, now=NOW)
    assert "COLLSCAN" not in plan.tree
    assert plan.indexes == ("jobName_1_startedAt_1",)
    assert 0 < plan.in_window < seeded
    # The rows of the window, plus at most a seek or two per name.
    assert plan.in_window <= plan.keys_examined <= plan.in_window + 2 * len(names or NAMES) + 1
    if pipeline is q.stats_minutes_pipeline:
        assert plan.tree.startswith("PROJECTION_COVERED")
        assert plan.docs_examined == 0
    else:
        assert plan.docs_examined == plan.in_window


def test_without_the_index_the_read_warns_once_and_is_still_right(
    sync_store: MongoJobStore, seeded: int, caplog: pytest.LogCaptureFixture
) -> None:
    since = NOW - 6 * _HOUR
    expected = sync_store.job_stats(since=since, until=NOW)
    sync_store.history_collection.drop_index("jobName_1_startedAt_1")
    with caplog.at_level(logging.WARNING, logger="dogs.mongo.store"):
        assert sync_store.job_stats(since=since, until=NOW) == expected
        assert sync_store.job_stats(since=since, until=NOW, job_names=[NAMES[1]]) == [
            s for s in expected if s.job_name == NAMES[1]
        ]
    warnings = [r for r in caplog.records if "is missing" in r.getMessage()]
    assert len(warnings) == 1
    assert "jobName: 1, startedAt: 1" in warnings[0].getMessage()


@pytest.mark.anyio
async def test_the_async_store_agrees(
    sync_store: MongoJobStore, async_store: AsyncMongoJobStore, seeded: int
) -> None:
    since = NOW - 7 * 24 * _HOUR
    stats = await async_store.job_stats(since=since, until=NOW)
    assert stats == sync_store.job_stats(since=since, until=NOW)
    assert sum(s.runs for s in stats) == seeded
    assert [s.job_name for s in stats] == sorted(NAMES)


def test_the_pipelines_match_the_window_and_the_names() -> None:
    since, until = NOW - _HOUR, NOW
    assert q.stats_match(since=since, until=until, job_names=None) == {
        "jobName": {"$type": "string"},
        "startedAt": {"$gte": since, "$lt": until},
    }
    summary = q.stats_summary_pipeline(since=since, until=until, job_names=["a", "b"])
    assert summary[0]["$match"]["jobName"] == {"$in": ["a", "b"]}
    assert summary[-1] == {"$sort": {"_id": 1}}
    minutes = q.stats_minutes_pipeline(since=since, until=until, job_names=None)
    assert minutes[1]["$group"]["_id"]["minute"] == {
        "$dateTrunc": {"date": "$startedAt", "unit": "minute"}
    }
    assert q.STATS_HINT == {"jobName": 1, "startedAt": 1}
