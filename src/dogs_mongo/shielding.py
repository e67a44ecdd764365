"""Shielding a cleanup from cancellation, written once for the async adapter and its generated
sync twin (which has no event loop: there, nothing can cancel it and the shield is a no-op)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import anyio

__all__ = ["shielded"]


@contextmanager
def shielded() -> Iterator[None]:
    """Shield the block from anyio cancellation when it runs in an event loop's task (closing a
    change stream when its consumer was cancelled); do nothing in a plain thread."""
    try:
        anyio.get_current_task()
    except Exception:  # no event loop in this thread: the generated sync store
        in_task = False
    else:
        in_task = True
    if not in_task:
        yield
        return
    with anyio.CancelScope(shield=True):
        yield
