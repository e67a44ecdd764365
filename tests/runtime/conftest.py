"""Shared fixtures and helpers of the runtime suite: trio under a virtual clock, the in-memory
store with call recording, and a small harness that builds clients and workers.

Every test in this package runs on trio with ``MockClock(autojump_threshold=0)``: whenever all
tasks are blocked the clock jumps to the next deadline, so lock expiry, polling, backoff and
probes take no real time. Times in these tests are virtual seconds (``anyio.current_time()``);
the application clock is a :class:`LoopClock` that follows it, starting at :data:`START`.

Callbacks in these tests (``on_error``, ``on_stale``, ``on_max_tries_reached``) are ``async``:
a sync callback runs in a worker thread, and while the loop waits for a thread it looks idle, so
virtual time would jump ahead (DESIGN §7). Sync handlers are tested in ``test_sync_handlers``
with a positive autojump threshold.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest
import trio.testing

from dogs_core.domain.outcome import Defer, Delete, DemoteStale, MarkTerminal, Release, Reschedule
from dogs_core.domain.records import ClaimedJob, ClaimRequest, HistoryRecord, JobRecord
from dogs_core.domain.settle import Settlement
from dogs_core.jobs import Jobs
from dogs_core.runtime import DogsClient, LoopClock, Workers
from dogs_testing.memory import InMemoryJobStore, SyncInMemoryJobStore

START = datetime(2026, 1, 1, tzinfo=UTC)
"""The application time at virtual time 0 (the first ``LoopClock.now()`` call)."""


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    return ("trio", {"clock": trio.testing.MockClock(autojump_threshold=0)})


def now() -> float:
    """The current virtual time in seconds."""
    return anyio.current_time()


@dataclass(frozen=True, slots=True)
class ExtendCall:
    """One ``extend_lock`` call as the store saw it."""

    job_id: str
    lock_id: str
    locked_until: datetime
    started: float
    matched: bool | None = None


@dataclass(frozen=True, slots=True)
class ClaimCall:
    """One ``claim`` call and its result."""

    request: ClaimRequest
    started: float
    result: ClaimedJob | None


@dataclass(frozen=True, slots=True)
class ProbeCall:
    hint: str
    partition: int
    started: float


_WRITE_NAMES: dict[type, str] = {
    Delete: "complete",
    Reschedule: "reschedule",
    Defer: "defer",
    MarkTerminal: "mark_terminal",
    Release: "release_lock",
    DemoteStale: "demote_stale",
}


@dataclass
class StoreHooks:
    """Knobs a test turns on a :class:`RecordingStore`."""

    claim_delay: float = 0.0
    extend_delay: float = 0.0
    extend_error: Exception | None = None
    release_error: Exception | None = None
    """Raised by a settlement that releases a lock: a crashed process cannot release anything."""
    probe_delay: float = 0.0
    probe_timing: Callable[[str, float], float] | None = None
    """Returns the "explain time" of one probe call (``hint``, virtual time of the call)."""
    before_claim: Callable[[ClaimRequest], None] | None = None


class RecordingStore(InMemoryJobStore):
    """The in-memory store, recording the calls the runtime makes and injecting delays or errors.

    Delays are virtual (``anyio.sleep``) and happen before the call reaches the state, as a
    network round trip would. Several recording stores may share one state (``sync``), e.g. to
    give each workers instance its own latency.
    """

    def __init__(self, *, sync: SyncInMemoryJobStore | None = None) -> None:
        super().__init__(sync=sync)
        self.hooks = StoreHooks()
        self.claims: list[ClaimCall] = []
        self.claims_in_flight = 0
        self.extends: list[ExtendCall] = []
        self.probes: list[ProbeCall] = []
        self.probes_in_flight = 0
        self.max_probes_in_flight = 0
        self.calls: list[str] = []
        self.reschedules: list[tuple[float, datetime]] = []

    async def claim(self, request: ClaimRequest) -> ClaimedJob | None:
        started = now()
        self.claims_in_flight += 1
        try:
            if self.hooks.before_claim is not None:
                self.hooks.before_claim(request)
            if self.hooks.claim_delay:
                await anyio.sleep(self.hooks.claim_delay)
            result = await super().claim(request)
        finally:
            self.claims_in_flight -= 1
        self.claims.append(ClaimCall(request, started, result))
        return result

    async def claim_many(self, requests: Sequence[ClaimRequest]) -> list[ClaimedJob]:
        """Recorded as one ``claim_many`` call, one :class:`ClaimCall` per job it claimed, and
        one ``ClaimCall`` with no job for a call that claimed nothing: tests that count claims
        per instant count calls, and tests that count hits count jobs."""
        started = now()
        self.calls.append("claim_many")
        self.claims_in_flight += 1
        try:
            if self.hooks.before_claim is not None:
                for request in requests:
                    self.hooks.before_claim(request)
            if self.hooks.claim_delay:
                await anyio.sleep(self.hooks.claim_delay)
            result = await super().claim_many(requests)
        finally:
            self.claims_in_flight -= 1
        by_lock_id = {request.lock_id: request for request in requests}
        if result:
            self.claims.extend(ClaimCall(by_lock_id[job.lock_id], started, job) for job in result)
        elif requests:
            self.claims.append(ClaimCall(requests[0], started, None))
        return result

    async def extend_lock(self, job_id: str, lock_id: str, locked_until: datetime) -> bool:
        started = now()
        self.calls.append("extend_lock")
        if self.hooks.extend_delay:
            await anyio.sleep(self.hooks.extend_delay)
        if self.hooks.extend_error is not None:
            self.extends.append(ExtendCall(job_id, lock_id, locked_until, started))
            raise self.hooks.extend_error
        matched = await super().extend_lock(job_id, lock_id, locked_until)
        self.extends.append(ExtendCall(job_id, lock_id, locked_until, started, matched))
        return matched

    async def probe(self, *, hint: str, job_names: Any, partition: int, now: datetime) -> float:
        started = anyio.current_time()
        self.probes.append(ProbeCall(hint, partition, started))
        self.probes_in_flight += 1
        self.max_probes_in_flight = max(self.max_probes_in_flight, self.probes_in_flight)
        try:
            if self.hooks.probe_delay:
                await anyio.sleep(self.hooks.probe_delay)
            if self.hooks.probe_timing is not None:
                return self.hooks.probe_timing(hint, started)
            return await super().probe(hint=hint, job_names=job_names, partition=partition, now=now)
        finally:
            self.probes_in_flight -= 1

    async def settle_many(self, settlements: Sequence[Settlement]) -> list[bool]:
        """Records one call per command, by the name of the write it makes (``complete``,
        ``reschedule``, ``defer``, ``mark_terminal``, ``release_lock``, ``demote_stale``)."""
        for settlement in settlements:
            command = settlement.command
            self.calls.append(_WRITE_NAMES[type(command)])
            if isinstance(command, Reschedule):
                self.reschedules.append((anyio.current_time(), command.next_run_at))
            if isinstance(command, Release) and self.hooks.release_error is not None:
                raise self.hooks.release_error
        return await super().settle_many(settlements)

    # -- reading helpers (synchronous: the state is in memory) ---------------------------------

    def records(self, job_name: str | None = None) -> list[JobRecord]:
        return self.sync.find_records(job_name=job_name, limit=1_000_000)

    def record(self, job_id: str) -> JobRecord | None:
        return self.sync.get_record(job_id)

    def history(self, job_name: str) -> list[HistoryRecord]:
        """Every history row of ``job_name``, oldest first."""
        return list(reversed(self.sync.read_history(job_name, limit=10_000)))

    def job_history(self, job_id: str) -> list[HistoryRecord]:
        """Every history row of one job, oldest first."""
        return list(reversed(self.sync.read_history(job_id=job_id, limit=10_000)))

    def successful_claims(self) -> list[ClaimedJob]:
        return [call.result for call in self.claims if call.result is not None]


@dataclass
class Harness:
    """One store, one application clock, a client, and factories for workers."""

    jobs: Jobs
    store: RecordingStore = field(default_factory=RecordingStore)
    clock: LoopClock = field(default_factory=lambda: LoopClock(START))
    seed: int = 0

    @property
    def client(self) -> DogsClient:
        return DogsClient(self.store, self.jobs, clock=self.clock, rng=random.Random(self.seed))

    def workers(self, **options: Any) -> Workers:
        """Workers on this store. These tests pace claims by polling, so the change feed is off
        unless a test turns it on (``watch_changes=True``, see ``test_wakeups``)."""
        options.setdefault("poll_interval", 1)
        options.setdefault("watch_changes", False)
        return Workers(
            self.store,
            self.jobs,
            clock=self.clock,
            rng=random.Random(self.seed),
            **options,
        )

    def at(self, seconds: float) -> datetime:
        """The application time at virtual time ``seconds``."""
        return START + timedelta(seconds=seconds)


def assert_nothing_locked(store: InMemoryJobStore, *, at: datetime | None = None) -> None:
    """No record holds a live lock: each is unlocked, expired (``at``), or terminal."""
    for record in store.sync.find_records(limit=1_000_000):
        if record.locked_until is None:
            continue
        assert at is not None, f"record {record.id} of {record.job_name} is locked"
        assert record.locked_until <= at, (
            f"record {record.id} of {record.job_name} is still locked until "
            f"{record.locked_until} (lock {record.lock_id})"
        )


@dataclass
class Gauge:
    """Counts concurrent activity and remembers the maximum."""

    current: int = 0
    maximum: int = 0
    events: list[tuple[float, str]] = field(default_factory=list)

    def __enter__(self) -> Gauge:
        self.current += 1
        self.maximum = max(self.maximum, self.current)
        self.events.append((anyio.current_time(), "start"))
        return self

    def __exit__(self, *exc: object) -> None:
        self.current -= 1
        self.events.append((anyio.current_time(), "end"))


def times(events: list[tuple[float, str]], kind: str) -> list[float]:
    """The virtual times of the ``kind`` events of a :class:`Gauge`."""
    return [t for t, k in events if k == kind]
