"""The log lines an execution keeps with its job (``store_logs``): the options, the line, its id.

With ``@jobs.event(store_logs=True)`` (or a level) the records a handler logs through
``ctx.logger`` at that level or above are kept in a logs collection of our own, at most
``max_log_lines`` per execution, then one last line saying how many were dropped
(:func:`dropped_line`). A line expires with the execution's history row (the job's
``save_executions_for``).

Pure: the runtime captures and ships the lines (:mod:`dogs_core.runtime.execution.log_capture`);
the stores
keep them (:mod:`dogs_core.ports.following`).

Ids. A line's id is ``<ms since the epoch, 13 digits>-<execution id>-<seq, 6 digits>``
(:func:`line_id`), so ids sort in time order across executions and in ``seq`` order within one
(the runtime never lets an execution's times go back). A reader pages and follows by id: the
lines after the last id it saw.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Final

from dogs_core.domain.values import value
from dogs_core.errors import InvalidIdError, InvalidOptionError

__all__ = [
    "DEFAULT_LOG_LEVEL",
    "DEFAULT_MAX_LOG_LINES",
    "LEVEL_NAMES",
    "MAX_LOG_LINES",
    "MAX_LOG_MESSAGE",
    "MAX_LOG_PAGE",
    "LogLine",
    "check_line_id",
    "check_log_options",
    "check_log_page",
    "check_owner_id",
    "clip",
    "dropped_line",
    "level_name",
    "line_id",
    "log_options",
]

#: ``store_logs=True`` keeps INFO and above.
DEFAULT_LOG_LEVEL: Final = 20
#: Lines kept per execution unless the job says otherwise (then one "dropped" line).
DEFAULT_MAX_LOG_LINES: Final = 1_000
#: The largest ``max_log_lines`` accepted.
MAX_LOG_LINES: Final = 100_000
#: A line's message and exception text are cut to this many characters each.
MAX_LOG_MESSAGE: Final = 8 * 1024
#: The most lines one read returns.
MAX_LOG_PAGE: Final = 10_000

#: The standard levels by name (``logging``'s numbers; the domain imports no ``logging``).
LEVEL_NAMES: Final[Mapping[str, int]] = {
    "DEBUG": 10,
    "INFO": 20,
    "WARNING": 30,
    "ERROR": 40,
    "CRITICAL": 50,
}
_NAMES_BY_LEVEL: Final = {level: name for name, level in LEVEL_NAMES.items()}
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


@value
class LogLine:
    """One log record an execution kept.

    ``id`` sorts lines in time order (:func:`line_id`); ``seq`` counts the execution's lines
    from 0; ``level`` is ``logging``'s number; ``exception`` the formatted traceback of
    ``exc_info`` when there was one; ``trace_id`` the trace the execution ran in (32 hex digits)
    when tracing is on; ``expires_at`` when the store drops the line.
    """

    id: str
    execution_id: str
    job_id: str
    job_name: str
    seq: int
    time: datetime
    level: int
    message: str
    expires_at: datetime
    exception: str | None = None
    trace_id: str | None = None

    @property
    def level_name(self) -> str:
        return level_name(self.level)


def level_name(level: int) -> str:
    """``INFO`` for 20, ``Level 25`` for a level without a standard name (as ``logging``)."""
    return _NAMES_BY_LEVEL.get(level, f"Level {level}")


def log_options(store_logs: object, max_log_lines: object) -> tuple[int | None, int]:
    """A job's ``store_logs`` and ``max_log_lines`` checked: the level kept from (``None``: no
    lines kept) and the cap per execution.

    ``store_logs``: ``False``/``None`` (off, the default), ``True`` (INFO and above), a level
    name (``"debug"``, ``"WARNING"``...) or a level number from 0 to 50. ``max_log_lines``: an
    int from 1 to :data:`MAX_LOG_LINES`."""
    if isinstance(max_log_lines, bool) or not isinstance(max_log_lines, int):
        raise InvalidOptionError("max_log_lines", max_log_lines, "must be an int")
    if not 1 <= max_log_lines <= MAX_LOG_LINES:
        raise InvalidOptionError(
            "max_log_lines", max_log_lines, f"must be from 1 to {MAX_LOG_LINES}"
        )
    return _level(store_logs), max_log_lines


def _level(store_logs: object) -> int | None:
    if store_logs is None or store_logs is False:
        return None
    if store_logs is True:
        return DEFAULT_LOG_LEVEL
    if isinstance(store_logs, str):
        level = LEVEL_NAMES.get(store_logs.strip().upper())
        if level is None:
            names = ", ".join(LEVEL_NAMES)
            raise InvalidOptionError(
                "store_logs", store_logs, f"is not a level name; expected one of {names}"
            )
        return level
    if isinstance(store_logs, int) and 0 <= store_logs <= 50:
        return store_logs
    raise InvalidOptionError(
        "store_logs",
        store_logs,
        "must be True, False, a level name (INFO, WARNING...) or a level number from 0 to 50",
    )


def check_log_options(level: int | None, save_executions_for: timedelta) -> None:
    """Options that conflict: lines kept by a job that keeps no history would never expire
    with it."""
    if level is not None and save_executions_for <= timedelta(0):
        raise InvalidOptionError(
            "store_logs",
            level,
            "conflicts with save_executions_for=0: log lines expire with the history, "
            "which this job does not keep",
        )


def line_id(time: datetime, execution_id: str, seq: int) -> str:
    """The id of line ``seq`` of ``execution_id`` logged at ``time`` (see the module)."""
    millis = (time - _EPOCH) // timedelta(milliseconds=1)
    return f"{millis:013d}-{execution_id}-{seq:06d}"


_LINE_ID: Final = re.compile(r"\d{13}-[0-9A-Za-z]{17}-\d{6}")


def check_line_id(after: object, *, field: str = "after") -> str | None:
    """``after`` of a caller's read: ``None`` or a line id as :func:`line_id` makes them; any
    other text raises :class:`~dogs_core.errors.InvalidIdError` (it would page from nowhere)."""
    if after is None:
        return None
    if not isinstance(after, str) or _LINE_ID.fullmatch(after.strip()) is None:
        example = line_id(_EPOCH, "2" * 17, 0)
        raise InvalidIdError(field, after, f"not a log line id (such as {example})")
    return after.strip()


def dropped_line(dropped: int, cap: int) -> str:
    """The message of an execution's last line when it logged more than its cap."""
    lines = "line" if dropped == 1 else "lines"
    return f"{dropped} {lines} dropped (max_log_lines={cap} per execution)"


def clip(text: str) -> str:
    """``text`` cut to :data:`MAX_LOG_MESSAGE` characters (with a note of the cut)."""
    if len(text) <= MAX_LOG_MESSAGE:
        return text
    cut = len(text) - MAX_LOG_MESSAGE
    return f"{text[:MAX_LOG_MESSAGE]}... [{cut} more characters]"


def check_log_page(limit: object, after: object) -> tuple[int, str | None]:
    """A read's ``limit`` (1 to :data:`MAX_LOG_PAGE`) and ``after`` (a line id or ``None``)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LOG_PAGE:
        raise InvalidOptionError("limit", limit, f"must be an int from 1 to {MAX_LOG_PAGE}")
    if after is not None and (not isinstance(after, str) or not after):
        raise InvalidOptionError("after", after, "must be a line id (a non-empty string) or None")
    return limit, after


def check_owner_id(owner_id: object, *, field: str = "id") -> str:
    """A job id or an execution id whose lines are read or followed: a non-empty string."""
    if not isinstance(owner_id, str) or not owner_id:
        raise InvalidOptionError(
            field, owner_id, "must be a job id or an execution id (a non-empty string)"
        )
    return owner_id
