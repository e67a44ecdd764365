"""The dashboard mounted with an auth callable: your application says who each request is from
and whether they may act; the audit trail names them.

    python examples/dashboard_auth.py              # serve on http://127.0.0.1:8000/dogs/
    python examples/dashboard_auth.py --check      # answer a few requests in-process, exit

A Starlette application with its own (pretend) sign-in: a cookie ``user`` holding ``alice``
(an operator) or ``bob`` (a viewer: a read-only role). ``create_app(client, auth=...)`` takes an
async callable of the request that returns a ``DashboardUser``, ``None`` (401) or a response of
its own (here, a redirect to the application's sign-in page). The in-memory store, with a few
demo jobs. See docs/dashboard.md#sign-in.
"""

from __future__ import annotations

import argparse
import re
import secrets
from collections.abc import Sequence

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route

from dogs_core import DogsClient, JobContext, Jobs, Scheduled
from dogs_dashboard import create_app
from dogs_dashboard.auth import DashboardUser
from dogs_testing import InMemoryJobStore

jobs = Jobs()

#: Your application's users: who may act on jobs (operators) and who may only look.
OPERATORS = {"alice"}
VIEWERS = {"bob"}


@jobs.event
async def send_report(params: dict[str, str], ctx: JobContext) -> str:
    return f"sent to {params['to']}"


async def auth(request: Request) -> DashboardUser | Response | None:
    """Who the request is from, as your application knows it (its session cookie here)."""
    user = request.cookies.get("user")
    if user in OPERATORS:
        return DashboardUser(user)
    if user in VIEWERS:
        return DashboardUser(user, can_act=False)
    if request.method == "GET":
        return RedirectResponse("/signin?next=" + request.url.path)
    return None  # a POST from nobody: 401


async def signin(request: Request) -> PlainTextResponse:
    return PlainTextResponse("your application's sign-in page")


def build_app(client: DogsClient) -> Starlette:
    dashboard = create_app(client, auth=auth, title="Reports", secret=secrets.token_hex(16))
    return Starlette(routes=[Route("/signin", signin), Mount("/dogs", app=dashboard)])


async def check(app: Starlette, client: DogsClient) -> None:
    """A few requests as browsers would send them, printed."""
    import httpx2

    outcome = await client.schedule(send_report, {"to": "ops@example.com"}, run_in="1h")
    assert isinstance(outcome, Scheduled)
    job = f"/dogs/jobs/{outcome.id}"
    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://app") as http:
        anonymous = await http.get(job)
        print(f"anonymous: {anonymous.status_code} to {anonymous.headers['location']}")
        http.cookies.set("user", "bob")
        page = await http.get(job)
        buttons = "data-action=" in page.text
        print(f"bob (a viewer) sees the job: {page.status_code}, buttons: {buttons}")
        refused = await http.post("/dogs/actions/cancel", data={"job_id": outcome.id})
        print(f"bob cancels: {refused.status_code}")
        http.cookies.set("user", "alice")
        page = await http.get(job)
        token = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page.text)
        assert token is not None
        form = {"csrf_token": token.group(1), "job_id": outcome.id, "confirmed": "yes"}
        done = await http.post("/dogs/actions/cancel", data=form)
        after = await http.get(done.headers["location"])
        print(f"alice cancels: {done.status_code}, then {after.status_code}")
    [entry] = await client.audit_log()
    print(f"audit: {entry.action} {entry.target} by {entry.actor}")


async def run(args: argparse.Namespace) -> None:
    client = DogsClient(InMemoryJobStore(), jobs)
    app = build_app(client)
    if args.check:
        await check(app, client)
        return
    import uvicorn

    print(f"serving http://127.0.0.1:{args.port}/dogs/ (set a cookie user=alice); Ctrl-C stops")
    await uvicorn.Server(uvicorn.Config(app, port=args.port, log_level="warning")).serve()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Dogs: the dashboard with an auth callable")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--check", action="store_true", help="answer a few requests, exit")
    anyio.run(run, parser.parse_args(argv), backend="asyncio")


if __name__ == "__main__":
    main()
