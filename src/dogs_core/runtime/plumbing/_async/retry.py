"""Retrying transient store errors: logged, bounded, with exponential backoff.

``_async/retry.py`` is the source of truth; ``_sync/retry.py`` (whose helper sleeps in the
caller's thread) is generated from it by ``scripts/generate_sync.py``.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from dogs_core.errors import TransientStoreError
from dogs_core.runtime.plumbing.outage import gives_up

__all__ = ["retry_transient"]

T = TypeVar("T")

logger = logging.getLogger("dogs.retry")


async def retry_transient(
    operation: Callable[[], Awaitable[T]],
    *,
    what: str,
    attempts: int | None = 6,
    deadline: float | None = None,
    first_delay: float = 0.05,
    max_delay: float = 2.0,
    on_ambiguous: Callable[[TransientStoreError], Awaitable[T | None]] | None = None,
) -> T:
    """Run ``operation``, retrying :class:`TransientStoreError` up to ``attempts`` times
    (``None``: until it succeeds or the caller is cancelled) and within ``deadline`` seconds.

    ``deadline`` bounds the whole call, attempts and backoff together, without cancelling an
    attempt (a write cut off midway leaves its outcome unknown): no new attempt starts that,
    lasting as long as the slowest one so far, would end after it. With a per-attempt server
    selection timeout of a third of the deadline, a call to an unreachable server gives up
    after two attempts, within the deadline.

    Only use it for operations that are safe to repeat. A write that is not (an insert keyed by
    a unique id whose record may have run and been deleted) passes ``on_ambiguous``: it is
    called with each error whose ``write_may_have_applied`` is true, before any retry, and
    settles what landed: it returns the operation's result when the write took effect, or
    ``None`` when repeating it is safe; what it raises is not retried. The last error is
    re-raised.
    """
    delay = first_delay
    # The clock is read only to bound a deadline: most calls (every fenced write of a job)
    # have none, and succeed at once.
    timed = deadline is not None
    started = anyio.current_time() if timed else 0.0
    slowest = 0.0
    for attempt in itertools.count(1):
        attempt_started = anyio.current_time() if timed else 0.0
        try:
            return await operation()
        except TransientStoreError as error:
            if on_ambiguous is not None and error.write_may_have_applied:
                settled = await on_ambiguous(error)
                if settled is not None:
                    return settled
            now = anyio.current_time() if timed else 0.0
            slowest = max(slowest, now - attempt_started)
            if gives_up(what, error, attempt, attempts, deadline, now - started, delay + slowest):
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
