"""What every page shares: the dashboard's settings, the Jinja2 environment (autoescaped),
the links under the mount point, the CSRF cookie, and the rendering of a page or of its live
fragment.

Links are built from the request's ``root_path`` (set by the framework that mounts the app,
or by a proxy), never from the host, so the app works under any path.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse

from dogs_core.domain.records import NameStatus
from dogs_core.domain.stats import JobStats
from dogs_core.runtime._async.client import DogsClient
from dogs_core.uris import redact_uri
from dogs_dashboard.charts import throughput_svg
from dogs_dashboard.csrf import COOKIE_NAME, FIELD_NAME, CsrfGuard
from dogs_dashboard.data import counts_snapshot, stats_snapshot
from dogs_dashboard.reading import TEMPLATE_FILTERS, TEMPLATE_GLOBALS
from dogs_dashboard.snapshots import Snapshot

__all__ = ["Dashboard", "redact", "root_of"]


def redact(source: str | None) -> str | None:
    """``source`` without the password of a URI's user info: the app never shows one, even
    when a caller passes an unredacted URI."""
    return None if source is None else redact_uri(source)


def root_of(request: Request) -> str:
    """The path the app is mounted at (``""`` at the root)."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def _here(request: Request) -> str:
    """The path and query of this page, without the live fragment's and the message's
    parameters: what an action's form comes back to."""
    kept = [(k, v) for k, v in request.query_params.multi_items() if k not in _TRANSIENT]
    return request.url.path + (f"?{urlencode(kept)}" if kept else "")


_TRANSIENT = frozenset({"fragment", "msg", "level"})


def _when(moment: datetime | None) -> str:
    if moment is None:
        return "—"
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _pretty(value: object) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def _millis(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.0f} ms"


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


def _window(value: timedelta) -> str:
    minutes = int(value.total_seconds() // 60)
    return f"{minutes // 60} h" if minutes % 60 == 0 and minutes >= 60 else f"{minutes} min"


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("dogs_dashboard", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(when=_when, pretty=_pretty, millis=_millis, percent=_percent)
    env.filters.update(window=_window)
    env.filters.update(TEMPLATE_FILTERS)
    env.globals.update(chart=throughput_svg, field_name=FIELD_NAME)
    env.globals.update(TEMPLATE_GLOBALS)
    return env


@dataclass
class Dashboard:
    """The app's state: settings given to ``create_app`` and what they build."""

    client: DogsClient
    read_only: bool
    csrf: CsrfGuard
    title: str
    source: str | None
    refresh_seconds: float
    stats: Snapshot[list[JobStats]]
    env: Environment
    counts: Snapshot[list[NameStatus]]
    stats_window: timedelta

    @classmethod
    def build(
        cls,
        client: DogsClient,
        *,
        read_only: bool,
        secret: str | None,
        title: str,
        source: str | None,
        refresh_seconds: float,
        stats_window: timedelta,
        stats_cache_seconds: float,
    ) -> Dashboard:
        return cls(
            client=client,
            read_only=read_only,
            csrf=CsrfGuard(secret),
            title=title,
            source=redact(source),
            refresh_seconds=refresh_seconds,
            stats=stats_snapshot(client, stats_window, stats_cache_seconds),
            env=_environment(),
            counts=counts_snapshot(client),
            stats_window=stats_window,
        )

    def link(self, request: Request, path: str, **query: object) -> str:
        """``path`` under the mount point, with the query parameters that are not ``None``."""
        given = {key: str(value) for key, value in query.items() if value not in (None, "")}
        return root_of(request) + path + (f"?{urlencode(given)}" if given else "")

    def render(
        self, request: Request, page: str, fragment: str, status_code: int = 200, **values: Any
    ) -> HTMLResponse:
        """The page template ``page``, or only its live part ``fragment`` when the page's
        script asks for it (``?fragment=1``); a browser without the CSRF cookie gets one."""
        cookie = request.cookies.get(COOKIE_NAME)
        fresh = cookie is None
        cookie = cookie or self.csrf.new_cookie()
        values.update(
            request=request,
            dash=self,
            root=root_of(request),
            link=lambda path, **query: self.link(request, path, **query),
            csrf_token=self.csrf.token_for(cookie),
            here=_here(request),
            message=request.query_params.get("msg"),
            level=request.query_params.get("level", "ok"),
            now=self.client.clock.now(),
        )
        chosen = fragment if request.query_params.get("fragment") == "1" else page
        html = self.env.get_template(chosen).render(values)
        response = HTMLResponse(html, status_code=status_code)
        response.headers["Cache-Control"] = "no-store"
        response.headers["X-Frame-Options"] = "SAMEORIGIN"
        response.headers["Referrer-Policy"] = "same-origin"
        if fresh:
            response.set_cookie(
                COOKIE_NAME,
                cookie,
                httponly=True,
                samesite="strict",
                path=(root_of(request) or "") + "/",
                secure=request.url.scheme == "https",
            )
        return response

    def error(self, request: Request, status_code: int, message: str) -> HTMLResponse:
        """An error page (never a traceback): ``message`` says what was refused."""
        return self.render(
            request, "error.html", "error.html", status_code, code=status_code, error=message
        )
