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
from starlette.responses import HTMLResponse, RedirectResponse, Response

from dogs_core.domain.records import NameStatus
from dogs_core.domain.stats import JobStats
from dogs_core.runtime.client._async.client import DogsClient
from dogs_core.uris import redact_uri
from dogs_dashboard.auth import ANONYMOUS, AuthCallable, DashboardUser, resolve
from dogs_dashboard.charts import throughput_svg
from dogs_dashboard.csrf import COOKIE_NAME, FIELD_NAME, CsrfGuard
from dogs_dashboard.data import counts_snapshot, stats_snapshot
from dogs_dashboard.flash import COOKIE_NAME as FLASH_COOKIE
from dogs_dashboard.flash import read_flash, set_flash
from dogs_dashboard.reading import TEMPLATE_FILTERS, TEMPLATE_GLOBALS
from dogs_dashboard.signing import Signer
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
    auth: AuthCallable | None = None
    """Who the request is from (``None``: no authentication, everyone is ``anonymous``)."""
    flashes: Signer | None = None

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
        auth: AuthCallable | None = None,
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
            auth=auth,
            flashes=Signer(secret, "dogs-dashboard-flash"),
        )

    # -- who is asking ------------------------------------------------------------------------

    async def authenticate(self, request: Request) -> Response | None:
        """Set ``request.state.user`` (and ``signed_in`` once admitted); a response to send
        instead when the request is not authenticated (or the auth callable answered with
        one)."""
        if self.auth is None:
            request.state.user = ANONYMOUS
            request.state.signed_in = True  # no authentication: everyone is let in
            return None
        try:
            result = await resolve(self.auth, request)
        except TypeError as error:
            request.state.user = ANONYMOUS
            return self.error(request, 500, str(error))
        if isinstance(result, DashboardUser):
            request.state.user = result
            request.state.signed_in = True
            return None
        request.state.user = ANONYMOUS
        if result is not None:
            return result
        return self.unauthorized(request)

    def unauthorized(self, request: Request) -> Response:
        """401: the browser is asked for basic credentials where the auth takes them, sent to
        the token login where it has one, else told to sign in through its application."""
        token_login = bool(getattr(self.auth, "token_login", False))
        if token_login and request.method == "GET" and not getattr(self.auth, "basic", False):
            target = self.link(request, "/login", next=_here(request))
            return RedirectResponse(target, status_code=303)
        response = self.render(
            request, "login.html", "login.html", 401, token_login=token_login, failed=False,
            next=_here(request),
        )  # fmt: skip
        if getattr(self.auth, "basic", False):
            response.headers["WWW-Authenticate"] = 'Basic realm="Dogs dashboard", charset="UTF-8"'
        return response

    def user(self, request: Request) -> DashboardUser:
        user = getattr(request.state, "user", None)
        return user if isinstance(user, DashboardUser) else ANONYMOUS

    def signed_in(self, request: Request) -> bool:
        """Whether this request was let in: only then does a page show the data source (the
        sign-in page and the 401 and error pages of someone not let in name nothing of it)."""
        return getattr(request.state, "signed_in", False) is True

    def can_act(self, request: Request) -> bool:
        """Whether this request's user may act (never in read-only mode)."""
        return not self.read_only and self.user(request).can_act

    def redirect_with(self, back: str, message: str, level: str, request: Request) -> Response:
        """303 to ``back``, leaving ``message`` for that page (a signed cookie, not the URL)."""
        response = RedirectResponse(back, status_code=303)
        if self.flashes is not None:
            set_flash(response, self.flashes, message, level, (root_of(request) or "") + "/")
        return response

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
            now=self.client.clock.now(),
            user=self.user(request),
            signed_in=self.signed_in(request),
            can_act=self.can_act(request),
            auth_on=self.auth is not None,
            session_login=bool(getattr(self.auth, "token_login", False)),
            basic_login=bool(getattr(self.auth, "basic", False)),
        )
        is_fragment = request.query_params.get("fragment") == "1"
        flash = None if is_fragment or self.flashes is None else read_flash(request, self.flashes)
        values.setdefault("message", None if flash is None else flash[0])
        values.setdefault("level", "ok" if flash is None else flash[1])
        chosen = fragment if is_fragment else page
        html = self.env.get_template(chosen).render(values)
        response = HTMLResponse(html, status_code=status_code)
        response.headers["Cache-Control"] = "no-store"
        response.headers["X-Frame-Options"] = "SAMEORIGIN"
        response.headers["Referrer-Policy"] = "same-origin"
        if flash is not None:
            response.delete_cookie(FLASH_COOKIE, path=(root_of(request) or "") + "/")
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
