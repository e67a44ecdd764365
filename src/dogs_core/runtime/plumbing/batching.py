"""Group commit: many executions' writes of one kind coalesced into one store call.

A busy worker finishes jobs faster than one round trip per job allows. Each execution submits
its write and awaits its own result; one task sends what has queued as one batch. While a batch
is in flight, new items queue for the next, so an idle worker pays no added latency (a lone
item goes out at once) and a busy one sends fewer, larger batches as the load grows.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

import anyio

from dogs_core.errors import DogsError
from dogs_core.runtime.plumbing.loop import Signal, new_event

__all__ = ["GroupCommit"]

T = TypeVar("T")
R = TypeVar("R")

logger = logging.getLogger("dogs.workers")


class _Batch(Generic[T, R]):
    __slots__ = ("callbacks", "done", "error", "items", "keys", "results")

    def __init__(self) -> None:
        self.items: list[T] = []
        self.keys: set[object] = set()
        self.results: Sequence[R] = ()
        self.error: BaseException | None = None
        self.done = new_event()
        self.callbacks: list[tuple[int, Callable[[R | BaseException], None]]] = []


class GroupCommit(Generic[T, R]):
    """Coalesces concurrent :meth:`submit` calls into calls of ``write(items) -> results``.

    ``write`` returns one result per item, in order. When it raises, every item of that batch
    gets the exception, so each submitter keeps its own retry policy. Serve the batches with
    :meth:`run`, in a task that outlives every submitter.

    With ``key``, no batch holds two items of one key: an item whose key the open batch holds
    already starts the next batch (a store call that refuses a record given twice, such as
    ``complete_many``, then gets each once, in submission order).
    """

    def __init__(
        self,
        write: Callable[[list[T]], Awaitable[Sequence[R]]],
        *,
        what: str,
        max_batch: int = 500,
        timeout: float = math.inf,
        key: Callable[[T], object] | None = None,
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch={max_batch!r}: must be at least 1")
        self._write = write
        self._key = key
        self._what = what
        self._max_batch = max_batch
        self._timeout = timeout
        self._open: _Batch[T, R] = _Batch()
        self._sealed: deque[_Batch[T, R]] = deque()  # full batches waiting, oldest first
        self._queued = Signal()
        self._progress = Signal()  # a batch is done
        self._items_queued = 0
        self._items_done = 0  # batches end in order: the first this many items are settled
        self.batches_sent = 0
        self.items_sent = 0

    async def submit(self, item: T) -> R:
        """Queue ``item`` for the next batch and return its result once that batch is written.

        A cancelled submitter's item is still written; only the wait is cut short.
        """
        batch, index = self._queue(item)
        await batch.done.wait()
        if batch.error is not None:
            raise batch.error
        return batch.results[index]

    def submit_nowait(self, item: T) -> None:
        """Queue ``item`` without waiting for its write (its result and error are dropped):
        :meth:`flush` waits for it, or a writer that flushes this one before its own write."""
        self._queue(item)

    def submit_callback(self, item: T, callback: Callable[[R | BaseException], None]) -> None:
        """Queue ``item`` and call ``callback`` with its result, or the batch's error, from
        the writer's task once its batch is written: a submitter that has nothing left to do
        but react to the result need not keep a task waiting for it. ``callback`` must not
        block; what it raises is logged."""
        batch, index = self._queue(item)
        batch.callbacks.append((index, callback))

    async def flush(self) -> None:
        """Wait until every item queued so far is written (or its batch failed); returns at
        once, without a checkpoint, when nothing is pending."""
        target = self._items_queued
        while self._items_done < target:
            await self._progress.wait()

    def _queue(self, item: T) -> tuple[_Batch[T, R], int]:
        batch = self._open
        key = None if self._key is None else self._key(item)
        if len(batch.items) >= self._max_batch or (key is not None and key in batch.keys):
            # The open batch is full (or holds this key): start another; the writer takes
            # them in order.
            batch = self._seal_and_open()
        if key is not None:
            batch.keys.add(key)
        index = len(batch.items)
        batch.items.append(item)
        self._items_queued += 1
        if index == 0:
            self._queued.notify()
        return batch, index

    def _seal_and_open(self) -> _Batch[T, R]:
        self._sealed.append(self._open)
        self._open = _Batch()
        return self._open

    async def run(self) -> None:
        """Write batches as items queue; runs until cancelled."""
        while True:
            sealed = self._sealed
            if sealed:
                batch = sealed.popleft()
            elif self._open.items:
                batch, self._open = self._open, _Batch()
            else:
                await self._queued.wait()
                continue
            await self._send(batch)

    async def _send(self, batch: _Batch[T, R]) -> None:
        try:
            with anyio.fail_after(self._timeout):
                results = await self._write(batch.items)
            if len(results) != len(batch.items):
                raise RuntimeError(
                    f"{self._what}: the store returned {len(results)} result(s) "
                    f"for {len(batch.items)} item(s)"
                )
            batch.results = results
        except Exception as error:
            batch.error = error
        finally:
            if batch.error is None and len(batch.results) != len(batch.items):
                # Cancelled mid-write (the workers are stopping): the outcome is unknown.
                batch.error = DogsError(f"{self._what}: the writer stopped during the write")
            # Set even when cancelled: no submitter waits forever.
            self.batches_sent += 1
            self.items_sent += len(batch.items)
            self._items_done += len(batch.items)
            batch.done.set()
            self._progress.notify()
            self._call_back(batch)

    def _call_back(self, batch: _Batch[T, R]) -> None:
        error, results = batch.error, batch.results
        for index, callback in batch.callbacks:
            try:
                callback(results[index] if error is None else error)
            except Exception:
                logger.exception("%s: a result callback raised", self._what)
