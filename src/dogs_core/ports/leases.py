"""The leases role: named distributed locks with fencing tokens (``client.lock()``)."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, runtime_checkable

from dogs_core.domain.controls import Lease

__all__ = ["AsyncLeaseStore"]


@runtime_checkable
class AsyncLeaseStore(Protocol):
    """Named distributed locks with fencing tokens."""

    async def acquire_lease(
        self, name: str, *, owner: str, until: datetime, now: datetime
    ) -> int | None:
        """Take the lease ``name`` for ``owner`` until ``until`` when nobody holds it or the
        holder's ``until`` is ``<= now``, atomically, and return its fencing token: one more than
        the token of the previous acquisition of ``name`` (1 the first time), never reused.
        ``None`` when it is held (also by ``owner``: a lease is not reentrant)."""
        ...

    async def renew_lease(
        self, name: str, *, owner: str, token: int, until: datetime, now: datetime
    ) -> bool:
        """Fenced by ``owner`` and ``token``, and only while the lease has not lapsed at ``now``:
        move its ``until``. ``False`` when it was lost."""
        ...

    async def release_lease(self, name: str, *, owner: str, token: int) -> bool:
        """Fenced by ``owner`` and ``token``: give the lease back (the token sequence is
        kept). ``False`` when it was no longer held by them."""
        ...

    async def get_lease(self, name: str) -> Lease | None:
        """The lease ``name`` as stored (its last holder, token and ``until``, possibly lapsed),
        or ``None`` when nobody ever held it or it was released."""
        ...
