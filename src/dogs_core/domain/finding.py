"""Finding jobs and their executions, and grouping their errors: the queries an operator asks
and the pure part of their answers (no I/O).

A query is a value checked once here, whatever the store: :class:`ExecutionQuery` (history rows:
newest first, across every job or of one, by status, error type, owner, time range, unique key
and params), :class:`RecordQuery` (records: by name, state, unique key, owner, creation time,
params). Every filter is an equality or a range; each store says which of them an index serves
(docs/finding.md), and bounds the rest.

Params are matched by path equality (:class:`ParamsMatch`, typed ``user.id=42``): the value is
read as JSON when it is a JSON scalar (``42``, ``true``, ``null``, ``"42"``), else as the text
typed, so ``plan=pro`` matches the string ``"pro"``.

Errors are grouped by their type and a fingerprint of their message (:func:`error_fingerprint`:
numbers, ids and quoted values replaced by placeholders, so ``user 42 not found`` and ``user 7
not found`` are one group); :func:`merge_error_groups` folds a store's exact groups into those.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Generic, TypeVar

from dogs_core.domain import validation
from dogs_core.domain.records import (
    HistoryRecord,
    HistoryStatus,
    JobRecord,
    JobState,
    NameStatus,
    Owner,
)
from dogs_core.domain.stats import UNKNOWN_ERROR_TYPE
from dogs_core.domain.tags import validate_tag_filter
from dogs_core.errors import InvalidOptionError

__all__ = [
    "DEFAULT_ERROR_ROWS",
    "MAX_ERROR_ROWS",
    "MAX_PARAMS_DEPTH",
    "Archived",
    "ErrorGroup",
    "ErrorReport",
    "ErrorScan",
    "ExecutionCursor",
    "ExecutionPage",
    "ExecutionQuery",
    "FoundJob",
    "JobLookup",
    "OwnerMatch",
    "ParamsMatch",
    "RawErrorGroup",
    "RecordQuery",
    "check_error_length",
    "check_error_window",
    "error_fingerprint",
    "merge_error_groups",
    "newest_to_read",
    "owner_matches",
    "params_match",
    "record_created_at",
    "uuid7_floor",
    "with_slots",
]

T = TypeVar("T")
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)

#: The deepest params path a match accepts (``a.b.c.d.e.f.g.h``).
MAX_PARAMS_DEPTH: Final = 8
#: How many of the newest error rows of a window an error report groups by default, and at
#: most: the bound of its cost (a report says when the window held more).
DEFAULT_ERROR_ROWS: Final = 50_000
MAX_ERROR_ROWS: Final = 500_000
#: The longest window an error report covers: the history's default retention.
MAX_ERROR_WINDOW: Final = timedelta(days=7)

_SEGMENT = re.compile(r"^[A-Za-z0-9_\-]+$")
_NOT_IDS = {"true", "false", "null"}


# -- params ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ParamsMatch:
    """``params.<path> == value``: ``path`` is dotted (``user.id``), each segment letters,
    digits, ``_`` or ``-``; ``value`` a JSON scalar."""

    path: str
    value: str | int | float | bool | None

    @classmethod
    def parse(cls, text: object, *, field: str = "params") -> ParamsMatch:
        """``path=value`` as typed (``user_id=42``, ``plan=pro``, ``ref="0042"``)."""
        if not isinstance(text, str) or "=" not in text:
            raise InvalidOptionError(field, text, "expected PATH=VALUE, e.g. user_id=42")
        path, _, raw = text.partition("=")
        return cls(_check_path(field, path.strip(), text), _scalar(raw.strip()))

    def __post_init__(self) -> None:
        _check_path("params", self.path, self.path)
        if not isinstance(self.value, str | int | float | bool | type(None)):
            raise InvalidOptionError("params", self.value, "the value must be a JSON scalar")

    @property
    def segments(self) -> tuple[str, ...]:
        return tuple(self.path.split("."))

    def __str__(self) -> str:
        return f"{self.path}={json.dumps(self.value)}"


def _check_path(field: str, path: str, typed: object) -> str:
    segments = path.split(".")
    if not path or len(segments) > MAX_PARAMS_DEPTH or not all(map(_SEGMENT.match, segments)):
        raise InvalidOptionError(
            field,
            typed,
            f"the path must be 1 to {MAX_PARAMS_DEPTH} dotted names of letters, digits, _ or -",
        )
    return path


def _scalar(raw: str) -> str | int | float | bool | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return raw


def params_match(params: Mapping[str, Any] | None, match: ParamsMatch) -> bool:
    """Whether ``params`` holds ``match.value`` at ``match.path`` (MongoDB's equality: a number
    equals the same number of another type, ``True`` is not ``1``; an array at the path
    matches when one of its elements is the value)."""
    found: Any = params
    for segment in match.segments:
        if not isinstance(found, Mapping) or segment not in found:
            return False
        found = found[segment]
    if isinstance(found, list):
        return any(_same(item, match.value) for item in found)
    return _same(found, match.value)


def _same(stored: Any, wanted: Any) -> bool:
    if isinstance(stored, bool) or isinstance(wanted, bool):
        return type(stored) is type(wanted) and stored == wanted
    return bool(stored == wanted) and (stored is None) == (wanted is None)


# -- owners ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OwnerMatch:
    """Who ran (or holds) a job, as typed: a host (``web-1``), a process (``web-1:4242``), an
    instance id, or the whole ``host:pid/instance`` that views show."""

    host: str | None = None
    pid: int | None = None
    instance_id: str | None = None

    @classmethod
    def parse(cls, text: object, *, field: str = "owner") -> OwnerMatch:
        if not isinstance(text, str) or not text.strip():
            raise InvalidOptionError(field, text, "expected a host, host:pid or an instance id")
        typed = text.strip()
        where, slash, instance = typed.partition("/")
        if slash:
            host, _, pid = where.rpartition(":")
            if not host or not pid.isdigit() or not instance:
                raise InvalidOptionError(field, text, "expected host:pid/instance")
            return cls(host=host, pid=int(pid), instance_id=instance)
        host, colon, pid = typed.rpartition(":")
        if colon and host and pid.isdigit():
            return cls(host=host, pid=int(pid))
        return cls(host=typed, instance_id=typed)  # either: a host name or an instance id

    @property
    def exact(self) -> bool:
        """The whole ``host:pid/instance``: every field must match."""
        return self.host is not None and self.pid is not None and self.instance_id is not None


def owner_matches(owner: Owner | None, match: OwnerMatch) -> bool:
    """Whether ``owner`` is the one ``match`` names."""
    if owner is None:
        return False
    if match.exact or match.pid is not None:
        return (
            owner.host == match.host
            and owner.pid == match.pid
            and (match.instance_id is None or owner.instance_id == match.instance_id)
        )
    return owner.host == match.host or owner.instance_id == match.instance_id


# -- queries --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExecutionQuery:
    """Which history rows: every given filter must hold. ``since`` is inclusive and ``until``
    exclusive, on ``started_at``."""

    job_name: str | None = None
    job_id: str | None = None
    status: HistoryStatus | None = None
    error_type: str | None = None
    owner: OwnerMatch | None = None
    since: datetime | None = None
    until: datetime | None = None
    unique_identifier: str | None = None
    params: ParamsMatch | None = None

    def __post_init__(self) -> None:
        for name in ("job_name", "job_id", "error_type", "unique_identifier"):
            _optional_text(name, getattr(self, name))
        if self.status is not None and not isinstance(self.status, HistoryStatus):
            raise InvalidOptionError("status", self.status, "must be a HistoryStatus")
        _check_range(self.since, self.until)

    @property
    def indexed(self) -> bool:
        """Whether an index serves every filter given (:meth:`unindexed` is empty)."""
        return not self.unindexed

    @property
    def unindexed(self) -> tuple[str, ...]:
        """The filters no index serves: checked on each row read, so the read is bounded."""
        return tuple(
            name for name, given in (("owner", self.owner), ("params", self.params)) if given
        )

    def matches(self, row: HistoryRecord) -> bool:
        """Whether ``row`` meets every filter (the in-memory store's reading of the query)."""
        checks = (
            self.job_name is None or row.job_name == self.job_name,
            self.job_id is None or row.job_id == self.job_id,
            self.status is None or row.status is self.status,
            self.error_type is None
            or (row.status is HistoryStatus.ERROR and row.error_type == self.error_type),
            self.owner is None or owner_matches(row.owner, self.owner),
            self.since is None or row.started_at >= self.since,
            self.until is None or row.started_at < self.until,
            self.unique_identifier is None or row.unique_identifier == self.unique_identifier,
            self.params is None or params_match(row.params, self.params),
        )
        return all(checks)


@dataclass(frozen=True, slots=True)
class ExecutionCursor:
    """Where a page of executions (newest first) ended: its oldest ``started_at`` and the ids
    of the rows shown at exactly that time, so the next page starts right after them even when
    several rows share a millisecond. Encoded for a URL by :meth:`encode`."""

    started_at: datetime
    execution_ids: tuple[str, ...]

    def encode(self) -> str:
        millis = (self.started_at - _EPOCH) // timedelta(milliseconds=1)
        return f"{millis}~{','.join(self.execution_ids)}"

    @classmethod
    def decode(cls, text: object, *, field: str = "before") -> ExecutionCursor:
        if not isinstance(text, str):
            raise InvalidOptionError(field, text, "must be a cursor printed by the previous page")
        millis, tilde, ids = text.partition("~")
        if not tilde or not millis.isdigit():
            raise InvalidOptionError(field, text, "is not a cursor printed by a previous page")
        moment = _EPOCH + timedelta(milliseconds=int(millis))
        return cls(moment, tuple(i for i in ids.split(",") if i))

    @classmethod
    def after_page(
        cls, rows: Sequence[HistoryRecord], previous: ExecutionCursor | None = None
    ) -> ExecutionCursor:
        """The cursor after ``rows`` (newest first, not empty), read after ``previous``: the
        rows at its oldest time shown by this page and by the earlier ones."""
        oldest = rows[-1].started_at
        shown = tuple(r.execution_id for r in rows if r.started_at == oldest)
        if previous is not None and previous.started_at == oldest:
            shown = previous.execution_ids + shown
        return cls(oldest, shown)

    def admits(self, row: HistoryRecord) -> bool:
        """Whether ``row`` comes after the page this cursor ends."""
        if row.started_at != self.started_at:
            return row.started_at < self.started_at
        return row.execution_id not in self.execution_ids


@dataclass(frozen=True, slots=True)
class RecordQuery:
    """Which records: every given filter must hold. ``state`` needs the ``now`` of the read;
    ``created_since`` / ``created_until`` bound the creation time a record id tells (UUIDv7 ids;
    ``until`` exclusive); ``job_ids`` names records; ``tags``: records carrying all of them."""

    job_name: str | None = None
    state: JobState | None = None
    unique_identifier: str | None = None
    owner: OwnerMatch | None = None
    created_since: datetime | None = None
    created_until: datetime | None = None
    params: ParamsMatch | None = None
    job_ids: tuple[str, ...] | None = None
    tags: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.tags is not None:
            object.__setattr__(self, "tags", validate_tag_filter(self.tags))
        for name in ("job_name", "unique_identifier"):
            _optional_text(name, getattr(self, name))
        if self.state is not None and not isinstance(self.state, JobState):
            raise InvalidOptionError("state", self.state, "must be a JobState")
        _check_range(self.created_since, self.created_until, fields=("created_since", "until"))
        if self.job_ids is not None and not all(isinstance(i, str) and i for i in self.job_ids):
            raise InvalidOptionError("job_ids", self.job_ids, "must be job ids")

    @property
    def unindexed(self) -> tuple[str, ...]:
        """The filters no index serves (see :attr:`ExecutionQuery.unindexed`)."""
        given = (("owner", self.owner), ("params", self.params), ("tags", self.tags))
        return tuple(name for name, value in given if value)

    def matches(self, record: JobRecord, now: datetime) -> bool:
        created = record_created_at(record.id)
        checks = (
            self.job_name is None or record.job_name == self.job_name,
            self.state is None or record.state(now) is self.state,
            self.unique_identifier is None or record.unique_identifier == self.unique_identifier,
            self.owner is None or owner_matches(record.lock_owner, self.owner),
            self.created_since is None or (created is not None and created >= self.created_since),
            self.created_until is None or (created is not None and created < self.created_until),
            self.params is None or params_match(record.params, self.params),
            self.job_ids is None or record.id in self.job_ids,
            self.tags is None or set(self.tags) <= set(record.tags),
        )
        return all(checks)


def _optional_text(name: str, value: object) -> None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise InvalidOptionError(name, value, "must be a non-empty string")


def _check_range(
    since: object, until: object, *, fields: tuple[str, str] = ("since", "until")
) -> None:
    for name, moment in zip(fields, (since, until), strict=True):
        if moment is not None and (not isinstance(moment, datetime) or moment.utcoffset() is None):
            raise InvalidOptionError(name, moment, "must be a timezone-aware datetime")
    if isinstance(since, datetime) and isinstance(until, datetime) and since >= until:
        raise InvalidOptionError(fields[0], since, f"must be before {fields[1]} ({until})")


def record_created_at(record_id: str) -> datetime | None:
    """When a record was created, from its UUIDv7 id (its first 48 bits are the milliseconds
    since the epoch); ``None`` for an id of another kind."""
    hexa = record_id.replace("-", "")
    if len(hexa) != 32 or hexa[12] != "7":
        return None
    try:
        millis = int(hexa[:12], 16)
    except ValueError:
        return None
    return datetime.fromtimestamp(millis / 1000, tz=UTC)


def uuid7_floor(moment: datetime) -> str:
    """The smallest UUIDv7 id created at ``moment`` (its millisecond): ids ``>=`` it were
    created then or later."""
    millis = (moment - _EPOCH) // timedelta(milliseconds=1)
    hexa = f"{millis:012x}"
    return f"{hexa[:8]}-{hexa[8:12]}-7000-8000-000000000000"


# -- answers --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExecutionPage:
    """A page of executions, newest first; ``next_before`` is the ``before`` of the next page
    (``None``: this was the last). From the archive, ``archived_at`` gives each row's time of
    archiving (empty otherwise)."""

    rows: tuple[HistoryRecord, ...]
    next_before: str | None
    archived_at: tuple[datetime | None, ...] = ()

    def __iter__(self) -> Iterator[HistoryRecord]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)


