"""The line an action leaves for the next page ("Cancelled send_email 0190..."), carried in a
short-lived signed cookie, never in the URL: a link cannot make the dashboard show a message it
did not write (a crafted ``/?msg=...&level=error`` shows nothing)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from dogs_dashboard.signing import Signer

__all__ = ["COOKIE_NAME", "MAX_AGE", "read_flash", "set_flash"]

COOKIE_NAME = "dogs_flash"
#: Seconds a message waits for the next page.
MAX_AGE = 60
_LEVELS = frozenset({"ok", "error"})


def set_flash(response: Response, signer: Signer, message: str, level: str, path: str) -> None:
    """Leave ``message`` (``level`` ``ok`` or ``error``) for the next page under ``path``."""
    value = signer.dumps({"m": message[:500], "l": level if level in _LEVELS else "ok"})
    response.set_cookie(
        COOKIE_NAME, value, max_age=MAX_AGE, httponly=True, samesite="strict", path=path
    )


def read_flash(request: Request, signer: Signer) -> tuple[str, str] | None:
    """The message left for this page, if a valid one is there (the page then clears it)."""
    value = signer.loads(request.cookies.get(COOKIE_NAME))
    if not isinstance(value, dict):
        return None
    message, level = value.get("m"), value.get("l")
    if not isinstance(message, str) or level not in _LEVELS:
        return None
    return message, str(level)
