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
from dogs_core.runtime._async.client import DogsClient
from dogs_dashboard import actions, finding, pages
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
) -> Starlette:
    """The dashboard of ``client``'s store.

    ``read_only`` hides every action and refuses every POST. ``secret`` keys the CSRF tokens
    (give the same one to every process behind one address; random per process when
    ``None``). ``source`` is a label shown in the header, such as the redacted URI (a password
    in it is masked anyway). ``refresh_seconds`` is how often an open page fetches its data
    again (0 turns live refresh off); the stats are cached for as long, at least 2 s.
    """
    _check(client, read_only, secret, title, source, refresh_seconds)
    dash = Dashboard.build(
        client,
        read_only=read_only,
        secret=secret,
        title=title,
        source=source,
        refresh_seconds=float(refresh_seconds),
        stats_window=STATS_WINDOW,
        stats_cache_seconds=max(2.0, float(refresh_seconds)),
    )

    def bound(handler: _Handler) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return await handler(dash, request)

        return endpoint

    routes = [
        Route("/", bound(pages.overview), name="overview"),
        Route("/jobs", bound(pages.job_list), name="jobs"),
        Route("/jobs/{job_id}", bound(pages.job_page), name="job"),
        # Finding (issue 29): executions across jobs, errors grouped, the archive.
        Route("/executions", bound(finding.executions), name="executions"),
        Route("/errors", bound(finding.errors), name="errors"),
        Route("/archive", bound(finding.archive), name="archive"),
        Route("/actions/{action}", bound(actions.perform), methods=["POST"], name="action"),
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
