"""The operator's console from the generated sync client (SyncDogsClient over the sync
in-memory store, each call in the caller's thread): a bulk retry in chunks with its audit
entry, a resume, the audit trail of single actions under acting_as, the fleet's registry."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dogs_core import JobContext, Jobs, SyncDogsClient
from dogs_core.domain.bulk import bulk_selection
from dogs_core.domain.records import JobRecord, JobStatus, JobType
from dogs_core.domain.registry import WorkerInfo, WorkerState
from dogs_core.ids import new_record_id
from dogs_core.runtime.plumbing.actors import acting_as
from dogs_testing.memory import SyncInMemoryJobStore

jobs = Jobs()


@jobs.event
async def mail(params: None, ctx: JobContext) -> None:
    pass


def test_bulk_audit_and_workers_from_the_sync_client() -> None:
    store = SyncInMemoryJobStore()
    client = SyncDogsClient(store, jobs)
    now = datetime.now(UTC)
    for _ in range(5):
        store.insert_record(
            JobRecord(
                id=new_record_id(), job_name="mail", type=JobType.EVENT, priority=100,
                next_run_at=now, tries=3, status=JobStatus.MAX_TRIES_REACHED,
                max_tries_reached_at=now,
            )
        )  # fmt: skip
    selection = bulk_selection(state="failed")
    assert client.bulk_count(selection) == 5
    with acting_as("carol", source="cli"):
        first = client.bulk("retry", selection, chunk_size=2, max_chunks=1)
        assert (first.changed, first.complete) == (2, False)
        rest = client.resume_bulk(first.audit_id or "")
        assert (rest.changed, rest.complete) == (5, True)
        job_id = client.find_jobs("mail").jobs[0].id
        client.delete(job_id)
    [deleted, bulk] = client.audit_log()
    assert (deleted.action, bulk.action, bulk.count, bulk.actor.name) == (
        "delete", "bulk_retry", 5, "carol",
    )  # fmt: skip
    fate = client.job_fate(job_id)
    assert fate is not None
    assert fate.what == "deleted"
    store.beat_worker(
        WorkerInfo("w1", "h", 1, "v", ("mail",), 2, 0, (), 0, now, now, WorkerState.RUNNING,
                   now + timedelta(minutes=1))
    )  # fmt: skip
    assert [info.instance_id for info in client.workers()] == ["w1"]
    assert client.quiet_worker("w") is not None  # by prefix
