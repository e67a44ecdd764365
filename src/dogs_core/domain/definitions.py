"""Event and recurrent job definitions, their validated options, and job params handling.

A definition is plain data plus the user's handler: it does no I/O and is never mutated (Dogs
mutated its definitions to record the job name; here the name is given at construction).
Definitions compare and hash by identity (two separately built definitions are different jobs
even when their options are equal).

Call conventions (what the runtime passes; checked loosely with :func:`inspect.signature`)

* ``handler(params, ctx)`` for an event job, ``handler(ctx)`` for a recurrent job;
* ``on_error(error, params, ctx)`` and ``on_stale(params, ctx)`` for both kinds, as in Dogs
  (``onError(error, params, context)``); ``params`` is None for a recurrent job.

Each may be ``def`` or ``async def``. ``on_error`` returns :class:`Retry`, :class:`Discard` or
``None`` (same as ``Retry()``), see :func:`normalize_on_error_result`. ``Retry()`` without a
time means: for an event job, after the job's backoff delay (:class:`RetryPolicy`); for a
recurrent job, at its next regular run.

Duration options accept a ``timedelta``, a number of **seconds** or a string such as ``"1m"``
(see :mod:`dogs_core.domain.schedules`). Bad option values raise
:class:`~dogs_core.errors.InvalidOptionError` naming the option; schedule options (``run_every``,
``cron``, ``timezone``, ``next_run``) raise :class:`~dogs_core.errors.InvalidScheduleError`.

Params
    An event job may declare a ``params_model``: a pydantic-like class (with ``model_validate``
    and ``model_dump``) or a dataclass. When not given it is taken from the annotation of the
    handler's first parameter if that is such a class. :func:`validate_params` turns what the
    caller passes into the plain dict that is stored; :func:`load_params` turns the stored dict
    back into what the handler receives. Without a model, params are ``None`` or a mapping with
    ``str`` keys whose values MongoDB can store (checked by :func:`check_bson_storable`). These
    functions live in :mod:`dogs_core.domain.params` and are re-exported here.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar, Literal, TypeAlias, TypedDict

from dogs_core.domain import validation
from dogs_core.domain.controls import RateLimit, rate_limit_option
from dogs_core.domain.log_lines import DEFAULT_MAX_LOG_LINES, check_log_options, log_options
from dogs_core.domain.misfire import MisfireMode, MisfirePolicy
from dogs_core.domain.params import (
    MAX_PARAMS_BSON_SIZE,
    NamedJob,
    ParamsModelJob,
    bson_document_size,
    check_bson_storable,
    derive_params_model,
    is_params_model,
    load_params,
    to_bson_storable,
    validate_params,
)
from dogs_core.domain.records import DEFAULT_PRIORITY, DEFAULT_RETENTION, JobType
from dogs_core.domain.schedules import (
    CronSchedule,
    CustomSchedule,
    DurationLike,
    RetryPolicy,
    RunEvery,
    ScheduleRule,
    backoff_delay,
    ensure_utc,
    event_run_at,
    parse_duration,
    parse_optional_duration,
    schedule_rule,
)
from dogs_core.errors import InvalidOptionError, InvalidScheduleError

__all__ = [
    "DEFAULT_HEARTBEAT_FRACTION",
    "DEFAULT_RECURRENT_PRIORITY",
    "MAX_NAME_LENGTH",
    "MAX_PARAMS_BSON_SIZE",
    "Discard",
    "EventJobDefinition",
    "EventJobOptions",
    "JobDefinition",
    "JobType",
    "NamedJob",
    "OnErrorResult",
    "ParamsModelJob",
    "RecurrentJobDefinition",
    "RecurrentJobOptions",
    "Retry",
    "Snooze",
    "UniqueScope",
    "bson_document_size",
    "check_bson_storable",
    "is_async_callable",
    "is_params_model",
    "load_params",
    "normalize_on_error_result",
    "retry_run_at",
    "to_bson_storable",
    "validate_params",
]

MAX_NAME_LENGTH = 200
"""The longest job name accepted."""

DEFAULT_HEARTBEAT_FRACTION = 1 / 3
"""``heartbeat=True`` renews the lock every third of the lock time."""

DEFAULT_RECURRENT_PRIORITY = 1000
"""A recurrent job's default priority, above the events' default 100: the claim takes the highest
priority first (then the oldest ``nextRunAt``), so a due cron job is not queued behind a backlog
of older events. A plain number, so a Node worker reads (and sorts) it the same way."""


UniqueScope: TypeAlias = Literal["global", "job"]
_AnyType: TypeAlias = type[Any]
_AnyCallable: TypeAlias = Callable[..., Any]
_OPT = InvalidOptionError


# --------------------------------------------------------------------------------------------
# What on_error returns


@dataclass(frozen=True, slots=True)
class Retry:
    """Retry the failed job: at ``run_in`` from now, at ``run_at``, or, with neither, after the
    job's backoff delay (:class:`~dogs_core.domain.schedules.RetryPolicy`) for an event job and
    at its next regular run for a recurrent job.

    The attempt still counts toward the job's attempt limit.
    """

    run_in: timedelta | None = None
    run_at: datetime | None = None

    def __post_init__(self) -> None:
        if self.run_in is not None and self.run_at is not None:
            raise InvalidScheduleError(
                "run_at",
                self.run_at,
                "conflicting options run_in and run_at: give one of them, not both",
            )
        if self.run_in is not None:
            object.__setattr__(self, "run_in", parse_duration(self.run_in, field="run_in"))
        if self.run_at is not None:
            object.__setattr__(self, "run_at", ensure_utc(self.run_at, field="run_at"))


@dataclass(frozen=True, slots=True)
class Discard:
    """Give up: an event job is removed (kept in history), a recurrent job moves to its next
    regular run."""


OnErrorResult: TypeAlias = Retry | Discard


class Snooze(Exception):
    """Return or raise it from a handler: run the job again ``run_in`` from now (or at
    ``run_at``) without counting this attempt toward its attempt limit, as Oban's
    ``{:snooze, seconds}``. The history row of the attempt says ``snoozed``."""

    def __init__(
        self, run_in: timedelta | int | float | str | None = None, *, run_at: datetime | None = None
    ) -> None:
        if (run_in is None) == (run_at is None):
            raise InvalidScheduleError("run_in", run_in, "give exactly one of run_in and run_at")
        self.run_in = None if run_in is None else parse_duration(run_in, field="run_in")
        self.run_at = None if run_at is None else ensure_utc(run_at, field="run_at")
        super().__init__(f"snoozed for {self.run_in}" if self.run_in else f"snoozed until {run_at}")

    def run_after(self, now: datetime) -> datetime:
        """When the snoozed job runs again."""
        if self.run_at is not None:
            return self.run_at
        assert self.run_in is not None
        return now + self.run_in


def normalize_on_error_result(value: object, *, job_name: str) -> OnErrorResult:
    """Check what an ``on_error`` callback returned: ``None`` means ``Retry()``."""
    if value is None:
        return Retry()
    if isinstance(value, Retry | Discard):
        return value
    raise InvalidOptionError(
        "on_error",
        value,
        f"job {job_name!r}: on_error must return Retry(...), Discard() or None",
    )


# --------------------------------------------------------------------------------------------
# Option types for the constructors (used by dogs_core.jobs for typed **options)


class _CommonOptions(TypedDict, total=False):
    priority: int
    lock_time: DurationLike | None
    save_executions_for: DurationLike
    on_error: _AnyCallable | None
    on_stale: _AnyCallable | None
    retry: RetryPolicy
    cancel_on_stale: bool
    heartbeat: bool | float
    timeout: DurationLike | None
    store_logs: bool | int | str
    max_log_lines: int


class EventJobOptions(_CommonOptions, total=False):
    """Keyword options of an event job (everything but ``name`` and ``handler``)."""

    max_tries: int | None
    max_parallel_executions_per_server: int | None
    params_model: _AnyType | None
    unique_scope: UniqueScope
    global_concurrency: int | None
    concurrency_key: Callable[[Any], object] | None
    rate_limit: RateLimit | tuple[int, DurationLike] | None


class RecurrentJobOptions(_CommonOptions, total=False):
    """Keyword options of a recurrent job (everything but ``name`` and ``handler``)."""

    schedule: ScheduleRule | None
    run_every: DurationLike | None
    cron: str | None
    timezone: str | None
    next_run: Callable[[datetime], datetime] | None
    misfire: MisfireMode
    misfire_grace: DurationLike | None
    max_catch_up: int | None


def _set_fleet_limits(
    definition: object,
    global_concurrency: object,
    concurrency_key: object,
    rate_limit: object,
) -> None:
    """An event job's fleet-wide limits (:mod:`dogs_core.domain.controls`), checked."""
    set_ = object.__setattr__
    limit = _optional_int(global_concurrency, "global_concurrency", minimum=1)
    if concurrency_key is not None:
        validation.callable_value("concurrency_key", concurrency_key)
        if limit is None:
            raise InvalidOptionError("concurrency_key", concurrency_key, "needs global_concurrency")
    set_(definition, "global_concurrency", limit)
    set_(definition, "concurrency_key", concurrency_key)
    set_(definition, "rate_limit", rate_limit_option(rate_limit))


