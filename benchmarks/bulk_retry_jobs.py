"""The job registry the bulk-retry benchmark's ``dogs worker`` process serves: ``probe``, a
no-op whose params carry when it was due (``due``, epoch seconds), so that each history row
says how long its claim waited (its ``startedAt`` minus ``due``). The worker has no
definition of the jobs the bulk action retries: they stay due, and what is measured is the
bulk action's effect on the claims of other work."""

from __future__ import annotations

from dogs_core.jobs import Jobs
from dogs_core.runtime import JobContext

__all__ = ["jobs"]

jobs = Jobs()


@jobs.event
async def probe(params: dict[str, float], ctx: JobContext) -> None:
    """Nothing: its history row is the measurement."""
