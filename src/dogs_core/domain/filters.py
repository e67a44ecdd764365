"""The filters of a search, declared once: what each edge (the ``dogs`` command's flags, the
dashboard's forms, a script's keywords) types as text, and what that text means.

A search's filters are a table of :class:`Filter`: the key a form or a query string uses, the
keyword of the client method it becomes, the command's flag, its help, and the one parser that
turns the typed text into the keyword's value. :data:`EXECUTION_FILTERS` are those of
``find_executions`` (``dogs history``, the dashboard's Executions page); :func:`filters_from_text`
reads a whole form or command line by the table. The CLI builds its options from the table and
the dashboard parses its forms with it, so one input means one thing everywhere.

Times and windows have one parser each, used by every edge: :func:`parse_moment` (an ISO 8601
time, UTC when it names no zone, or a duration ago such as ``2h``) and :func:`parse_window` (a
duration greater than zero and at most a maximum, such as ``15m``, ``1h`` or ``1d``). Errors are
:class:`~dogs_core.errors.InvalidOptionError` naming the filter's key and the text typed, with
no Python representation in the message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from dogs_core.domain import validation
from dogs_core.domain.finding import MAX_ERROR_WINDOW, OwnerMatch, ParamsMatch
from dogs_core.domain.records import HistoryStatus, JobState
from dogs_core.domain.steering import check_state
from dogs_core.errors import InvalidOptionError, ValidationError, duration_text

__all__ = [
    "EXECUTION_FILTERS",
    "RECORD_FILTERS",
    "SEARCH_KEYWORDS",
    "STATES_IN_WORDS",
    "Filter",
    "filters_from_text",
    "parse_moment",
    "parse_window",
]

#: Every job state, for help texts: "scheduled, due, ..., held or sleeping."
STATES_IN_WORDS: Final = (
    ", ".join(state.value for state in list(JobState)[:-1]) + f" or {list(JobState)[-1].value}."
)

#: What a filter's parser is given: the text typed (stripped, never empty) and the time now.
Parser = Callable[[str, str, datetime], object]


def parse_moment(field: str, text: str, now: datetime) -> datetime:
    """``text`` as a time: a duration ago (``2h``, ``1d``) or an ISO 8601 time (``Z`` or an
    offset; a time without one is UTC, as a browser's ``datetime-local`` sends it)."""
    typed = text.strip()
    try:
        return now - validation.duration(field, typed)
    except ValidationError:
        pass
    try:
        moment = datetime.fromisoformat(typed.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidOptionError(
            field, text, "expected a duration ago (2h) or an ISO 8601 time"
        ) from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def parse_window(field: str, text: object, maximum: timedelta = MAX_ERROR_WINDOW) -> timedelta:
    """``text`` (or a ``timedelta``) as a window back from now: greater than zero and at most
    ``maximum`` (seven days, the history's default retention)."""
    length = validation.duration(field, text.strip() if isinstance(text, str) else text)
    if length <= timedelta(0):
        raise InvalidOptionError(field, length, "must be greater than zero, e.g. 15m, 1h or 1d")
    if length > maximum:
        why = " (the history's default retention)" if maximum == MAX_ERROR_WINDOW else ""
        raise InvalidOptionError(field, length, f"must be at most {duration_text(maximum)}{why}")
    return length


def _text(field: str, text: str, now: datetime) -> str:
    return text


def _status(field: str, text: str, now: datetime) -> str:
    if text not in {status.value for status in HistoryStatus}:
        choices = ", ".join(status.value for status in HistoryStatus)
        raise InvalidOptionError(field, text, f"expected one of {choices}")
    return text


def _owner(field: str, text: str, now: datetime) -> OwnerMatch:
    return OwnerMatch.parse(text, field=field)


def _params(field: str, text: str, now: datetime) -> ParamsMatch:
    return ParamsMatch.parse(text, field=field)


@dataclass(frozen=True, slots=True)
class Filter:
    """One filter of a search, as every edge sees it."""

    key: str
    """Its name in a form, a query string and a command's error messages (``since``)."""
    keyword: str
    """The keyword of the client method it becomes (``since``; ``name`` is the job, ``job``)."""
    flag: str
    """The ``dogs`` command's flag (``--since``)."""
    help: str
    parse: Parser = _text
    """Typed text (stripped, not empty) -> the keyword's value; raises InvalidOptionError."""


#: The filters of the executions (history rows): ``find_executions``, ``archived_executions``,
#: ``dogs history``, the dashboard's Executions page.
EXECUTION_FILTERS: Final[tuple[Filter, ...]] = (
    Filter("name", "job", "--name", "Only this job name."),
    Filter("job_id", "job_id", "--job-id", "Only this job (its id)."),
    Filter("status", "status", "--status", "success, error, stale, cancelled or snoozed.", _status),
    Filter(
        "error_type", "error_type", "--error-type", "Only errors of this type, e.g. app.Timeout."
    ),
    Filter("owner", "owner", "--owner", "Run by this host, host:pid or instance id.", _owner),
    Filter(
        "since",
        "since",
        "--since",
        "Started at or after: 2h (ago) or ISO 8601 (UTC unless it names a zone).",
        parse_moment,
    ),
    Filter(
        "until",
        "until",
        "--until",
        "Started before: 10m (ago) or ISO 8601 (UTC unless it names a zone).",
        parse_moment,
    ),
    Filter(
        "param", "params", "--param", "Params path equal to a value: user.id=42, plan=pro.", _params
    ),
    Filter("unique_key", "unique_key", "--unique-key", "Only the job(s) of this unique key."),
)


def _state(field: str, text: str, now: datetime) -> JobState | None:
    return check_state(text, field=field)


#: The filters of the job records: ``find_jobs`` and ``search_jobs``, ``dogs jobs list``, the
#: dashboard's job list. ``param``, ``owner`` and the creation times are searches
#: (:attr:`SEARCH_KEYWORDS`): a bounded read no index serves alone.
RECORD_FILTERS: Final[tuple[Filter, ...]] = (
    Filter("name", "job", "--name", "Only this job name."),
    Filter(
        "state", "state", "--state", STATES_IN_WORDS, _state,
    ),
    Filter("unique_key", "unique_key", "--unique-key", "Only the job holding this unique key."),
    Filter(
        "param", "params", "--param", "Params path equal to a value: user.id=42, plan=pro.", _params
    ),
    Filter("owner", "owner", "--owner", "Run now by this host, host:pid or instance id.", _owner),
    Filter(
        "created_since", "created_since", "--created-since",
        "Created at or after: 2h (ago) or ISO 8601 (UTC unless it names a zone).", parse_moment,
    ),
    Filter(
        "created_until", "created_until", "--created-until",
        "Created before: 10m (ago) or ISO 8601 (UTC unless it names a zone).", parse_moment,
    ),
)  # fmt: skip

#: The record filters only ``search_jobs`` takes (``find_jobs`` reads by index alone).
SEARCH_KEYWORDS: Final = frozenset({"params", "owner", "created_since", "created_until"})


def filters_from_text(
    filters: Sequence[Filter], texts: Mapping[str, str | None], now: datetime
) -> dict[str, object]:
    """The client keywords of what was typed (``key`` -> text; blank or missing: not given),
    each parsed by its filter; the first bad one raises InvalidOptionError naming its key."""
    known = {one.key for one in filters}
    unknown = sorted(set(texts) - known)
    if unknown:
        filters_are = ", ".join(sorted(known))
        raise InvalidOptionError(
            unknown[0], texts[unknown[0]], f"not a filter; the filters are {filters_are}"
        )
    keywords: dict[str, object] = {}
    for one in filters:
        typed = texts.get(one.key)
        if typed is None or not typed.strip():
            continue
        keywords[one.keyword] = one.parse(one.key, typed.strip(), now)
    return keywords
