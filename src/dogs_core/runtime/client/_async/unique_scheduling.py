"""Unique scheduling beyond Dogs' rule: a key's states, its window after the record ended,
replace, debounce and throttle, performed as the domain decides
(:func:`dogs_core.domain.uniqueness.resolve`) through the store's uniqueness role.

One call is a loop of single atomic steps, each a compare-and-set on what the decision was made
from, so a lost race is decided again with what changed: try the insert (Dogs' unique index
says who holds the key), read the holder, decide, act (skip, replace, debounce, or take the
key from a holder that no longer holds it, then insert again). A call with a window first
reads the key's hold, then inserts its record **parked** (due in the year 9999: no claim takes
it), reads the hold again and only then publishes it (its real run time) or drops it: a record
that ended wrote its hold before it was deleted
(:mod:`dogs_core.runtime.execution.ending`), so a
key freed by a deletion is always seen held by its window. A throttle takes the key's hold for
its period (the first call of the period wins) and inserts its record without an identifier.

``_async/unique_scheduling.py`` is the source of truth; ``_sync/unique_scheduling.py`` is
generated from it.
"""

from __future__ import annotations

import dataclasses
import logging
from datetime import datetime
from typing import TYPE_CHECKING

import anyio

from dogs_core.domain.records import (
    Debounced,
    Duplicate,
    JobRecord,
    NewJob,
    Replaced,
    Scheduled,
    ScheduleOutcome,
)
from dogs_core.domain.uniqueness import (
    FIRST_RACE_WAIT,
    MAX_ROUNDS,
    Debounce,
    HoldState,
    PendingUpdate,
    Replace,
    Skip,
    TakeKey,
    Unique,
    UniqueHold,
    resolve,
)
from dogs_core.errors import UniqueContendedError
from dogs_core.ports import AsyncJobStore, AsyncUniquenessStore, Role
from dogs_core.ports.store import require_role
from dogs_core.runtime.client.calls import parked, window_duplicate
from dogs_core.runtime.client.scheduling import ClientBase
from dogs_core.runtime.plumbing._async.retry import retry_transient

__all__ = ["UniqueScheduling"]

logger = logging.getLogger("dogs.client")


