"""Which PyMongo errors are worth retrying, and their translation to
:class:`~dogs_core.errors.TransientStoreError` (shared by the async and the sync adapter).

Transient (raised as ``TransientStoreError``, the original chained as ``__cause__``):

* ``ConnectionFailure`` and its subclasses: ``AutoReconnect``, ``NetworkTimeout``,
  ``NotPrimaryError`` (primary step-down), ``ServerSelectionTimeoutError`` (no primary reachable),
  ``WaitQueueTimeoutError`` (connection pool exhausted);
* ``ExecutionTimeout`` (``maxTimeMS`` exceeded) and any error PyMongo flags as a client-side
  timeout (``error.timeout``);
* an ``OperationFailure`` (``WriteConcernError`` included) carrying the ``RetryableWriteError``
  or ``TransientTransactionError`` label, or whose code is a retryable server code (not primary,
  shutting down, interrupted by a replica-set state change, host unreachable, network timeout,
  exceeded time limit), ``WriteConflict`` (112), ``MaxTimeMSExpired`` (50) or, for a write
  concern error, ``WriteConcernFailed`` (64, the ``wtimeout``).

Everything else (duplicate keys handled by the adapter aside) propagates unchanged: a bad
query, a document too large, an authorization failure will not get better by retrying.

``write_may_have_applied`` is false for reads and for failures where the server certainly did
not apply the write: no server was selected, the pool had no connection, the server answered
"not primary" or reported a write conflict, or it labelled the error ``NoWritesPerformed``. A
write concern error always may have applied, whatever its code: the server applied the write
and only the wait for its replication failed (a step-down interrupts that wait with 11602).
Retryable writes stay on (PyMongo's default): the driver already retries a write once, and this
translation only concerns what is left after that.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from pymongo.errors import (
    BulkWriteError,
    ConnectionFailure,
    ExecutionTimeout,
    NotPrimaryError,
    OperationFailure,
    PyMongoError,
    ServerSelectionTimeoutError,
    WaitQueueTimeoutError,
    WriteConcernError,
)

from dogs_core.errors import TransientStoreError

__all__ = [
    "RETRYABLE_CODES",
    "TRANSIENT_LABELS",
    "WRITE_CONFLICT",
    "is_transient",
    "translate_errors",
    "write_may_have_applied",
]

#: Server codes MongoDB drivers retry: not primary, node shutting down or interrupted by a
#: replica-set state change, host unreachable or not found, network timeout, socket exception,
#: exceeded time limit, read concern majority not available yet.
RETRYABLE_CODES: Final = frozenset(
    {6, 7, 89, 91, 134, 189, 262, 9001, 10058, 10107, 11600, 11602, 13435, 13436}
)
WRITE_CONFLICT: Final = 112
MAX_TIME_MS_EXPIRED: Final = 50
WRITE_CONCERN_FAILED: Final = 64
TRANSIENT_LABELS: Final = ("RetryableWriteError", "TransientTransactionError")
_NOT_APPLIED_CODES: Final = frozenset({WRITE_CONFLICT, 10107, 13435, 13436, 189, 11602})


def is_transient(error: BaseException) -> bool:
    """Whether ``error`` is a MongoDB failure worth retrying (see the module docstring)."""
    if not isinstance(error, PyMongoError):
        return False
    if isinstance(error, ConnectionFailure | ExecutionTimeout):
        return True
    if error.timeout:
        return True
    if any(error.has_error_label(label) for label in TRANSIENT_LABELS):
        return True
    if isinstance(error, BulkWriteError):
        return False  # per-item errors: the adapter maps them back to the items
    if isinstance(error, OperationFailure):
        code = error.code
        if code in RETRYABLE_CODES or code in (WRITE_CONFLICT, MAX_TIME_MS_EXPIRED):
            return True
        if isinstance(error, WriteConcernError) and code == WRITE_CONCERN_FAILED:
            return True
    return False


def write_may_have_applied(error: BaseException) -> bool:
    """Whether a write that failed with ``error`` may nevertheless have been applied."""
    if isinstance(error, ServerSelectionTimeoutError | WaitQueueTimeoutError | NotPrimaryError):
        return False
    if isinstance(error, PyMongoError) and error.has_error_label("NoWritesPerformed"):
        return False
    if isinstance(error, WriteConcernError):
        # The server applied the write and then could not confirm its write concern: even
        # "interrupted by a replica-set state change" (11602) interrupted the wait, not the write.
        return True
    return not (isinstance(error, OperationFailure) and error.code in _NOT_APPLIED_CODES)


@contextmanager
def translate_errors(operation: str, *, write: bool) -> Iterator[None]:
    """Re-raise transient PyMongo errors of ``operation`` as ``TransientStoreError``."""
    try:
        yield
    except PyMongoError as error:
        if not is_transient(error):
            raise
        applied = write and write_may_have_applied(error)
        raise TransientStoreError(
            f"{operation} failed with a transient MongoDB error ({type(error).__name__}: {error})",
            write_may_have_applied=applied,
        ) from error
