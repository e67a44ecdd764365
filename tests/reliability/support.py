"""Helpers of the reliability suite: virtual time, and the lock-ownership ledger.

Ownership, made precise
-----------------------
An execution is the **live owner** of its record from the moment its handler starts until the
handler returns, raises or is cancelled, or, for a job with ``cancel_on_stale=False``, until the
execution is reported stale (``on_stale``): from then on it may keep running, but every write it
makes is refused by the fence, so it owns nothing.

The guarantee checked: when an execution of a record starts, every other live owner of that
record has *already been told to stop* (its lock deadline passed and its watchdog fired, or it was
released at shutdown). Under a virtual clock "already" means "at the same virtual instant": trio
runs the tasks woken at one instant in some order, so the new owner may start a few scheduling
steps before the old one's cancellation is delivered, but never a virtual microsecond later.

One tolerance remains, :data:`OWNERSHIP_TOLERANCE`: stores keep ``lockedUntil`` at millisecond
precision (BSON dates) and truncate it, so the stored lock can expire up to 1 ms before the
owner's own deadline. Across processes, clock skew between hosts is the same kind of error, only
larger; the documentation tells users to keep lock times far above it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime

START = datetime(2026, 1, 1, tzinfo=UTC)
"""The application time at virtual time 0."""

OWNERSHIP_TOLERANCE = 0.0011
"""Seconds an old owner may outlive the start of a new one: the millisecond truncation of
``lockedUntil`` plus the microsecond rounding of the application clock."""


@dataclass
class _Live:
    execution_id: str
    started: float
    tries: int
    must_end_by: float | None = None
    successor: str | None = None
    flagged: bool = False


@dataclass
class OwnershipLedger:
    """Tracks live owners per record and records every violation of the rules above, and of
    "tries never decrease" for event jobs (each new execution has a higher ``tries``)."""

    tolerance: float = OWNERSHIP_TOLERANCE
    live: dict[str, dict[str, _Live]] = field(default_factory=lambda: defaultdict(dict))
    last_tries: dict[str, int] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    starts: int = 0
    max_overlap: float = 0.0

    def started(
        self, job_id: str, execution_id: str, tries: int, now: float, *, event: bool
    ) -> None:
        self.starts += 1
        owners = self.live[job_id]
        for other in owners.values():
            if other.must_end_by is None:
                other.must_end_by = now + self.tolerance
                other.successor = execution_id
        owners[execution_id] = _Live(execution_id, now, tries)
        if event:
            previous = self.last_tries.get(job_id)
            if previous is not None and tries <= previous:
                self.violations.append(
                    f"record {job_id}: execution {execution_id} started with tries={tries} "
                    f"after an execution with tries={previous} (t={now:.4f})"
                )
            self.last_tries[job_id] = max(tries, previous or 0)

    def ended(self, job_id: str, execution_id: str, now: float) -> None:
        """The handler ended or the execution was reported stale (idempotent)."""
        owner = self.live[job_id].pop(execution_id, None)
        if owner is None:
            return
        if not self.live[job_id]:
            del self.live[job_id]
        if owner.must_end_by is not None:
            overlap = now - (owner.must_end_by - self.tolerance)
            self.max_overlap = max(self.max_overlap, overlap)
            if now > owner.must_end_by:
                self.violations.append(
                    f"record {job_id}: execution {execution_id} (started t={owner.started:.4f}, "
                    f"tries={owner.tries}) was still live {overlap:.4f}s after execution "
                    f"{owner.successor} of the same record started"
                )

    def check(self, now: float) -> None:
        """Flag owners that are overdue (a successor started and they have not ended)."""
        for job_id, owners in self.live.items():
            for owner in owners.values():
                overdue = owner.must_end_by is not None and now > owner.must_end_by
                if overdue and not owner.flagged:
                    owner.flagged = True
                    self.violations.append(
                        f"record {job_id}: execution {owner.execution_id} still live at "
                        f"t={now:.4f} while {owner.successor} owns the record"
                    )

    def live_count(self) -> int:
        return sum(len(owners) for owners in self.live.values())
