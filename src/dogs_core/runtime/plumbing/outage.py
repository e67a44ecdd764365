"""Meeting a store that keeps failing (MongoDB down, a failover): how long a scheduling call
waits before it gives up, and how a loop that retries forever logs each failed round.

While a server is down, every round of every loop fails the same way; one short line each
(the adapter's one-line message) tells the operator what is happening, where a traceback per
round would bury it.
"""

from __future__ import annotations

import logging
import math
from typing import Final

from dogs_core.errors import InvalidOptionError, TransientStoreError

__all__ = ["DEFAULT_OPERATION_TIMEOUT", "log_store_failure", "validate_operation_timeout"]

#: Seconds a scheduling call retries a store that keeps failing before it gives up.
DEFAULT_OPERATION_TIMEOUT: Final = 15.0


def validate_operation_timeout(value: object) -> float | None:
    """``operation_timeout`` as seconds: a positive finite number, or ``None`` (no deadline)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidOptionError("operation_timeout", value, "must be a number of seconds or None")
    if not math.isfinite(value) or value <= 0:
        raise InvalidOptionError("operation_timeout", value, "must be positive and finite")
    return float(value)


def log_store_failure(
    logger: logging.Logger, message: str, error: Exception, *, unexpected: int = logging.ERROR
) -> None:
    """Log a failed round of a loop that will try again: a :class:`TransientStoreError` as one
    WARNING line with its one-line message, since it repeats every round of an outage;
    anything else at ``unexpected`` with its traceback (a bug to look at)."""
    if isinstance(error, TransientStoreError):
        logger.warning("%s: %s", message, error)
    else:
        logger.log(unexpected, message, exc_info=error)


def log_gave_up(log: logging.Logger, message: str, error: BaseException) -> None:
    """Log a write or read that gave up: one ERROR line naming a :class:`TransientStoreError`
    (the retries have logged the outage already; a traceback per job would bury it), the
    traceback for anything else (a bug to look at)."""
    if isinstance(error, TransientStoreError):
        log.error("%s: %s", message, error)
    else:
        log.error("%s", message, exc_info=error)


#: The retries' own logger (``dogs.retry``), as before they were shared by both faces.
retry_log = logging.getLogger("dogs.retry")


def gives_up(
    what: str,
    error: TransientStoreError,
    attempt: int,
    attempts: int | None,
    deadline: float | None,
    elapsed: float,
    next_wait: float,
) -> bool:
    """Whether a call gives up after its failed ``attempt`` (one ERROR line when it does): its
    attempts are spent, or the next one (after ``next_wait``) would end past its deadline."""
    if attempts is not None and attempt >= attempts:
        retry_log.error("%s failed after %d attempts: %s", what, attempts, error)
        return True
    if deadline is not None and elapsed + next_wait > deadline:
        retry_log.error(
            "%s gave up after %d attempt(s) in %.1fs (deadline %gs): %s",
            *(what, attempt, elapsed, deadline, error),
        )
        return True
    return False
