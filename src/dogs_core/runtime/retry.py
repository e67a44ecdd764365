"""Retrying transient store errors: logged, bounded, with exponential backoff."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from dogs_core.errors import TransientStoreError

__all__ = ["retry_transient"]

T = TypeVar("T")

logger = logging.getLogger("dogs.retry")


async def retry_transient(
    operation: Callable[[], Awaitable[T]],
    *,
    what: str,
    attempts: int | None = 6,
    first_delay: float = 0.05,
    max_delay: float = 2.0,
) -> T:
    """Run ``operation``, retrying :class:`TransientStoreError` up to ``attempts`` times
    (``None``: until it succeeds or the caller is cancelled).

    Only use it for operations that are safe to repeat (inserts keyed by a unique id are not:
    callers of those check what landed). The last error is re-raised.
    """
    delay = first_delay
    for attempt in itertools.count(1):
        try:
            return await operation()
        except TransientStoreError as error:
            if attempts is not None and attempt >= attempts:
                logger.error("%s failed after %d attempts: %s", what, attempts, error)
                raise
            logger.warning(
                "%s hit a transient store error (attempt %d/%s), retrying in %.2fs: %s",
                what,
                attempt,
                "unlimited" if attempts is None else attempts,
                delay,
                error,
            )
            await anyio.sleep(delay)
            delay = min(delay * 2, max_delay)
    raise AssertionError("unreachable")  # pragma: no cover
