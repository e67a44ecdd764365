"""Execution stats per job name over a time window, from the history rows: the pure part both
stores share.

A store reads the rows of the window (``started_at`` in ``[since, until)``), counts them and
hands the counts to :func:`stats_of_name`, which builds the :class:`JobStats` value; the in-memory
store does all of it here (:func:`stats_from_history`), the MongoDB store by aggregation
(``dogs_mongo.queries.stats``). Both use the same definitions, so they cannot disagree:

* the window is checked by :func:`check_stats_window`: timezone-aware, ``since < until``, at
  most :data:`MAX_STATS_WINDOW` (the bound of the cost: a read scans the window's rows);
* a percentile is the nearest-rank one (:func:`nearest_rank`): the value at 1-based rank
  ``ceil(p * n / 100)`` of the sorted durations, an actual duration, never an interpolation;
* throughput is counted per UTC minute of ``started_at`` (:func:`minute_start`), every minute
  of the window present, zeros included (:func:`minute_buckets`).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from dogs_core.domain.records import HistoryRecord, HistoryStatus, to_millis
from dogs_core.errors import InvalidOptionError

__all__ = [
    "FAILED",
    "MAX_STATS_WINDOW",
    "RETRIED",
    "UNKNOWN_ERROR_TYPE",
    "JobStats",
    "check_stats_names",
    "check_stats_window",
    "minute_buckets",
    "minute_start",
    "nearest_rank",
    "nearest_rank_index",
    "stats_from_history",
    "stats_of_name",
]

MAX_STATS_WINDOW: Final = timedelta(days=7)
"""The longest window a stats read accepts: a read costs one index scan of the window's rows
(and keeps one duration per row in memory to sort), so the window bounds its cost. Seven days is
also the default history retention."""

#: The outcome of an error row followed by a retry, and of one that ended its job
#: (:attr:`~dogs_core.domain.records.HistoryRecord.outcome`).
RETRIED: Final = "retried"
FAILED: Final = "failed"

UNKNOWN_ERROR_TYPE: Final = "unknown"
"""The failure type of an error row without an ``error_type`` (a Node Dogs row, an old one)."""

_MINUTE: Final = timedelta(minutes=1)
_SECOND: Final = timedelta(seconds=1)


@dataclass(frozen=True, slots=True)
class JobStats:
    """What the executions of one job name did in the window ``[since, until)``, per attempt
    and per job.

    Every count is of history rows whose ``started_at`` is in the window: one row per attempt.
    ``runs`` (the attempts) counts every row, whatever its status; ``succeeded``, ``errors``,
    ``stale``, ``cancelled`` and ``snoozed`` split it by status. An error row also says whether
    a retry followed (``retried``) or the job ended there (``failed``: its attempt limit, or
    discarded by ``on_error``); rows written by Node Dogs workers do not say, so
    ``errors >= retried + failed``.

    Per attempt: :attr:`attempt_success_rate`, over the attempts with a verdict (succeeded,
    errors, stale). Per job: :attr:`job_success_rate`, over the jobs that ended in the window
    (succeeded or failed): a job that failed twice then succeeded is one attempt success in
    three, and one job success in one.
    """

    job_name: str
    runs: int
    """Attempts: history rows whose ``started_at`` is in ``[since, until)``."""
    succeeded: int
    """Rows of status ``success``: attempts that succeeded, each the end of its job (or of
    that run of a recurrent job)."""
    errors: int
    """Rows of status ``error``: attempts whose handler raised."""
    stale: int
    """Rows of status ``stale`` (the execution lost its lock, or its worker died)."""
    cancelled: int
    """Rows of status ``cancelled`` (by an operator, or at shutdown)."""
    snoozed: int
    """Rows of status ``snoozed`` (the handler asked to run again later)."""
    retried: int
    """Error rows followed by a retry (outcome ``retried``)."""
    failed: int
    """Error rows that ended their job (outcome ``failed``): jobs that failed."""
    errors_by_type: Mapping[str, int]
    """Error rows by ``error_type`` (:data:`UNKNOWN_ERROR_TYPE` when a row has none)."""
    duration_p50_ms: float | None
    """Nearest-rank median duration of the rows (``None`` when there are none)."""
    duration_p95_ms: float | None
    """Nearest-rank 95th percentile duration."""
    duration_max_ms: float | None
    """Longest duration."""
    throughput: tuple[tuple[datetime, int], ...]
    """``(minute start UTC, rows started in that minute)`` for every minute of the window,
    zeros included, oldest first (the first minute may start before ``since``)."""
    since: datetime
    """The window's start (inclusive), truncated to the millisecond."""
    until: datetime
    """The window's end (exclusive)."""
    first_started_at: datetime | None = None
    """The earliest ``started_at`` of the rows (``None`` when there are none)."""
    last_started_at: datetime | None = None
    """The latest ``started_at`` of the rows."""

    expired: int = 0
    """Rows of status ``expired`` (not started by their ``start_before`` deadline: never run,
    and left out of the durations)."""
    superseded: int = 0
    """Rows of status ``superseded``: attempts that ran to success after their lock had moved
    on to an attempt that ran the job again (an outage longer than the lock). Not successes:
    the job's one counted success is the other attempt's."""

    @property
    def attempts(self) -> int:
        """The attempts (:attr:`runs`)."""
        return self.runs

    @property
    def attempt_success_rate(self) -> float | None:
        """Per attempt: ``succeeded / (succeeded + errors + stale)``; ``None`` when that is 0."""
        verdicts = self.succeeded + self.errors + self.stale
        return None if verdicts == 0 else self.succeeded / verdicts

    @property
    def job_success_rate(self) -> float | None:
        """Per job: ``succeeded / (succeeded + failed)``, the jobs that ended in the window;
        ``None`` when none did."""
        ended = self.succeeded + self.failed
        return None if ended == 0 else self.succeeded / ended

    @property
    def success_rate(self) -> float | None:
        """The per-attempt rate (:attr:`attempt_success_rate`), by its older name."""
        return self.attempt_success_rate

    @property
    def active_span(self) -> timedelta | None:
        """From the first start to the last one in the window (at least a second); ``None``
        with fewer than two attempts."""
        first, last = self.first_started_at, self.last_started_at
        if self.runs < 2 or first is None or last is None:
            return None
        return max(last - first, _SECOND)

    @property
    def per_minute(self) -> float | None:
        """Attempts started per minute over the :attr:`active_span` (300 attempts in 4 s are
        4,500 per minute, however long the window); ``None`` with fewer than two attempts."""
        span = self.active_span
        return None if span is None else self.runs / (span / _MINUTE)