# --------------------------------------------------------------------------------------------
# Definitions


@dataclass(frozen=True, eq=False, init=False)
class EventJobDefinition:
    """A one-shot job: many records may share its name, each with its own params.

    Options (all keyword-only):

    ``priority``
        int, default 100; higher runs first; 0 is allowed.
    ``lock_time``
        duration > 0, or None for the workers' default lock time.
    ``max_tries``
        attempt limit (int >= 1), or None for the workers' default.
    ``max_parallel_executions_per_server``
        cap on concurrent executions of this job per workers instance (int >= 0; 0 means this
        instance never runs it), or None for no cap.
    ``save_executions_for``
        history retention (duration >= 0, default 7 days; 0 disables history).
    ``on_error`` / ``on_stale``
        callbacks (see the module docstring), or None.
    ``retry``
        the :class:`RetryPolicy` for retries without an explicit time.
    ``params_model``
        a pydantic-like model or dataclass class; derived from the handler's first parameter's
        annotation when None.
    ``cancel_on_stale``
        cancel an async execution whose lock went stale (default True).
    ``heartbeat``
        renew the lock automatically: True = every third of the lock time, a float in (0, 1) =
        that fraction of it, False (default) = only when the handler asks.
    ``timeout``
        an execution time limit (duration > 0) after which an async handler is cancelled and the
        attempt counts as failed; a sync handler's thread cannot be interrupted, so its late
        result is ignored. None (default) = no limit.
    ``unique_scope``
        ``"global"`` (default; Dogs' one namespace of unique keys) or ``"job"`` (unique keys are
        scoped to this job name).
    ``global_concurrency``
        at most this many executions at once across every Python worker sharing the store
        (int >= 1), per value of ``concurrency_key(params)`` when given; None (default) = no
        fleet-wide limit (see :mod:`dogs_core.domain.controls`).
    ``rate_limit``
        at most ``limit`` starts per ``period`` across the fleet: a
        :class:`~dogs_core.domain.controls.RateLimit` (with an optional key function) or a
        ``(limit, period)`` tuple; None (default) = no rate limit.
    ``store_logs``, ``max_log_lines``
        keep what the handler logs through ``ctx.logger`` with the job: ``True`` (INFO and
        above), a level (``"DEBUG"``, ``logging.WARNING``...) or ``False`` (default); at most
        ``max_log_lines`` (default 1,000) per execution, then one "N lines dropped" line
        (:mod:`dogs_core.domain.log_lines`). Read them with ``client.get_logs``.
    """

    type: ClassVar[JobType] = JobType.EVENT

    name: str
    handler: _AnyCallable
    priority: int
    lock_time: timedelta | None
    max_tries: int | None
    max_parallel_executions_per_server: int | None
    save_executions_for: timedelta
    on_error: _AnyCallable | None
    on_stale: _AnyCallable | None
    retry: RetryPolicy
    params_model: _AnyType | None
    cancel_on_stale: bool
    heartbeat: bool | float
    timeout: timedelta | None
    unique_scope: UniqueScope
    is_async: bool
    global_concurrency: int | None
    concurrency_key: Callable[[Any], object] | None
    rate_limit: RateLimit | None
    log_level: int | None
    """The level from which ``ctx.logger``'s records are kept (``None``: none kept)."""
    max_log_lines: int

    def __init__(
        self,
        name: str,
        handler: _AnyCallable,
        *,
        priority: int = DEFAULT_PRIORITY,
        lock_time: DurationLike | None = None,
        max_tries: int | None = None,
        max_parallel_executions_per_server: int | None = None,
        save_executions_for: DurationLike = DEFAULT_RETENTION,
        on_error: _AnyCallable | None = None,
        on_stale: _AnyCallable | None = None,
        retry: RetryPolicy | None = None,
        params_model: _AnyType | None = None,
        cancel_on_stale: bool = True,
        heartbeat: bool | float = False,
        timeout: DurationLike | None = None,
        unique_scope: UniqueScope = "global",
        global_concurrency: int | None = None,
        concurrency_key: Callable[[Any], object] | None = None,
        rate_limit: RateLimit | tuple[int, DurationLike] | None = None,
        store_logs: bool | int | str = False,
        max_log_lines: int = DEFAULT_MAX_LOG_LINES,
    ) -> None:
        _set_common(
            self,
            name=name,
            handler=handler,
            handler_args=("params", "ctx"),
            on_error=on_error,
            on_error_args=("error", "params", "ctx"),
            on_stale=on_stale,
            on_stale_args=("params", "ctx"),
            priority=priority,
            lock_time=lock_time,
            save_executions_for=save_executions_for,
            retry=retry,
            cancel_on_stale=cancel_on_stale,
            heartbeat=heartbeat,
            timeout=timeout,
        )
        _set_log_options(self, store_logs, max_log_lines)
        set_ = object.__setattr__
        set_(self, "max_tries", _optional_int(max_tries, "max_tries", minimum=1))
        cap = "max_parallel_executions_per_server"
        set_(self, cap, _optional_int(max_parallel_executions_per_server, cap, minimum=0))
        if unique_scope not in ("global", "job"):
            raise InvalidOptionError("unique_scope", unique_scope, "must be 'global' or 'job'")
        set_(self, "unique_scope", unique_scope)
        _set_fleet_limits(self, global_concurrency, concurrency_key, rate_limit)
        if params_model is None:
            params_model = derive_params_model(self.handler)
        elif not is_params_model(params_model):
            raise InvalidOptionError(
                "params_model",
                params_model,
                "must be a pydantic-like model class (model_validate/model_dump) or a dataclass",
            )
        set_(self, "params_model", params_model)

    @property
    def heartbeat_fraction(self) -> float | None:
        """The fraction of the lock time between automatic renewals, or None (no heartbeat)."""
        return _heartbeat_fraction(self.heartbeat)

    def heartbeat_interval(self, lock_time: timedelta) -> timedelta | None:
        """Time between automatic renewals for an effective ``lock_time``, or None."""
        fraction = self.heartbeat_fraction
        return None if fraction is None else lock_time * fraction

    def effective_lock_time(self, default: timedelta) -> timedelta:
        """This job's lock time, or the workers' ``default``."""
        return self.lock_time if self.lock_time is not None else default

    def effective_max_tries(self, default: int | None) -> int | None:
        """This job's attempt limit, or the workers' ``default`` (None = unlimited)."""
        return self.max_tries if self.max_tries is not None else default


