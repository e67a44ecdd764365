"""The deployment recipes of docs/deployment.md (deploy/): the systemd unit verified by
``systemd-analyze verify`` and its command line parsed as ``dogs worker``'s; the Kubernetes
Deployment's command, grace and probes checked against the worker's flags; the KEDA query's
count on the real mongod equal to the due backlog that ``dogs status`` reports."""

from __future__ import annotations

import configparser
import shlex
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml
from bson import json_util
from pymongo import MongoClient

from dogs_cli import app
from dogs_core import JobContext, Jobs
from dogs_core.domain import validation
from dogs_mongo import DogsContainer
from dogs_mongo import queries as q

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
#: How long /readyz waits for the store (dogs_core.runtime.worker.health's default bound).
STORE_BOUND_SECONDS = 2.0


def worker_context(args: list[str]) -> Any:
    """``dogs ARGS`` parsed by the real command (unknown flags and bad values fail here)."""
    assert args[0] == "worker", args
    command = typer.main.get_command(app).commands["worker"]  # type: ignore[attr-defined]
    return command.make_context("worker", list(args[1:]))


def seconds(text: str) -> float:
    return validation.duration("grace", text).total_seconds()


# -- systemd -----------------------------------------------------------------------------------


def unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(DEPLOY / "systemd" / "dogs-worker.service")
    return parser


def test_the_systemd_unit_runs_dogs_worker_and_outlasts_its_grace() -> None:
    service = unit()["Service"]
    command = shlex.split(service["ExecStart"])
    assert command[0].endswith("/bin/dogs")
    context = worker_context(command[1:])
    assert context.params["registry"] == "myapp.jobs:jobs"
    assert context.params["health_port"] == 8081
    assert service["KillSignal"] == "SIGTERM", "the worker drains on SIGTERM"
    assert float(service["TimeoutStopSec"]) > seconds(context.params["grace"])
    assert service["Restart"] == "on-failure"


def test_systemd_analyze_verifies_the_unit(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed here (apt-get install systemd)")
    dogs = Path(sys.executable).parent / "dogs"
    text = (DEPLOY / "systemd" / "dogs-worker.service").read_text()
    text = text.replace("/srv/myapp/.venv/bin/dogs", str(dogs))  # an executable that exists
    copy = tmp_path / "dogs-worker.service"
    copy.write_text(text)
    done = subprocess.run(
        [analyze, "verify", str(copy)], capture_output=True, text=True, timeout=60, check=False
    )
    # A wrong directive or value ("Failed to parse signal name..."), a missing executable:
    # each is a line on stderr and a non-zero exit.
    assert (done.returncode, done.stderr.strip()) == (0, ""), done.stderr


# -- Kubernetes --------------------------------------------------------------------------------


def deployment() -> dict[str, Any]:
    (document,) = yaml.safe_load_all((DEPLOY / "kubernetes" / "worker.yaml").read_text())
    assert isinstance(document, dict)
    assert document["kind"] == "Deployment"
    return document


def test_the_deployment_runs_dogs_worker_with_probes_on_its_health_port() -> None:
    pod = deployment()["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    command = [*container["command"], *container["args"]]
    assert command[0] == "dogs"
    context = worker_context(command[1:])
    health_port = context.params["health_port"]
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert ports["health"] == health_port
    assert ports["metrics"] == context.params["metrics_port"]
    for probe, path in (
        ("startupProbe", "/healthz"),
        ("livenessProbe", "/healthz"),
        ("readinessProbe", "/readyz"),
    ):
        assert container[probe]["httpGet"] == {"path": path, "port": "health"}, probe
    assert container["readinessProbe"]["timeoutSeconds"] > STORE_BOUND_SECONDS
    pre_stop = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    grace = seconds(context.params["grace"])
    assert pod["terminationGracePeriodSeconds"] > pre_stop + grace, (
        "Kubernetes kills a pod still draining when its grace period ends"
    )
    env = {variable["name"] for variable in container["env"]}
    assert {"DOGS_MONGODB_URI", "DOGS_MONGODB_DATABASE"} <= env


def keda_trigger() -> dict[str, Any]:
    documents = list(yaml.safe_load_all((DEPLOY / "kubernetes" / "keda.yaml").read_text()))
    scaled = next(document for document in documents if document["kind"] == "ScaledObject")
    assert scaled["spec"]["scaleTargetRef"]["name"] == deployment()["metadata"]["name"]
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "mongodb"
    metadata: dict[str, Any] = trigger["metadata"]
    assert metadata["collection"] == q.DEFAULT_RECORDS_COLLECTION
    assert int(metadata["queryValue"]) > 0
    return metadata


jobs = Jobs()


@jobs.event
def chore(params: dict[str, Any] | None, ctx: JobContext) -> None:
    """Never run here: the test only schedules."""


@pytest.mark.mongo
def test_the_keda_query_counts_the_due_backlog(mongodb_uri: str, mongo_database_name: str) -> None:
    # KEDA parses the query as canonical extended JSON (Go's bson.UnmarshalExtJSON, canonical)
    # and runs countDocuments with it; json_util reads the same text.
    query = json_util.loads(keda_trigger()["query"])
    container = DogsContainer(uri=mongodb_uri, database=mongo_database_name, driver="sync")
    client = container.blocking_client(jobs)
    ids = [client.schedule(chore).id for _ in range(8)]  # type: ignore[union-attr]
    for _ in range(2):
        client.schedule(chore, run_in="1h")  # later: not due
    now = datetime.now(UTC)
    mongo: MongoClient[dict[str, Any]] = MongoClient(mongodb_uri)
    records = mongo[mongo_database_name][q.DEFAULT_RECORDS_COLLECTION]
    minute = timedelta(minutes=1)
    lock = {"lockId": "abcdefghijklmnopq"}
    states: dict[str, dict[str, Any]] = {
        "running": {**lock, "lockedUntil": now + minute},
        "stale": {**lock, "lockedUntil": now - minute},
        "released": {**lock, "lockedUntil": now - minute, "lockReleasedAt": now - minute},
        "failed": {"status": "maxTriesReached"},
    }
    for job_id, change in zip(ids, states.values(), strict=False):
        records.update_one({"_id": job_id}, {"$set": change})
    statuses = client.status()
    backlog = sum(status.due + status.stale for status in statuses)
    assert backlog == 6, statuses  # 4 untouched, the released one and the stale one
    assert records.count_documents(query) == backlog
    container.close()
    mongo.close()