@dataclass(frozen=True, slots=True)
class FoundJob:
    """One job a lookup found, and where: ``live`` (its record), ``finished`` (its record gone,
    its executions kept), or ``archived`` (``dogs archive`` moved its record or its rows, at
    ``archived_at``). ``newest`` is its newest execution there."""

    job_id: str
    job_name: str
    where: str
    record: JobRecord | None = None
    newest: HistoryRecord | None = None
    archived_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class JobLookup:
    """What a search for ``query`` found: how it matched (``"id"``, ``"unique key"``, or
    ``None`` when nothing did) and the jobs."""

    query: str
    matched_by: str | None
    jobs: tuple[FoundJob, ...]


# -- fleet slots --------------------------------------------------------------------------------


def with_slots(
    statuses: Sequence[NameStatus],
    running: Mapping[str, Sequence[JobRecord]],
    holders: Mapping[str, frozenset[str]],
) -> list[NameStatus]:
    """``statuses`` with the running records of each name that holds fleet concurrency slots
    checked against the slots' holders: a record claimed but not admitted yet (its execution
    is still asking for a slot, and will give the job back if none is free) is counted as
    ``held``, not ``running``, so a name under ``global_concurrency=1`` never shows two running
    jobs. ``running`` maps such names to their running records (read before ``holders``, so a
    job admitted in between counts as running)."""
    adjusted = []
    for status in statuses:
        held_by = holders.get(status.job_name)
        records = running.get(status.job_name)
        if not held_by or not records:
            adjusted.append(status)
            continue
        waiting = sum(1 for record in records if record.lock_id not in held_by)
        waiting = min(waiting, status.running)
        adjusted.append(
            dataclasses.replace(
                status, running=status.running - waiting, held=status.held + waiting
            )
        )
    return adjusted


