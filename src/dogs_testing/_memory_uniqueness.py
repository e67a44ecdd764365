"""The uniqueness role of the in-memory store (:class:`~dogs_core.ports.UniquenessStore`): the
holds of unique keys in a dict, and the compare-and-set steps on records, each one atomic under
the state's lock as MongoDB's single-document operations are (:mod:`dogs_mongo._async.uniqueness`).
A hold whose time has passed is read as it is stored (as MongoDB's TTL removes it late)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime

from dogs_core.domain.records import JobRecord, to_millis
from dogs_core.domain.uniqueness import (
    HoldState,
    PendingUpdate,
    UniqueHold,
    debounced_next_run,
    hold_state,
)
from dogs_testing._memory_state import MemoryState, _copy_params, _out

__all__ = ["MemoryUniqueness"]


class MemoryUniqueness(MemoryState):
    """Unique keys' holds and the compare-and-set steps of unique scheduling."""

    @property
    def _holds(self) -> dict[str, UniqueHold]:
        holds: dict[str, UniqueHold] = self.__dict__.setdefault("_unique_holds", {})
        return holds

    def read_unique_hold(self, key: str) -> UniqueHold | None:
        with self._state():
            return self._holds.get(key)

    def take_unique_hold(
        self, key: str, job_id: str, *, until: datetime, now: datetime
    ) -> UniqueHold | None:
        with self._state():
            held = self._holds.get(key)
            if held is not None and held.until > to_millis(now):
                return held
            self._holds[key] = UniqueHold(key, job_id, to_millis(until))
            return None

    def extend_unique_hold(self, key: str, job_id: str, *, until: datetime) -> None:
        with self._state():
            held = self._holds.get(key)
            latest = to_millis(until) if held is None else max(held.until, to_millis(until))
            self._holds[key] = UniqueHold(key, job_id, latest)

    def release_unique_identifier(
        self, job_id: str, identifier: str, *, state: HoldState, now: datetime
    ) -> bool:
        with self._state():
            record = self._holding(job_id, identifier, state, now)
            if record is None:
                return False
            self._put(record, dataclasses.replace(record, unique_identifier=None))
            return True

    def update_pending(
        self, job_id: str | None, identifier: str, update: PendingUpdate, *, now: datetime
    ) -> JobRecord | None:
        with self._state():
            holder = self._unique.get(identifier) if job_id is None else job_id
            record = (
                None
                if holder is None
                else self._holding(holder, identifier, HoldState.PENDING, now)
            )
            if record is None:
                return None
            run_at = to_millis(update.next_run_at)
            if record.behind_until is not None and record.behind_until > run_at:
                run_at = record.behind_until  # still behind the running record of its key
            if update.debounce is not None:
                run_at = to_millis(
                    debounced_next_run(
                        record.next_run_at, now, update.debounce, record.debounce_until
                    )
                )
            params = update.params
            changed = dataclasses.replace(
                record,
                params=_copy_params(dict(params)) if isinstance(params, Mapping) else None,
                next_run_at=run_at,
                priority=update.priority,
                tags=tuple(update.tags),
                start_before=None
                if update.start_before is None
                else to_millis(update.start_before),
            )
            self._put(record, changed)
            self._feeds.offer_record(changed)
            return _out(changed)

    def publish_parked(self, job_id: str, *, parked_at: datetime, run_at: datetime) -> bool:
        with self._state():
            record = self._records.get(job_id)
            if record is None or record.parked_at != to_millis(parked_at):
                return False
            published = dataclasses.replace(
                record, next_run_at=to_millis(run_at), parked_at=None, parked_run_at=None
            )
            self._put(record, published)
            self._feeds.offer_record(published)
            return True

    def drop_parked(self, job_id: str, *, parked_at: datetime) -> bool:
        with self._state():
            record = self._records.get(job_id)
            if record is None or record.parked_at != to_millis(parked_at):
                return False
            self._put(record, None)
            return True

    def _holding(
        self, job_id: str, identifier: str, state: HoldState, now: datetime
    ) -> JobRecord | None:
        """Record ``job_id`` if it holds ``identifier``, is not parked and is in ``state``."""
        record = self._records.get(job_id)
        if record is None or record.unique_identifier != identifier or record.parked_at:
            return None
        return record if hold_state(record, to_millis(now)) is state else None