@dataclass(frozen=True, eq=False, init=False)
class RecurrentJobDefinition:
    """A job with exactly one record that reschedules itself by its :data:`ScheduleRule`.

    The schedule is given as exactly one of ``run_every`` (duration > 0: the next run is that
    long after completion), ``cron`` + ``timezone`` (an IANA name, required with cron),
    ``next_run`` (a function of now), or a ready-made ``schedule`` rule object.

    ``priority`` defaults to :data:`DEFAULT_RECURRENT_PRIORITY` (1000), so that the job is not
    queued behind older event jobs. ``misfire`` (``"run_once"``, the default; ``"skip"``;
    ``"run_all"``), ``misfire_grace`` (a duration, or None) and ``max_catch_up`` (``run_all``
    only, int >= 1) say what becomes of the slots the job missed
    (:mod:`dogs_core.domain.misfire`; the effective policy is :attr:`misfire`). The other options
    mean what they mean for :class:`EventJobDefinition`; ``max_tries``, the per-server cap,
    params and unique keys do not apply to recurrent jobs.
    """

    type: ClassVar[JobType] = JobType.RECURRENT

    name: str
    handler: _AnyCallable
    schedule: ScheduleRule
    misfire: MisfirePolicy
    priority: int
    lock_time: timedelta | None
    save_executions_for: timedelta
    on_error: _AnyCallable | None
    on_stale: _AnyCallable | None
    retry: RetryPolicy
    cancel_on_stale: bool
    heartbeat: bool | float
    timeout: timedelta | None
    is_async: bool
    log_level: int | None
    max_log_lines: int

    def __init__(
        self,
        name: str,
        handler: _AnyCallable,
        *,
        schedule: ScheduleRule | None = None,
        run_every: DurationLike | None = None,
        cron: str | None = None,
        timezone: str | None = None,
        next_run: Callable[[datetime], datetime] | None = None,
        misfire: MisfireMode = "run_once",
        misfire_grace: DurationLike | None = None,
        max_catch_up: int | None = None,
        priority: int = DEFAULT_RECURRENT_PRIORITY,
        lock_time: DurationLike | None = None,
        save_executions_for: DurationLike = DEFAULT_RETENTION,
        on_error: _AnyCallable | None = None,
        on_stale: _AnyCallable | None = None,
        retry: RetryPolicy | None = None,
        cancel_on_stale: bool = True,
        heartbeat: bool | float = False,
        timeout: DurationLike | None = None,
        store_logs: bool | int | str = False,
        max_log_lines: int = DEFAULT_MAX_LOG_LINES,
    ) -> None:
        _set_common(
            self,
            name=name,
            handler=handler,
            handler_args=("ctx",),
            on_error=on_error,
            on_error_args=("error", "params", "ctx"),
            on_stale=on_stale,
            on_stale_args=("params", "ctx"),
            priority=priority,
            lock_time=lock_time,
            save_executions_for=save_executions_for,
            retry=retry,
            cancel_on_stale=cancel_on_stale,
            heartbeat=heartbeat,
            timeout=timeout,
        )
        _set_log_options(self, store_logs, max_log_lines)
        schedule = _resolve_schedule(schedule, run_every, cron, timezone, next_run)
        object.__setattr__(self, "schedule", schedule)
        policy = MisfirePolicy.of(misfire, misfire_grace, max_catch_up, schedule=schedule)
        object.__setattr__(self, "misfire", policy)

    @property
    def heartbeat_fraction(self) -> float | None:
        """The fraction of the lock time between automatic renewals, or None (no heartbeat)."""
        return _heartbeat_fraction(self.heartbeat)

    def heartbeat_interval(self, lock_time: timedelta) -> timedelta | None:
        """Time between automatic renewals for an effective ``lock_time``, or None."""
        fraction = self.heartbeat_fraction
        return None if fraction is None else lock_time * fraction

    def effective_lock_time(self, default: timedelta) -> timedelta:
        """This job's lock time, or the workers' ``default``."""
        return self.lock_time if self.lock_time is not None else default


