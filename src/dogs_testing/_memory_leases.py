"""The leases role of the in-memory store: per name, the last holder (``None`` once
released), its fencing token and ``until``, kept forever (the token sequence must survive a
release). Each call runs under the state's one lock, one atomic step as each of the MongoDB
store's single-document writes is. See :mod:`dogs_testing.memory`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from dogs_core.domain import validation
from dogs_core.domain.controls import Lease, check_lease
from dogs_core.domain.records import to_millis
from dogs_core.ports import Clock
from dogs_testing._memory_state import MemoryState

__all__ = ["MemoryLeases"]


@dataclass(slots=True)
class _LeaseRow:
    """A lease as stored: ``owner`` is ``None`` once released; ``token`` is the last one given."""

    owner: str | None
    token: int
    until: datetime


class MemoryLeases(MemoryState):
    """Named distributed locks with fencing tokens."""

    def __init__(self, *, clock: Clock | None = None) -> None:
        super().__init__(clock=clock)
        self._leases: dict[str, _LeaseRow] = {}

    def acquire_lease(self, name: str, *, owner: str, until: datetime, now: datetime) -> int | None:
        validation.text("name", name)
        validation.text("owner", owner)
        at = to_millis(now)
        with self._state():
            row = self._leases.get(name)
            if row is not None and row.owner is not None and row.until > at:
                return None
            token = 1 if row is None else row.token + 1
            self._leases[name] = _LeaseRow(owner, token, to_millis(until))
            return token

    def renew_lease(
        self, name: str, *, owner: str, token: int, until: datetime, now: datetime
    ) -> bool:
        check_lease(name, owner, token)
        at = to_millis(now)
        with self._state():
            row = self._held_lease(name, owner, token)
            if row is None or row.until <= at:
                return False
            row.until = to_millis(until)
            return True

    def release_lease(self, name: str, *, owner: str, token: int) -> bool:
        """Fenced by ``owner`` and ``token`` only: a lapsed lease nobody took over is released
        too (as MongoDB's ``updateOne({_id, owner, token})``)."""
        check_lease(name, owner, token)
        with self._state():
            row = self._held_lease(name, owner, token)
            if row is None:
                return False
            row.owner = None
            return True

    def get_lease(self, name: str) -> Lease | None:
        validation.text("name", name)
        with self._state():
            row = self._leases.get(name)
            if row is None or row.owner is None:
                return None
            return Lease(name=name, owner=row.owner, token=row.token, expires_at=row.until)

    def _held_lease(self, name: str, owner: str, token: int) -> _LeaseRow | None:
        row = self._leases.get(name)
        if row is None or row.owner is None or row.owner != owner or row.token != token:
            return None
        return row
