"""The contract suite, the audit role (optional): entries recorded once, read newest first by
action, actor and job, bulk entries updated by their runner and taken over once stalled
(:class:`~dogs_core.ports.AsyncAuditStore`).

Not part of :class:`~dogs_testing.contract.JobStoreContract`: subclass :class:`AuditContract`
(name starting with ``Test``) and provide ``store``, an
:class:`~dogs_core.ports.AsyncJobStore` that also has the audit role.
"""

from __future__ import annotations

import dataclasses
from typing import cast

import pytest

from dogs_core.domain.audit import (
    Actor,
    AuditEntry,
    AuditOutcome,
    BulkProgress,
    check_audit_query,
)
from dogs_core.ids import new_record_id
from dogs_core.ports import AsyncAuditStore, AsyncJobStore
from dogs_testing.contract.base import _DAY, _MIN, _S, T0, ContractBase, defined_in

__all__ = ["AuditContract"]

ALICE = Actor("alice", "cli", "host-a")
BOB = Actor("bob", "dashboard")


def _audit(store: AsyncJobStore) -> AsyncAuditStore:
    return cast(AsyncAuditStore, store)


def _entry(action: str = "cancel", **changes: object) -> AuditEntry:
    entry = AuditEntry(
        id=new_record_id(),
        at=T0,
        actor=ALICE,
        action=action,
        target="job-1",
        outcome=AuditOutcome.DONE,
        count=1,
        job_ids=("job-1",),
        details={"outcome": "cancelled", "runAt": T0 + _MIN},
        expires_at=T0 + 90 * _DAY,
    )
    return dataclasses.replace(entry, **changes)  # type: ignore[arg-type]


def _bulk(runner: str | None = "r1") -> BulkProgress:
    return BulkProgress(
        selection={"state": "failed", "since": T0 - _DAY},
        matched=10,
        chunk_size=5,
        runner=runner,
    )


class AuditContract(ContractBase):
    """The audit role's contract."""

    @pytest.fixture(autouse=True)
    async def _set_up_audit(self, request: pytest.FixtureRequest, store: AsyncJobStore) -> None:
        # Only for this part's tests: in StoreContract it sits beside every other part.
        if defined_in(AuditContract, request):
            await _audit(store).setup_audit()

    async def test_recorded_once_and_read_back(self, store: AsyncJobStore) -> None:
        audit = _audit(store)
        entry = _entry()
        await audit.record_audit(entry)
        await audit.record_audit(dataclasses.replace(entry, count=99))  # a retried insert
        assert await audit.get_audit(entry.id) == entry
        assert await audit.get_audit(new_record_id()) is None

    async def test_reads_newest_first_with_filters_and_a_cursor(self, store: AsyncJobStore) -> None:
        audit = _audit(store)
        first = _entry("cancel")
        second = _entry("pause", actor=BOB, job_ids=(), target="send_email")
        parent = _entry("bulk_delete", job_ids=(), target="failed jobs")
        chunk = _entry("bulk_chunk", parent_id=parent.id, job_ids=("job-1", "job-2"))
        for entry in (first, second, parent, chunk):
            await audit.record_audit(entry)
        newest = await audit.read_audit(check_audit_query())
        assert [e.id for e in newest] == [parent.id, second.id, first.id]
        page = await audit.read_audit(check_audit_query(limit=1, before=parent.id))
        assert [e.id for e in page] == [second.id]
        assert [e.id for e in await audit.read_audit(check_audit_query(action="pause"))] == [
            second.id
        ]
        assert [e.id for e in await audit.read_audit(check_audit_query(actor="bob"))] == [second.id]
        about = await audit.read_audit(check_audit_query(job_id="job-1", top_level=False))
        assert [e.id for e in about] == [chunk.id, first.id]
        with_chunks = await audit.read_audit(check_audit_query(top_level=False))
        assert len(with_chunks) == 4

    async def test_only_the_runner_updates_a_bulk_entry(self, store: AsyncJobStore) -> None:
        audit = _audit(store)
        entry = _entry("bulk_retry", outcome=AuditOutcome.RUNNING, bulk=_bulk(), updated_at=T0)
        await audit.record_audit(entry)
        progressed = dataclasses.replace(
            entry, bulk=dataclasses.replace(_bulk(), changed=5, cursor="x"), count=5
        )
        assert await audit.update_audit(progressed, runner="r1")
        assert not await audit.update_audit(progressed, runner="r2")
        assert await audit.get_audit(entry.id) == progressed
        plain = _entry()
        await audit.record_audit(plain)
        assert await audit.update_audit(dataclasses.replace(plain, count=0), runner=None)
        assert not await audit.update_audit(_entry(), runner=None)  # never recorded

    async def test_take_over_only_once_stalled(self, store: AsyncJobStore) -> None:
        audit = _audit(store)
        entry = _entry("bulk_retry", outcome=AuditOutcome.RUNNING, bulk=_bulk(), updated_at=T0)
        await audit.record_audit(entry)
        fresh = await audit.take_over_audit(
            entry.id, runner="r2", stalled_before=T0 - _S, now=T0 + _S
        )
        assert fresh is None  # updated after stalled_before: still running
        taken = await audit.take_over_audit(
            entry.id, runner="r2", stalled_before=T0 + _S, now=T0 + 2 * _S
        )
        assert taken is not None
        assert taken.bulk is not None
        assert (taken.bulk.runner, taken.updated_at, taken.outcome) == (
            "r2",
            T0 + 2 * _S,
            AuditOutcome.RUNNING,
        )
        assert not await audit.update_audit(entry, runner="r1")  # the old runner is out
        stopped = _entry("bulk_retry", outcome=AuditOutcome.STOPPED, bulk=_bulk(None))
        await audit.record_audit(stopped)
        resumed = await audit.take_over_audit(
            stopped.id, runner="r3", stalled_before=T0 - _DAY, now=T0
        )
        assert resumed is not None
        assert resumed.outcome is AuditOutcome.RUNNING
        done = _entry("bulk_retry", bulk=_bulk(None))
        await audit.record_audit(done)
        assert await audit.take_over_audit(done.id, runner="r4", stalled_before=T0, now=T0) is None
        plain = _entry()
        await audit.record_audit(plain)
        assert await audit.take_over_audit(plain.id, runner="r4", stalled_before=T0, now=T0) is None
