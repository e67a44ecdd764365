"""Input checks of the port's batch methods, shared by every store.

A store must refuse a malformed batch before it writes anything; keeping the rules here means
the in-memory store, the MongoDB adapters and a user's own adapter refuse the same inputs with
the same words. A refusal is an :class:`~dogs_core.errors.InvalidOptionError` (a ``ValueError``)
whose ``field`` is the offending item's (``requests[2].partition``, ``claims[1]``) and whose
``value`` is what that item holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from dogs_core.domain.records import ClaimRequest
from dogs_core.errors import InvalidOptionError

__all__ = ["check_claim_requests", "check_completions"]

#: What the requests of one ``claim_many`` must share: they differ only in ``lock_id``.
CLAIM_BATCH_FIELDS: Final = ("job_names", "partition", "hint", "now", "locked_until")


def check_claim_requests(requests: Sequence[ClaimRequest]) -> list[ClaimRequest]:
    """The requests of ``claim_many`` as a list. They must agree on everything but ``lock_id``
    and carry distinct lock ids: otherwise :class:`InvalidOptionError`, naming the field."""
    checked = list(requests)
    if not checked:
        return checked
    first = checked[0]
    for index, request in enumerate(checked[1:], start=1):
        for name in CLAIM_BATCH_FIELDS:
            value, expected = getattr(request, name), getattr(first, name)
            if value != expected:
                reason = (
                    f"request 0 has {expected!r}; the requests of one claim_many must differ "
                    "only in lock_id"
                )
                raise InvalidOptionError(
                    f"requests[{index}].{name}",
                    value,
                    reason,
                    message=f"requests: request {index} has {name}={value!r} but {reason}",
                )
    seen: set[str] = set()
    for index, request in enumerate(checked):
        if request.lock_id in seen:
            reason = "is repeated; each request needs its own lock id"
            raise InvalidOptionError(
                f"requests[{index}].lock_id",
                request.lock_id,
                reason,
                message=f"requests: lock_id {request.lock_id!r} {reason}",
            )
        seen.add(request.lock_id)
    return checked


def check_completions(claims: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The ``(job_id, lock_id)`` pairs of ``complete_many`` as a list; a job id given twice is
    refused with :class:`InvalidOptionError`."""
    pairs = [(job_id, lock_id) for job_id, lock_id in claims]
    seen: set[str] = set()
    for index, (job_id, _) in enumerate(pairs):
        if job_id in seen:
            reason = "is repeated; give each record once"
            raise InvalidOptionError(
                f"claims[{index}]",
                job_id,
                reason,
                message=f"claims: job id {job_id!r} {reason}",
            )
        seen.add(job_id)
    return pairs