# -- archive --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Archived(Generic[T]):
    """A document of an archive collection (``dogs archive``) and when it was moved there."""

    item: T
    archived_at: datetime | None


# -- errors ---------------------------------------------------------------------------------------

_UUID = re.compile(
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
)
_HEX = re.compile(r"\b(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{12,}\b")
_TIME = re.compile(r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d)?")
_QUOTED = re.compile(r"'[^'\n]{1,200}'|\"[^\"\n]{1,200}\"")
_NUMBER = re.compile(r"(?<![A-Za-z_])[-+]?\d+(\.\d+)?")
#: The longest fingerprint kept (a message is cut there first).
FINGERPRINT_LENGTH: Final = 300


def error_fingerprint(message: str | None) -> str:
    """``message`` with what differs from one occurrence to the next replaced: UUIDs
    (``<uuid>``), times (``<time>``), long hex strings (``<hex>``), quoted values (``<str>``)
    and numbers (``<n>``); whitespace collapsed, at most :data:`FINGERPRINT_LENGTH`
    characters. ``user 42 not found`` and ``user 7 not found`` give ``user <n> not found``."""
    if not message:
        return ""
    text = " ".join(message.split())[: FINGERPRINT_LENGTH * 2]
    text = _UUID.sub("<uuid>", text)
    text = _TIME.sub("<time>", text)
    text = _HEX.sub("<hex>", text)
    text = _QUOTED.sub("<str>", text)
    text = _NUMBER.sub("<n>", text)
    return text[:FINGERPRINT_LENGTH]


