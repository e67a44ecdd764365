"""What the templates use to say a job's truth: the times that mean something in its state, a
run's timing (or that it never ran), params cut to a readable size, a durable job's recorded
steps, the traceback folded with
the user's frames first, and the age of a snapshot (all decided in ``dogs_core.domain``, shared
with ``dogs jobs show``)."""

from __future__ import annotations

from typing import Any, Final

from dogs_core.domain.display import (
    execution_timing,
    params_preview,
    record_moments,
    step_lines,
)
from dogs_core.domain.tracebacks import fold_traceback

__all__ = ["TEMPLATE_FILTERS", "TEMPLATE_GLOBALS", "age_text"]


def age_text(seconds: float | None) -> str:
    """``as of 12 s ago`` for a snapshot, ``""`` for a value read just now."""
    if seconds is None:
        return ""
    if seconds < 90:
        return f"as of {seconds:.0f} s ago"
    return f"as of {seconds / 60:.0f} min ago"


TEMPLATE_FILTERS: Final[dict[str, Any]] = {
    "fold": fold_traceback,
    "age": age_text,
}
TEMPLATE_GLOBALS: Final[dict[str, Any]] = {
    "moments": record_moments,
    "timing": execution_timing,
    "preview": params_preview,
    "step_lines": step_lines,
}
