"""The store's own transactions (inserting or retrying workflows, a transactional step): one
body run in a transaction of the store's client by PyMongo's ``with_transaction``, which runs
it again after a transient conflict, but not past :data:`CONFLICT_SECONDS`, and commits under
the store's write concern; a deployment without transactions is told in one error.

Part of the async adapter (the source of truth): ``scripts/generate_sync.py`` generates
``_sync/transactions.py`` from this module.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

from pymongo import AsyncMongoClient, WriteConcern
from pymongo.errors import OperationFailure

from dogs_core.errors import TransactionsNotSupportedError, TransientStoreError
from dogs_mongo.errors import translate_errors

__all__ = ["CONFLICT_SECONDS", "run_transaction"]

#: Seconds a transaction is run again after transient conflicts before the call gives up (a
#: TransientStoreError, retried by its caller).
CONFLICT_SECONDS: Final = 2.0

_NO_TRANSACTIONS: Final = (20, 263)  # IllegalOperation, OperationNotSupportedInTransaction


async def run_transaction(
    client: AsyncMongoClient[Any],
    write_concern: WriteConcern,
    operation: str,
    body: Callable[[Any], Awaitable[Any]],
    *,
    feature: str,
) -> Any:
    """``body(session)`` in a transaction of ``client``, its PyMongo errors translated;
    ``feature`` names what needs transactions in the error of a deployment without them."""
    began = time.monotonic()
    attempts = 0

    async def bounded(session: Any) -> Any:
        nonlocal attempts
        attempts += 1
        if attempts > 1 and time.monotonic() - began > CONFLICT_SECONDS:
            raise TransientStoreError(
                f"{operation}: its transaction kept conflicting with another for "
                f"{CONFLICT_SECONDS:g}s (another writer, or the open transaction of a "
                "killed process, which MongoDB aborts after transactionLifetimeLimitSeconds)",
                write_may_have_applied=False,
            )
        return await body(session)

    try:
        with translate_errors(operation, write=True):
            async with client.start_session() as session:
                return await session.with_transaction(bounded, write_concern=write_concern)
    except OperationFailure as error:
        if error.code in _NO_TRANSACTIONS or "replica set" in str(error):
            raise TransactionsNotSupportedError(
                f"{operation}: {feature} need MongoDB transactions, which this deployment "
                f"does not have ({error}); run a replica set (even of one node)"
            ) from error
        raise
