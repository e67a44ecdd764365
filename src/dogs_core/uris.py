"""A URI fit to show: the password of its user info replaced by ``***``.

One function for every place that prints a connection string (error messages, logs, the CLI's
header lines, the dashboard), whatever the scheme.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["redact_uri"]

#: ``scheme://user:password@`` (the password up to the last ``@`` before the path).
_USER_INFO: Final = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://[^:/@]*):[^/]*@")


def redact_uri(uri: str) -> str:
    """``uri`` with the password of its user info replaced by ``***``."""
    return _USER_INFO.sub(lambda match: f"{match.group(1)}:***@", uri, count=1)
