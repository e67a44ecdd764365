"""The change feeds of the in-memory store: who listens, and how a write reaches them.

Every write of the in-memory state that may make a record claimable (an insert, a reschedule,
a release, an unlock, a partition repair), every history row first written, every pause or
resume that changed something and every change of a workflow is offered to the
:class:`FeedHub` of that state, under the state's lock, from whatever thread wrote it. Each
subscriber keeps what it accepts in a buffer of its own:

* a sync feed (:meth:`FeedHub.records`) in a ``queue.SimpleQueue``, read with a timeout
  of :data:`~dogs_core.domain.feeds.FEED_HEARTBEAT_SECONDS` (the heartbeat);
* an async feed (:meth:`FeedHub.watch_records_async`) in a ``threading.Lock``-guarded list; the
  writer wakes the feed's task with an ``anyio.Event``, set directly when it writes from the
  event loop's thread and through the loop's token (``run_sync_soon``, which never blocks the
  writer) from any other thread. The heartbeat is an ``anyio.move_on_after``, so under a
  virtual clock (trio's ``MockClock``) it follows virtual time. A consumer that reads the feed
  inside :func:`~dogs_core.runtime.plumbing.watching.without_heartbeats` (the workers' change
  watcher
  and pause feed) gets none: under a virtual clock each heartbeat is a step the clock has to
  stop at, which made an idle virtual day cost seconds of CPU.

A subscriber exists from the feed's first ``next()`` (which yields ``[]``) until the feed is
closed; a change made while nobody listens is not kept anywhere (a notification, not a queue).
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import AsyncGenerator, Callable, Generator, Sequence
from typing import Any, Final, Generic, TypeVar

import anyio
import anyio.lowlevel

from dogs_core.domain.feeds import (
    FEED_HEARTBEAT_SECONDS,
    check_feed_names,
    check_optional_feed_names,
)
from dogs_core.domain.log_lines import LogLine, check_owner_id
from dogs_core.domain.records import HistoryRecord, JobRecord
from dogs_core.domain.wakeups import RecordChange
from dogs_core.runtime.plumbing.watching import heartbeats_wanted

__all__ = ["FeedHub"]

T = TypeVar("T")

#: Most changes in one batch (a burst larger than that is several batches).
MAX_BATCH: Final = 1_000


class _Subscriber(Generic[T]):
    """One open feed: what it accepts, and where an accepted item goes (``deliver`` must not
    block: it runs under the state's lock)."""

    __slots__ = ("accepts", "deliver")

    def __init__(self, accepts: Callable[[T], bool], deliver: Callable[[T], None]) -> None:
        self.accepts = accepts
        self.deliver = deliver


class _Waker:
    """Wakes one async feed's task from any thread, without blocking the writer."""

    def __init__(self) -> None:
        self._thread = threading.get_ident()
        self._token = anyio.lowlevel.current_token()
        self._lock = threading.Lock()
        self._event = anyio.Event()
        self._pending = False

    def wake(self) -> None:
        with self._lock:
            if self._pending:
                return
            self._pending = True
            event = self._event
        if threading.get_ident() == self._thread:
            event.set()
            return
        with contextlib.suppress(Exception):  # the loop has ended: nobody waits any more
            self._token.backend_class.run_sync_soon(event.set, (), self._token.native_token)

    async def wait(self) -> None:
        """Until woken (or a heartbeat's time, when the consumer wants heartbeats), then ready
        for the next wake-up."""
        with self._lock:
            event = self._event
        if heartbeats_wanted():
            with anyio.move_on_after(FEED_HEARTBEAT_SECONDS):
                await event.wait()
        else:
            await event.wait()
        with self._lock:
            self._pending = False
            self._event = anyio.Event()


class FeedHub:
    """The subscribers of one in-memory state. :meth:`offer_record`, :meth:`offer_history` and
    :meth:`offer_pause` are called by the state's writes; the ``watch_*`` methods open feeds."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # kind ("records", "history", "pauses") -> its subscribers, replaced (never mutated)
        # under the lock, so that a writer reads a consistent tuple without taking it.
        self._subscribers: dict[str, tuple[_Subscriber[Any], ...]] = {
            "records": (),
            "history": (),
            "pauses": (),
            "log_lines": (),
            "jobs": (),
            "workflows": (),
        }
        self.jobs_watched = False
        """Whether a feed follows the changes of some job's record (``watch_progress``)."""

    # ------------------------------------------------------------------ the writers' side

    @property
    def watched(self) -> bool:
        """Whether any feed is open (writes skip the offer when none is)."""
        return any(self._subscribers.values())

    def offer_record(self, record: JobRecord) -> None:
        """``record`` (as stored after a write) may have become claimable."""
        subscribers = self._subscribers["records"]
        if not subscribers:
            return
        change = RecordChange(
            job_name=record.job_name, partition=record.partition, next_run_at=record.next_run_at
        )
        for subscriber in subscribers:
            if subscriber.accepts(change):
                subscriber.deliver(change)

    def offer_history(
        self, row: HistoryRecord, copy: Callable[[HistoryRecord], HistoryRecord]
    ) -> None:
        """``row`` was written for the first time; each subscriber gets its own ``copy``."""
        for subscriber in self._subscribers["history"]:
            if subscriber.accepts(row):
                subscriber.deliver(copy(row))

    def offer_pause(self, job_name: str) -> None:
        """``job_name`` (or ``"*"``) was paused or resumed (a call that changed nothing is not
        offered)."""
        for subscriber in self._subscribers["pauses"]:
            subscriber.deliver(job_name)

    def offer_log_lines(self, lines: Sequence[LogLine]) -> None:
        """``lines`` were kept; each subscriber that follows their job or execution gets
        their ids."""
        for subscriber in self._subscribers["log_lines"]:
            for line in lines:
                if subscriber.accepts(line):
                    subscriber.deliver(line.id)

    def offer_job(self, job_id: str) -> None:
        """The record ``job_id`` was written (any change)."""
        for subscriber in self._subscribers["jobs"]:
            if subscriber.accepts(job_id):
                subscriber.deliver(job_id)

    def offer_workflow(self, workflow_id: str) -> None:
        """The workflow ``workflow_id`` (or one of its steps) changed."""
        for subscriber in self._subscribers["workflows"]:
            if subscriber.accepts(workflow_id):
                subscriber.deliver(workflow_id)

    # ------------------------------------------------------------------ the feeds

    # Every feed is a generator that checks its arguments at its first next(), as the MongoDB
    # store's feeds do (an async generator runs nothing before it is advanced).

    def records(self, job_names: Sequence[str]) -> Generator[list[RecordChange], None, None]:
        return self._sync_feed("records", lambda: _name_filter(job_names))

    def history(
        self, *, job_ids: Sequence[str] | None = None, job_names: Sequence[str] | None = None
    ) -> Generator[list[HistoryRecord], None, None]:
        return self._sync_feed("history", lambda: _history_filter(job_ids, job_names))

    def step_rows(self, except_instance: str | None) -> Generator[list[HistoryRecord], None, None]:
        return self._sync_feed("history", lambda: _others_filter(except_instance))

    def step_rows_async(
        self, *, except_instance: str | None = None
    ) -> AsyncGenerator[list[HistoryRecord], None]:
        return self._async_feed("history", lambda: _others_filter(except_instance))

    def pauses(self) -> Generator[list[str], None, None]:
        return self._sync_feed("pauses", lambda: _every)

    def log_lines(self, owner_id: str) -> Generator[list[str], None, None]:
        return self._sync_feed("log_lines", lambda: _owner_filter(owner_id))

    def jobs(self, job_id: str) -> Generator[list[str], None, None]:
        return self._sync_feed("jobs", lambda: _job_filter(job_id))

    def log_lines_async(self, owner_id: str) -> AsyncGenerator[list[str], None]:
        return self._async_feed("log_lines", lambda: _owner_filter(owner_id))

    def jobs_async(self, job_id: str) -> AsyncGenerator[list[str], None]:
        return self._async_feed("jobs", lambda: _job_filter(job_id))

    def workflows(self, workflow_ids: Sequence[str]) -> Generator[list[str], None, None]:
        return self._sync_feed("workflows", lambda: _id_filter(workflow_ids))

    def workflows_async(self, workflow_ids: Sequence[str]) -> AsyncGenerator[list[str], None]:
        return self._async_feed("workflows", lambda: _id_filter(workflow_ids))

    def records_async(self, job_names: Sequence[str]) -> AsyncGenerator[list[RecordChange], None]:
        return self._async_feed("records", lambda: _name_filter(job_names))

    def history_async(
        self, *, job_ids: Sequence[str] | None = None, job_names: Sequence[str] | None = None
    ) -> AsyncGenerator[list[HistoryRecord], None]:
        return self._async_feed("history", lambda: _history_filter(job_ids, job_names))

    def pauses_async(self) -> AsyncGenerator[list[str], None]:
        return self._async_feed("pauses", lambda: _every)

    def _sync_feed(
        self, kind: str, accepts: Callable[[], Callable[[T], bool]]
    ) -> Generator[list[T], None, None]:
        items: queue.SimpleQueue[T] = queue.SimpleQueue()
        subscriber = _Subscriber(accepts(), items.put)
        self._subscribe(kind, subscriber)
        try:
            yield []
            while True:
                try:
                    batch = [items.get(timeout=FEED_HEARTBEAT_SECONDS)]
                except queue.Empty:
                    yield []
                    continue
                while len(batch) < MAX_BATCH:
                    try:
                        batch.append(items.get_nowait())
                    except queue.Empty:
                        break
                yield batch
        finally:
            self._unsubscribe(kind, subscriber)

    async def _async_feed(
        self, kind: str, accepts: Callable[[], Callable[[T], bool]]
    ) -> AsyncGenerator[list[T], None]:
        check = accepts()
        waker = _Waker()
        lock = threading.Lock()
        buffered: list[T] = []

        def deliver(item: T) -> None:
            with lock:
                buffered.append(item)
            waker.wake()

        subscriber = _Subscriber(check, deliver)
        self._subscribe(kind, subscriber)
        try:
            yield []
            while True:
                await waker.wait()
                with lock:
                    batch = buffered[:MAX_BATCH]
                    del buffered[:MAX_BATCH]
                    more = bool(buffered)
                if more:
                    waker.wake()
                yield batch
        finally:
            self._unsubscribe(kind, subscriber)

    def _subscribe(self, kind: str, subscriber: _Subscriber[T]) -> None:
        with self._lock:
            self._subscribers[kind] = (*self._subscribers[kind], subscriber)
            self.jobs_watched = bool(self._subscribers["jobs"])

    def _unsubscribe(self, kind: str, subscriber: _Subscriber[T]) -> None:
        with self._lock:
            self._subscribers[kind] = tuple(
                s for s in self._subscribers[kind] if s is not subscriber
            )
            self.jobs_watched = bool(self._subscribers["jobs"])


def _every(_: object) -> bool:
    return True


def _owner_filter(owner_id: str) -> Callable[[Any], bool]:
    """Accepts a :class:`LogLine` of ``owner_id`` (the feed yields its id)."""
    owner = check_owner_id(owner_id)
    return lambda line: isinstance(line, LogLine) and owner in (line.job_id, line.execution_id)


def _job_filter(job_id: str) -> Callable[[Any], bool]:
    wanted = check_owner_id(job_id, field="job_id")
    return lambda changed: changed == wanted


def _name_filter(job_names: Sequence[str]) -> Callable[[RecordChange], bool]:
    names = frozenset(check_feed_names("job_names", job_names))
    return lambda change: change.job_name in names


def _id_filter(workflow_ids: Sequence[str]) -> Callable[[str], bool]:
    ids = frozenset(check_feed_names("workflow_ids", workflow_ids))
    return lambda workflow_id: workflow_id in ids


def _others_filter(except_instance: str | None) -> Callable[[HistoryRecord], bool]:
    """The rows not written by the ``Workers`` instance ``except_instance``."""
    return lambda row: row.owner is None or row.owner.instance_id != except_instance


def _history_filter(
    job_ids: Sequence[str] | None, job_names: Sequence[str] | None
) -> Callable[[HistoryRecord], bool]:
    ids = check_optional_feed_names("job_ids", job_ids)
    names = check_optional_feed_names("job_names", job_names)
    id_set = None if ids is None else frozenset(ids)
    name_set = None if names is None else frozenset(names)
    return lambda row: (
        (id_set is None or row.job_id in id_set) and (name_set is None or row.job_name in name_set)
    )
