"""dogs_mongo.run_example: a script on a DogsContainer, in memory by default, on MongoDB with
--uri (a fresh database, dropped at the end, or the --database given, kept)."""

from __future__ import annotations

from typing import Any

import pytest
from pymongo import MongoClient

from dogs_core import JobContext, Jobs, Scheduled
from dogs_core.errors import InvalidOptionError
from dogs_mongo import (
    AsyncMongoJobStore,
    Example,
    example_parser,
    run_blocking_example,
    run_example,
)
from dogs_testing import InMemoryJobStore, SyncInMemoryJobStore

jobs = Jobs()


@jobs.event
async def double(params: dict[str, int], ctx: JobContext) -> int:
    return 2 * params["n"]


async def _one_job(example: Example) -> tuple[Any, str | None, int]:
    client = example.client(jobs)
    outcome = await client.schedule(double, {"n": 21})
    assert isinstance(outcome, Scheduled)
    async with example.workers(jobs, poll_interval="100ms") as workers:
        row = await client.wait_for(outcome.id, timeout="60s")
        await workers.stop()
    return example.store, example.database, row.result


def test_in_memory_by_default() -> None:
    made: list[InMemoryJobStore] = []

    def memory() -> InMemoryJobStore:
        made.append(InMemoryJobStore())
        return made[-1]

    store, database, result = run_example(_one_job, [], name="runner", memory=memory)
    assert store is made[0]
    assert database is None
    assert result == 42


def test_the_script_options_are_in_args() -> None:
    parser = example_parser("a script")
    parser.add_argument("--size", type=int, default=1)

    async def main(example: Example) -> int:
        assert not example.on_mongodb
        size: int = example.args.size
        return size

    assert (
        run_example(main, ["--size", "7"], name="runner", memory=InMemoryJobStore, parser=parser)
        == 7
    )


def test_blocking_in_memory() -> None:
    def main(example: Example) -> object:
        with example.blocking_client(jobs) as client:
            outcome = client.schedule(double, {"n": 2})
            assert isinstance(outcome, Scheduled)
            with example.blocking_workers(jobs, poll_interval=0.1):
                return client.wait_for(outcome.id, timeout=60).result

    assert run_blocking_example(main, [], name="runner", memory=SyncInMemoryJobStore) == 4


def test_a_bad_name_is_refused_before_anything_is_built() -> None:
    async def main(example: Example) -> None:
        raise AssertionError("not run")

    with pytest.raises(InvalidOptionError, match="name"):
        run_example(main, [], name="no spaces", memory=InMemoryJobStore)


@pytest.mark.mongo
def test_on_mongodb_a_fresh_database_dropped_at_the_end(
    mongodb_uri: str, sync_mongo_client: MongoClient[dict[str, Any]]
) -> None:
    store, database, result = run_example(
        _one_job, ["--uri", mongodb_uri], name="runner", memory=InMemoryJobStore
    )
    assert isinstance(store, AsyncMongoJobStore)
    assert database is not None
    assert database.startswith("dogs_runner_")
    assert result == 42
    assert database not in sync_mongo_client.list_database_names()


@pytest.mark.mongo
def test_on_mongodb_the_database_given_is_kept(
    mongodb_uri: str, sync_mongo_client: MongoClient[dict[str, Any]], mongo_database_name: str
) -> None:
    argv = ["--uri", mongodb_uri, "--database", mongo_database_name]
    _, database, _ = run_example(_one_job, argv, name="runner", memory=InMemoryJobStore)
    assert database == mongo_database_name
    assert mongo_database_name in sync_mongo_client.list_database_names()
