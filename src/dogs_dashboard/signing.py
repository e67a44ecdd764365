"""Values the dashboard hands a browser and reads back signed: an HMAC-SHA256 of the value
under the dashboard's secret (random per process when none is given), so a value a browser
sends back was written by this dashboard (the flash message, the token login's session)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from typing import Any

__all__ = ["Signer"]


class Signer:
    """Signs small JSON values as ``base64url(json).hmac`` and reads them back."""

    def __init__(self, secret: str | None, purpose: str) -> None:
        root = secrets.token_bytes(32) if secret is None else secret.encode("utf-8")
        # one key per purpose: a flash cookie is never accepted as a session, nor as a token
        self._key = hmac.new(root, purpose.encode("utf-8"), hashlib.sha256).digest()

    def dumps(self, value: Any) -> str:
        body = base64.urlsafe_b64encode(json.dumps(value, separators=(",", ":")).encode())
        text = body.decode("ascii").rstrip("=")
        return f"{text}.{self._mac(text)}"

    def loads(self, signed: str | None) -> Any:
        """The value, or ``None`` when ``signed`` is missing, malformed or not ours."""
        if not signed or "." not in signed:
            return None
        text, mac = signed.rsplit(".", 1)
        if not hmac.compare_digest(self._mac(text), mac):
            return None
        try:
            return json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        except ValueError:
            return None

    def _mac(self, text: str) -> str:
        return hmac.new(self._key, text.encode("ascii"), hashlib.sha256).hexdigest()