@dataclass(frozen=True, slots=True)
class RawErrorGroup:
    """What a store counts: the error rows of one exact ``(error type, message)``, and its
    newest row's execution id; ``newest``, that row, when the store read it (it reads the
    newest of each fingerprint group, :func:`newest_to_read`)."""

    error_type: str | None
    message: str | None
    count: int
    first_seen: datetime
    last_seen: datetime
    job_names: tuple[str, ...]
    newest_execution_id: str
    newest: HistoryRecord | None = None

    @property
    def key(self) -> tuple[str, str]:
        """Its group: the error type and the message's fingerprint."""
        return (self.error_type or UNKNOWN_ERROR_TYPE, error_fingerprint(self.message))


#: How many groups of an error report get their newest row read (the most frequent first).
MAX_GROUPS_WITH_ROWS: Final = 500


def newest_to_read(raw: Iterable[RawErrorGroup], limit: int = MAX_GROUPS_WITH_ROWS) -> list[str]:
    """The execution ids of the rows an error report shows: the newest of each group (by type
    and fingerprint), for its ``limit`` most frequent groups."""
    best: dict[tuple[str, str], RawErrorGroup] = {}
    counts: dict[tuple[str, str], int] = {}
    for group in raw:
        key = group.key
        counts[key] = counts.get(key, 0) + group.count
        known = best.get(key)
        if known is None or group.last_seen > known.last_seen:
            best[key] = group
    frequent = sorted(best, key=lambda key: -counts[key])[:limit]
    return [best[key].newest_execution_id for key in frequent]


