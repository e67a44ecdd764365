"""The log lines an execution keeps (``store_logs``): what ``ctx.logger`` captures, per execution.

A job with ``store_logs`` gets a ``ctx.logger`` that also hands its records to the execution's
:class:`LogCapture` (made on first use, as every job logger is): each record at the job's level
or above becomes a :class:`~dogs_core.domain.log_lines.LogLine`, whatever the application's
logging configuration (the record still goes to ``logging`` as before). The
capture numbers the lines, keeps at most ``max_log_lines`` of them, counts the others and, when
the execution ends, adds one last line saying how many were dropped. Lines go to the workers'
:class:`~dogs_core.runtime.plumbing.writers.LogShipper`, which writes them in batches: logging
never
waits for a write and never fails the job.

Each line keeps the trace id of the execution: the current one when a tracing subscriber gives
it (:attr:`~dogs_core.runtime.plumbing.telemetry.Telemetry.trace_id_source`, read at the
execution's first
line, in the handler's context), else the one of the call that scheduled the job (the record's
W3C ``traceparent``), else none.
"""

from __future__ import annotations

import sys
import threading
import traceback
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Protocol

from dogs_core.domain.definitions import JobDefinition
from dogs_core.domain.log_lines import LogLine, clip, dropped_line, line_id
from dogs_core.domain.records import ClaimedJob
from dogs_core.ports import Clock
from dogs_core.runtime.plumbing.clock import now_in_any_thread
from dogs_core.runtime.plumbing.telemetry import Telemetry

__all__ = ["LogCapture", "Shipper", "capture_for", "trace_id_of"]

_WARNING = 30


def capture_for(
    shipper: Shipper | None,
    clock: Clock,
    telemetry: Telemetry,
    job: ClaimedJob,
    definition: JobDefinition,
) -> LogCapture | None:
    """The capture of ``job``'s execution, or ``None`` when its job keeps no lines (or the
    workers have no ``shipper``)."""
    level = definition.log_level
    if level is None or shipper is None:
        return None
    return LogCapture(shipper, clock, telemetry, job, definition, level)


class LogCapture:
    """The lines of one execution (thread-safe: a sync handler logs from its thread)."""

    __slots__ = (
        "_cap",
        "_clock",
        "_dropped",
        "_ended",
        "_guard",
        "_job",
        "_last",
        "_retention",
        "_seq",
        "_shipper",
        "_telemetry",
        "_trace_id",
        "level",
    )

    def __init__(
        self,
        shipper: Shipper,
        clock: Clock,
        telemetry: Telemetry,
        job: ClaimedJob,
        definition: JobDefinition,
        level: int,
    ) -> None:
        self._clock = clock
        self._telemetry = telemetry
        self._job = job
        self._shipper = shipper
        self._retention = definition.save_executions_for
        self._cap = definition.max_log_lines
        self.level = level
        """Records below this level are not kept."""
        self._guard = threading.Lock()
        self._seq = 0
        self._dropped = 0
        self._ended = False
        self._last: datetime | None = None
        self._trace_id: str | bool | None = False  # False: not looked up yet

    def keep(self, level: int, msg: object, args: tuple[object, ...], exc_info: object) -> None:
        """Keep one ``logging`` call's record (``msg % args``, the traceback of ``exc_info``)."""
        if level >= self.level:
            self.add(level, _message(msg, args), _exception_text(exc_info))

    def add(self, level: int, message: str, exception: str | None) -> None:
        """Keep one line (or count it as dropped past the cap)."""
        with self._guard:
            if self._ended:
                return
            if self._seq >= self._cap:
                self._dropped += 1
                return
            seq, at = self._next()
        if self._trace_id is False:
            self._trace_id = trace_id_of(self._telemetry, self._job)
        trace_id = self._trace_id if isinstance(self._trace_id, str) else None
        self._shipper.put(self._line(seq, at, level, message, exception, trace_id))

    def end(self) -> None:
        """The execution ended: later lines are not kept; one for those dropped, if any."""
        with self._guard:
            if self._ended:
                return
            self._ended = True
            dropped = self._dropped
            if not dropped:
                return
            seq, at = self._next()
        message = dropped_line(dropped, self._cap)
        trace_id = self._trace_id if isinstance(self._trace_id, str) else None
        self._shipper.put(self._line(seq, at, _WARNING, message, None, trace_id))

    def _next(self) -> tuple[int, datetime]:
        """The next line's number and time (never before the previous line's)."""
        seq = self._seq
        self._seq += 1
        now = now_in_any_thread(self._clock)
        last = self._last
        if last is not None and now < last:
            now = last
        self._last = now
        return seq, now

    def _line(
        self,
        seq: int,
        at: datetime,
        level: int,
        message: str,
        exception: str | None,
        trace_id: str | None,
    ) -> LogLine:
        job = self._job
        return LogLine(
            id=line_id(at, job.execution_id, seq),
            execution_id=job.execution_id,
            job_id=job.job_id,
            job_name=job.job_name,
            seq=seq,
            time=at,
            level=level,
            message=clip(message),
            expires_at=at + max(self._retention, timedelta(0)),
            exception=None if exception is None else clip(exception),
            trace_id=trace_id,
        )


class Shipper(Protocol):
    """What a capture hands its lines to
    (:class:`~dogs_core.runtime.plumbing.writers.LogShipper`)."""

    def put(self, line: LogLine) -> bool:
        """Take ``line`` for a later batch, at once (``False``: dropped, the buffer is full)."""
        ...


def trace_id_of(telemetry: Telemetry, job: ClaimedJob) -> str | None:
    """The trace id of ``job``'s execution (see the module), or ``None``."""
    source = telemetry.trace_id_source
    if source is not None:
        try:
            current = source()
        except Exception:  # a tracing integration must not fail a log call
            current = None
        if current:
            return current
    carrier = job.trace_context
    parent = None if carrier is None else carrier.get("traceparent")
    if isinstance(parent, str):
        parts = parent.split("-")
        if len(parts) >= 4 and len(parts[1]) == 32 and parts[1] != "0" * 32:
            return parts[1]
    return None


def _message(msg: object, args: tuple[object, ...]) -> str:
    """The record's message as ``logging`` formats it (``msg % args``)."""
    text = str(msg)
    if not args:
        return text
    if len(args) == 1 and isinstance(args[0], Mapping) and args[0]:
        args = (args[0],)  # logging's single-mapping form: "%(name)s" % {...}
        try:
            return text % args[0]
        except (TypeError, ValueError, KeyError):
            pass
    try:
        return text % args
    except (TypeError, ValueError, KeyError):
        return f"{text} {args!r}"


def _exception_text(exc_info: object) -> str | None:
    """The traceback of a record's ``exc_info`` (``True``: the exception being handled)."""
    if not exc_info:
        return None
    info: object = exc_info
    if isinstance(info, BaseException):
        info = (type(info), info, info.__traceback__)
    elif not isinstance(info, tuple):
        info = sys.exc_info()
    if not isinstance(info, tuple) or len(info) != 3 or info[1] is None:
        return None
    kind, error, tb = info
    return "".join(traceback.format_exception(kind, error, tb))