def check_stats_window(since: object, until: object) -> tuple[datetime, datetime]:
    """The window ``[since, until)`` truncated to milliseconds (the stores' precision).

    Both must be timezone-aware datetimes, ``since`` before ``until``, and the window at most
    :data:`MAX_STATS_WINDOW` long; :class:`~dogs_core.errors.InvalidOptionError` otherwise.
    """
    start = _aware("since", since)
    end = _aware("until", until)
    if start >= end:
        raise InvalidOptionError("since", since, f"must be before until ({end.isoformat()})")
    if end - start > MAX_STATS_WINDOW:
        raise InvalidOptionError(
            "until",
            until,
            f"the window from since ({start.isoformat()}) is {end - start}, longer than the "
            f"maximum of {MAX_STATS_WINDOW.days} days",
        )
    return start, end


def check_stats_names(job_names: object) -> tuple[str, ...] | None:
    """``None`` (every name) or the distinct non-empty job names of a sequence, sorted."""
    if job_names is None:
        return None
    if isinstance(job_names, str) or not isinstance(job_names, Sequence):
        raise InvalidOptionError("job_names", job_names, "must be a sequence of job names")
    for name in job_names:
        if not isinstance(name, str) or not name:
            raise InvalidOptionError("job_names", job_names, f"{name!r} is not a job name")
    return tuple(sorted(set(job_names)))


def _aware(name: str, value: object) -> datetime:
    if not isinstance(value, datetime):
        raise InvalidOptionError(name, value, "must be a datetime")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidOptionError(name, value, "must be timezone-aware (UTC)")
    return to_millis(value)