@dataclass(frozen=True, slots=True)
class ErrorScan:
    """What a store's ``error_groups`` read: the exact groups, how many rows were grouped, and
    whether the window held more than that (only the newest were read)."""

    groups: tuple[RawErrorGroup, ...]
    examined: int
    truncated: bool


@dataclass(frozen=True, slots=True)
class ErrorGroup:
    """Error rows of one type whose messages share a fingerprint: how many, when first and
    last, of which jobs, the newest of them (its traceback, its job), and a few of its exact
    messages."""

    error_type: str
    fingerprint: str
    count: int
    first_seen: datetime
    last_seen: datetime
    job_names: tuple[str, ...]
    newest: HistoryRecord | None
    """The newest error of the group (``None`` past the :data:`MAX_GROUPS_WITH_ROWS` most
    frequent groups)."""
    messages: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ErrorReport:
    """The error rows of a window grouped (:class:`ErrorGroup`, most frequent first).

    ``examined`` rows were grouped: the newest ``max_rows`` of the window at most, so
    ``truncated`` says the window held more (the counts are then of the newest ones)."""

    groups: tuple[ErrorGroup, ...]
    since: datetime
    until: datetime
    examined: int
    truncated: bool
    job_name: str | None = None
    group_limit_reached: bool = False
    distinct: int = field(default=0)


