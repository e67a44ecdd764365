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

A ``ServerSelectionTimeoutError`` (no server answered within the server selection timeout)
becomes :class:`~dogs_core.errors.StoreUnavailableError`, whose message is one line naming each
server and why it failed ("localhost:1 (connection refused)"), not PyMongo's topology dump: it is
logged once per retry while a server is down. Other messages are cut to one short line too.

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

import logging
import os
import re
from collections.abc import (
    Iterator,
    Mapping,
)
from contextlib import contextmanager
from typing import Any, Final

from pymongo.errors import (
    BulkWriteError,
    ConnectionFailure,
    CursorNotFound,
    ExecutionTimeout,
    NotPrimaryError,
    OperationFailure,
    PyMongoError,
    ServerSelectionTimeoutError,
    WaitQueueTimeoutError,
    WriteConcernError,
)
from pymongo.uri_parser import parse_uri

from dogs_core.errors import (
    ChangeFeedUnavailableError,
    StoreUnavailableError,
    TransientStoreError,
)

__all__ = [
    "RETRYABLE_CODES",
    "TRANSIENT_LABELS",
    "WRITE_CONFLICT",
    "FenceMissedError",
    "is_transient",
    "name_uri",
    "summarize",
    "translate_errors",
    "write_may_have_applied",
]


class FenceMissedError(Exception):
    """A fenced write inside a transaction matched nothing (the lock moved on): raised to abort
    the transaction, so the writes made before it in that transaction roll back. Caught by the
    adapter; it never reaches a caller."""


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
_MAX_MESSAGE: Final = 300
_SERVER: Final = re.compile(
    r"<ServerDescription \('(?P<host>[^']*)', (?P<port>\d+)\) server_type: (?P<type>\w+)"
    r"(?:, rtt: [^,>]*)?(?:, error=\w+\((?P<q>['\"])(?P<error>.*?)(?P=q)\))?>"
)
_TIMEOUT: Final = re.compile(r", Timeout: (?P<seconds>[\d.]+)s, Topology Description: ")
_CONFIGURED: Final = re.compile(r" ?\(configured timeouts: [^)]*\)")
_ERRNO: Final = re.compile(r"\[Errno (?P<code>-?\d+)\] (?P<text>.*)")
#: "host:port" -> the (redacted) URI an application configured with that seed, the latest one.
_URIS: dict[str, str] = {}


def name_uri(uri: str, redacted: str) -> None:
    """Remember that ``redacted`` (the URI, its password hidden) names its seed hosts, so that
    a message about an unreachable server names the URI the application configured. A
    ``mongodb+srv://`` URI is left out: its hosts come from a DNS lookup."""
    if not uri.startswith("mongodb://"):
        return
    try:
        nodes = parse_uri(uri)["nodelist"]
    except (PyMongoError, ValueError):
        return
    for host, port in nodes:
        _URIS[f"{host}:{port}"] = redacted


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


def summarize(error: BaseException) -> str:
    """One short line saying what went wrong, for messages logged once per retry.

    A ``ServerSelectionTimeoutError`` becomes "no MongoDB server reachable within 5.0s:
    localhost:1 (connection refused)", read from the servers of its topology description;
    any other message loses PyMongo's timeout settings and is cut to 300 characters.
    """
    text = str(error)
    timeout = _TIMEOUT.search(text)
    if isinstance(error, ServerSelectionTimeoutError) and timeout is not None:
        found = list(_SERVER.finditer(text[timeout.end() :]))
        states = sorted(map(_server_state, found))  # PyMongo's order varies
        where = ", ".join(states) if states else _short(text[: timeout.start()])
        uris = [_URIS[a] for a in (f"{m['host']}:{m['port']}" for m in found) if a in _URIS]
        at = f" at {uris[0]}" if uris else ""
        return f"no MongoDB server reachable{at} within {timeout['seconds']}s: {where}"
    return _short(text if timeout is None else text[: timeout.start()])


def _server_state(server: re.Match[str]) -> str:
    address = f"{server['host']}:{server['port']}"
    cause = server["error"]
    if cause is None:  # it answered, but not as the server the operation needs
        return f"{address} (a server of type {server['type']}, not one this operation can use)"
    cause = _CONFIGURED.sub("", cause.removeprefix(f"{address}: "))
    errno = _ERRNO.match(cause)
    if errno is not None:  # "[Errno 111] Connect call failed (...)": the errno says it best
        code = int(errno["code"])
        cause = os.strerror(code) if code > 0 else errno["text"]
    return f"{address} ({cause[:1].lower()}{cause[1:]})"


def _short(text: str) -> str:
    line = _CONFIGURED.sub("", text.strip().splitlines()[0] if text.strip() else "")
    return line if len(line) <= _MAX_MESSAGE else f"{line[: _MAX_MESSAGE - 3]}..."


@contextmanager
def translate_errors(operation: str, *, write: bool) -> Iterator[None]:
    """Re-raise transient PyMongo errors of ``operation`` as ``TransientStoreError``."""
    try:
        yield
    except PyMongoError as error:
        if not is_transient(error):
            raise
        if isinstance(error, ServerSelectionTimeoutError):
            raise StoreUnavailableError(f"{operation}: {summarize(error)}") from error
        applied = write and write_may_have_applied(error)
        raise TransientStoreError(
            f"{operation} failed with a transient MongoDB error "
            f"({type(error).__name__}: {summarize(error)})",
            write_may_have_applied=applied,
        ) from error


