"""The workers' background writers.

The history writer: executions' rows, written by one group commit that retries each batch
itself (``write_history_many`` is an upsert of whole rows: repeating it is safe) and never fails
its submitters, so a finished job can queue its row without waiting for it. The settle writer
(:mod:`dogs_core.runtime.execution.settle`) flushes the rows queued before each of its batches,
which keeps
the order every job needs (its row is stored before its record is settled, see
:mod:`dogs_core.runtime.execution.arrival`).

The log lines of every execution of one ``Workers``, written in batches (``store_logs``).

:class:`LogShipper` is the workers' one buffer of lines. :meth:`LogShipper.put` appends a line
from any thread and returns at once (the handler never waits for a write); the first line of a
batch wakes the shipper's task (from a worker thread, through the loop's token, without
blocking), which waits :data:`FLUSH_DELAY` for more and writes everything buffered, at most
:data:`BATCH_SIZE` lines per ``write_log_lines``. Bounded everywhere: at most
:data:`MAX_BUFFERED` lines wait (more are dropped and counted); a batch that fails with a
transient error is tried again at most :data:`ATTEMPTS` times, then dropped and counted; any
other failure drops it at once. Losing lines never fails a job: the first loss is logged (one
WARNING), the next ones are counted (:attr:`LogShipper.lost`) until a write succeeds again (one
INFO line with the count). At shutdown what is buffered is written, within
:data:`FINAL_FLUSH_TIMEOUT` (a batch cut short by the stop is written again; what is still
unwritten after that time is counted lost, with one WARNING).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
from collections.abc import Iterable
from typing import Any, Final, cast

import anyio
import anyio.lowlevel

from dogs_core.domain.definitions import JobDefinition
from dogs_core.domain.log_lines import LogLine
from dogs_core.domain.records import HistoryRecord
from dogs_core.errors import MissingRoleError, TransientStoreError
from dogs_core.ports import AsyncFollowingStore, AsyncJobStore, Role, has_role
from dogs_core.runtime.plumbing._async.retry import retry_transient
from dogs_core.runtime.plumbing.loop import Signal
from dogs_core.runtime.plumbing.outage import log_gave_up

__all__ = [
    "ATTEMPTS",
    "BATCH_SIZE",
    "FINAL_FLUSH_TIMEOUT",
    "FLUSH_DELAY",
    "HISTORY_WRITE_TIMEOUT",
    "MAX_BUFFERED",
    "WRITE_TIMEOUT",
    "LogShipper",
    "shipper_for",
    "write_history_batch",
]


logger = logging.getLogger("dogs.execution")


HISTORY_WRITE_TIMEOUT = 30.0  # seconds; a batch of history rows that takes longer is dropped


async def write_history_batch(store: AsyncJobStore, records: list[HistoryRecord]) -> list[None]:
    """Write ``records``, retrying transient errors, within :data:`HISTORY_WRITE_TIMEOUT`;
    a batch that cannot be written is logged (one ERROR line) and dropped, never raised."""
    what = f"history of {len(records)} execution(s)"
    with anyio.move_on_after(HISTORY_WRITE_TIMEOUT) as scope:
        try:
            await retry_transient(lambda: store.write_history_many(records), what=what)
        except Exception as error:
            log_gave_up(logger, f"could not write the {what}", error)
    if scope.cancelled_caught:
        logger.error("could not write the %s within %g s", what, HISTORY_WRITE_TIMEOUT)
    return [None] * len(records)


logger = logging.getLogger("dogs.logs")


#: Seconds the shipper waits after a batch's first line for more (lines reach the store within
#: about this long, plus the write).
FLUSH_DELAY: Final = 0.25


#: Most lines per ``write_log_lines``.
BATCH_SIZE: Final = 1_000


#: Most lines waiting in the buffer; more are dropped (and counted).
MAX_BUFFERED: Final = 50_000


#: Writes of one batch before it is dropped (transient errors only).
ATTEMPTS: Final = 3


#: Seconds one write may take.
WRITE_TIMEOUT: Final = 10.0


#: Seconds the last write at shutdown may take.
FINAL_FLUSH_TIMEOUT: Final = 10.0


def shipper_for(store: AsyncJobStore, definitions: Iterable[JobDefinition]) -> LogShipper | None:
    """The shipper of workers running ``definitions``: ``None`` when none keeps its lines;
    :class:`~dogs_core.errors.MissingRoleError` when one does and ``store`` cannot keep
    them (before anything runs)."""
    keeping = [d.name for d in definitions if d.log_level is not None]
    if not keeping:
        return None
    if not has_role(store, Role.FOLLOWING):
        feature = f"store_logs (of {', '.join(sorted(keeping))})"
        raise MissingRoleError(Role.FOLLOWING.value, feature, store)
    return LogShipper(store)


class LogShipper:
    """The buffered, batched writer of the workers' log lines (see the module)."""

    def __init__(self, store: AsyncJobStore, *, flush_delay: float = FLUSH_DELAY) -> None:
        self._store = cast(AsyncFollowingStore, store)
        self._flush_delay = flush_delay
        self._lines: collections.deque[LogLine] = collections.deque()
        self._guard = threading.Lock()
        self._woken = False
        self._signal = Signal()
        self._token: Any = None
        self._set_up = False
        self._loop_thread: int | None = None
        self._failing = False
        self.written = 0
        """Lines written."""
        self.lost = 0
        """Lines dropped: buffer full, or their batch could not be written."""

    def put(self, line: LogLine) -> bool:
        """Take ``line`` for the next batch (any thread, never waits); ``False`` when it was
        dropped (the buffer is full)."""
        with self._guard:
            if len(self._lines) >= MAX_BUFFERED:
                self.lost += 1
                self._lost_first_time("the buffer is full")
                return False
            self._lines.append(line)
            if self._woken:
                return True
            self._woken = True
        self._wake()
        return True

    def _wake(self) -> None:
        if self._loop_thread is None or threading.get_ident() == self._loop_thread:
            self._signal.notify()
            return
        token = self._token
        with contextlib.suppress(Exception):  # the loop has ended: the final flush is over
            token.backend_class.run_sync_soon(self._signal.notify, (), token.native_token)

    async def run(self) -> None:
        """Write batches as lines come, until cancelled; then write what is left."""
        self._token = anyio.lowlevel.current_token()
        self._loop_thread = threading.get_ident()
        try:
            while True:
                with self._guard:  # idle, and ready to be woken by the next line, at once
                    idle = not self._lines
                    if idle:
                        self._woken = False
                if idle:
                    await self._signal.wait()
                await anyio.sleep(self._flush_delay)
                await self.flush()
        finally:
            with anyio.CancelScope(shield=True):
                with anyio.move_on_after(FINAL_FLUSH_TIMEOUT):
                    await self.flush()
                self._lose_the_rest()

    async def flush(self) -> None:
        """Write every line buffered now, a batch at a time (the logs collection's indexes
        created first, once: until that succeeds, it is tried again before each flush)."""
        if not self._set_up:
            await self._setup()
        while True:
            with self._guard:
                count = min(len(self._lines), BATCH_SIZE)
                batch = [self._lines.popleft() for _ in range(count)]
            if not batch:
                return
            try:
                await self._write(batch)
            except anyio.get_cancelled_exc_class():
                # Stopped mid-write (the workers' stop cancels this task): the final flush
                # writes the batch again, and a line already kept is skipped by its id.
                with self._guard:
                    self._lines.extendleft(reversed(batch))
                raise

    async def _write(self, batch: list[LogLine]) -> None:
        for attempt in range(1, ATTEMPTS + 1):
            try:
                with anyio.fail_after(WRITE_TIMEOUT):
                    await self._store.write_log_lines(batch)
            except (TransientStoreError, TimeoutError) as error:
                if attempt < ATTEMPTS:
                    await anyio.sleep(self._flush_delay * 2**attempt)
                    continue
                self._dropped(batch, error)
            except Exception as error:
                self._dropped(batch, error)
            else:
                self.written += len(batch)
                if self._failing:
                    self._failing = False
                    logger.info("log lines are written again (%d lost so far)", self.lost)
            return

    async def _setup(self) -> None:
        try:
            with anyio.fail_after(WRITE_TIMEOUT):
                await self._store.setup_following()
        except Exception as error:
            logger.warning("could not create the log lines' indexes yet: %r", error)
            return
        self._set_up = True

    def _lose_the_rest(self) -> None:
        """Count as lost what the final flush left (it did not end in time)."""
        with self._guard:
            left = len(self._lines)
            self._lines.clear()
            self.lost += left
        if left:
            self._failing = False  # this loss is logged whatever came before
            self._lost_first_time(
                f"the final write did not end within {FINAL_FLUSH_TIMEOUT:g} s; {left} not written"
            )

    def _dropped(self, batch: list[LogLine], error: BaseException) -> None:
        with self._guard:
            self.lost += len(batch)
        self._lost_first_time(f"writing them failed: {error!r}")

    def _lost_first_time(self, why: str) -> None:
        if not self._failing:
            self._failing = True
            logger.warning(
                "job log lines lost (%s); jobs are not affected, further losses are counted "
                "until a write succeeds",
                why,
            )
