"""What each option of ``schedule()`` costs (issue 27), for ``benchmarks.scheduling``: the
latency of ``schedule()`` with each option beside the plain call, in one sitting, and the
debounce storm.

**Options.** For ``calls`` rounds, every variant makes one ``schedule()`` call, in turn (so every
variant sees the same load on a shared machine); each call is timed. A variant whose key is new
at each call measures the path that schedules a record; a "taken key" variant measures the path
of a call whose key is held (replace, debounce: one record updated; throttle: the call dropped).
The ratio is each variant's p50 over the plain call's.

**Tags and claims.** Due records drained by concurrent claimers, untagged, tagged, and tagged
without the tags index: the claims/s say whether the partial tags index slows claims (a claim
changes no tag, so it should not touch the index).

**Debounce storm.** ``storm_calls`` calls of ``Unique(on_conflict="debounce")`` on ``storm_keys``
keys from ``storm_tasks`` concurrent tasks (one client): exactly one record per key must be left,
each call ``Scheduled`` (one per key) or ``Debounced``.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import anyio

from benchmarks.support.claiming import drain_by_claims
from dogs_core import DogsClient, EventJobDefinition, Jobs, Scheduled, Unique
from dogs_core.domain.records import NewJob, ScheduleOutcome
from dogs_core.ids import new_record_id
from dogs_mongo import AsyncMongoJobStore
from dogs_mongo import queries as q

__all__ = ["VARIANTS", "OptionsResult", "StormResult", "measure_options", "storm"]

Call = Callable[[DogsClient, EventJobDefinition, int], Any]


def _debounce(key: str) -> Unique:
    return Unique(key, on_conflict="debounce", delay="1h", max_wait="2h")


def _variant(**options: Any) -> Call:
    return lambda client, job, i: client.schedule(job, {"customer_id": i}, **options)


def _keyed(make: Callable[[int], Unique], **options: Any) -> Call:
    return lambda client, job, i: client.schedule(
        job, {"customer_id": i}, unique=make(i), **options
    )


#: (label, the call for round ``i``): new keys unless the label says "taken".
VARIANTS: Final[tuple[tuple[str, Call], ...]] = (
    ("plain", _variant()),
    ("tags + start_before", _variant(tags=["tenant:acme", "report"], start_before="1h")),
    ("unique_key= (Dogs' rule)", lambda c, j, i: c.schedule(j, {"i": i}, unique_key=f"uk:{i}")),
    ("Unique(by=customer_id)", _keyed(lambda i: Unique(by=("customer_id",)))),
    ("Unique(states=pending)", _keyed(lambda i: Unique(f"st:{i}", states="pending"))),
    ("Unique(period=10m), new key", _keyed(lambda i: Unique(f"w:{i}", period="10m"))),
    ("replace, taken key", _keyed(lambda i: Unique("replace", on_conflict="replace"), run_in="1h")),
    ("debounce, new key", _keyed(lambda i: _debounce(f"d:{i}"))),
    ("debounce, taken key", _keyed(lambda i: _debounce("debounce"))),
    ("throttle, new key", _keyed(lambda i: Unique(f"t:{i}", on_conflict="throttle", period="1h"))),
    ("throttle, taken key (dropped)", _keyed(
        lambda i: Unique("throttle", on_conflict="throttle", period="1h"))),
)  # fmt: skip


@dataclass(slots=True)
class OptionsResult:
    calls: int
    seconds: dict[str, list[float]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


@dataclass(slots=True)
class StormResult:
    calls: int
    keys: int
    tasks: int
    seconds: float = 0.0
    records: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    @property
    def per_second(self) -> float | None:
        return self.calls / self.seconds if self.seconds else None


def _definition(registry: Jobs, name: str) -> EventJobDefinition:
    async def handler(params: dict[str, Any], ctx: object) -> None:
        """Never runs: no worker is started."""

    return registry.event(name=name)(handler)


async def measure_options(client: Any, database: str, calls: int) -> OptionsResult:
    """Every variant ``calls`` times, round-robin, on one client over ``database``."""
    result = OptionsResult(calls)
    registry = Jobs()
    job = _definition(registry, "options")
    store = AsyncMongoJobStore(client, database)
    await store.setup()
    dogs = DogsClient(store, registry)
    for _label, call in VARIANTS:  # warm each path once (connections, the first setup)
        await call(dogs, job, -1)
    for i in range(calls):
        for label, call in VARIANTS:
            began = time.perf_counter()
            outcome = await call(dogs, job, i)
            result.seconds.setdefault(label, []).append(time.perf_counter() - began)
            if outcome is None:
                result.failures.append(f"{label}: no outcome")
    records = store.records_collection
    # Each new-key variant wrote a record per round (the warm-up too); each taken-key one, one.
    new = sum(1 for label, _ in VARIANTS if "taken" not in label and "unique_key" not in label)
    taken = sum(1 for label, _ in VARIANTS if "taken" in label)
    expected = new * (calls + 1) + taken
    stored = await records.count_documents({"params.customer_id": {"$exists": True}})
    if stored != expected:
        result.failures.append(f"{stored} records of the keyed variants, expected {expected}")
    for key in ("replace", "debounce"):
        held = await records.count_documents({"uniqueIdentifier": key})
        if held != 1:
            result.failures.append(f"{held} records hold {key!r}, expected 1")
    return result


async def storm(client: Any, database: str, calls: int, keys: int, tasks: int) -> StormResult:
    """The debounce storm (see the module documentation)."""
    result = StormResult(calls, keys, tasks)
    registry = Jobs()
    job = _definition(registry, "notify")
    store = AsyncMongoJobStore(client, database)
    await store.setup()
    dogs = DogsClient(store, registry)
    counter = itertools.count()
    outcomes: list[ScheduleOutcome] = []

    async def worker() -> None:
        while (n := next(counter)) < calls:
            unique = _debounce(f"notify:{n % keys}")
            outcomes.append(await dogs.schedule(job, {"n": n}, unique=unique))

    began = time.perf_counter()
    async with anyio.create_task_group() as group:
        for _ in range(tasks):
            group.start_soon(worker)
    result.seconds = time.perf_counter() - began
    result.outcomes = Counter(type(outcome).__name__ for outcome in outcomes)
    result.records = await store.records_collection.count_documents({"jobName": "notify"})
    if result.records != keys:
        result.failures.append(f"{result.records} records after the storm, expected {keys}")
    scheduled = sum(isinstance(outcome, Scheduled) for outcome in outcomes)
    if scheduled != keys or result.outcomes["Debounced"] != calls - keys:
        result.failures.append(f"outcomes {dict(result.outcomes)}, expected {keys} Scheduled")
    return result


@dataclass(slots=True)
class TagClaims:
    """Claims/s of one drain per case (best of the rounds), and the checks."""

    jobs: int
    per_second: dict[str, float] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


#: The cases of :func:`claims_with_tags`: (label, tags per record, the tags index kept).
TAG_CASES: Final = (
    ("untagged records, tags index", 0, True),
    ("tagged records (3 tags), tags index", 3, True),
    ("tagged records (3 tags), no tags index", 3, False),
)


async def claims_with_tags(client: Any, databases: list[str], jobs: int, rounds: int) -> TagClaims:
    """Whether the tags index slows claims: ``jobs`` due records drained by 8 concurrent
    claimers in 4 partitions, per case of :data:`TAG_CASES`, the cases interleaved ``rounds``
    times (each drain in a fresh database); every record must be claimed exactly once."""
    result = TagClaims(jobs)
    names = ("tagged_a", "tagged_b")
    for round_number in range(rounds):
        for case, (label, count, indexed) in enumerate(TAG_CASES):
            database = databases[round_number * len(TAG_CASES) + case]
            store = AsyncMongoJobStore(client, database)
            await store.setup()
            if not indexed:
                await store.records_collection.drop_index(q.TAGS_INDEX_NAME)
            due = datetime.now(UTC) - timedelta(hours=1)
            tags = tuple(f"tenant:{n}" for n in range(count))
            batch = [
                NewJob(new_record_id(), names[i % 2], {"i": i}, due + timedelta(milliseconds=i),
                       100, i % 4, tags=tags)
                for i in range(jobs)
            ]  # fmt: skip
            await store.insert_jobs(batch)
            drain = await drain_by_claims(
                store, claimers=8, partitions=4, job_names=names, hint="byJobName"
            )
            claimed = {job.job_id for job in drain.claimed}
            if len(drain.claimed) != jobs or len(claimed) != jobs:
                result.failures.append(f"{label}: {len(drain.claimed)} claims of {jobs} records")
            rate = jobs / drain.seconds if drain.seconds else 0.0
            result.per_second[label] = max(rate, result.per_second.get(label, 0.0))
    return result
