"""Which PyMongo errors are transient, and how the adapters raise them (no server needed)."""

from __future__ import annotations

import pytest
from pymongo.errors import (
    AutoReconnect,
    BulkWriteError,
    ConnectionFailure,
    DuplicateKeyError,
    ExecutionTimeout,
    NetworkTimeout,
    NotPrimaryError,
    OperationFailure,
    PyMongoError,
    ServerSelectionTimeoutError,
    WaitQueueTimeoutError,
    WriteConcernError,
)

from dogs_core.errors import TransientStoreError
from dogs_mongo.errors import is_transient, translate_errors, write_may_have_applied


def _labelled(label: str, code: int = 2) -> OperationFailure:
    return OperationFailure("labelled", code, {"errorLabels": [label], "code": code})


TRANSIENT: list[tuple[PyMongoError, bool]] = [
    # (error, whether a write that failed with it may have been applied)
    (AutoReconnect("connection reset"), True),
    (NetworkTimeout("timed out"), True),
    (ConnectionFailure("gone"), True),
    (NotPrimaryError("not primary", {"code": 10107}), False),
    (ServerSelectionTimeoutError("no primary"), False),
    (WaitQueueTimeoutError("pool exhausted"), False),
    (ExecutionTimeout("operation exceeded time limit", 50), True),
    (OperationFailure("WriteConflict", 112), False),
    (OperationFailure("InterruptedDueToReplStateChange", 11602), False),
    (OperationFailure("PrimarySteppedDown", 189), False),
    (OperationFailure("ShutdownInProgress", 91), True),
    (OperationFailure("ExceededTimeLimit", 262), True),
    (_labelled("RetryableWriteError"), True),
    (_labelled("TransientTransactionError"), True),
    (WriteConcernError("waiting for replication timed out", 64), True),
    (WriteConcernError("labelled", 100, {"errorLabels": ["RetryableWriteError"]}), True),
    # A step-down while the primary waited for replication: the write was applied there.
    (WriteConcernError("operation was interrupted", 11602), True),
    (WriteConcernError("not primary", 10107), True),
]

PERMANENT: list[BaseException] = [
    DuplicateKeyError("E11000 duplicate key error", 11000),
    OperationFailure("BadValue", 2),
    OperationFailure("Unauthorized", 13),
    WriteConcernError("UnsatisfiableWriteConcern", 100),
    BulkWriteError({"writeErrors": [{"index": 0, "code": 11000, "errmsg": "E11000"}]}),
    ValueError("not a mongo error"),
]


@pytest.mark.parametrize(("error", "applied"), TRANSIENT, ids=lambda e: type(e).__name__)
def test_transient_errors(error: PyMongoError, applied: bool) -> None:
    assert is_transient(error)
    assert write_may_have_applied(error) is applied


@pytest.mark.parametrize("error", PERMANENT, ids=lambda e: type(e).__name__)
def test_permanent_errors(error: BaseException) -> None:
    assert not is_transient(error)


def test_no_writes_performed_label() -> None:
    error = AutoReconnect("x", {"errorLabels": ["NoWritesPerformed"]})
    assert is_transient(error)
    assert not write_may_have_applied(error)


def test_translate_errors_raises_transient_store_error_with_the_cause() -> None:
    cause = AutoReconnect("connection reset by peer")
    with (
        pytest.raises(TransientStoreError, match="claim failed") as raised,
        translate_errors("claim", write=True),
    ):
        raise cause
    assert raised.value.__cause__ is cause
    assert raised.value.write_may_have_applied is True


def test_translate_errors_of_a_read_never_applied_a_write() -> None:
    with pytest.raises(TransientStoreError) as raised, translate_errors("get_job", write=False):
        raise AutoReconnect("connection reset by peer")
    assert raised.value.write_may_have_applied is False


@pytest.mark.parametrize("error", PERMANENT, ids=lambda e: type(e).__name__)
def test_translate_errors_lets_permanent_errors_through(error: BaseException) -> None:
    with pytest.raises(type(error)) as raised, translate_errors("anything", write=True):
        raise error
    assert raised.value is error
