"""The Dogs dashboard under Django's admin, for active staff only, in an ASGI deployment.

Django does not mount ASGI applications, so the dashboard is routed before Django, in
``asgi.py``::

    from django.core.asgi import get_asgi_application
    django_application = get_asgi_application()

    from dogs_integrations.django.dashboard import with_dashboard
    application = with_dashboard(django_application)          # at /admin/dogs/

A request under the path is answered by the dashboard when the Django session's user is active
staff (the admin's own rule), redirected to the admin's login page when nobody is logged in,
and refused (403) otherwise; every other request goes to Django. The dashboard's actions are
recorded in the audit trail under the staff user's Django username (source ``dashboard``).
The dashboard is built at the first such request, over the async client of
:func:`~dogs_integrations.django.get_container`.
It needs the ``dashboard`` extra; under WSGI, run ``dogs dashboard`` behind your proxy instead.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from importlib import import_module
from typing import Any
from urllib.parse import quote

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import get_user
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from starlette.requests import Request

from dogs_core.errors import InvalidOptionError
from dogs_core.uris import redact_uri
from dogs_dashboard.auth import DashboardUser
from dogs_integrations.django.client import get_container

__all__ = ["StaffDashboard", "with_dashboard"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
#: Django's handler and Starlette's apps, whose annotations differ in details.
ASGIApp = Callable[..., Awaitable[None]]


#: The scope key carrying the staff user to the dashboard's auth hook (:func:`_staff_user`).
_USER_KEY = "dogs.django_user"


def _staff(session_key: str | None) -> DashboardUser | bool | None:
    """The dashboard user of active staff (named by the Django username), ``False`` for
    another user, ``None`` for nobody."""
    if not session_key:
        return None
    request = HttpRequest()
    request.session = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    user = get_user(request)
    if not user.is_authenticated:
        return None
    if not (user.is_active and getattr(user, "is_staff", False)):
        return False
    return DashboardUser(str(user.get_username()))


def _staff_user(request: Request) -> DashboardUser | None:
    """The dashboard's auth hook: the staff user :class:`StaffDashboard` checked for this
    request, so the audit trail names who acted (not ``anonymous``)."""
    user = request.scope.get(_USER_KEY)
    return user if isinstance(user, DashboardUser) else None


def _cookie(scope: Scope, name: str) -> str | None:
    from http.cookies import SimpleCookie

    headers = dict(scope.get("headers", []))
    cookie = SimpleCookie(headers.get(b"cookie", b"").decode("latin-1"))
    morsel = cookie.get(name)
    return None if morsel is None else morsel.value


async def _plain(send: Send, status: int, text: str, headers: list[tuple[bytes, bytes]]) -> None:
    body = text.encode()
    start = [(b"content-type", b"text/plain; charset=utf-8"), *headers]
    start.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": start})
    await send({"type": "http.response.body", "body": body})


class StaffDashboard:
    """The ASGI application of :func:`with_dashboard`."""

    def __init__(self, django_app: ASGIApp, path: str, options: dict[str, Any]) -> None:
        self.django_app = django_app
        self.path = path
        self.options = options
        self._dashboard: ASGIApp | None = None

    def _under(self, path: str) -> bool:
        return path == self.path or path.startswith(self.path + "/")

    async def _build(self) -> ASGIApp:
        if self._dashboard is None:
            from dogs_dashboard import create_app

            container = await sync_to_async(get_container)()
            uri = container.settings().uri
            source = redact_uri(uri) if uri else None
            app: ASGIApp = create_app(
                container.client(), source=source, auth=_staff_user, **self.options
            )
            self._dashboard = app
        return self._dashboard

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        """Django answers no lifespan: this one closes the dashboard's MongoDB client at
        shutdown."""
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._dashboard is not None:
                    await get_container().aclose()
                    self._dashboard = None
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http" or not self._under(scope.get("path", "")):
            await self.django_app(scope, receive, send)
            return
        session = _cookie(scope, settings.SESSION_COOKIE_NAME)
        staff = await sync_to_async(_staff)(session)
        if staff is None:
            try:
                login = reverse("admin:login")
            except NoReverseMatch:
                await _plain(send, 403, "staff only: log in first", [])
                return
            target = quote(scope.get("root_path", "") + scope["path"])
            await _plain(send, 302, "log in", [(b"location", f"{login}?next={target}".encode())])
            return
        if not isinstance(staff, DashboardUser):
            await _plain(send, 403, "staff only", [])
            return
        dashboard = await self._build()
        inner = dict(scope, root_path=scope.get("root_path", "") + self.path)
        inner[_USER_KEY] = staff
        await dashboard(inner, receive, send)


def with_dashboard(
    django_app: ASGIApp, *, path: str = "/admin/dogs", **dashboard_options: Any
) -> StaffDashboard:
    """``django_app`` with the dashboard at ``path`` for active staff (see the module
    documentation). ``dashboard_options`` go to :func:`dogs_dashboard.create_app`
    (``read_only``, ``secret``, ``title``, ``refresh_seconds``)."""
    if not callable(django_app):
        raise InvalidOptionError("django_app", django_app, "must be an ASGI application")
    if not isinstance(path, str) or not path.startswith("/") or path.endswith("/"):
        raise InvalidOptionError("path", path, "must start with / and not end with it")
    unknown = set(dashboard_options) - {"read_only", "secret", "title", "refresh_seconds"}
    if unknown:
        name = sorted(unknown)[0]
        reason = "not an option of the dashboard (read_only, secret, title, refresh_seconds)"
        raise InvalidOptionError(name, dashboard_options[name], reason)
    return StaffDashboard(django_app, path, dashboard_options)
