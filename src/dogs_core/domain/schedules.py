"""Durations, next-run rules and retry backoff: pure and deterministic.

Nothing here reads the clock or a random source: ``now`` and ``rand`` are always passed in. Every
datetime that goes in must be timezone-aware (a naive one is rejected with a clear error) and
every datetime that comes out is in UTC.

Durations
    Internally every duration is a :class:`~datetime.timedelta`. At the API edge a duration may
    also be given as a number or a string:

    * ``int`` / ``float`` are **seconds** (the Python convention). Dogs (Node) used milliseconds;
      ``lock_time=30_000`` here means 30 000 seconds, not 30 seconds.
    * ``str`` is parsed by ``pytimeparse2``: ``"90s"``, ``"1m"``, ``"1h30m"``, ``"24h"``, ``"1d"``,
      ``"1w"``, ``"1.5h"``, ``"2 days"``; a bare number string (``"10"``) is seconds.
    * ``bool``, negative, NaN, infinite, out-of-range and unparseable values are rejected.

Precedence of schedule options (a deliberate deviation from Dogs)
    A recurrent job takes **exactly one** rule: ``run_every``, ``cron`` (with its required
    ``timezone``) or ``next_run``. Giving two is a conflicting-options error. Dogs silently lets
    ``runEvery`` win over ``cron`` and ``getNextRun`` while its documentation says
    ``getNextRun`` wins (docs/differences.md#scheduling); rather than pick one of two
    contradictory behaviours we make the ambiguous definition impossible. Likewise, an event job
    is scheduled with ``run_in`` **or** ``run_at`` (or neither, meaning now); both together is an
    error. ``run_in=0`` is allowed and means now (Dogs treated 0 as absent, which gives the same
    result).

Next-run rules (after an execution completes, as in Dogs: docs/configuration.md#recurrent-jobs-only)
    * :class:`RunEvery` ``anchor="completion"`` (default, Dogs' behaviour): ``now + interval``,
      a fixed delay from completion, which drifts by the run time.
    * :class:`RunEvery` ``anchor="slot"``: fixed rate. The next run is the first slot
      ``scheduled_at + k * interval`` (k >= 1) strictly after ``now``; missed slots are skipped
      (coalesced into the one run that just happened). Without ``scheduled_at`` it falls back to
      ``now + interval``.
    * :class:`CronSchedule`: the first cron occurrence strictly after ``now``, evaluated in the
      job's IANA timezone (DST-aware, Debian-cron semantics via ``cronsim``), returned in UTC.
    * :class:`CustomSchedule`: the user's function, called with ``now`` (UTC); it must return an
      aware datetime. A time in the past means "run as soon as possible".

Retry backoff (used when a failed attempt is retried without an explicit ``run_in``/``run_at``)
    For the ``attempt``-th failed attempt (1 = the first failure) and ``rand`` in [0, 1)::

        raw(attempt) = min(max_delay, base * factor ** (attempt - 1))
        delay        = raw(attempt) * (1 + jitter * (2 * rand - 1))

    so ``raw`` is non-decreasing in ``attempt`` and ``delay`` lies in
    ``[raw * (1 - jitter), raw * (1 + jitter)]``, hence always within
    ``[0, max_delay * (1 + jitter)]``. The defaults (base 2 s, factor 2, max 1 h, jitter 0.2)
    give about 2 s, 4 s, 8 s, ... reaching the one-hour cap at the 12th attempt; with the default
    attempt limit :data:`DEFAULT_MAX_TRIES` (20) a job that always fails is given up after roughly
    nine hours.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final, Literal, TypeAlias
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError

from dogs_core.domain import validation
from dogs_core.domain.validation import DurationLike
from dogs_core.errors import InvalidOptionError, InvalidScheduleError, ValidationError

__all__ = [
    "DEFAULT_MAX_TRIES",
    "CronSchedule",
    "CustomSchedule",
    "DurationLike",
    "RetryPolicy",
    "RunEvery",
    "ScheduleRule",
    "backoff_delay",
    "base_delay",
    "cron_occurrences_before",
    "ensure_utc",
    "event_run_at",
    "next_run_after",
    "parse_duration",
    "parse_optional_duration",
    "parse_positive_duration",
    "schedule_rule",
]

DEFAULT_MAX_TRIES: Final = 20
"""Default attempt limit of event jobs (a worker-level option overrides it; None = unlimited)."""

_CRON_ALIASES: Final = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

_ErrorType: TypeAlias = type[ValidationError]


# --------------------------------------------------------------------------------------------
# Durations and datetimes


def parse_duration(
    value: DurationLike, *, field: str, error: _ErrorType = InvalidScheduleError
) -> timedelta:
    """Return ``value`` as a non-negative timedelta.

    ``int``/``float`` are seconds; strings are parsed by ``pytimeparse2`` ("1m", "1h30m", "1d").
    Raises ``error`` (default :class:`InvalidScheduleError`) naming ``field`` and the value for
    bools, negative, NaN or infinite numbers, unparseable strings and any other type (the rule is
    :func:`dogs_core.domain.validation.duration`).
    """
    return validation.duration(field, value, error=error)


def parse_positive_duration(
    value: DurationLike, *, field: str, error: _ErrorType = InvalidScheduleError
) -> timedelta:
    """Like :func:`parse_duration`, and the result must be strictly positive."""
    return validation.positive_duration(field, value, error=error)


def parse_optional_duration(
    value: DurationLike | None,
    *,
    field: str,
    positive: bool = False,
    error: _ErrorType = InvalidScheduleError,
) -> timedelta | None:
    """``None`` passes through; anything else goes to :func:`parse_(positive_)duration`."""
    if value is None:
        return None
    if positive:
        return parse_positive_duration(value, field=field, error=error)
    return parse_duration(value, field=field, error=error)


def ensure_utc(value: object, *, field: str, error: _ErrorType = InvalidScheduleError) -> datetime:
    """Return an aware datetime converted to UTC; reject naive datetimes and other types."""
    if not isinstance(value, datetime):
        raise error(field, value, f"expected a timezone-aware datetime, not {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise error(
            field,
            value,
            "naive datetimes are ambiguous; pass a timezone-aware datetime "
            "(e.g. datetime.now(timezone.utc))",
        )
    return value.astimezone(UTC)


# --------------------------------------------------------------------------------------------
# Schedule rules of recurrent jobs


@dataclass(frozen=True, slots=True)
class RunEvery:
    """Run again ``interval`` after the last run (``anchor="completion"``, Dogs' fixed delay), or
    at a fixed rate of slots ``interval`` apart (``anchor="slot"``; missed slots are skipped)."""

    interval: timedelta
    anchor: Literal["completion", "slot"] = "completion"

    def __post_init__(self) -> None:
        interval = parse_positive_duration(self.interval, field="run_every")
        object.__setattr__(self, "interval", interval)
        if self.anchor not in ("completion", "slot"):
            raise InvalidScheduleError("anchor", self.anchor, "must be 'completion' or 'slot'")


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """A cron expression evaluated in an IANA timezone (required, as in Dogs).

    Five fields (minute hour day month weekday), an optional leading seconds field, the
    ``cronsim`` extensions (``L``, ``W``, ``#``) and the aliases ``@hourly``, ``@daily``,
    ``@midnight``, ``@weekly``, ``@monthly``, ``@yearly``/``@annually`` are accepted. The
    expression and the timezone are validated at construction.
    """

    expression: str
    timezone: str

    def __post_init__(self) -> None:
        if isinstance(self.timezone, ZoneInfo):
            object.__setattr__(self, "timezone", self.timezone.key)
        zone = _zone(self.timezone)
        _cron_iter(self.expression, datetime(2000, 1, 1, tzinfo=zone))

    @property
    def zone(self) -> ZoneInfo:
        """The timezone as a :class:`zoneinfo.ZoneInfo`."""
        return ZoneInfo(self.timezone)


@dataclass(frozen=True, slots=True)
class CustomSchedule:
    """A user function ``next_run(now) -> datetime`` (Dogs' ``getNextRun``), called with the
    current time in UTC. It must return a timezone-aware datetime; a past time means "now"."""

    next_run: Callable[[datetime], datetime]

    def __post_init__(self) -> None:
        if not callable(self.next_run):
            raise InvalidScheduleError("next_run", self.next_run, "must be a callable")


ScheduleRule: TypeAlias = RunEvery | CronSchedule | CustomSchedule
"""The next-run rule of a recurrent job."""


def schedule_rule(
    *,
    run_every: DurationLike | None = None,
    cron: str | None = None,
    timezone: str | ZoneInfo | None = None,
    next_run: Callable[[datetime], datetime] | None = None,
) -> ScheduleRule:
    """Build the one schedule rule of a recurrent job from its options.

    Exactly one of ``run_every``, ``cron`` (plus ``timezone``) or ``next_run`` must be given;
    two or more are conflicting options, and ``timezone`` without ``cron`` is an error too.
    """
    given = [
        name
        for name, value in (("run_every", run_every), ("cron", cron), ("next_run", next_run))
        if value is not None
    ]
    if len(given) > 1:
        raise InvalidScheduleError(
            given[1],
            {"run_every": run_every, "cron": cron, "next_run": next_run}[given[1]],
            f"conflicting options {' and '.join(given)}: a recurrent job takes exactly one of "
            "run_every, cron (+ timezone) or next_run",
        )
    if timezone is not None and cron is None:
        raise InvalidScheduleError(
            "timezone", timezone, "timezone only applies to a cron schedule; give cron as well"
        )
    if run_every is not None:
        return RunEvery(parse_positive_duration(run_every, field="run_every"))
    if cron is not None:
        if timezone is None:
            raise InvalidScheduleError(
                "timezone", None, "cron recurrent jobs require a timezone (an IANA name)"
            )
        return CronSchedule(cron, timezone.key if isinstance(timezone, ZoneInfo) else timezone)
    if next_run is not None:
        return CustomSchedule(next_run)
    raise InvalidScheduleError(
        "schedule",
        None,
        "a recurrent job needs one of run_every, cron (+ timezone) or next_run",
    )


def next_run_after(
    rule: ScheduleRule, now: datetime, *, scheduled_at: datetime | None = None
) -> datetime:
    """The next run time (UTC) of a recurrent job whose execution finished at ``now``.

    ``scheduled_at`` is the slot the job was due at (its ``nextRunAt`` when claimed); only the
    fixed-rate :class:`RunEvery` (``anchor="slot"``) uses it. A cron result is strictly after
    ``now``. Errors raised by a :class:`CustomSchedule` function propagate unchanged.
    """
    now = ensure_utc(now, field="now")
    if isinstance(rule, RunEvery):
        if rule.anchor == "slot" and scheduled_at is not None:
            slot = ensure_utc(scheduled_at, field="scheduled_at")
            if slot > now:
                return slot
            missed = (now - slot) // rule.interval
            return slot + (missed + 1) * rule.interval
        return now + rule.interval
    if isinstance(rule, CronSchedule):
        for candidate in _cron_iter(rule.expression, now.astimezone(rule.zone)):
            result = candidate.astimezone(UTC)
            # An ambiguous wall time (DST fall-back) resolves to its first occurrence, which
            # can lie before `now` when `now` is inside the repeated hour: skip it.
            if result > now:
                return result
        raise InvalidScheduleError(
            "cron", rule.expression, f"no occurrence in the 50 years after {now.isoformat()}"
        )
    if isinstance(rule, CustomSchedule):
        result = rule.next_run(now)
        if not isinstance(result, datetime) or result.utcoffset() is None:
            raise InvalidScheduleError(
                "next_run",
                result,
                f"the next_run function {_callable_name(rule.next_run)} must return a "
                "timezone-aware datetime",
            )
        return result.astimezone(UTC)
    raise InvalidScheduleError("schedule", rule, "not a RunEvery, CronSchedule or CustomSchedule")


def cron_occurrences_before(rule: CronSchedule, at: datetime) -> Iterator[datetime]:
    """The occurrences of ``rule`` at or before ``at``, newest first, in UTC (the misfire
    policy counts missed slots back from now with it)."""
    start = ensure_utc(at, field="at").astimezone(rule.zone) + timedelta(microseconds=1)
    # cronsim's reverse walk starts strictly before a whole second, at or before one with
    # microseconds: one microsecond more makes `at` itself a candidate.
    for candidate in _cron_iter(rule.expression, start, reverse=True):
        yield candidate.astimezone(UTC)


def _zone(name: object) -> ZoneInfo:
    if not isinstance(name, str):
        raise InvalidScheduleError(
            "timezone", name, "expected an IANA timezone name such as 'Europe/Paris'"
        )
    try:
        return ZoneInfo(name)
    except (ValueError, KeyError, OSError) as exc:
        raise InvalidScheduleError(
            "timezone", name, f"unknown IANA timezone ({exc}); use e.g. 'America/Santiago'"
        ) from None


def _cron_iter(expression: object, start: datetime, *, reverse: bool = False) -> CronSim:
    if not isinstance(expression, str):
        raise InvalidScheduleError("cron", expression, "expected a cron expression string")
    text = _CRON_ALIASES.get(expression.strip().lower(), expression)
    try:
        return CronSim(text, start, reverse=reverse)
    except (CronSimError, ValueError, TypeError, IndexError, KeyError) as exc:
        raise InvalidScheduleError("cron", expression, f"invalid cron expression: {exc}") from None


def _callable_name(func: object) -> str:
    return str(getattr(func, "__qualname__", None) or repr(func))


# --------------------------------------------------------------------------------------------
# Event scheduling


def event_run_at(
    now: datetime,
    run_in: DurationLike | None = None,
    run_at: datetime | None = None,
) -> datetime:
    """When an event job should run: ``now + run_in``, ``run_at`` (in UTC), or ``now``.

    ``run_in`` and ``run_at`` are mutually exclusive. ``run_in=0`` means now; a past ``run_at``
    means as soon as possible.
    """
    now = ensure_utc(now, field="now")
    if run_in is not None and run_at is not None:
        raise InvalidScheduleError(
            "run_at", run_at, "conflicting options run_in and run_at: give one of them, not both"
        )
    if run_in is not None:
        return now + parse_duration(run_in, field="run_in")
    if run_at is not None:
        return ensure_utc(run_at, field="run_at")
    return now


# --------------------------------------------------------------------------------------------
# Retry backoff


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff with jitter for retried attempts (see the module docstring).

    ``base`` (>= 0) is the delay after the first failure, ``factor`` (>= 1) the growth per
    attempt, ``max_delay`` (>= base) the cap before jitter, and ``jitter`` in [0, 1] the relative
    spread: the delay is multiplied by a factor in ``[1 - jitter, 1 + jitter)``. Durations also
    accept seconds or strings ("2s", "1h").
    """

    base: timedelta = timedelta(seconds=2)
    factor: float = 2.0
    max_delay: timedelta = timedelta(hours=1)
    jitter: float = 0.2

    def __post_init__(self) -> None:
        base = parse_duration(self.base, field="retry.base", error=InvalidOptionError)
        max_delay = parse_duration(
            self.max_delay, field="retry.max_delay", error=InvalidOptionError
        )
        object.__setattr__(self, "base", base)
        object.__setattr__(self, "max_delay", max_delay)
        if max_delay < base:
            raise InvalidOptionError(
                "retry.max_delay", max_delay, f"must be at least retry.base ({base})"
            )
        factor = _finite_number(self.factor, "retry.factor")
        if factor < 1:
            raise InvalidOptionError("retry.factor", self.factor, "must be at least 1")
        jitter = _finite_number(self.jitter, "retry.jitter")
        if not 0 <= jitter <= 1:
            raise InvalidOptionError("retry.jitter", self.jitter, "must be between 0 and 1")
        object.__setattr__(self, "factor", float(factor))
        object.__setattr__(self, "jitter", float(jitter))


def base_delay(policy: RetryPolicy, attempt: int) -> timedelta:
    """``min(max_delay, base * factor ** (attempt - 1))``: the delay before jitter.

    Non-decreasing in ``attempt`` (>= 1, the number of the attempt that just failed).
    """
    _check_attempt(attempt)
    base_s = policy.base.total_seconds()
    max_s = policy.max_delay.total_seconds()
    if base_s == 0 or max_s == base_s or policy.factor == 1:
        return policy.base
    # Compare exponents instead of computing factor ** n, which overflows for large attempts.
    if (attempt - 1) * math.log(policy.factor) >= math.log(max_s / base_s):
        return policy.max_delay
    return min(policy.max_delay, timedelta(seconds=base_s * policy.factor ** (attempt - 1)))


def backoff_delay(policy: RetryPolicy, attempt: int, rand: float) -> timedelta:
    """The jittered retry delay after failed attempt number ``attempt`` (>= 1).

    ``rand`` is a uniform random number in [0, 1) supplied by the caller. The result is
    ``base_delay * (1 + jitter * (2 * rand - 1))``, clamped to ``[0, max_delay * (1 + jitter)]``.
    """
    if isinstance(rand, bool) or not isinstance(rand, int | float) or not 0 <= rand < 1:
        raise InvalidOptionError("rand", rand, "must be a number in [0, 1)")
    raw = base_delay(policy, attempt)
    delay = raw * (1 + policy.jitter * (2 * rand - 1))
    upper = policy.max_delay * (1 + policy.jitter)
    return max(timedelta(0), min(delay, upper))


def _check_attempt(attempt: int) -> None:
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
        raise InvalidOptionError("attempt", attempt, "must be an int >= 1")


def _finite_number(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidOptionError(field, value, "must be a number")
    if math.isnan(value) or math.isinf(value):
        raise InvalidOptionError(field, value, "must be finite")
    return float(value)