#: The server's code for "hint provided does not correspond to an existing index".
_BAD_VALUE: Final = 2

_hint_log = logging.getLogger("dogs.mongo.store")


def read_without_missing_hint(
    error: OperationFailure, hint: Mapping[str, int], *, collection: str, seen: set[str]
) -> None:
    """Re-raise ``error`` unless it says the hinted index does not exist; then warn (once per
    index: ``seen`` remembers them) so that the caller reads again without the hint, slower and
    still right."""
    if error.code != _BAD_VALUE or "hint" not in str(error):
        raise error
    key = ", ".join(f"{field}: {direction}" for field, direction in hint.items())
    if key not in seen:
        seen.add(key)
        _hint_log.warning(
            "dogs: the index {%s} of %s is missing (run the store's setup): reading without it",
            key,
            collection,
        )


#: The server's code for "hint provided does not correspond to an existing index".
BAD_VALUE: Final = 2


def is_missing_hint(error: OperationFailure) -> bool:
    """Whether the server refused a query because its hinted index does not exist (dropped,
    or still being built)."""
    return error.code == BAD_VALUE and "hint" in str(error)


#: The store's logger (``dogs.mongo.store``): what the claims log, whichever face.
store_log = logging.getLogger("dogs.mongo.store")


def claim_many_write_error(error: BulkWriteError, sent: int) -> int:
    """How many records a ``claim_many`` bulk write that reported errors modified. A write
    concern error alone means the updates applied on the primary: they are read back. Per-item
    write errors (a record the pipeline cannot update, say a non-numeric ``tries``) are logged
    when other items were claimed, and raised when none was."""
    details = error.details
    modified = int(details.get("nModified", 0))
    write_errors = details.get("writeErrors") or []
    if write_errors and modified == 0:
        raise error
    if write_errors:
        store_log.error(
            "dogs: claim_many: %d of %d updates failed (first: %s); returning the %d claimed",
            len(write_errors),
            sent,
            write_errors[0].get("errmsg"),
            modified,
        )
    else:
        store_log.warning(
            "dogs: claim_many: write concern error (%s); returning the %d records claimed on "
            "the primary",
            details.get("writeConcernErrors"),
            modified,
        )
    return modified


#: Reopens in a row (each after a failure PyMongo could not resume) before the feed gives up.
MAX_REOPENS: Final = 5

UNAUTHORIZED: Final = 13

STANDALONE: Final = 40573  # "The $changeStream stage is only supported on replica sets"

#: The resume token is unusable: ChangeStreamFatalError, ChangeStreamHistoryLost,
#: InvalidResumeToken (and BSONObjectTooLarge of one event).
TOKEN_LOST: Final = frozenset({280, 286, 260, 10334})


def is_unavailable(error: BaseException) -> bool:
    """Whether ``error`` says this server or user cannot open change streams at all."""
    if not isinstance(error, OperationFailure):
        return False
    return error.code in (UNAUTHORIZED, STANDALONE) or (
        "only supported on replica sets" in str(error)
    )


def is_resumable(error: PyMongoError) -> bool:
    """Whether reopening the stream may help (the change-stream spec's resumable errors, and
    every transient error of :mod:`dogs_mongo.errors`)."""
    if isinstance(error, ConnectionFailure | CursorNotFound) or is_transient(error):
        return True
    return isinstance(error, OperationFailure) and (
        error.has_error_label("ResumableChangeStreamError") or error.code in TOKEN_LOST
    )


def resume_point(error: PyMongoError, stream: Any, token: Any) -> Any:
    """Where to reopen after ``error``: the stream's last token, or nowhere (from now) when the
    server cannot resume from it."""
    if isinstance(error, OperationFailure) and error.code in TOKEN_LOST:
        return None
    if stream is not None and stream.resume_token is not None:
        return stream.resume_token
    return token


def give_up_unless_resumable(operation: str, error: PyMongoError, failures: int) -> None:
    """Raise unless the feed should reopen after its ``failures``-th failure in a row."""
    if is_unavailable(error):
        raise ChangeFeedUnavailableError(f"{operation}: change streams unavailable: {error}")
    if not is_resumable(error):
        raise error
    if failures > MAX_REOPENS:
        raise TransientStoreError(
            f"{operation}: the change stream failed {failures} times in a row "
            f"({type(error).__name__}: {error})",
            write_may_have_applied=False,
        ) from error


DUPLICATE_KEY = 11000


def raise_unless_duplicates(error: BulkWriteError) -> None:
    """A batch whose only write errors are lines already kept has written the others."""
    details = error.details
    errors = details.get("writeErrors") or []
    if any(item.get("code") != DUPLICATE_KEY for item in errors):
        raise error
    concern_errors = details.get("writeConcernErrors")
    if concern_errors:
        raise TransientStoreError(
            f"write_log_lines: write concern error ({concern_errors[0]})",
            write_may_have_applied=True,
        ) from error


INDEX_OPTIONS_CONFLICT: Final = 85

INDEX_KEY_SPECS_CONFLICT: Final = 86

NAMESPACE_NOT_FOUND: Final = 26