def _resolve_schedule(
    schedule: ScheduleRule | None,
    run_every: DurationLike | None,
    cron: str | None,
    timezone: str | None,
    next_run: Callable[[datetime], datetime] | None,
) -> ScheduleRule:
    """The one schedule of a recurrent job: a ready-made rule, or one built from exactly one of
    the other options."""
    if schedule is None:
        return schedule_rule(run_every=run_every, cron=cron, timezone=timezone, next_run=next_run)
    given = {"run_every": run_every, "cron": cron, "timezone": timezone, "next_run": next_run}
    others = [option for option, value in given.items() if value is not None]
    if others:
        raise InvalidScheduleError(
            others[0],
            given[others[0]],
            f"conflicting options schedule and {others[0]}: give one schedule only",
        )
    if not isinstance(schedule, RunEvery | CronSchedule | CustomSchedule):
        raise InvalidScheduleError(
            "schedule", schedule, "must be a RunEvery, CronSchedule or CustomSchedule"
        )
    return schedule


JobDefinition: TypeAlias = EventJobDefinition | RecurrentJobDefinition
"""Either kind of job definition."""


def _set_common(
    target: EventJobDefinition | RecurrentJobDefinition,
    *,
    name: str,
    handler: _AnyCallable,
    handler_args: tuple[str, ...],
    on_error: _AnyCallable | None,
    on_error_args: tuple[str, ...],
    on_stale: _AnyCallable | None,
    on_stale_args: tuple[str, ...],
    priority: int,
    lock_time: DurationLike | None,
    save_executions_for: DurationLike,
    retry: RetryPolicy | None,
    cancel_on_stale: bool,
    heartbeat: bool | float,
    timeout: DurationLike | None,
) -> None:
    set_ = object.__setattr__
    set_(target, "name", _check_name(name))
    _check_callable(handler, "handler", handler_args)
    set_(target, "handler", handler)
    set_(target, "is_async", is_async_callable(handler))
    for field, callback, args in (
        ("on_error", on_error, on_error_args),
        ("on_stale", on_stale, on_stale_args),
    ):
        if callback is not None:
            _check_callable(callback, field, args)
        set_(target, field, callback)
    set_(target, "priority", validation.priority("priority", priority))
    set_(
        target,
        "lock_time",
        parse_optional_duration(lock_time, field="lock_time", positive=True, error=_OPT),
    )
    set_(
        target,
        "save_executions_for",
        parse_duration(save_executions_for, field="save_executions_for", error=_OPT),
    )
    set_(
        target,
        "timeout",
        parse_optional_duration(timeout, field="timeout", positive=True, error=_OPT),
    )
    if retry is None:
        retry = RetryPolicy()
    elif not isinstance(retry, RetryPolicy):
        raise InvalidOptionError("retry", retry, "must be a RetryPolicy")
    set_(target, "retry", retry)
    if not isinstance(cancel_on_stale, bool):
        raise InvalidOptionError("cancel_on_stale", cancel_on_stale, "must be a bool")
    set_(target, "cancel_on_stale", cancel_on_stale)
    _heartbeat_fraction(heartbeat)  # validates
    set_(target, "heartbeat", heartbeat)


