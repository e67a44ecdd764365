"""The Dogs dashboard mounted inside your own ASGI application, behind its authentication.

    python examples/dashboard_mount.py              # serve on http://127.0.0.1:8000/dogs/
    python examples/dashboard_mount.py --check      # answer a few requests in-process, exit
    python examples/dashboard_mount.py --uri mongodb://localhost:27017/app?replicaSet=rs0

A Starlette application (FastAPI mounts it the same way, ``app.mount("/dogs", ...)``) with a
page of its own at ``/`` and the dashboard at ``/dogs``, wrapped in a small HTTP basic auth
middleware: whoever mounts the dashboard decides who gets in (or gives it an ``auth``
callable: examples/dashboard_auth.py). The middleware leaves the user it let in in the ASGI
scope and the dashboard's ``auth`` hook reads it, so the audit trail names who acted (without
a hook, every action is recorded as ``anonymous``).
User ``admin``, password from ``$DASHBOARD_PASSWORD`` (``change-me`` by default). The
in-memory store by default, filled with a few demo jobs run by real workers; with ``--uri``
your MongoDB. See docs/dashboard.md.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import os
import re
import secrets
from collections.abc import Sequence

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from dogs_core import DogsClient, JobContext, Jobs, Scheduled
from dogs_dashboard import create_app
from dogs_dashboard.auth import DashboardUser
from dogs_mongo import Example, example_parser, run_example
from dogs_testing import InMemoryJobStore

jobs = Jobs()


@jobs.event
async def send_email(params: dict[str, str], ctx: JobContext) -> str:
    return f"sent to {params['to']}"


@jobs.event(max_tries=1)
async def import_file(params: dict[str, str], ctx: JobContext) -> str:
    raise ValueError(f"cannot parse {params['path']}")


#: Where :class:`BasicAuth` leaves the name of the user it let in.
USER_KEY = "myapp.user"


class BasicAuth:
    """ASGI middleware: HTTP basic auth in front of ``app`` (use your real auth instead); the
    user it lets in is ``scope[USER_KEY]``."""

    def __init__(self, app: ASGIApp, *, user: str, password: str) -> None:
        self.app = app
        self.user = user.encode()
        self.password = password.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self._allowed(dict(scope["headers"])):
            response = PlainTextResponse(
                "authentication required", 401, {"WWW-Authenticate": 'Basic realm="dogs"'}
            )
            await response(scope, receive, send)
            return
        await self.app({**scope, USER_KEY: self.user.decode()}, receive, send)

    def _allowed(self, headers: dict[bytes, bytes]) -> bool:
        scheme, _, encoded = headers.get(b"authorization", b"").partition(b" ")
        if scheme.lower() != b"basic":
            return False
        try:
            user, _, password = base64.b64decode(encoded, validate=True).partition(b":")
        except binascii.Error:
            return False
        return hmac.compare_digest(user, self.user) & hmac.compare_digest(password, self.password)


async def home(request: Request) -> PlainTextResponse:
    return PlainTextResponse("my application; the job dashboard is at /dogs/")


def signed_in(request: Request) -> DashboardUser | None:
    """The dashboard's auth hook: the user :class:`BasicAuth` let in (the audit trail's actor)."""
    name = request.scope.get(USER_KEY)
    return DashboardUser(name) if isinstance(name, str) else None


def build_app(client: DogsClient, password: str) -> Starlette:
    """Your application: its own routes, and the dashboard under /dogs behind basic auth."""
    dashboard = create_app(
        client, title="My app jobs", secret=secrets.token_hex(16), auth=signed_in
    )
    return Starlette(
        routes=[
            Route("/", home),
            Mount("/dogs", app=BasicAuth(dashboard, user="admin", password=password)),
        ]
    )


async def fill(example: Example, client: DogsClient) -> None:
    """A few jobs that ran (three emails, one import that failed for good) and one waiting."""
    ran = [await client.schedule(send_email, {"to": f"u{n}@example.com"}) for n in range(3)]
    ran.append(await client.schedule(import_file, {"path": "orders.csv"}))
    async with example.workers(jobs, workers_count=4, poll_interval="100ms") as workers:
        for outcome in ran:
            assert isinstance(outcome, Scheduled)
            await client.wait_for(outcome.id, timeout=30)
        await workers.stop()
    await client.schedule(send_email, {"to": "later@example.com"}, run_in="1h")


async def check(app: Starlette, client: DogsClient, password: str) -> None:
    """Answer a few requests in this process and event loop, as a browser would, and print
    them (httpx2, the test client of the dev extra, speaks ASGI directly)."""
    import httpx2

    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://app") as http:
        print(f"GET /: {(await http.get('/')).status_code}")
        print(f"GET /dogs/ without credentials: {(await http.get('/dogs/')).status_code}")
        page = await http.get("/dogs/", auth=("admin", password))
        links = re.findall(r'\shref="([^"]+)"', page.text)
        print(f"GET /dogs/ as admin: {page.status_code}")
        print(f"every link under /dogs/: {all(link.startswith('/dogs/') for link in links)}")
        for name in ("send_email", "import_file"):
            listed = f'data-name="{name}"' in page.text
            print(f"overview lists {name}: {listed}")
        failed = await http.get("/dogs/jobs?state=failed", auth=("admin", password))
        print(f"failed jobs listed: {failed.text.count('data-job-id=')}")
        token = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page.text)
        assert token is not None
        form = {"csrf_token": token.group(1), "name": "import_file", "confirmed": "yes"}
        paused = await http.post("/dogs/actions/pause", data=form, auth=("admin", password))
        (entry,) = await client.audit_log(limit=1)
        print(f"POST pause import_file: {paused.status_code}, audited as {entry.actor.name}")


async def run(example: Example) -> None:
    args = example.args
    client = example.client(jobs)
    if not example.on_mongodb:
        await fill(example, client)
    password = os.environ.get("DASHBOARD_PASSWORD", "change-me")
    app = build_app(client, password)
    if args.check:
        await check(app, client, password)
        return
    import uvicorn

    print(f"serving http://127.0.0.1:{args.port}/dogs/ (user admin); Ctrl-C stops")
    server = uvicorn.Server(uvicorn.Config(app, port=args.port, log_level="warning"))
    await server.serve()


def main(argv: Sequence[str] | None = None) -> None:
    parser = example_parser("Dogs: the dashboard mounted behind auth")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--check", action="store_true", help="answer a few requests, exit")
    # name=None: with --uri, the database named in the URI path, kept (the dashboard shows it).
    run_example(run, argv, name=None, memory=InMemoryJobStore, parser=parser)


if __name__ == "__main__":
    main()
