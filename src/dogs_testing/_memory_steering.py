"""The steering role of the in-memory store: what an operator reads and changes,
``get_record``, ``find_records`` by state with a cursor, and the atomic steps behind cancel,
retry, reschedule and delete (``delete_record``, ``modify_record``, ``delete_records``). Each
runs under the state's lock, so it is one atomic step against every claim and fenced write.
See :mod:`dogs_testing.memory`.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from dogs_core.domain import validation
from dogs_core.domain.records import JobRecord, JobState, to_millis
from dogs_core.domain.steering import JobChange, check_bulk_state, check_state
from dogs_core.domain.tags import validate_tag_filter
from dogs_core.errors import InvalidOptionError
from dogs_testing._memory_state import MemoryState, _is_terminal, _ms, _out

__all__ = ["MemorySteering"]


class MemorySteering(MemoryState):
    """The operators' part of the port over :class:`MemoryState` (the store's sync face adds
    the rest)."""

    def get_record(self, job_id: str) -> JobRecord | None:
        with self._state():
            record = self._records.get(job_id)
            return None if record is None else _out(record)

    def find_records(
        self,
        *,
        job_name: str | None = None,
        state: JobState | None = None,
        unique_identifier: str | None = None,
        after: str | None = None,
        limit: int = 100,
        now: datetime | None = None,
        tags: Sequence[str] | None = None,
    ) -> list[JobRecord]:
        """The port's page: at most ``limit`` matching records in ascending id order, ids
        greater than ``after``. A scan of the candidates (one name's records, the failed ones,
        the holder of an identifier, or all of them), not an index walk."""
        wanted = check_state(state)
        validation.integer("limit", limit, minimum=1)
        tagged = set(validate_tag_filter(tags) or ())
        for field, value in (
            ("job_name", job_name),
            ("unique_identifier", unique_identifier),
            ("after", after),
        ):
            if value is not None and not isinstance(value, str):
                raise InvalidOptionError(field, value, "must be a string")
        if wanted is not None and now is None:
            raise InvalidOptionError("now", now, "is required with a state filter")
        at = _ms(now)
        with self._state():
            matching = (
                record
                for record in self._candidates(job_name, wanted, unique_identifier)
                if (after is None or record.id > after)
                and (job_name is None or record.job_name == job_name)
                and (unique_identifier is None or record.unique_identifier == unique_identifier)
                and (wanted is None or at is None or record.state(at) is wanted)
                and tagged.issubset(record.tags)
            )
            return [_out(r) for r in heapq.nsmallest(limit, matching, key=_record_id)]

    def delete_record(
        self,
        job_id: str,
        *,
        unless_running_at: datetime | None = None,
        unless_failed: bool = False,
    ) -> JobRecord | None:
        """The port's atomic delete, returning the record as it was."""
        at = _ms(unless_running_at)
        validation.boolean("unless_failed", unless_failed)
        with self._state():
            old = self._records.get(job_id)
            if old is None:
                return None
            if at is not None and old.locked_until is not None and old.locked_until > at:
                return None
            if unless_failed and _is_terminal(old):
                return None
            self._put(old, None)
            return _out(old)

    def modify_record(self, job_id: str, change: JobChange, *, now: datetime) -> JobRecord | None:
        """The port's compare-and-set: ``change`` applied unless the record is running at
        ``now``; the lock fields are kept."""
        if not isinstance(change, JobChange):
            raise InvalidOptionError("change", change, "must be a JobChange")
        at = to_millis(now)
        with self._state():
            old = self._records.get(job_id)
            if old is None or (old.locked_until is not None and old.locked_until > at):
                return None
            new = _changed(old, change)
            if new != old:
                self._put(old, new)
                self._feeds.offer_record(new)
            return _out(new)

    def delete_records(
        self, *, job_name: str | None, state: JobState, now: datetime, dry_run: bool = False
    ) -> int:
        """The port's bulk delete (or count) of one state, in one atomic step."""
        wanted = check_bulk_state(state)
        validation.boolean("dry_run", dry_run)
        at = to_millis(now)
        with self._state():
            doomed = [
                record
                for record in self._candidates(job_name, wanted, None)
                if (job_name is None or record.job_name == job_name) and record.state(at) is wanted
            ]
            if not dry_run:
                for record in doomed:
                    self._put(record, None)
            return len(doomed)

    # ------------------------------------------------------------------ helpers

    def _candidates(
        self, job_name: str | None, state: JobState | None, unique_identifier: str | None
    ) -> Iterable[JobRecord]:
        """A superset of the records the filters match, from the narrowest index (a snapshot:
        callers may delete while they iterate)."""
        if unique_identifier is not None:
            holder = self._unique.get(unique_identifier)
            return [] if holder is None else [self._records[holder]]
        if state is JobState.FAILED:
            return [self._records[i] for i in self._terminal]
        if job_name is not None:
            return [self._records[i] for i in self._by_name.get(job_name, ())]
        return list(self._records.values())


def _record_id(record: JobRecord) -> str:
    return record.id


def _changed(old: JobRecord, change: JobChange) -> JobRecord:
    """``old`` with ``change`` applied (times in milliseconds)."""
    updates: dict[str, Any] = {}
    if change.next_run_at is not None:
        updates["next_run_at"] = to_millis(change.next_run_at)
    if change.priority is not None:
        updates["priority"] = change.priority
    if change.tries is not None:
        updates["tries"] = change.tries
    if change.revive:
        updates.update(status=None, max_tries_reached_at=None, expires_at=None)
    return dataclasses.replace(old, **updates)
