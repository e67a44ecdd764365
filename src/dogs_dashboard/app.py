"""``create_app``: the dashboard as a Starlette (ASGI) application.

Run it on its own (``dogs dashboard``) or mount it in any ASGI application under a path
behind that application's own authentication: every link is built from the request's
``root_path``. The app reads and steers jobs only through the :class:`DogsClient` it is
given, so it works on any store.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from datetime import timedelta

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from dogs_core.errors import InvalidOptionError
from dogs_core.runtime.client._async.client import DogsClient
from dogs_dashboard import (
    actions,
    console,
    console_actions,
    finding,
    pages,
    schedules,
    workflow_pages,
)
from dogs_dashboard.auth import AuthCallable
from dogs_dashboard.context import Dashboard

__all__ = ["create_app"]

_Handler = Callable[[Dashboard, Request], Awaitable[Response]]

#: The stats window of the overview and its chart.
STATS_WINDOW = timedelta(hours=1)


def create_app(
    client: DogsClient,
    *,
    read_only: bool = False,
    secret: str | None = None,
    title: str = "Dogs",
    source: str | None = None,
    refresh_seconds: float = 5.0,
    auth: AuthCallable | None = None,
) -> Starlette:
    """The dashboard of ``client``'s store.

    ``read_only`` hides every action and refuses every POST. ``secret`` keys the CSRF tokens
    (give the same one to every process behind one address; random per process when
    ``None``). ``source`` is a label shown in the header, such as the redacted URI (a password
    in it is masked anyway). ``refresh_seconds`` is how often an open page fetches its data
    again (0 turns live refresh off); the stats are cached for as long, at least 2 s.
    ``auth`` says who each request is from and whether they may act (``None``: everyone,
    anonymously): see :mod:`dogs_dashboard.auth`.
    """
    _check(client, read_only, secret, title, source, refresh_seconds)
    if auth is not None and not callable(auth):
        raise InvalidOptionError("auth", auth, "must be a callable of the request or None")
    dash = Dashboard.build(
        client,
        read_only=read_only,
        secret=secret,
        title=title,
        source=source,
        refresh_seconds=float(refresh_seconds),
        stats_window=STATS_WINDOW,
        stats_cache_seconds=max(2.0, float(refresh_seconds)),
        auth=auth,
    )

    def bound(handler: _Handler) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            refused = await dash.authenticate(request)
            return refused if refused is not None else await handler(dash, request)

        return endpoint

    def public(handler: _Handler) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return await handler(dash, request)

        return endpoint

    routes = [
        Route("/", bound(pages.overview), name="overview"),
        Route("/jobs", bound(pages.job_list), name="jobs"),
        Route("/jobs/{job_id}", bound(pages.job_page), name="job"),
        Route("/workflows", bound(workflow_pages.workflow_list), name="workflows"),
        Route("/workflows/{workflow_id}", bound(workflow_pages.workflow_page), name="workflow"),
        Route("/schedules", bound(schedules.schedule_list), name="schedules"),
        # Finding (issue 29): executions across jobs, errors grouped, the archive.
        Route("/executions", bound(finding.executions), name="executions"),
        Route("/errors", bound(finding.errors), name="errors"),
        Route("/archive", bound(finding.archive), name="archive"),
        Route("/actions/{action}", bound(actions.perform), methods=["POST"], name="action"),
        # the operator's console: workers, bulk actions, the audit trail, signing in
        Route("/workers", bound(console.workers_page), name="workers"),
        Route("/workers/{instance_id}", bound(console.worker_page), name="worker"),
        Route("/audit", bound(console.audit_page), name="audit"),
        Route("/bulk", bound(console.bulk_page), name="bulk"),
        Route("/bulk/{audit_id}", bound(console.bulk_progress_page), name="bulk_progress"),
        Route("/ops/{action}", bound(console_actions.perform), methods=["POST"], name="op"),
        Route("/login", public(console.login), methods=["GET", "POST"], name="login"),
        Route("/logout", public(console.logout), methods=["POST"], name="logout"),
        Route("/favicon.ico", public(console.favicon), name="favicon"),
        Mount("/static", StaticFiles(packages=[("dogs_dashboard", "static")]), name="static"),
    ]
    app = Starlette(routes=routes)
    app.state.dashboard = dash
    return app


def _check(
    client: object,
    read_only: object,
    secret: object,
    title: object,
    source: object,
    refresh_seconds: object,
) -> None:
    if not isinstance(client, DogsClient):
        raise InvalidOptionError("client", client, "must be a dogs_core DogsClient (async)")
    if not isinstance(read_only, bool):
        raise InvalidOptionError("read_only", read_only, "must be True or False")
    if secret is not None and (not isinstance(secret, str) or len(secret) < 16):
        raise InvalidOptionError("secret", "***", "must be a string of at least 16 characters")
    if not isinstance(title, str) or not title.strip():
        raise InvalidOptionError("title", title, "must be a non-empty string")
    if source is not None and not isinstance(source, str):
        raise InvalidOptionError("source", source, "must be a string or None")
    if (
        isinstance(refresh_seconds, bool)
        or not isinstance(refresh_seconds, int | float)
        or not math.isfinite(refresh_seconds)
        or refresh_seconds < 0
    ):
        raise InvalidOptionError(
            "refresh_seconds", refresh_seconds, "must be a finite number >= 0 (0: no refresh)"
        )
