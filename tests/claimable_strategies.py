"""Random records and claims for the property tests of the claimable rule
(:mod:`dogs_core.domain.claimable`): the domain's, the in-memory store's and MongoDB's.

Every moment is drawn from one lattice of whole milliseconds around ``T0``, so a record's
``next_run_at``, ``locked_until`` and ``lock_released_at`` and the claim's ``now`` often fall
on the same instant (the edges of every ``<=``). A claim's ``now`` may carry microseconds, which
the stores truncate. The records are the shapes the writers of either library leave: a lock
always with its lock id, a ``lock_released_at`` at, before or after the lock's deadline or
without a lock (what a Node reschedule leaves), at most one recurrent record per job name.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from hypothesis import strategies as st

from dogs_core.domain.claimable import ClaimScope
from dogs_core.domain.records import JobRecord, JobStatus, JobType

T0 = datetime(2100, 1, 1, tzinfo=UTC)
_STEP = timedelta(milliseconds=500)
JOB_NAMES = ("a", "b", "c")
PARTITIONS = (0, 1)

moments = st.integers(-4, 4).map(lambda steps: T0 + steps * _STEP)


@st.composite
def records(draw: st.DrawFn, record_id: str) -> JobRecord:
    locked_until = draw(st.one_of(st.none(), moments))
    return JobRecord(
        id=record_id,
        job_name=draw(st.sampled_from(JOB_NAMES)),
        type=draw(st.sampled_from(JobType)),
        priority=draw(st.sampled_from([0, 100, 1000])),
        next_run_at=draw(moments),
        partition=draw(st.sampled_from([*PARTITIONS, None])),
        locked_until=locked_until,
        lock_id=None if locked_until is None else f"lock-{record_id}",
        lock_released_at=draw(st.one_of(st.none(), st.just(locked_until), moments)),
        tries=draw(st.sampled_from([None, 0, 1, 3])),
        status=draw(st.sampled_from([None, *JobStatus])),
    )


@st.composite
def record_sets(draw: st.DrawFn, max_size: int = 12) -> list[JobRecord]:
    """Records with distinct ids; a second recurrent record of a name becomes an event one
    (a store keeps one recurrent record per name)."""
    count = draw(st.integers(0, max_size))
    drawn = [draw(records(f"r{index:02d}")) for index in range(count)]
    recurrent_names: set[str] = set()
    kept = []
    for record in drawn:
        if record.type is JobType.RECURRENT:
            if record.job_name in recurrent_names:
                record = dataclasses.replace(record, type=JobType.EVENT)
            recurrent_names.add(record.job_name)
        kept.append(record)
    return kept


#: A claim's ``now``: a lattice moment, sometimes with microseconds the stores truncate.
clocks = st.tuples(moments, st.sampled_from([0, 1, 999])).map(
    lambda drawn: drawn[0] + timedelta(microseconds=drawn[1])
)

scopes = st.builds(
    ClaimScope,
    partition=st.sampled_from(PARTITIONS),
    job_names=st.frozensets(st.sampled_from(JOB_NAMES)),
    now=clocks,
)