class UniqueScheduling(ClientBase):
    """The unique half of ``schedule``: see the module documentation."""

    store: AsyncJobStore
    operation_timeout: float | None

    if TYPE_CHECKING:

        async def _insert_one(
            self, job: NewJob, session: object | None = None
        ) -> ScheduleOutcome: ...

    async def _schedule_unique(self, job: NewJob, unique: Unique) -> ScheduleOutcome:
        """Schedule ``job`` (its identifier is the key) under ``unique``'s rules."""
        keys = require_role(self.store, Role.UNIQUENESS, "unique= beyond Dogs' rule")
        if unique.on_conflict == "throttle":
            return await self._throttle(keys, job, unique)
        key = job.unique_identifier
        assert key is not None  # set by shape()
        run_at = job.next_run_at
        if unique.on_conflict in ("replace", "debounce") and HoldState.PENDING in unique.states:
            # The common case of a replace or a debounce is a key already held by a pending
            # record: one write, by the key, before anything else.
            done = await self._update(keys, job, key, None, unique, run_at, self.clock.now())
            if done is not None:
                return done
        pause = FIRST_RACE_WAIT
        for _ in range(MAX_ROUNDS):
            now = self.clock.now()
            if unique.window is not None:
                held = await self._hold(keys, key)
                if held is not None and held.until > now:
                    return window_duplicate(held)
            if unique.window is not None:
                inserted = await self._insert_one(parked(job, run_at, now))
            else:
                inserted = await self._insert_one(dataclasses.replace(job, next_run_at=run_at))
            if isinstance(inserted, Scheduled):
                if unique.window is None:
                    return inserted
                return await self._publish(keys, job, key, run_at, now)
            holder = await self._holder(inserted)
            if holder is None:
                continue  # gone meanwhile: insert again
            decision = resolve(unique, holder, now)
            if isinstance(decision, Skip):
                return Duplicate(existing_id=holder.id, unique_identifier=key)
            if isinstance(decision, Replace | Debounce):
                done = await self._update(keys, job, key, holder.id, unique, run_at, now)
                if done is not None:
                    return done
            elif isinstance(decision, TakeKey):
                await self._take_key(keys, key, decision, now)
                if decision.behind is not None:
                    # Waits behind the running holder, and a later replace keeps it there.
                    job = dataclasses.replace(job, behind_until=decision.behind)
                    run_at = max(run_at, decision.behind)
            elif decision.abandoned:
                await self._finish_parked(keys, holder, key)
            else:
                await anyio.sleep(pause)
                pause = min(pause * 2, 0.1)
        raise UniqueContendedError(key, MAX_ROUNDS)

    # -- the steps ----------------------------------------------------------------------------

    async def _throttle(
        self, keys: AsyncUniquenessStore, job: NewJob, unique: Unique
    ) -> ScheduleOutcome:
        """The first call of a period takes the key's hold; the others are dropped."""
        period = unique.period
        assert period is not None  # checked by Unique
        key = job.unique_identifier
        assert key is not None
        now = self.clock.now()
        held = await retry_transient(
            lambda: keys.take_unique_hold(key, job.id, until=now + period, now=now),
            what=f"throttle {job.job_name}",
            deadline=self.operation_timeout,
        )
        if held is not None and held.job_id != job.id:  # our own retried write is ours
            return Duplicate(held.job_id, key, reason="throttle", held_until=held.until)
        outcome = await self._insert_one(dataclasses.replace(job, unique_identifier=None))
        return Scheduled(outcome.id) if isinstance(outcome, Scheduled) else outcome

    async def _hold(self, keys: AsyncUniquenessStore, key: str) -> UniqueHold | None:
        return await retry_transient(
            lambda: keys.read_unique_hold(key), what="read unique hold", deadline=self._deadline
        )

    async def _holder(self, outcome: ScheduleOutcome) -> JobRecord | None:
        """The record an insert found holding the key (``None``: gone already)."""
        if not isinstance(outcome, Duplicate) or outcome.existing_id is None:
            return None
        holder_id = outcome.existing_id
        found = await retry_transient(
            lambda: self.store.get_record(holder_id), what="read holder", deadline=self._deadline
        )
        if found is None or found.unique_identifier != outcome.unique_identifier:
            return None
        return found

    async def _publish(
        self, keys: AsyncUniquenessStore, job: NewJob, key: str, run_at: datetime, parked: datetime
    ) -> ScheduleOutcome:
        """The parked record of a call with a window: dropped when a window opened meanwhile
        (a holder ended between the first look and the insert), else given its run time."""
        held = await self._hold(keys, key)
        if held is not None and held.until > self.clock.now():
            await retry_transient(
                lambda: keys.drop_parked(job.id, parked_at=parked),
                what="drop parked record",
                deadline=self._deadline,
            )
            return window_duplicate(held)
        await retry_transient(
            lambda: keys.publish_parked(job.id, parked_at=parked, run_at=run_at),
            what="publish parked record",
            deadline=self._deadline,
        )
        return Scheduled(job.id)

    async def _update(
        self,
        keys: AsyncUniquenessStore,
        job: NewJob,
        key: str,
        holder: str | None,
        unique: Unique,
        run_at: datetime,
        now: datetime,
    ) -> ScheduleOutcome | None:
        """Replace or debounce the pending holder (``None``: whichever record holds the
        key); ``None`` when no pending record holds it (anymore)."""
        debounce = unique.on_conflict == "debounce"
        update = PendingUpdate(
            params=job.params,
            next_run_at=run_at,
            priority=job.priority,
            tags=job.tags,
            start_before=job.start_before,
            debounce=unique.delay if debounce else None,
        )
        written = await retry_transient(
            lambda: keys.update_pending(holder, key, update, now=now),
            what=f"{'debounce' if debounce else 'replace'} {job.job_name}",
            deadline=self._deadline,
        )
        if written is None:
            return None
        if debounce:
            return Debounced(id=written.id, run_at=written.next_run_at, unique_identifier=key)
        return Replaced(id=written.id, unique_identifier=key)

    async def _take_key(
        self, keys: AsyncUniquenessStore, key: str, decision: TakeKey, now: datetime
    ) -> None:
        """Remove the key from a holder that does not hold it in its state (compare and set: a
        holder that moved on keeps it, and the next round decides again)."""
        await retry_transient(
            lambda: keys.release_unique_identifier(
                decision.holder, key, state=decision.state, now=now
            ),
            what="take unique key",
            deadline=self._deadline,
        )

    async def _finish_parked(self, keys: AsyncUniquenessStore, holder: JobRecord, key: str) -> None:
        """A parked holder whose call died between its writes: do what that call would have."""
        parked = holder.parked_at
        assert parked is not None
        logger.warning(
            "unique key %r: finishing the parked record %s of a call that stopped", key, holder.id
        )
        held = await self._hold(keys, key)
        if held is not None and held.until > self.clock.now():
            await keys.drop_parked(holder.id, parked_at=parked)
        else:
            run_at = holder.parked_run_at or self.clock.now()
            await keys.publish_parked(holder.id, parked_at=parked, run_at=run_at)

    @property
    def _deadline(self) -> float | None:
        return self.operation_timeout
