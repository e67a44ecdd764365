"""Input checks of the port's batch methods, shared by every store.

A store must refuse a malformed batch before it writes anything; keeping the rules here means
the in-memory store, the MongoDB adapters and a user's own adapter refuse the same inputs with
the same words.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from dogs_core.domain.records import ClaimRequest

__all__ = ["check_claim_requests", "check_completions"]

#: What the requests of one ``claim_many`` must share: they differ only in ``lock_id``.
CLAIM_BATCH_FIELDS: Final = ("job_names", "partition", "hint", "now", "locked_until")


def check_claim_requests(requests: Sequence[ClaimRequest]) -> list[ClaimRequest]:
    """The requests of ``claim_many`` as a list. They must agree on everything but ``lock_id``
    and carry distinct lock ids: otherwise ``ValueError``, naming the field."""
    checked = list(requests)
    if not checked:
        return checked
    first = checked[0]
    for index, request in enumerate(checked[1:], start=1):
        for name in CLAIM_BATCH_FIELDS:
            if getattr(request, name) != getattr(first, name):
                raise ValueError(
                    f"requests: request {index} has {name}={getattr(request, name)!r} but "
                    f"request 0 has {getattr(first, name)!r}; the requests of one claim_many "
                    "must differ only in lock_id"
                )
    seen: set[str] = set()
    for request in checked:
        if request.lock_id in seen:
            raise ValueError(
                f"requests: lock_id {request.lock_id!r} is repeated; each request needs its "
                "own lock id"
            )
        seen.add(request.lock_id)
    return checked


def check_completions(claims: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The ``(job_id, lock_id)`` pairs of ``complete_many`` as a list; a job id given twice is
    refused with ``ValueError``."""
    pairs = [(job_id, lock_id) for job_id, lock_id in claims]
    seen: set[str] = set()
    for job_id, _ in pairs:
        if job_id in seen:
            raise ValueError(f"claims: job id {job_id!r} is repeated; give each record once")
        seen.add(job_id)
    return pairs
