"""A Flask application with the Dogs extension: the configuration in ``app.config``, a route
that schedules a job through the application's blocking client, and the workers run by
Flask's command line.

    python examples/flask_app.py                   # in memory: requests, then workers in-process
    python examples/flask_app.py --uri mongodb://localhost:27017/?replicaSet=rs0
    SHOP_DOGS_URI=mongodb://... flask --app examples.flask_app dogs worker --workers-count 4

``create_app`` sets ``DOGS_JOBS`` and reads the rest of the configuration from the environment
(``SHOP_DOGS_URI``, ``SHOP_DOGS_DATABASE``: Flask's ``from_prefixed_env("SHOP")``), as a
deployment would. ``POST /orders/<id>`` schedules the receipt of an order once (a unique key),
``GET /jobs/<id>`` answers its result. With ``--uri`` the jobs are run by ``flask dogs
worker`` in a second process, stopped with SIGINT (it drains and exits 0), on a fresh database
dropped at the end. See docs/flask.md.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from flask import Flask, abort

from dogs_core import Duplicate, InvalidIdError, JobContext, Jobs
from dogs_integrations.flask import Dogs

jobs = Jobs()
dogs = Dogs()


@jobs.event(max_tries=3)
def send_receipt(params: dict[str, Any], ctx: JobContext) -> str:
    """A sync handler: it runs in a worker thread."""
    return f"receipt of order {params['order_id']} sent to {params['email']}"


def create_app(**overrides: Any) -> Flask:
    app = Flask(__name__)
    app.config["DOGS_JOBS"] = jobs
    app.config["DOGS_DATABASE"] = "shop"
    app.config.from_prefixed_env("SHOP")  # SHOP_DOGS_URI=... -> app.config["DOGS_URI"]
    dogs.init_app(app, **overrides)

    @app.post("/orders/<int:order_id>")
    def place_order(order_id: int) -> dict[str, Any]:
        outcome = dogs.client.schedule(
            send_receipt,
            {"order_id": order_id, "email": f"buyer{order_id}@example.com"},
            unique_key=f"receipt:{order_id}",
        )
        if isinstance(outcome, Duplicate):
            return {"job_id": outcome.existing_id, "new": False}
        return {"job_id": outcome.id, "new": True}

    @app.get("/jobs/<job_id>")
    def job(job_id: str) -> dict[str, Any]:
        # The record first: a job that ends writes its history row before its record goes,
        # so "no record, then no row" means no such job, never "it ended in between".
        try:
            record = dogs.client.get_job(job_id)
            execution = dogs.client.get_result(job_id)
        except InvalidIdError:  # not even an id: no such job either
            abort(404)
        if execution is None:
            if record is None:
                abort(404)
            return {"status": "waiting"}
        return {"status": execution.status.value, "result": execution.result}

    return app


def place_orders(app: Flask) -> list[str]:
    http = app.test_client()
    ids = []
    for order_id in (1, 2, 1):
        answer = http.post(f"/orders/{order_id}").get_json()
        print(f"POST /orders/{order_id}: new={answer['new']}")
        ids.append(answer["job_id"])
    print(f"GET /jobs/<order 1's job> before a worker ran: {http.get(f'/jobs/{ids[0]}').json}")
    return ids


def wait_for_results(app: Flask, ids: Sequence[str]) -> None:
    http = app.test_client()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        answers = [http.get(f"/jobs/{job_id}").get_json() for job_id in ids[:2]]
        if all(answer["status"] == "success" for answer in answers):
            break
        time.sleep(0.1)
    for answer in answers:
        print(f"GET /jobs/...: {answer}")


def run_in_memory() -> None:
    from dogs_core.runtime.plumbing.wrappers import ThreadedJobStore
    from dogs_testing import SyncInMemoryJobStore

    app = create_app(store=ThreadedJobStore(SyncInMemoryJobStore()))
    ids = place_orders(app)
    workers = dogs.container(app).blocking_workers(jobs, poll_interval=0.1)
    with workers:
        wait_for_results(app, ids)
    print("workers stopped")


def run_on_mongodb(uri: str) -> None:
    database = f"dogs_flask_{uuid.uuid4().hex[:8]}"
    environment = {"SHOP_DOGS_URI": uri, "SHOP_DOGS_DATABASE": database}
    saved = {name: os.environ.get(name) for name in environment}
    os.environ.update(environment)  # what a deployment sets, for this process and the worker
    try:
        app = create_app()
    finally:
        for name, value in saved.items():
            os.environ.pop(name) if value is None else os.environ.update({name: value})
    root = Path(__file__).resolve().parent.parent
    command = [sys.executable, "-m", "flask", "--app", "examples.flask_app", "dogs", "worker"]
    command += ["--poll-interval", "0.2", "--workers-count", "2"]
    try:
        ids = place_orders(app)
        env = {**os.environ, **environment}
        worker = subprocess.Popen(command, cwd=root, env=env, stderr=subprocess.PIPE, text=True)
        try:
            wait_for_results(app, ids)
        finally:
            worker.send_signal(signal.SIGINT)
            _, log = worker.communicate(timeout=30)
        print(f"flask dogs worker exited with {worker.returncode} after SIGINT")
        if worker.returncode != 0:
            print(log)
    finally:
        dogs.container(app).sync_mongo_client().drop_database(database)
        dogs.close(app)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Dogs in a Flask application")
    parser.add_argument("--uri", help="MongoDB URI of a replica set (default: in memory)")
    args = parser.parse_args(argv)
    if args.uri:
        run_on_mongodb(args.uri)
    else:
        run_in_memory()


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    main()
