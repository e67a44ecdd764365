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
    ``str`` keys whose values MongoDB can store (checked by :func:`check_bson_storable`).
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import typing
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar, Literal, TypeAlias, TypedDict, TypeGuard

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
from dogs_core.errors import InvalidOptionError, InvalidParamsError, InvalidScheduleError

__all__ = [
    "DEFAULT_HEARTBEAT_FRACTION",
    "MAX_NAME_LENGTH",
    "Discard",
    "EventJobDefinition",
    "EventJobOptions",
    "JobDefinition",
    "JobType",
    "OnErrorResult",
    "RecurrentJobDefinition",
    "RecurrentJobOptions",
    "Retry",
    "UniqueScope",
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

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_MAX_BSON_DEPTH = 100

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


class EventJobOptions(_CommonOptions, total=False):
    """Keyword options of an event job (everything but ``name`` and ``handler``)."""

    max_tries: int | None
    max_parallel_executions_per_server: int | None
    params_model: _AnyType | None
    unique_scope: UniqueScope


class RecurrentJobOptions(_CommonOptions, total=False):
    """Keyword options of a recurrent job (everything but ``name`` and ``handler``)."""

    schedule: ScheduleRule | None
    run_every: DurationLike | None
    cron: str | None
    timezone: str | None
    next_run: Callable[[datetime], datetime] | None


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
        set_ = object.__setattr__
        set_(self, "max_tries", _optional_int(max_tries, "max_tries", minimum=1))
        set_(
            self,
            "max_parallel_executions_per_server",
            _optional_int(
                max_parallel_executions_per_server, "max_parallel_executions_per_server", minimum=0
            ),
        )
        if unique_scope not in ("global", "job"):
            raise InvalidOptionError("unique_scope", unique_scope, "must be 'global' or 'job'")
        set_(self, "unique_scope", unique_scope)
        if params_model is None:
            params_model = _derive_params_model(self.handler)
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
    ``next_run`` (a function of now), or a ready-made ``schedule`` rule object. The other options
    mean what they mean for :class:`EventJobDefinition`; ``max_tries``, the per-server cap,
    params and unique keys do not apply to recurrent jobs.
    """

    type: ClassVar[JobType] = JobType.RECURRENT

    name: str
    handler: _AnyCallable
    schedule: ScheduleRule
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
        priority: int = DEFAULT_PRIORITY,
        lock_time: DurationLike | None = None,
        save_executions_for: DurationLike = DEFAULT_RETENTION,
        on_error: _AnyCallable | None = None,
        on_stale: _AnyCallable | None = None,
        retry: RetryPolicy | None = None,
        cancel_on_stale: bool = True,
        heartbeat: bool | float = False,
        timeout: DurationLike | None = None,
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
        if schedule is not None:
            others = [
                option
                for option, value in (
                    ("run_every", run_every),
                    ("cron", cron),
                    ("timezone", timezone),
                    ("next_run", next_run),
                )
                if value is not None
            ]
            if others:
                raise InvalidScheduleError(
                    others[0],
                    {"run_every": run_every, "cron": cron, "timezone": timezone}.get(
                        others[0], next_run
                    ),
                    f"conflicting options schedule and {others[0]}: give one schedule only",
                )
            if not isinstance(schedule, RunEvery | CronSchedule | CustomSchedule):
                raise InvalidScheduleError(
                    "schedule", schedule, "must be a RunEvery, CronSchedule or CustomSchedule"
                )
        else:
            schedule = schedule_rule(
                run_every=run_every, cron=cron, timezone=timezone, next_run=next_run
            )
        object.__setattr__(self, "schedule", schedule)

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
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise InvalidOptionError("priority", priority, "must be an int (higher runs first)")
    if not _INT64_MIN <= priority <= _INT64_MAX:
        raise InvalidOptionError("priority", priority, "must fit in a 64-bit integer")
    set_(target, "priority", priority)
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
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidOptionError(field, value, f"must be an int >= {minimum} or None")
    if value < minimum:
        raise InvalidOptionError(field, value, f"must be at least {minimum}")
    return value


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
# Params


def is_params_model(obj: object) -> TypeGuard[type[Any]]:
    """True for a pydantic-like model class (``model_validate`` and ``model_dump``) or a
    dataclass class."""
    if not isinstance(obj, type):
        return False
    return _is_pydantic_like(obj) or dataclasses.is_dataclass(obj)


def _is_pydantic_like(model: type[Any]) -> bool:
    return callable(getattr(model, "model_validate", None)) and callable(
        getattr(model, "model_dump", None)
    )


def _derive_params_model(handler: _AnyCallable) -> _AnyType | None:
    try:
        signature = inspect.signature(handler)
    except (TypeError, ValueError):
        return None
    first = next(iter(signature.parameters.values()), None)
    if first is None or first.kind is inspect.Parameter.VAR_POSITIONAL:
        return None
    annotation: object = first.annotation
    if isinstance(annotation, str):
        try:
            annotation = typing.get_type_hints(handler).get(first.name)
        except Exception:  # unresolvable forward references: no model
            return None
    return annotation if is_params_model(annotation) else None


def validate_params(definition: EventJobDefinition, params: object) -> dict[str, Any] | None:
    """Validate ``params`` for an event job and return the plain dict to store (or None).

    With a ``params_model``, ``params`` may be a model instance or a mapping (None counts as an
    empty mapping); a mapping is validated (pydantic coerces, e.g. ``"10"`` becomes ``10``; a
    dataclass is just constructed) and the result dumped with ``model_dump(mode="python")`` or
    :func:`dataclasses.asdict`. Without one, params must be None or a mapping with str keys.
    Either way the stored value must be BSON-storable. Raises :class:`InvalidParamsError`.
    """
    model = definition.params_model
    job = definition.name
    data: object
    if model is not None:
        data = _dump_model(_build_model(model, params, job, stored=False), model, job)
    elif params is None:
        return None
    elif isinstance(params, Mapping):
        data = params
    else:
        raise InvalidParamsError(
            "params",
            params,
            f"job {job!r}: params must be a mapping with str keys, or None "
            f"(give the job a params_model to pass a {type(params).__name__})",
        )
    result = to_bson_storable(data, path="params", job=job)
    if not isinstance(result, dict):  # a model whose dump is not a document
        raise InvalidParamsError(
            "params", data, f"job {job!r}: params must serialize to a mapping, not {type(data)}"
        )
    size = bson_document_size(result)
    if size > MAX_PARAMS_BSON_SIZE:
        raise InvalidParamsError(
            "params",
            f"<{size} bytes as BSON>",
            f"job {job!r}: params exceed {MAX_PARAMS_BSON_SIZE} bytes; a MongoDB document holds "
            "at most 16 MiB with the record's own fields: store large data elsewhere and pass "
            "a reference",
        )
    return result


#: The largest params document: MongoDB's 16 MiB limit less room for the record's own fields.
MAX_PARAMS_BSON_SIZE = 16 * 1024 * 1024 - 16 * 1024


def bson_document_size(document: Mapping[str, Any]) -> int:
    """The size in bytes of ``document`` encoded as BSON (for values that pass
    :func:`check_bson_storable`), computed without encoding it."""
    return 5 + sum(_bson_element_size(str(key), value) for key, value in document.items())


def _bson_element_size(key: str, value: object) -> int:
    return 2 + len(key.encode("utf-8")) + _bson_value_size(value)


def _bson_value_size(value: object) -> int:
    if value is None or isinstance(value, bool):
        return 0 if value is None else 1
    if isinstance(value, int):
        return 4 if -(2**31) <= value < 2**31 else 8
    if isinstance(value, float | datetime):
        return 8
    if isinstance(value, str):
        return 5 + len(value.encode("utf-8"))
    if isinstance(value, bytes | bytearray):
        return 5 + len(value)
    if isinstance(value, uuid.UUID):
        return 5 + 16
    if isinstance(value, Mapping):
        return bson_document_size(value)
    if isinstance(value, list | tuple):
        return 5 + sum(_bson_element_size(str(i), item) for i, item in enumerate(value))
    return 16  # other BSON types (ObjectId 12, Decimal128 16...): an upper bound is enough


def load_params(definition: JobDefinition, stored: Mapping[str, Any] | None) -> object:
    """What the handler receives for the ``stored`` params: a model instance when the job has a
    ``params_model`` (None counts as an empty mapping), else ``stored`` unchanged.

    Raises :class:`InvalidParamsError` when the stored params no longer fit the model.
    """
    if not isinstance(definition, EventJobDefinition) or definition.params_model is None:
        return stored
    return _build_model(definition.params_model, stored, definition.name, stored=True)


def _build_model(model: _AnyType, params: object, job: str, *, stored: bool) -> object:
    if isinstance(params, model):
        return params
    what = "stored params" if stored else "params"
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        raise InvalidParamsError(
            "params",
            params,
            f"job {job!r}: expected a {model.__name__} or a mapping, not {type(params).__name__}",
        )
    source = dict(params)
    try:
        if _is_pydantic_like(model):
            return model.model_validate(source)
        return model(**source)
    except Exception as exc:
        raise InvalidParamsError(
            "params",
            params,
            f"job {job!r}: {what} do not match {model.__name__}: {exc}",
        ) from exc


def _dump_model(instance: object, model: _AnyType, job: str) -> object:
    if _is_pydantic_like(model):
        return typing.cast(Any, instance).model_dump(mode="python")
    return dataclasses.asdict(typing.cast(Any, instance))


def check_bson_storable(value: object, path: str = "params", *, job: str | None = None) -> None:
    """Raise :class:`InvalidParamsError` naming the path (``params.items[2].at``) of the first
    value that MongoDB cannot store.

    Accepted: None, bool, int (64-bit), float, str, bytes, aware datetime, uuid.UUID, values of
    ``bson`` types (ObjectId, Decimal128, ...), lists and tuples, and mappings whose keys are
    ``str`` without NUL characters and not starting with ``$``. Nesting is limited to 100 levels.
    Anything else (sets, dates without time, Decimal, arbitrary objects, naive datetimes) is
    rejected.
    """
    to_bson_storable(value, path=path, job=job)


def to_bson_storable(value: object, *, path: str = "params", job: str | None = None) -> Any:
    """Like :func:`check_bson_storable`, and return a plain copy (mappings become dicts,
    tuples become lists)."""
    return _storable(value, path, job, 0)


def _storable(value: object, path: str, job: str | None, depth: int) -> Any:
    if depth > _MAX_BSON_DEPTH:
        _not_storable(path, value, job, f"nested more than {_MAX_BSON_DEPTH} levels deep")
    if value is None or isinstance(value, bool | str | bytes | float | uuid.UUID):
        return value
    if isinstance(value, int):
        if not _INT64_MIN <= value <= _INT64_MAX:
            _not_storable(path, value, job, "integers must fit in 64 bits")
        return value
    if isinstance(value, datetime):
        if value.utcoffset() is None:
            _not_storable(path, value, job, "naive datetimes are ambiguous; make it timezone-aware")
        return value
    if isinstance(value, Mapping):
        result: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                _not_storable(path, key, job, f"mapping keys must be str, not {type(key).__name__}")
            child = _child_path(path, key)
            if "\x00" in key:
                _not_storable(child, key, job, "keys cannot contain a NUL character")
            if key.startswith("$"):
                _not_storable(child, key, job, "keys cannot start with '$'")
            result[key] = _storable(item, child, job, depth + 1)
        return result
    if isinstance(value, list | tuple):
        return [_storable(item, f"{path}[{i}]", job, depth + 1) for i, item in enumerate(value)]
    if type(value).__module__.split(".")[0] == "bson":
        return value
    _not_storable(path, value, job, f"a {type(value).__name__} cannot be stored in MongoDB")


def _child_path(path: str, key: str) -> str:
    return f"{path}.{key}" if key.isidentifier() else f"{path}[{key!r}]"


def _not_storable(path: str, value: object, job: str | None, reason: str) -> typing.NoReturn:
    prefix = f"job {job!r}: " if job is not None else ""
    raise InvalidParamsError(path, value, prefix + reason)


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
