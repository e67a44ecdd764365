"""The in-memory store claims exactly what the claimable rule says, on random records and
clocks: its claim index and walks (:mod:`dogs_testing._memory_state`) against
:func:`dogs_core.domain.claimable.is_claimable`."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings

from dogs_core.domain.claimable import ClaimScope, is_claimable
from dogs_core.domain.records import ClaimRequest, JobRecord
from dogs_testing.memory import SyncInMemoryJobStore
from tests.claimable_strategies import record_sets, scopes


def _requests(scope: ClaimScope, count: int) -> list[ClaimRequest]:
    assert scope.partition is not None
    return [
        ClaimRequest(
            job_names=tuple(sorted(scope.job_names)),
            partition=scope.partition,
            hint="byJobName",
            now=scope.now,
            locked_until=scope.now + timedelta(minutes=1),
            lock_id=f"claim-{index}",
        )
        for index in range(count)
    ]


def _store(records: list[JobRecord]) -> SyncInMemoryJobStore:
    store = SyncInMemoryJobStore()
    for record in records:
        store.insert_record(record)
    return store


@settings(max_examples=150, deadline=None)
@given(records=record_sets(), scope=scopes)
def test_claims_take_exactly_the_claimable_records(
    records: list[JobRecord], scope: ClaimScope
) -> None:
    claimable = {r.id for r in records if is_claimable(r, scope)}
    # More requests than records: claim_many takes every record a claim may take.
    taken = _store(records).claim_many(_requests(scope, len(records) + 1))
    assert {job.job_id for job in taken} == claimable
    one = _store(records).claim(_requests(scope, 1)[0])
    assert (one is None) == (not claimable)
    assert one is None or one.job_id in claimable