def nearest_rank_index(count: int, percent: int) -> int:
    """The 0-based index of the nearest-rank ``percent``-th percentile among ``count`` sorted
    values (``count >= 1``, ``1 <= percent <= 100``): ``ceil(percent * count / 100) - 1``,
    computed in integers (the MongoDB pipeline computes the same rank)."""
    return max(0, -(-percent * count // 100) - 1)


def nearest_rank(ordered: Sequence[float], percent: int) -> float | None:
    """The nearest-rank ``percent``-th percentile of ``ordered`` (sorted ascending); ``None``
    when it is empty."""
    if not ordered:
        return None
    return float(ordered[nearest_rank_index(len(ordered), percent)])


def minute_start(moment: datetime) -> datetime:
    """The start of the UTC minute holding ``moment``."""
    return moment.astimezone(UTC).replace(second=0, microsecond=0)


@functools.lru_cache(maxsize=16)
def minute_buckets(since: datetime, until: datetime) -> tuple[datetime, ...]:
    """The start of every UTC minute that overlaps ``[since, until)``, oldest first (kept for
    the last few windows: every name of one read shares them)."""
    first = minute_start(since)
    count = -(-(until - first) // _MINUTE)
    return tuple(first + i * _MINUTE for i in range(count))


def stats_of_name(
    job_name: str,
    *,
    since: datetime,
    until: datetime,
    runs: int,
    statuses: Mapping[str, int],
    errors_by_type: Mapping[str, int],
    durations: tuple[float | None, float | None, float | None],
    per_minute: Mapping[datetime, int],
    error_outcomes: Mapping[str, int] | None = None,
    started: tuple[datetime | None, datetime | None] = (None, None),
) -> JobStats:
    """One name's :class:`JobStats` from its counts: ``statuses`` by status value,
    ``durations`` as ``(p50, p95, max)``, ``per_minute`` by minute start (absent minutes are
    zeros; a minute outside the window is dropped), ``error_outcomes`` the error rows by
    outcome (``retried``, ``failed``), ``started`` the first and last start."""
    p50, p95, longest = durations
    buckets = minute_buckets(since, until)
    counts = [0] * len(buckets)
    for minute, count in per_minute.items():
        index = (minute - buckets[0]) // _MINUTE
        if 0 <= index < len(counts):
            counts[index] += count
    return JobStats(
        job_name=job_name,
        runs=runs,
        succeeded=statuses.get(HistoryStatus.SUCCESS.value, 0),
        errors=statuses.get(HistoryStatus.ERROR.value, 0),
        stale=statuses.get(HistoryStatus.STALE.value, 0),
        cancelled=statuses.get(HistoryStatus.CANCELLED.value, 0),
        expired=statuses.get(HistoryStatus.EXPIRED.value, 0),
        snoozed=statuses.get(HistoryStatus.SNOOZED.value, 0),
        superseded=statuses.get(HistoryStatus.SUPERSEDED.value, 0),
        retried=(error_outcomes or {}).get(RETRIED, 0),
        failed=(error_outcomes or {}).get(FAILED, 0),
        errors_by_type=dict(sorted(errors_by_type.items())),
        duration_p50_ms=p50,
        duration_p95_ms=p95,
        duration_max_ms=longest,
        throughput=tuple(zip(buckets, counts, strict=True)),
        since=since,
        until=until,
        first_started_at=started[0],
        last_started_at=started[1],
    )


def stats_from_history(
    rows: Iterable[HistoryRecord], *, since: datetime, until: datetime
) -> list[JobStats]:
    """The stats of every name among ``rows`` (the caller's window check done): rows outside
    ``[since, until)`` are ignored; names without a row in it are absent; sorted by name."""
    by_name: dict[str, list[HistoryRecord]] = {}
    for row in rows:
        if since <= row.started_at < until:
            by_name.setdefault(row.job_name, []).append(row)
    return [_name_stats(name, by_name[name], since, until) for name in sorted(by_name)]


def _name_stats(
    name: str, rows: Sequence[HistoryRecord], since: datetime, until: datetime
) -> JobStats:
    # An expired row never ran: its zero duration is not a duration of the job.
    ordered = sorted(
        float(max(0, row.duration_ms)) for row in rows if row.status is not HistoryStatus.EXPIRED
    )
    errors = [row for row in rows if row.status is HistoryStatus.ERROR]
    starts = [row.started_at for row in rows]
    return stats_of_name(
        name,
        since=since,
        until=until,
        runs=len(rows),
        statuses=Counter(HistoryStatus(row.status).value for row in rows),
        errors_by_type=Counter(row.error_type or UNKNOWN_ERROR_TYPE for row in errors),
        durations=(
            nearest_rank(ordered, 50),
            nearest_rank(ordered, 95),
            ordered[-1] if ordered else None,
        ),
        per_minute=Counter(minute_start(row.started_at) for row in rows),
        error_outcomes=Counter(row.outcome for row in errors if row.outcome in (RETRIED, FAILED)),
        started=(min(starts), max(starts)),
    )


#: The window of :meth:`StatsClient.stats` when none is given.
DEFAULT_STATS_WINDOW = timedelta(hours=1)
