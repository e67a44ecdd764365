"""The query plans and the cost of ``job_stats``: which index serves each aggregation and how
much it reads, for windows of an hour, a day and a week over a week of history.

Seeds the history collection with ``--rows`` rows per size (10,000 and 200,000 by default;
``--quick``: 2,000) spread evenly over the last 7 days across 8 job names (one name holds half
of them), shaped as the store writes them (a mix of statuses, error types, durations), sets up
the store's indexes, then for each window (1 h, 24 h, 7 days) and each name filter (every name,
one name) runs ``explain`` (``executionStats``) of the two pipelines ``job_stats`` sends (the
summary and the per-minute counts) and times the whole ``job_stats`` call (best of 3). For each
it prints the winning plan as a stage tree (``FETCH > IXSCAN[index]``), keys and documents
examined, the milliseconds of the index scan (``executionTimeMillis`` of the query stage), and
the rows in the window.

Checks (exit 1 when one fails): no plan scans the collection (``COLLSCAN``), every plan uses
``jobName_1_startedAt_1``, keys examined are at most the rows in the window plus two per name
(the seeks from name to name), the per-minute pipeline fetches no document (covered), and the
stats' ``runs`` add up to the rows in the window.

Run it as a module from the project root::

    python -m benchmarks.explain_stats                 # a throw-away local mongod
    python -m benchmarks.explain_stats --quick
    python -m benchmarks.explain_stats --uri mongodb://localhost:27017/?replicaSet=rs0
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from pymongo import MongoClient
from pymongo.database import Database

from benchmarks.support.cli import add_quick, add_uri, new_parser
from benchmarks.support.plans import plan_indexes, plan_tree
from benchmarks.support.report import command_line, new_console, plain_context, problems_status
from benchmarks.support.server import mongo_server, scratch_database
from dogs_core.domain.records import HistoryRecord, HistoryStatus, JobType
from dogs_core.ids import new_execution_id, new_record_id
from dogs_mongo import MongoJobStore
from dogs_mongo import queries as q

__all__ = ["StatsPlan", "explain_stats", "main", "seed_history"]

NAMES: Final = ("email", "report", "sync", "thumbnail", "billing", "export", "cleanup", "webhook")
SIZES: Final = (10_000, 200_000)
QUICK_SIZES: Final = (2_000,)
WINDOWS: Final = (
    ("1h", timedelta(hours=1)),
    ("24h", timedelta(days=1)),
    ("7d", timedelta(days=7)),
)
INDEX: Final = "jobName_1_startedAt_1"
_ERRORS: Final = ("app.PaymentDeclined", "builtins.TimeoutError", None)

Document = dict[str, Any]
Pipeline = Callable[..., list[Document]]


@dataclass(frozen=True, slots=True)
class StatsPlan:
    """What ``explain`` said about one of the two ``job_stats`` pipelines."""

    pipeline: str
    window: str
    job_names: tuple[str, ...] | None
    tree: str
    indexes: tuple[str, ...]
    keys_examined: int
    docs_examined: int
    server_ms: int
    in_window: int

    @property
    def scans_collection(self) -> bool:
        return "COLLSCAN" in self.tree


def _row(at: datetime, rng: random.Random) -> HistoryRecord:
    name = NAMES[0] if rng.random() < 0.5 else rng.choice(NAMES[1:])
    status = rng.choices(
        (HistoryStatus.SUCCESS, HistoryStatus.ERROR, HistoryStatus.STALE, HistoryStatus.SNOOZED),
        weights=(90, 7, 1, 2),
    )[0]
    duration = timedelta(milliseconds=int(rng.lognormvariate(4, 1)))
    return HistoryRecord(
        execution_id=new_execution_id(),
        job_id=new_record_id(),
        job_name=name,
        type=JobType.EVENT,
        priority=100,
        tries=1,
        started_at=at,
        ended_at=at + duration,
        status=status,
        expires_at=at + timedelta(days=30),
        params={"n": rng.randrange(1000)},
        error_message="boom" if status is HistoryStatus.ERROR else None,
        error_type=rng.choice(_ERRORS) if status is HistoryStatus.ERROR else None,
    )


def seed_history(database: Database[Document], count: int, now: datetime, seed: int = 15) -> int:
    """Insert ``count`` history rows started evenly over the 7 days before ``now`` (see the
    module documentation), as ``write_history_many`` stores them."""
    rng = random.Random(seed)
    step = timedelta(days=7) / count
    collection = database[q.DEFAULT_HISTORY_COLLECTION]
    batch: list[Document] = []
    for i in range(count):
        row = _row(now - (i + 1) * step, rng)
        batch.append(q.history_update(row, new_record_id())["$setOnInsert"])
        if len(batch) == 10_000:
            collection.insert_many(batch, ordered=False)
            batch = []
    if batch:
        collection.insert_many(batch, ordered=False)
    return count


def _cursor_stage(result: Mapping[str, Any]) -> Mapping[str, Any]:
    """The query part of an aggregation's explain (``$cursor``, or the whole result when the
    engine pushed the ``$group`` down into the query)."""
    stages = result.get("stages")
    if stages:
        return dict(stages[0]["$cursor"])
    return result


def explain_stats(
    database: Database[Document],
    pipeline: Pipeline,
    *,
    window: tuple[str, timedelta],
    job_names: tuple[str, ...] | None,
    now: datetime,
) -> StatsPlan:
    """``explain`` (executionStats) of ``pipeline`` (a builder of :mod:`dogs_mongo.queries`)
    as ``job_stats`` sends it: hinted, over ``window`` before ``now``."""
    label, length = window
    since = now - length
    stages = pipeline(since=since, until=now, job_names=job_names)
    collection = q.DEFAULT_HISTORY_COLLECTION
    result = database.command(
        {
            "explain": {
                "aggregate": collection,
                "pipeline": stages,
                "cursor": {},
                "hint": dict(q.STATS_HINT),
            },
            "verbosity": "executionStats",
        }
    )
    query = _cursor_stage(result)
    winning = query["queryPlanner"]["winningPlan"]
    stats = query["executionStats"]
    in_window = database[collection].count_documents(
        q.stats_match(since=since, until=now, job_names=job_names)
    )
    return StatsPlan(
        pipeline=pipeline.__name__.removeprefix("stats_").removesuffix("_pipeline"),
        window=label,
        job_names=job_names,
        tree=plan_tree(winning),
        indexes=tuple(dict.fromkeys(plan_indexes(winning))),
        keys_examined=int(stats["totalKeysExamined"]),
        docs_examined=int(stats["totalDocsExamined"]),
        server_ms=int(stats.get("executionTimeMillis", 0)),
        in_window=in_window,
    )


def _problems(plan: StatsPlan) -> list[str]:
    where = f"{plan.pipeline} {plan.window} names={plan.job_names or '*'}"
    problems = []
    if plan.scans_collection:
        problems.append(f"{where}: COLLSCAN in {plan.tree}")
    if INDEX not in plan.indexes:
        problems.append(f"{where}: not served by {INDEX} ({plan.tree})")
    names = len(plan.job_names) if plan.job_names is not None else len(NAMES)
    if plan.keys_examined > plan.in_window + 2 * names + 1:
        problems.append(
            f"{where}: {plan.keys_examined} keys examined for {plan.in_window} rows in the window"
        )
    if plan.pipeline == "minutes" and plan.docs_examined:
        problems.append(f"{where}: the per-minute counts fetched {plan.docs_examined} documents")
    return problems


def _timed_stats(
    store: MongoJobStore, since: datetime, until: datetime, names: tuple[str, ...] | None
) -> tuple[float, int]:
    """The best of 3 wall times of ``job_stats`` (ms) and the runs it counted."""
    best = float("inf")
    runs = 0
    for _ in range(3):
        started = time.perf_counter()
        stats = store.job_stats(since=since, until=until, job_names=names)
        best = min(best, (time.perf_counter() - started) * 1000)
        runs = sum(s.runs for s in stats)
    return best, runs


def _run_size(
    client: MongoClient[Document], size: int, now: datetime
) -> tuple[list[str], list[str]]:
    """Seed ``size`` rows in a fresh database, explain and time every case; the printed lines
    and the problems found."""
    name = scratch_database("explain_stats")
    lines = [f"\n{size:,} history rows over 7 days, {len(NAMES)} job names"]
    problems: list[str] = []
    try:
        store = MongoJobStore(client, name)
        store.setup()
        seed_history(client[name], size, now)
        for window in WINDOWS:
            for names in (None, (NAMES[1],)):
                ms, runs = _timed_stats(store, now - window[1], now, names)
                for pipeline in (q.stats_summary_pipeline, q.stats_minutes_pipeline):
                    plan = explain_stats(
                        client[name], pipeline, window=window, job_names=names, now=now
                    )
                    problems += _problems(plan)
                    lines.append(
                        f"{plan.window:<4} names={','.join(names or ('*',)):<7} "
                        f"{plan.pipeline:<8} {plan.tree}\n{'':<21}rows in window={plan.in_window} "
                        f"keysExamined={plan.keys_examined} docsExamined={plan.docs_examined} "
                        f"scan={plan.server_ms} ms"
                    )
                    in_window = plan.in_window
                lines.append(f"{'':<21}job_stats: {ms:.1f} ms (best of 3), runs={runs}")
                if runs != in_window:
                    problems.append(f"{window[0]} {names}: runs {runs} != rows {in_window}")
    finally:
        client.drop_database(name)
    return lines, problems


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = new_parser("explain_stats", __doc__.splitlines()[0])
    add_uri(parser)
    parser.add_argument(
        "--rows", type=int, nargs="+", default=None, help="history rows per size (10000 200000)"
    )
    add_quick(parser, "one small size (2000 rows)")
    args = parser.parse_args(argv)
    if args.rows is not None and min(args.rows) < 100:
        parser.error("--rows must be at least 100")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    sizes = args.rows or (QUICK_SIZES if args.quick else SIZES)
    console = new_console()
    now = datetime.now(UTC).replace(microsecond=0)
    problems: list[str] = []
    with mongo_server(args.uri, console) as server:
        client: MongoClient[Document] = MongoClient(server.uri, tz_aware=True)
        try:
            print(plain_context(command_line("benchmarks.explain_stats", argv), server))
            for size in sizes:
                lines, found = _run_size(client, size, now)
                print("\n".join(lines))
                problems += found
        finally:
            client.close()
    return problems_status(problems)


if __name__ == "__main__":
    sys.exit(main())
