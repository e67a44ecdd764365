"""Fixtures of the dashboard tests: skipped as a whole when the extra is not installed."""

from __future__ import annotations

import pytest

pytest.importorskip("starlette", reason="the dashboard extra (dogs-py[dashboard]) is not installed")