def _set_log_options(
    target: EventJobDefinition | RecurrentJobDefinition, store_logs: object, max_log_lines: object
) -> None:
    """``store_logs`` and ``max_log_lines`` (:mod:`dogs_core.domain.log_lines`), checked."""
    level, cap = log_options(store_logs, max_log_lines)
    check_log_options(level, target.save_executions_for)
    object.__setattr__(target, "log_level", level)
    object.__setattr__(target, "max_log_lines", cap)


def _check_name(name: object) -> str:
    if not isinstance(name, str):
        raise InvalidOptionError("name", name, "a job name must be a str")
    if not name.strip():
        raise InvalidOptionError("name", name, "a job name cannot be empty")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidOptionError(
            "name", name, f"a job name must be at most {MAX_NAME_LENGTH} characters"
        )
    if "\x00" in name:
        raise InvalidOptionError("name", name, "a job name cannot contain a NUL character")
    return name


def _optional_int(value: object, field: str, *, minimum: int) -> int | None:
    return None if value is None else validation.integer(field, value, minimum=minimum)


def _heartbeat_fraction(value: object) -> float | None:
    if isinstance(value, bool):
        return DEFAULT_HEARTBEAT_FRACTION if value else None
    if not isinstance(value, int | float) or math.isnan(value) or not 0 < value < 1:
        raise InvalidOptionError(
            "heartbeat",
            value,
            "must be a bool or a fraction of the lock time strictly between 0 and 1",
        )
    return float(value)


