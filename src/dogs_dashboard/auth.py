"""Who is looking, and whether they may act: the dashboard's authentication.

``create_app(client, auth=...)`` takes a callable of the request (sync or async) that returns
a :class:`DashboardUser` (``can_act=False``: a read-only role, no action is shown or accepted),
``None`` (not authenticated: 401), or a Starlette ``Response`` to send instead (a redirect to
the application's own login). Every page and action goes through it; the static files, the
favicon and the login page do not. The user's name is the actor of the audit trail::

    async def auth(request):
        user = await my_app.user_of(request)           # the application's own session
        if user is None:
            return RedirectResponse("/login?next=/dogs/")
        return DashboardUser(user.email, can_act=user.is_staff)

    app.mount("/dogs", create_app(client, auth=auth))

:class:`CredentialsAuth` is what ``dogs dashboard`` builds from environment variables: tokens
(``Authorization: Bearer``, or pasted once on ``/login`` for a signed session cookie) and HTTP
basic users, each an operator or a ``viewer`` (read-only). Its failed sign-ins are throttled
per client address and logged without what was tried (:mod:`dogs_dashboard.throttle`).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import inspect
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final, TypeAlias

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from dogs_core.errors import InvalidOptionError
from dogs_dashboard.signing import Signer
from dogs_dashboard.throttle import SignInThrottle

__all__ = [
    "ANONYMOUS",
    "SESSION_COOKIE",
    "AuthCallable",
    "AuthResult",
    "Credential",
    "CredentialsAuth",
    "DashboardUser",
    "SignInThrottle",
    "client_of",
    "parse_credentials",
    "resolve",
    "too_many",
]

logger = logging.getLogger("dogs.dashboard.auth")

#: The cookie of a token login (a signed name, role and expiry).
SESSION_COOKIE = "dogs_session"
#: How long a token login lasts.
SESSION_SECONDS: Final = 12 * 3600
_VIEWER = "viewer"
_OPERATOR = "operator"


@dataclass(frozen=True, slots=True)
class DashboardUser:
    """An authenticated user: ``name`` (the audit trail's actor) and whether they may act."""

    name: str
    can_act: bool = True


#: The user of a dashboard without authentication.
ANONYMOUS: Final = DashboardUser("anonymous")

AuthResult: TypeAlias = DashboardUser | Response | None
AuthCallable: TypeAlias = Callable[[Request], AuthResult | Awaitable[AuthResult]]


def client_of(request: Request) -> str:
    """The client a failed sign-in is counted against: its address."""
    return request.client.host if request.client is not None else "unknown"


def too_many(wait: float) -> Response:
    """429 to a client waiting out its failed sign-ins, with ``Retry-After`` (whole seconds)."""
    seconds = max(1, math.ceil(wait))
    return PlainTextResponse(
        f"too many failed sign-ins from this address: try again in {seconds} s",
        status_code=429,
        headers={"Retry-After": str(seconds), "Cache-Control": "no-store"},
    )


async def resolve(auth: AuthCallable, request: Request) -> AuthResult:
    """Call ``auth`` (sync or async) and check what it returned."""
    result = auth(request)
    if inspect.isawaitable(result):
        result = await result
    if result is None or isinstance(result, DashboardUser | Response):
        return result
    raise TypeError(
        f"the dashboard's auth callable returned {result!r}: expected a DashboardUser, "
        "None or a Response"
    )


@dataclass(frozen=True, slots=True)
class Credential:
    """One secret: a token or a basic-auth password, of ``name``, operator or viewer."""

    name: str
    secret: str
    can_act: bool = True


def parse_credentials(text: str, *, field: str, tokens: bool) -> list[Credential]:
    """Entries separated by commas or newlines: ``NAME:SECRET`` or ``NAME:SECRET:viewer``
    (read-only; ``:operator`` is the default); a token may be a bare ``SECRET`` (named
    ``token``). A secret may hold colons but no comma, newline or space."""
    found: list[Credential] = []
    for raw in text.replace("\n", ",").split(","):
        entry = raw.strip()
        if not entry:
            continue
        role = _OPERATOR
        for suffix in (_VIEWER, _OPERATOR):
            if entry.endswith(":" + suffix) and entry.count(":") >= 2:
                entry, role = entry[: -len(suffix) - 1], suffix
        name, separator, secret = entry.partition(":")
        if not separator:
            if not tokens:
                raise InvalidOptionError(field, "***", "each entry is USER:PASSWORD[:viewer]")
            name, secret = "token", entry
        if not name or not secret or any(character.isspace() for character in secret):
            raise InvalidOptionError(field, "***", f"entry for {name or '?'!r} is malformed")
        if len(secret) < 8:
            raise InvalidOptionError(field, "***", f"the secret of {name!r} is shorter than 8")
        found.append(Credential(name, secret, can_act=role == _OPERATOR))
    if not found:
        raise InvalidOptionError(field, "***", "holds no credential")
    return found


class CredentialsAuth:
    """Tokens and/or basic-auth users (see :func:`parse_credentials`); what ``dogs dashboard``
    runs with ``--token-env`` and ``--basic-auth-env``.

    A request is authenticated by ``Authorization: Bearer TOKEN``, ``Authorization: Basic``,
    or the signed session cookie a token login on ``/login`` set. Without any, a browser is
    sent to ``/login`` (tokens only) or asked for basic credentials (``WWW-Authenticate``).
    ``throttle`` counts the failed sign-ins per client (default: :class:`SignInThrottle`'s
    defaults)."""

    def __init__(
        self,
        *,
        tokens: Iterable[Credential] = (),
        users: Iterable[Credential] = (),
        secret: str | None = None,
        clock: Callable[[], float] = time.time,
        throttle: SignInThrottle | None = None,
    ) -> None:
        self.tokens = tuple(tokens)
        self.users: Mapping[str, Credential] = {user.name: user for user in users}
        if not self.tokens and not self.users:
            raise InvalidOptionError("auth", None, "give tokens, basic users, or both")
        if throttle is not None and not isinstance(throttle, SignInThrottle):
            raise InvalidOptionError("throttle", throttle, "must be a SignInThrottle or None")
        self._sessions = Signer(secret, "dogs-dashboard-session")
        self._clock = clock
        #: The failed sign-ins per client (:mod:`dogs_dashboard.throttle`).
        self.throttle = throttle if throttle is not None else SignInThrottle()

    @property
    def basic(self) -> bool:
        return bool(self.users)

    @property
    def token_login(self) -> bool:
        return bool(self.tokens)

    def __call__(self, request: Request) -> DashboardUser | Response | None:
        header = request.headers.get("authorization", "")
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "bearer" and value:
            return self.sign_in(request, "bearer token", lambda: self.check_token(value.strip()))
        if scheme.lower() == "basic" and value:
            return self.sign_in(request, "basic", lambda: self._basic(value.strip()))
        return self._session(request.cookies.get(SESSION_COOKIE))

    def sign_in(
        self, request: Request, kind: str, check: Callable[[], DashboardUser | None]
    ) -> DashboardUser | Response | None:
        """``check()`` the credentials of ``request`` unless its client is waiting out its
        failed sign-ins (then a 429 with ``Retry-After``, the credentials not looked at); a
        failure is counted and logged (what was tried is never logged)."""
        client = client_of(request)
        wait = self.throttle.wait(client)
        if wait > 0:
            return too_many(wait)
        user = check()
        if user is not None:
            self.throttle.succeeded(client)
            return user
        wait = self.throttle.failed(client)
        then = f"; it waits {wait:g} s before its next try" if wait > 0 else ""
        logger.warning("dashboard: failed sign-in (%s) from %s%s", kind, client, then)
        return None

    def check_token(self, token: str) -> DashboardUser | None:
        """The user of ``token`` (every token compared, in constant time)."""
        match: Credential | None = None
        for credential in self.tokens:
            if hmac.compare_digest(credential.secret.encode(), token.encode()):
                match = credential
        return None if match is None else DashboardUser(match.name, match.can_act)

    def session_cookie(self, user: DashboardUser) -> str:
        """The signed session of a token login."""
        expires = int(self._clock()) + SESSION_SECONDS
        return self._sessions.dumps({"n": user.name, "a": user.can_act, "e": expires})

    def _session(self, cookie: str | None) -> DashboardUser | None:
        value = self._sessions.loads(cookie)
        if not isinstance(value, dict) or not isinstance(value.get("n"), str):
            return None
        if not isinstance(value.get("e"), int) or value["e"] < self._clock():
            return None
        return DashboardUser(value["n"], bool(value.get("a")))

    def _basic(self, encoded: str) -> DashboardUser | None:
        try:
            decoded = base64.b64decode(encoded, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        name, _, password = decoded.partition(":")
        user = self.users.get(name)
        expected = (user.secret if user is not None else "\0" * 16).encode()
        if not hmac.compare_digest(expected, password.encode()) or user is None:
            return None
        return DashboardUser(user.name, user.can_act)
