"""The Django project of examples/django_project, driven through ``manage.py`` as an operator
would: Django on MongoDB (django-mongodb-backend), a view that writes an order and schedules
its receipt job in one MongoDB transaction, and ``manage.py dogs_worker`` running the job.

    python examples/django_app.py --uri mongodb://localhost:27017/?replicaSet=rs0

Two ``manage.py`` processes on a fresh database (dropped at the end): ``dogs_worker``, and
beside it ``shop_demo``, which migrates (Dogs sets up its collections after ``migrate``) and
posts three orders with Django's test client; the third fails after scheduling, so neither the
order nor its job is written. Once the two receipts ran the worker gets SIGINT (it drains and
exits 0) and the orders are printed with their receipts. Without ``--uri`` it only says so:
Django on MongoDB needs a replica set. See docs/django.md.
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

from pymongo import MongoClient

PROJECT = Path(__file__).resolve().parent / "django_project"


def manage(*args: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def wait_for_receipts(mongo: MongoClient[dict[str, Any]], database: str, count: int) -> int:
    history = mongo[database]["orionjs.jobs_dogs_history"]
    deadline = time.monotonic() + 30
    done = 0
    while time.monotonic() < deadline:
        done = history.count_documents({"jobName": "send_receipt", "status": "success"})
        if done >= count:
            break
        time.sleep(0.1)
    return done


def run(uri: str) -> None:
    database = f"dogs_django_{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "MONGODB_URI": uri, "MONGODB_DATABASE": database}
    mongo: MongoClient[dict[str, Any]] = MongoClient(uri)
    command = [sys.executable, "manage.py", "dogs_worker", "--poll-interval", "0.2", "--log-jobs"]
    try:
        # The worker starts while the orders are placed: it is woken by the change feed.
        worker = subprocess.Popen(command, cwd=PROJECT, env=env, stderr=subprocess.PIPE, text=True)
        try:
            print(manage("shop_demo", env=env).rstrip())
            print(f"receipts run by manage.py dogs_worker: {wait_for_receipts(mongo, database, 2)}")
        finally:
            worker.send_signal(signal.SIGINT)
            _, log = worker.communicate(timeout=30)
        print(f"manage.py dogs_worker exited with {worker.returncode} after SIGINT")
        if worker.returncode != 0:
            print(log)
        for order in mongo[database]["shop_order"].find({}, sort=[("email", 1)]):
            print(f"{order['email']}: {order['receipt']}")
    finally:
        mongo.drop_database(database)
        mongo.close()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Dogs in a Django project on MongoDB")
    parser.add_argument("--uri", help="MongoDB URI of a replica set")
    args = parser.parse_args(argv)
    if not args.uri:
        print("Django on MongoDB needs a replica set: pass --uri mongodb://...?replicaSet=...")
        return
    run(args.uri)


if __name__ == "__main__":
    main()
