"""Following a job as the clients offer it: ``get_logs``, ``follow_logs`` and ``watch_progress``,
over the store's optional following role (:class:`~dogs_core.ports.AsyncFollowingStore`; a
store without it raises :class:`~dogs_core.errors.MissingRoleError`). A record's progress
is read with ``get_job`` (``JobRecord.progress``).

The two streams are woken by the store's change feeds (MongoDB change streams, resumed by token
across reconnects) and read the state after each batch or heartbeat; where the store cannot
watch (a standalone server) or the feed fails, they read every ``poll_interval`` instead, so a
feed only ever makes them sooner. Both end when what they follow has ended:

* ``watch_progress(job_id)`` ends when the job ends, as ``wait_for`` says it (an event job that
  succeeded, was discarded or reached its attempt limit; a recurrent job's next execution that
  finishes), after yielding the execution's final progress from its history row;
* ``follow_logs(id)`` ends :data:`LOG_LINGER` seconds after the job (as above) or the execution
  ``id`` ended, so that the lines its worker was still writing arrive.

This module is the source of truth; ``_sync/following.py`` is generated from it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Literal

import anyio

from dogs_core.domain.log_lines import LogLine, check_line_id, check_log_page
from dogs_core.domain.progress import Progress
from dogs_core.domain.records import HistoryRecord, JobRecord, JobState
from dogs_core.errors import (
    ChangeFeedUnavailableError,
    JobNotFoundError,
    WaitTimeoutError,
)
from dogs_core.ids import parse_id, parse_job_or_execution_id
from dogs_core.ports import AsyncFollowingStore, AsyncJobStore, Role
from dogs_core.ports.store import require_role
from dogs_core.runtime.client.calls import LOG_LINGER
from dogs_core.runtime.client.scheduling import ClientBase, ended_execution, validate_wait
from dogs_core.runtime.plumbing._async.retry import retry_transient

__all__ = ["FollowingClient"]

logger = logging.getLogger("dogs.client")


_Owner = Literal["job", "execution"]


class FollowingClient(ClientBase):
    """``get_logs``, ``follow_logs`` and ``watch_progress``."""

    store: AsyncJobStore
    operation_timeout: float | None

    async def get_logs(
        self, id: str, *, after: str | None = None, limit: int = 1_000
    ) -> list[LogLine]:
        """The log lines kept for job ``id`` (all its executions) or for execution ``id``, in
        time order: at most ``limit`` (1 to 10,000), after the line id ``after`` (the ``id`` of
        the last line of the previous page). Lines are kept by jobs with ``store_logs``.

        Raises :class:`~dogs_core.errors.JobNotFoundError` when ``id`` is neither a job (a
        record or history) nor an execution, and
        :class:`~dogs_core.errors.InvalidOptionError` for a bad argument, before reading."""
        owner = parse_job_or_execution_id(id)
        size, after = check_log_page(limit, check_line_id(after))
        store = require_role(self.store, Role.FOLLOWING, "get_logs")
        lines = await self._read_lines(store, owner, after, size)
        if not lines and after is None:
            await self._owner_kind(store, owner)  # raises for an id nobody knows
        return lines

    async def follow_logs(
        self,
        id: str,
        *,
        after: str | None = None,
        poll_interval: float | str = 1,
        timeout: float | str | None = None,  # noqa: ASYNC109 (sync twin too)
    ) -> AsyncIterator[LogLine]:
        """Every log line of job or execution ``id`` (after the line id ``after``), as it is
        written, until :data:`LOG_LINGER` seconds after what it follows has ended (see the
        module). Raises :class:`~dogs_core.errors.JobNotFoundError` for an id nobody knows and
        :class:`~dogs_core.errors.WaitTimeoutError` after ``timeout`` (seconds or ``"5m"``)."""
        owner = parse_job_or_execution_id(id)
        _, after = check_log_page(1, check_line_id(after))
        seconds, pause = validate_wait(timeout, poll_interval)
        store = require_role(self.store, Role.FOLLOWING, "follow_logs")
        kind = await self._owner_kind(store, owner)
        since, started = self.clock.now(), anyio.current_time()
        ended_at: float | None = None
        feed = store.watch_log_lines(owner)
        async with contextlib.aclosing(feed):
            live = await _opened(feed)
            while True:
                lines = await self._read_lines(store, owner, after, 1_000)
                for line in lines:
                    yield line
                    after = line.id
                if len(lines) == 1_000:
                    continue
                now = anyio.current_time()
                if ended_at is None and await self._owner_ended(store, kind, owner, since):
                    ended_at = now
                if ended_at is not None and now - ended_at >= LOG_LINGER:
                    return
                if seconds is not None and now - started >= seconds:
                    raise WaitTimeoutError(owner, seconds)
                live = live and await _next_batch(feed)
                if not live or ended_at is not None:
                    await anyio.sleep(pause if ended_at is None else min(pause, 0.25))

    async def watch_progress(
        self,
        job_id: str,
        *,
        poll_interval: float | str = 1,
        timeout: float | str | None = None,  # noqa: ASYNC109 (sync twin too)
    ) -> AsyncIterator[Progress]:
        """Each new progress of job ``job_id`` as its worker writes it (at most one per the
        workers' ``progress_interval``), ending when the job ends, with the final progress of
        the execution that ended it (from its history row). Raises
        :class:`~dogs_core.errors.JobNotFoundError` when the job has neither a record nor
        history, :class:`~dogs_core.errors.WaitTimeoutError` after ``timeout``."""
        owner = parse_id(job_id)
        seconds, pause = validate_wait(timeout, poll_interval)
        store = require_role(self.store, Role.FOLLOWING, "watch_progress")
        since, started = self.clock.now(), anyio.current_time()
        last: Progress | None = None
        seen = False
        feed = store.watch_progress(owner)
        async with contextlib.aclosing(feed):
            live = await _opened(feed)
            while True:
                record, newest = await self._job_state(owner)
                if record is None and newest is None:
                    if seen:
                        return  # ended without history (save_executions_for=0)
                    raise JobNotFoundError(owner)
                seen = True
                current = None if record is None else record.progress
                if current is not None and current != last:
                    last = current
                    yield current
                ended = ended_execution(record, newest, since=since)
                if ended is not None:
                    if ended.progress is not None and ended.progress != last:
                        yield ended.progress
                    return
                if seconds is not None and anyio.current_time() - started >= seconds:
                    raise WaitTimeoutError(owner, seconds)
                live = live and await _next_batch(feed)
                if not live:
                    await anyio.sleep(pause)

    # -- helpers ------------------------------------------------------------------------------

    async def _read_lines(
        self, store: AsyncFollowingStore, owner: str, after: str | None, limit: int
    ) -> list[LogLine]:
        return await retry_transient(
            lambda: store.read_log_lines(owner, after=after, limit=limit),
            what="read log lines",
            deadline=self.operation_timeout,
        )

    async def _job_state(self, job_id: str) -> tuple[JobRecord | None, HistoryRecord | None]:
        """The job's record and newest row (in this order: a job ending in between is seen with
        its row)."""
        record = await retry_transient(
            lambda: self.store.get_record(job_id),
            what="read job",
            deadline=self.operation_timeout,
        )
        rows = await retry_transient(
            lambda: self.store.read_history(job_id=job_id, limit=1),
            what="read history",
            deadline=self.operation_timeout,
        )
        return record, rows[0] if rows else None

    async def _owner_kind(self, store: AsyncFollowingStore, owner: str) -> _Owner:
        """Whether ``owner`` is a job or an execution; JobNotFoundError when neither."""
        record, newest = await self._job_state(owner)
        if record is not None or newest is not None:
            return "job"
        job_id = await retry_transient(
            lambda: store.execution_job_id(owner),
            what="find execution",
            deadline=self.operation_timeout,
        )
        if job_id is not None:
            return "execution"
        lines = await self._read_lines(store, owner, None, 1)
        if lines:
            return "job" if lines[0].job_id == owner else "execution"
        raise JobNotFoundError(owner, "no job and no execution with this id")

    async def _owner_ended(
        self, store: AsyncFollowingStore, kind: _Owner, owner: str, since: datetime
    ) -> bool:
        if kind == "job":
            record, newest = await self._job_state(owner)
            return (record is None and newest is None) or ended_execution(
                record, newest, since=since
            ) is not None
        job_id = await retry_transient(
            lambda: store.execution_job_id(owner),
            what="find execution",
            deadline=self.operation_timeout,
        )
        if job_id is None:
            return True
        record, _ = await self._job_state(job_id)
        return (
            record is None
            or record.lock_id != owner
            or record.state(self.clock.now()) is not JobState.RUNNING
        )


async def _opened(feed: AsyncIterator[list[str]]) -> bool:
    """Wait for a feed to open; ``False`` where the store has none (then poll)."""
    try:
        await anext(feed)
    except ChangeFeedUnavailableError:
        return False
    except Exception as error:
        logger.warning("change feed failed to open, following by polling: %r", error)
        return False
    return True


async def _next_batch(feed: AsyncIterator[list[str]]) -> bool:
    """Wait for the next batch or heartbeat; ``False`` once the feed failed or ended."""
    try:
        await anext(feed)
    except StopAsyncIteration:
        return False
    except Exception as error:
        logger.warning("change feed failed, following by polling: %r", error)
        return False
    return True
