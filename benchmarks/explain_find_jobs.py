"""The query plan of ``find_jobs`` for every state: which index serves it, and how much it reads.

Seeds a records collection with a mix of every state (``--records``, 5,000 by default: about
44 % scheduled, 45 % due, 5 % retrying, 2 % running, 1 % stale, 2 % failed, 1 % held, 1 %
sleeping, over two job
names), shaped as the store writes them (locks with ``lockOwner``, releases with
``lockReleasedAt``, terminal records), sets up the store's indexes, then runs ``explain``
(``executionStats``) of the very query ``MongoJobStore.find_jobs`` sends for each state, with
and without a job name, first page (limit 100). For each it prints the winning plan as a stage
tree (``LIMIT > FETCH > IXSCAN[index]``), keys and documents examined, and documents returned,
and checks that no plan scans the collection (``COLLSCAN``) and that the explain returned as
many records as ``find_jobs`` does. Exit 1 when a check fails.

Run it as a module from the project root::

    python -m benchmarks.explain_find_jobs                 # a throw-away local mongod
    python -m benchmarks.explain_find_jobs --uri mongodb://localhost:27017/?replicaSet=rs0
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from pymongo import MongoClient
from pymongo.database import Database

from benchmarks.support.cli import add_uri, new_parser
from benchmarks.support.plans import plan_indexes, plan_tree
from benchmarks.support.report import command_line, new_console, plain_context, problems_status
from benchmarks.support.server import mongo_server, scratch_database
from dogs_core.domain.records import (
    Hold,
    HoldReason,
    JobRecord,
    JobState,
    JobStatus,
    JobType,
    Owner,
)
from dogs_core.ids import new_execution_id, new_record_id
from dogs_mongo import MongoJobStore
from dogs_mongo import queries as q

__all__ = ["PlanSummary", "explain_all", "explain_find_jobs", "main", "seed_mix"]

NAMES: Final = ("email", "report")
PAGE: Final = 100
_OWNER: Final = Owner(host="bench-host", pid=4242, instance_id="bench-1")

Document = dict[str, Any]


@dataclass(frozen=True, slots=True)
class PlanSummary:
    """What ``explain`` said about one ``find_jobs`` query."""

    state: JobState
    job_name: str | None
    tree: str
    indexes: tuple[str, ...]
    keys_examined: int
    docs_examined: int
    returned: int

    @property
    def scans_collection(self) -> bool:
        return "COLLSCAN" in self.tree


def _record(kind: str, now: datetime, rng: random.Random) -> JobRecord:
    """A record of ``kind`` (a state, or ``released``) at ``now``, as the store leaves it."""
    base = JobRecord(
        id=new_record_id(),
        job_name=rng.choice(NAMES),
        type=JobType.EVENT,
        priority=100,
        next_run_at=now - timedelta(seconds=rng.randint(1, 3600)),
        partition=rng.randrange(8),
        params={"n": rng.randrange(1000)},
    )
    later = now + timedelta(seconds=rng.randint(1, 3600))
    locked = replace(
        base,
        lock_id=new_execution_id(),
        last_run_at=now - timedelta(seconds=5),
        tries=1,
        lock_owner=_OWNER,
    )
    if kind == "scheduled":
        return replace(base, next_run_at=later)
    if kind == "retrying":
        return replace(base, tries=2, next_run_at=rng.choice([base.next_run_at, later]))
    if kind == "running":
        return replace(locked, locked_until=now + timedelta(seconds=30))
    if kind == "stale":
        return replace(locked, locked_until=now - timedelta(seconds=60))
    if kind == "released":  # given back at shutdown: retrying, not stale
        released = now - timedelta(seconds=10)
        return replace(locked, locked_until=released, lock_released_at=released)
    if kind == "held":  # given back by a fleet limit until later
        hold = Hold(HoldReason.CONCURRENCY, since=base.next_run_at, until=later)
        return replace(base, next_run_at=later, held=hold)
    if kind == "sleeping":  # a durable handler's ctx.sleep until later
        return replace(base, next_run_at=later, sleeping_until=later)
    if kind == "failed":
        return replace(
            base,
            tries=20,
            status=JobStatus.MAX_TRIES_REACHED,
            last_run_at=now - timedelta(minutes=5),
            max_tries_reached_at=now - timedelta(minutes=5),
            expires_at=now + timedelta(days=7),
        )
    return base  # due


_MIX: Final = (
    ("scheduled", 44),
    ("due", 45),
    ("retrying", 4),
    ("released", 1),
    ("running", 2),
    ("stale", 1),
    ("failed", 2),
    ("held", 1),
    ("sleeping", 1),
)


def seed_mix(database: Database[Document], count: int, now: datetime, seed: int = 12) -> int:
    """Insert ``count`` records of every state (see the module documentation) into the store's
    records collection of ``database`` (ids in creation order, kinds interleaved)."""
    rng = random.Random(seed)
    kinds = [kind for kind, share in _MIX for _ in range(max(1, count * share // 100))]
    rng.shuffle(kinds)
    documents = [q.document_from_record(_record(kind, now, rng)) for kind in kinds]
    database[q.DEFAULT_RECORDS_COLLECTION].insert_many(documents, ordered=False)
    return len(documents)


def explain_find_jobs(
    database: Database[Document],
    *,
    state: JobState,
    job_name: str | None,
    now: datetime,
    limit: int = PAGE,
) -> PlanSummary:
    """``explain`` (executionStats) of the query ``find_jobs`` sends for ``state``."""
    query = q.find_jobs_query(
        job_name=job_name, state=state, unique_identifier=None, after=None, limit=limit, now=now
    )
    result = database.command(
        {
            "explain": {
                "find": q.DEFAULT_RECORDS_COLLECTION,
                "filter": query.filter,
                "sort": dict(query.sort),
                "hint": query.hint,
                "limit": query.limit,
            },
            "verbosity": "executionStats",
        }
    )
    winning = result["queryPlanner"]["winningPlan"]
    stats = result["executionStats"]
    return PlanSummary(
        state=state,
        job_name=job_name,
        tree=plan_tree(winning),
        indexes=tuple(dict.fromkeys(plan_indexes(winning))),
        keys_examined=int(stats["totalKeysExamined"]),
        docs_examined=int(stats["totalDocsExamined"]),
        returned=int(stats["nReturned"]),
    )


def explain_all(
    database: Database[Document], now: datetime, names: Sequence[str | None] = (None, NAMES[0])
) -> list[PlanSummary]:
    """:func:`explain_find_jobs` of every state, for each of ``names``."""
    return [
        explain_find_jobs(database, state=state, job_name=name, now=now)
        for state in JobState
        for name in names
    ]


def _check(store: MongoJobStore, plans: Sequence[PlanSummary], now: datetime) -> list[str]:
    problems = []
    for plan in plans:
        found = store.find_records(job_name=plan.job_name, state=plan.state, now=now, limit=PAGE)
        if plan.scans_collection:
            problems.append(f"{plan.state} ({plan.job_name}): COLLSCAN in {plan.tree}")
        if plan.returned != len(found):
            problems.append(
                f"{plan.state} ({plan.job_name}): explain returned {plan.returned}, "
                f"find_jobs {len(found)}"
            )
    return problems


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = new_parser("explain_find_jobs", __doc__.splitlines()[0])
    add_uri(parser)
    parser.add_argument("--records", type=int, default=5_000, help="records to seed (5000)")
    args = parser.parse_args(argv)
    if args.records < 100:
        parser.error("--records must be at least 100")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    console = new_console()
    now = datetime.now(UTC).replace(microsecond=0)
    with mongo_server(args.uri, console) as server:
        client: MongoClient[Document] = MongoClient(server.uri, tz_aware=True)
        name = scratch_database("explain")
        try:
            store = MongoJobStore(client, name)
            store.setup()
            seeded = seed_mix(client[name], args.records, now)
            plans = explain_all(client[name], now)
            print(plain_context(command_line("benchmarks.explain_find_jobs", argv), server))
            print(f"{seeded:,} records; find_jobs(state=..., limit={PAGE}), first page\n")
            for plan in plans:
                print(
                    f"{plan.state.value:<9} job={plan.job_name or '*':<6} {plan.tree}\n"
                    f"{'':<20} keysExamined={plan.keys_examined} "
                    f"docsExamined={plan.docs_examined} nReturned={plan.returned}"
                )
            problems = _check(store, plans, now)
        finally:
            client.drop_database(name)
            client.close()
    return problems_status(problems)


if __name__ == "__main__":
    sys.exit(main())
