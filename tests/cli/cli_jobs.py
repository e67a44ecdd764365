"""A small Jobs registry for the ``dogs`` command tests (test_cli.py, test_cli_jobs.py)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import anyio

from dogs_core import JobContext, Jobs, RetryPolicy

__all__ = ["Greeting", "flaky_fixed", "jobs"]

log = logging.getLogger("tests.cli.cli_jobs")

jobs = Jobs()


@dataclass
class Greeting:
    name: str


@jobs.event(lock_time="30s")
async def nap(params: dict[str, Any] | None, ctx: JobContext) -> None:
    """Sleeps ``params["seconds"]``; logs when it starts and ends (the tests wait for these)."""
    params = params or {}
    tag = params.get("tag", "nap")
    log.info("job %s started", tag)
    await anyio.sleep(float(params.get("seconds", 0)))
    log.info("job %s finished", tag)


@jobs.event
async def greet(params: Greeting, ctx: JobContext) -> str:
    return f"hello {params.name}"


#: Until a test sets it, ``flaky`` fails (the bug a ``dogs jobs retry`` runs into once fixed).
flaky_fixed = {"fixed": False}


@jobs.event(max_tries=2, retry=RetryPolicy(base=timedelta(milliseconds=10), jitter=0))
async def flaky(params: dict[str, Any] | None, ctx: JobContext) -> str:
    """Fails until ``flaky_fixed["fixed"]`` is set, then succeeds."""
    if not flaky_fixed["fixed"]:
        raise RuntimeError(f"flaky is broken (try {ctx.tries})")
    return "fixed"


@jobs.recurrent(run_every="1h")
async def hourly(ctx: JobContext) -> None:
    """A recurrent job: it cannot be scheduled by hand."""


empty = Jobs()
not_a_registry = 42
