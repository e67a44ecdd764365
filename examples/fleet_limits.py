"""Fleet-wide limits: a global concurrency limit (also per key), a rate limit and a pause.

    python examples/fleet_limits.py                    # the in-memory store
    python examples/fleet_limits.py --uri mongodb://localhost:27017/?replicaSet=rs0

Two ``Workers`` instances share one store, as two processes would share a database, each with
room for 16 executions at once. ``render_pdf`` may run 3 at once across both
(``global_concurrency=3``); ``sync_account`` once per account at a time (``concurrency_key``);
``call_partner`` starts at most 4 times per fixed window of 1 s (``rate_limit``). A job that a
limit refuses is given back with its try not counted and runs later. Then ``send_newsletter`` is
paused: its jobs wait, due, until it is resumed. With ``--uri`` it uses a fresh database on your
server and drops it at the end. See docs/fleet-controls.md.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta

import anyio

from dogs_core import (
    DogsClient,
    EventJobDefinition,
    JobContext,
    Jobs,
    Scheduled,
    ScheduleItem,
)
from dogs_core.domain.controls import rate_window
from dogs_mongo import Example, run_example
from dogs_testing import InMemoryJobStore

jobs = Jobs()
RATE_PERIOD = timedelta(seconds=1)  # long beside a loaded machine's pickup lag


class Running:
    """How many executions of one kind run at once in this process (both instances)."""

    def __init__(self) -> None:
        self.now: Counter[str] = Counter()
        self.most: Counter[str] = Counter()

    @contextlib.contextmanager
    def one(self, key: str) -> Iterator[None]:
        self.now[key] += 1
        self.most[key] = max(self.most[key], self.now[key])
        try:
            yield
        finally:
            self.now[key] -= 1


running = Running()
partner_calls: list[datetime] = []
newsletters: list[datetime] = []


@jobs.event(global_concurrency=3)
async def render_pdf(params: dict[str, int], ctx: JobContext) -> None:
    with running.one("render_pdf"):
        await anyio.sleep(0.05)


@jobs.event(global_concurrency=1, concurrency_key=lambda p: p["account"])
async def sync_account(params: dict[str, str], ctx: JobContext) -> None:
    with running.one(params["account"]), running.one("sync_account"):
        await anyio.sleep(0.05)


@jobs.event(rate_limit=(4, RATE_PERIOD))
async def call_partner(params: dict[str, int], ctx: JobContext) -> None:
    partner_calls.append(datetime.now(UTC))


@jobs.event
async def send_newsletter(params: dict[str, int], ctx: JobContext) -> None:
    newsletters.append(datetime.now(UTC))


async def schedule(
    client: DogsClient, job: EventJobDefinition, items: Sequence[Mapping[str, object]]
) -> list[str]:
    outcome = await client.schedule_many(job, [ScheduleItem(params=p) for p in items])
    assert outcome.scheduled_count == len(items), outcome
    return [item.id for item in outcome.outcomes if isinstance(item, Scheduled)]


async def wait_all(client: DogsClient, ids: list[str]) -> None:
    for job_id in ids:
        await client.wait_for(job_id, timeout="60s")


async def limits(client: DogsClient) -> None:
    pdfs = await schedule(client, render_pdf, [{"page": i} for i in range(12)])
    accounts = [{"account": a} for a in ("acme", "globex", "initech") for _ in range(3)]
    syncs = await schedule(client, sync_account, accounts)
    await wait_all(client, pdfs + syncs)
    # Scheduled on idle workers just after a window starts: the jobs admitted in a window then
    # start well before it ends, so each start time shows the window its rate token was taken in.
    _, window_end = rate_window(datetime.now(UTC), RATE_PERIOD)
    await anyio.sleep((window_end - datetime.now(UTC)).total_seconds() + 0.02)
    calls = await schedule(client, call_partner, [{"call": i} for i in range(10)])
    await wait_all(client, calls)
    print(f"render_pdf: 12 jobs, at most {running.most['render_pdf']} at once (limit 3)")
    per_account = max(running.most[a] for a in ("acme", "globex", "initech"))
    print(
        f"sync_account: 9 jobs, at most {per_account} at once per account (limit 1), "
        f"{running.most['sync_account']} accounts at once"
    )
    windows = Counter(rate_window(moment, RATE_PERIOD)[0] for moment in partner_calls)
    print(
        f"call_partner: {len(partner_calls)} starts in {len(windows)} windows of 1 s, "
        f"at most {max(windows.values())} in one (limit 4)"
    )
    rows = [row for job_id in pdfs for row in await client.get_executions(job_id=job_id)]
    print(f"render_pdf history: {len(rows)} rows, all on try 1: {all(r.tries == 1 for r in rows)}")


async def pause(client: DogsClient, poll_interval: float) -> None:
    await client.pause(send_newsletter)
    print(f"paused: {sorted(await client.paused())}")
    await anyio.sleep(2 * poll_interval)  # every instance has read the pause by now
    ids = await schedule(client, send_newsletter, [{"issue": i} for i in range(3)])
    await anyio.sleep(5 * poll_interval)
    print(f"send_newsletter while paused: {len(newsletters)} of 3 ran")
    await client.resume(send_newsletter)
    await wait_all(client, ids)
    print(f"send_newsletter after resume: {len(newsletters)} of 3 ran")


async def run(example: Example) -> None:
    client = example.client(jobs)
    poll_interval = 0.1
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(2):  # two instances, as two processes would be
            workers = example.workers(jobs, workers_count=16, poll_interval=poll_interval)
            await stack.enter_async_context(workers)
        await limits(client)
        await pause(client, poll_interval)


def main(argv: Sequence[str] | None = None) -> None:
    running.now.clear()
    running.most.clear()
    partner_calls.clear()
    newsletters.clear()
    run_example(
        run,
        argv,
        name="fleet_limits",
        memory=InMemoryJobStore,
        description="Dogs: global limits, rate limits and pauses",
    )


if __name__ == "__main__":
    main()
