"""dogs_integrations.flask with Flask's test client and CLI runner: the configuration checked
with errors naming the key, the blocking client per application, and ``flask dogs schedule``
/ ``flask dogs worker`` passing through to the ``dogs`` commands (on the real mongod). The
example (examples/flask_app.py, whose ``--uri`` run starts ``flask dogs worker`` in a second
process) runs in tests/test_examples.py."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask
from pymongo import MongoClient

from dogs_core import JobContext, Jobs
from dogs_core.runtime.plumbing.wrappers import ThreadedJobStore
from dogs_integrations.flask import Dogs, DogsNotInitializedError, SettingsError
from dogs_testing import SyncInMemoryJobStore

jobs = Jobs()


@jobs.event
def ping(params: dict[str, Any] | None, ctx: JobContext) -> str:
    return "pong"


def make_app(**config: Any) -> Flask:
    app = Flask("shop")
    app.config.update(config)
    return app


def test_each_application_has_its_client() -> None:
    dogs = Dogs(jobs=jobs)
    first, second = make_app(), make_app()
    dogs.init_app(first, store=ThreadedJobStore(SyncInMemoryJobStore()))
    dogs.init_app(second, store=ThreadedJobStore(SyncInMemoryJobStore()))

    @first.post("/")
    def schedule() -> dict[str, int]:
        dogs.client.schedule(ping)
        return {"jobs": len(dogs.client.find_jobs(ping))}

    assert first.test_client().post("/").json == {"jobs": 1}
    assert first.test_client().post("/").json == {"jobs": 2}
    with second.app_context():
        assert len(dogs.client.find_jobs(ping)) == 0, "another application, another store"
    with first.app_context():
        assert dogs.client is dogs.client, "one client per application"
    dogs.close(first)
    with pytest.raises(DogsNotInitializedError, match=r"call dogs\.init_app"):
        Dogs().client  # noqa: B018 - outside any application context raises too
    with make_app().app_context(), pytest.raises(DogsNotInitializedError, match="'shop'"):
        Dogs().client  # noqa: B018


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"DOGS_URI": "mongodb://h/"}, "DOGS_JOBS=None: missing: the Jobs registry"),
        ({"DOGS_JOBS": "tests.nowhere:jobs"}, "DOGS_JOBS='tests.nowhere:jobs': cannot import"),
        ({"DOGS_JOBS": "tests.integrations.test_flask:ping"}, "not a dogs_core.Jobs registry"),
        ({"DOGS_JOBS": jobs}, "DOGS_URI=None: missing: the MongoDB connection string"),
        ({"DOGS_JOBS": jobs, "DOGS_URI": "h", "DOGS_WORKERS_COUNT": 0}, "DOGS_WORKERS_COUNT=0"),
        ({"DOGS_JOBS": jobs, "DOGS_URI": "h", "DOGS_DRIVER": "fast"}, "DOGS_DRIVER='fast'"),
        ({"DOGS_JOBS": jobs, "DOGS_URI": "h", "DOGS_WORKERS": 2}, "DOGS_WORKERS=2: not a setting"),
    ],
)
def test_bad_configuration_names_the_key(config: dict[str, Any], message: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Dogs().init_app(make_app(**config))
    assert message in str(caught.value)


def test_a_dogs_command_with_an_unknown_option_fails_like_dogs() -> None:
    app = make_app(DOGS_JOBS=jobs, DOGS_URI="mongodb://127.0.0.1:1/")
    Dogs().init_app(app)
    result = app.test_cli_runner().invoke(args=["dogs", "worker", "--no-such-option"])
    assert result.exit_code == 2, result.output
    assert "No such option: --no-such-option" in result.output
    result = app.test_cli_runner().invoke(args=["dogs", "schedule", "nope"])
    assert result.exit_code == 2, result.output
    assert "unknown job name 'nope'; known jobs: ping" in result.output
    assert (
        "(see flask dogs worker --help)"
        in app.test_cli_runner().invoke(args=["dogs", "worker", "--no-such-option"]).output
    )


def test_a_dogs_commands_help_leaves_out_what_flask_fills() -> None:
    app = make_app(DOGS_JOBS=jobs, DOGS_URI="mongodb://127.0.0.1:1/")
    Dogs().init_app(app)
    result = app.test_cli_runner().invoke(args=["dogs", "worker", "--help"])
    assert result.exit_code == 0, result.output
    usage = [line.strip() for line in result.output.splitlines() if "Usage:" in line]
    assert usage == ["Usage: flask dogs worker [OPTIONS]"]
    assert "--workers-count" in result.output
    assert "MODULE:REGISTRY" not in result.output
    assert "--app-dir" not in result.output


@pytest.mark.mongo
def test_flask_dogs_schedule_uses_the_configuration(
    mongodb_uri: str, mongo_database_name: str, sync_mongo_client: MongoClient[dict[str, Any]]
) -> None:
    app = make_app(
        DOGS_JOBS=jobs,
        DOGS_URI=mongodb_uri,
        DOGS_DATABASE=mongo_database_name,
        DOGS_RECORDS_COLLECTION="shop_jobs",
        DOGS_OPERATION_TIMEOUT="20s",
    )
    dogs = Dogs(app)
    result = app.test_cli_runner().invoke(args=["dogs", "schedule", "ping", "--run-in", "1h"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Scheduled ")
    stored = sync_mongo_client[mongo_database_name]["shop_jobs"].find_one()
    assert stored is not None
    assert stored["jobName"] == "ping"
    with app.app_context():
        assert [job.id for job in dogs.client.find_jobs(ping).jobs] == [stored["_id"]]
    dogs.close(app)
