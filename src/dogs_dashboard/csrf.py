"""CSRF protection of the dashboard's actions: a double-submit cookie bound by an HMAC.

Every page sets a random cookie (``HttpOnly``, ``SameSite=Strict``) once; every action form
carries ``HMAC(secret, cookie)``. A POST is accepted only when its form token matches the
HMAC of the cookie it came with. A cross-site page can neither read the cookie nor compute the
HMAC without the server's secret, so it cannot forge a form; and since the token is derived,
the server keeps no session state (it works the same behind several processes sharing
``secret``).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

__all__ = ["COOKIE_NAME", "FIELD_NAME", "CsrfGuard"]

#: The cookie holding the per-browser random value.
COOKIE_NAME = "dogs_csrf"
#: The form field holding the token.
FIELD_NAME = "csrf_token"

_COOKIE_BYTES = 32


class CsrfGuard:
    """Issues cookie values and checks tokens with one secret (random per process when
    ``secret`` is ``None``: tokens then stop working when the process restarts, which only
    means a reload of the page)."""

    def __init__(self, secret: str | None) -> None:
        key = secrets.token_bytes(32) if secret is None else secret.encode("utf-8")
        self._key = key

    @staticmethod
    def new_cookie() -> str:
        """A fresh random cookie value for a browser that has none."""
        return secrets.token_urlsafe(_COOKIE_BYTES)

    def token_for(self, cookie: str) -> str:
        """The form token that goes with ``cookie``."""
        return hmac.new(self._key, cookie.encode("utf-8"), hashlib.sha256).hexdigest()

    def is_valid(self, cookie: str | None, token: str | None) -> bool:
        """Whether a POST carrying ``token`` with ``cookie`` came from one of our forms."""
        if not cookie or not token:
            return False
        return hmac.compare_digest(self.token_for(cookie), token)