def check_error_length(window: object) -> timedelta:
    """The ``window`` of an error report counted back from now: a positive duration of at
    most seven days (the history's default retention), named ``window`` when it is not."""
    length = validation.positive_duration("window", window)
    if length > MAX_ERROR_WINDOW:
        raise InvalidOptionError(
            "window", length, "must be at most 7d (the history's default retention)"
        )
    return length


def check_error_window(since: object, until: object) -> tuple[datetime, datetime]:
    """The window of an error report: aware datetimes, ``since`` before ``until``, at most
    seven days (the history's default retention)."""
    _check_range(since, until)
    if not isinstance(since, datetime) or not isinstance(until, datetime):
        raise InvalidOptionError("since", since, "give both since and until")
    if until - since > MAX_ERROR_WINDOW:
        raise InvalidOptionError("since", since, "the window must be at most 7 days")
    return since, until


def merge_error_groups(
    raw: Iterable[RawErrorGroup], *, examples: int = 3
) -> tuple[ErrorGroup, ...]:
    """The store's exact groups folded by ``(type, fingerprint)``: counts added, the earliest
    first and latest last seen, the newest row (of the exact group seen last), up to
    ``examples`` exact messages; most frequent first (ties: the most recent first)."""
    merged: dict[tuple[str, str], ErrorGroup] = {}
    for group in raw:
        key = group.key
        known = merged.get(key)
        message = (group.message or "").strip()
        if known is None:
            merged[key] = ErrorGroup(
                error_type=key[0],
                fingerprint=key[1],
                count=group.count,
                first_seen=group.first_seen,
                last_seen=group.last_seen,
                job_names=tuple(sorted(group.job_names)),
                newest=group.newest,
                messages=(message,) if message else (),
            )
            continue
        later = group.last_seen > known.last_seen
        newest = group.newest if later and group.newest is not None else known.newest
        if known.newest is None and group.newest is not None:
            newest = group.newest
        kept = known.messages + ((message,) if message and message not in known.messages else ())
        merged[key] = ErrorGroup(
            error_type=key[0],
            fingerprint=key[1],
            count=known.count + group.count,
            first_seen=min(known.first_seen, group.first_seen),
            last_seen=max(known.last_seen, group.last_seen),
            job_names=tuple(sorted({*known.job_names, *group.job_names})),
            newest=newest,
            messages=kept[:examples],
        )
    return tuple(sorted(merged.values(), key=lambda g: (-g.count, -g.last_seen.timestamp())))
