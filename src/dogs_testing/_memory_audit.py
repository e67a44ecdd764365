"""The audit of the in-memory store (:class:`~dogs_core.ports.AuditStore`): entries by id,
each call atomic under the state's lock; with a clock, an entry whose ``expires_at`` has passed
is gone at the next call."""

from __future__ import annotations

import dataclasses
from datetime import datetime

from dogs_core.domain.audit import AuditEntry, AuditOutcome, AuditQuery
from dogs_core.domain.records import to_millis
from dogs_core.domain.validation import text
from dogs_core.errors import InvalidOptionError
from dogs_testing._memory_state import MemoryState

__all__ = ["MemoryAudit"]


def _stored(entry: AuditEntry) -> AuditEntry:
    return dataclasses.replace(
        entry,
        at=to_millis(entry.at),
        updated_at=None if entry.updated_at is None else to_millis(entry.updated_at),
        expires_at=None if entry.expires_at is None else to_millis(entry.expires_at),
        details=dict(entry.details),
    )


class MemoryAudit(MemoryState):
    """The audit trail over :class:`MemoryState`, kept beside it."""

    def _entries(self) -> dict[str, AuditEntry]:
        entries: dict[str, AuditEntry] = self.__dict__.setdefault("_audit", {})
        if self._clock is not None:
            now = to_millis(self._clock.now())
            for key in [
                key
                for key, entry in entries.items()
                if entry.expires_at is not None and entry.expires_at <= now
            ]:
                del entries[key]
        return entries

    def setup_audit(self) -> None:
        """Nothing to create in memory."""

    def record_audit(self, entry: AuditEntry) -> None:
        stored = _stored(_entry(entry))
        with self._state():
            self._entries().setdefault(stored.id, stored)

    def update_audit(self, entry: AuditEntry, *, runner: str | None) -> bool:
        stored = _stored(_entry(entry))
        with self._state():
            entries = self._entries()
            old = entries.get(stored.id)
            held_by = None if old is None or old.bulk is None else old.bulk.runner
            if old is None or held_by != runner:
                return False
            entries[stored.id] = stored
            return True

    def take_over_audit(
        self, entry_id: str, *, runner: str, stalled_before: datetime, now: datetime
    ) -> AuditEntry | None:
        text("runner", runner)
        key = text("entry_id", entry_id)
        with self._state():
            entries = self._entries()
            entry = entries.get(key)
            if entry is None or entry.bulk is None:
                return None
            last = entry.updated_at or entry.at
            idle = entry.outcome in (AuditOutcome.STOPPED, AuditOutcome.FAILED)
            stalled = entry.outcome is AuditOutcome.RUNNING and last < to_millis(stalled_before)
            if not (idle or stalled):
                return None
            taken = dataclasses.replace(
                entry,
                bulk=dataclasses.replace(entry.bulk, runner=runner),
                updated_at=to_millis(now),
                outcome=AuditOutcome.RUNNING,
                error=None,
            )
            entries[key] = taken
            return taken

    def get_audit(self, entry_id: str) -> AuditEntry | None:
        key = text("entry_id", entry_id)
        with self._state():
            return self._entries().get(key)

    def read_audit(self, query: AuditQuery) -> list[AuditEntry]:
        if not isinstance(query, AuditQuery):
            raise InvalidOptionError("query", query, "must be an AuditQuery")
        with self._state():
            entries = [
                entry
                for entry in self._entries().values()
                if (query.before is None or entry.id < query.before)
                and (query.action is None or entry.action == query.action)
                and (query.actor is None or entry.actor.name == query.actor)
                and (query.job_id is None or query.job_id in entry.job_ids)
                and (not query.top_level or entry.parent_id is None)
            ]
        entries.sort(key=lambda entry: entry.id, reverse=True)
        return entries[: query.limit]


def _entry(entry: object) -> AuditEntry:
    if not isinstance(entry, AuditEntry):
        raise InvalidOptionError("entry", entry, "must be an AuditEntry")
    return entry
