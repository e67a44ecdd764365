"""The audit role, optional: the operators' audit trail (:mod:`dogs_core.domain.audit`). A
store that has it lists :attr:`~dogs_core.ports.common.Role.AUDIT` in its ``roles``.

Entries are keyed by ``id`` (a UUIDv7: newest first is descending id). Writing an entry twice
(a retried call) keeps one. An entry whose ``expires_at`` has passed may disappear (a TTL).
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, runtime_checkable

from dogs_core.domain.audit import AuditEntry, AuditQuery

__all__ = ["AsyncAuditStore"]


@runtime_checkable
class AsyncAuditStore(Protocol):
    """The operators' audit trail (optional)."""

    async def setup_audit(self) -> None:
        """Create what the audit needs (MongoDB: its indexes). Idempotent."""
        ...

    async def record_audit(self, entry: AuditEntry) -> None:
        """Insert ``entry``; an entry of that id already stored is kept as it is."""
        ...

    async def update_audit(self, entry: AuditEntry, *, runner: str | None) -> bool:
        """Replace the stored entry of ``entry.id`` with ``entry`` while its bulk progress is
        held by ``runner`` (``None``: held by nobody, or not a bulk entry). ``False`` when the
        entry is gone or another runner holds it (the caller stops: it was taken over)."""
        ...

    async def take_over_audit(
        self, entry_id: str, *, runner: str, stalled_before: datetime, now: datetime
    ) -> AuditEntry | None:
        """Make ``runner`` the runner of bulk entry ``entry_id`` (its ``updated_at`` set to
        ``now``), in one atomic step, if it is resumable and not running, or running but last
        updated before ``stalled_before``; the entry after it, ``None`` when it may not be
        taken over."""
        ...

    async def get_audit(self, entry_id: str) -> AuditEntry | None:
        """One entry by id."""
        ...

    async def read_audit(self, query: AuditQuery) -> list[AuditEntry]:
        """At most ``query.limit`` entries matching the query, newest first (descending id),
        only ids smaller than ``query.before``."""
        ...
