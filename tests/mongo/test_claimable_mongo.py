"""On the real mongod, the MongoDB forms of the domain's rules match exactly the records the
domain says, on random records and clocks: the claim selector
(:func:`~dogs_mongo.queries.claims.eligible_filter`, through either claim index) against
:func:`~dogs_core.domain.claimable.is_claimable`, and each filter of
:mod:`dogs_mongo.queries.states` (through the index that serves it) against
:meth:`JobRecord.state <dogs_core.domain.records.JobRecord.state>`.

One scratch collection, with every index of the records collection, serves every example."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pymongo import MongoClient
from pymongo.collection import Collection

from dogs_core.domain.claimable import ClaimScope, is_claimable
from dogs_core.domain.records import JobRecord, JobState
from dogs_mongo import queries as q
from tests.claimable_strategies import record_sets, scopes

pytestmark = pytest.mark.mongo

Records = Collection[dict[str, Any]]


@pytest.fixture(scope="module")
def scratch(sync_mongo_client: MongoClient[dict[str, Any]]) -> Iterator[Records]:
    name = f"dogs_test_claimable_{uuid.uuid4().hex[:12]}"
    collection = sync_mongo_client[name][q.DEFAULT_RECORDS_COLLECTION]
    collection.create_indexes([spec.as_index_model() for spec in q.RECORD_INDEXES])
    try:
        yield collection
    finally:
        sync_mongo_client.drop_database(name)


def _ids(collection: Records, filter_: Mapping[str, Any], hint: Mapping[str, int]) -> set[str]:
    found = collection.find(filter_, {"_id": 1}).hint(list(hint.items()))
    return {str(doc["_id"]) for doc in found}


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(records=record_sets(), claims=st.lists(scopes, min_size=1, max_size=3))
def test_the_claim_and_state_filters_match_what_the_domain_says(
    scratch: Records, records: list[JobRecord], claims: list[ClaimScope]
) -> None:
    scratch.delete_many({})
    if records:
        scratch.insert_many([q.document_from_record(record) for record in records])
    for scope in claims:
        assert scope.partition is not None
        claimable = {r.id for r in records if is_claimable(r, scope)}
        selector = q.eligible_filter(sorted(scope.job_names), scope.partition, scope.now)
        for hint in q.HINTS.values():
            assert _ids(scratch, selector, hint) == claimable, (scope, hint)
        for state in JobState:
            in_state = {r.id for r in records if r.state(scope.now) is state}
            conditions = {"$and": q.state_filter(state, scope.now)}
            assert _ids(scratch, conditions, q.state_hint(state)) == in_state, (scope, state)