def is_async_callable(func: object) -> bool:
    """True for ``async def`` functions, methods, partials of them, and objects whose
    ``__call__`` is ``async def``."""
    if inspect.iscoroutinefunction(func):
        return True
    if inspect.isroutine(func) or isinstance(func, type):
        return False
    return inspect.iscoroutinefunction(getattr(func, "__call__", None))  # noqa: B004


def _check_callable(func: object, field: str, args: tuple[str, ...]) -> None:
    if not callable(func):
        raise InvalidOptionError(field, func, "must be callable")
    if inspect.isasyncgenfunction(func) or inspect.isgeneratorfunction(func):
        raise InvalidOptionError(
            field, func, "must be a function or coroutine function, not a generator function"
        )
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):  # some builtins and C callables have no signature
        return
    params = list(signature.parameters.values())
    positional = [
        p
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    required = [p for p in positional if p.default is inspect.Parameter.empty]
    has_varargs = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)
    required_keyword_only = [
        p.name
        for p in params
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is inspect.Parameter.empty
    ]
    n = len(args)
    if required_keyword_only or len(required) > n or (len(positional) < n and not has_varargs):
        raise InvalidOptionError(
            field,
            func,
            f"is called as {field}({', '.join(args)}): it must accept exactly {n} positional "
            f"argument{'s' if n != 1 else ''}, but its signature is {signature}",
        )


# --------------------------------------------------------------------------------------------
# Retries


def retry_run_at(
    definition: JobDefinition, result: Retry, now: datetime, attempt: int, rand: float
) -> datetime:
    """When to run a job again after failed attempt ``attempt`` and ``on_error`` -> ``result``:
    ``result.run_in`` / ``result.run_at`` when given, else ``now`` plus the job's backoff delay
    (``rand`` uniform in [0, 1), supplied by the caller)."""
    if result.run_in is not None or result.run_at is not None:
        return event_run_at(now, result.run_in, result.run_at)
    return ensure_utc(now, field="now") + backoff_delay(definition.retry, attempt, rand)
