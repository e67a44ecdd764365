"""Worker options: one plain, frozen, validated settings object (in the style of arq).

:class:`WorkerSettings` is the single description of the worker options: each field is declared
once, with its type, default, check (from :mod:`dogs_core.domain.validation`), a one-line help
and, when the ``dogs worker`` command exposes it, its flag. :data:`WORKER_OPTIONS` lists them as
:class:`WorkerOption` rows; the container's worker defaults and the command's flags are derived
from it.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Final, TypedDict, Unpack

from dogs_core.domain import validation as v
from dogs_core.domain.clock_offset import DEFAULT_CLOCK_SYNC_INTERVAL
from dogs_core.domain.progress import DEFAULT_PROGRESS_INTERVAL
from dogs_core.domain.records import DEFAULT_RETENTION
from dogs_core.domain.schedules import DEFAULT_MAX_TRIES
from dogs_core.domain.validation import DurationLike
from dogs_core.errors import InvalidOptionError
from dogs_core.jobs import Jobs

__all__ = [
    "ACCEPTED_NAMES",
    "WORKER_OPTIONS",
    "DurationLike",
    "MaxTriesHook",
    "WorkerOption",
    "WorkerOptions",
    "WorkerSettings",
    "check_names",
    "worker_option",
]

#: The ceilings of the adaptive claim sizes (with ``workers_count``): see WorkerSettings.
BATCH_CEILING: Final = 64
CONCURRENCY_CEILING: Final = 8
#: The options that adapt when not given (:attr:`WorkerSettings.adaptive_claims`).
ADAPTIVE: Final = ("claim_batch_size", "claim_concurrency")

#: Called with the claimed job when an event job is marked maxTriesReached.
MaxTriesHook = Callable[[Any], Awaitable[None] | None]


@dataclass(frozen=True, slots=True)
class WorkerOption:
    """One worker option as the table describes it.

    ``name`` is the keyword argument and attribute, ``default`` what applies when it is not given
    (``None`` with ``derive``: computed from the other options), ``check`` validates and
    normalizes a given value (``check(name, value)``), ``help`` is a one-line description, and
    ``flag`` / ``short`` its ``dogs worker`` flags (``None`` when the command has none);
    ``from_text`` turns the flag's text into the value ``check`` is given.
    """

    name: str
    default: Any
    check: v.Check
    help: str
    flag: str | None = None
    short: str | None = None
    from_text: Callable[[str], object] = str
    derive: Callable[[Mapping[str, Any]], Any] | None = None


def _int_text(text: str) -> object:
    """A flag's integer (the text itself when it is none, for the check to name)."""
    try:
        return int(text)
    except ValueError:
        return text


def _tries_text(text: str) -> object:
    """``--max-tries``: an integer, or 'unlimited' (``None``)."""
    if text.strip().lower() in ("unlimited", "none"):
        return None
    try:
        return int(text)
    except ValueError:
        raise InvalidOptionError(
            "max_tries", text, "expected an integer >= 1 or 'unlimited'"
        ) from None


def _duration_or_none_text(text: str) -> object:
    """A flag's duration, or 'none'/'unlimited' (``None``: no bound)."""
    return None if text.strip().lower() in ("unlimited", "none") else text


def _option(default: Any, check: v.Check, help: str, **cli: Any) -> dict[str, Any]:
    """The metadata of a field of :class:`WorkerSettings`: its row of the table (see
    :class:`WorkerOption`)."""
    return {"option": (default, check, help, cli)}


@dataclass(frozen=True, slots=True, init=False, eq=False, repr=False)
class WorkerSettings:
    """Options of one workers instance (one scheduler loop).

    Durations accept a ``timedelta``, seconds as a number, or a string such as ``"30s"``.

    ``workers_count``
        Most executions running at once in this instance (not a number of pollers).
    ``poll_interval``
        Wait after a sweep of every partition found nothing. At most one empty sweep happens
        per interval, whatever ``workers_count`` is.
    ``default_lock_time``
        Lock written at claim; a job's own ``lock_time`` is applied by a second fenced write.
    ``n_partitions``
        Acquisition partitions; must be the same on every instance sharing the database.
    ``max_tries``
        Attempt limit of event jobs unless the job sets its own; ``None`` for unlimited.
    ``max_tries_reached_retention``
        How long terminal event records are kept; ``None`` keeps them forever.
    ``claim_concurrency``
        Claims kept in flight at once while capacity is free. Not given, it adapts between one
        and ``min(workers_count, 8)``: one more while claims come back full with a batch's worth
        of slots still free, one less when the free slots cut a claim short, back to one on a
        partial reply (Dogs awaits one at a time, which bounds a worker by one round trip per
        job). A given value stays fixed. Per-name caps are reserved before each claim is sent,
        so they are never exceeded.
    ``claim_batch_size``
        Most jobs one claim call may take (never more than the free slots). Not given, it
        starts at ``min(workers_count, 64)``, shrinks to what a claim found when one comes back
        partial and doubles back while claims come back full. A given value stays fixed; ``1``
        claims one job at a time, as Dogs does. A claim for several jobs is three store round
        trips instead of one per job.
    ``completions_in_flight``
        How many finished jobs may have their settlement (the delete of an event record, a
        retry's or a next run's reschedule) still on its way to the store while their slots
        already run new jobs. The next job starts during the write instead of after it; the
        records stay locked by this instance until the writes land. Default: ``workers_count``;
        ``0`` frees a slot only once its settlement is written (at most ``workers_count``
        records locked at a time).
    ``probe_interval``, ``probe_enabled``
        The adaptive index-hint probe (every 30 minutes by default).
    ``reconcile_enabled``
        The partition reconciler that gives a partition to records missing one.
    ``watch_changes``
        Wake the claim lanes from the store's change feed (MongoDB change streams on a replica
        set) when a job is scheduled or released anywhere, and start a job due before the next
        poll on a local timer. Where the store cannot watch, polling alone remains (logged
        once). Polling stays on either way: a change feed is a notification, not a queue.
    ``log_jobs``
        Log a line as each job starts and one as it ends (logger ``dogs.jobs``, with the job's
        name, id, execution id and tries as ``extra`` fields). Failures are logged with their
        traceback either way.
    ``release_workflows``, ``workflow_sweep_interval``
        Release the steps of workflows as their dependencies end, from the store's history feed,
        and sweep every interval for what the feed missed (docs/workflows.md). Every instance
        may release (each decision is written once); at least one must.
    ``clock_sync_interval``
        How often the offset between this machine's clock and the store's is measured (every
        60 s, and before the first claim). Lock deadlines and eligibility are computed on the
        store's clock, so workers whose clocks disagree still agree on which locks are live;
        ``None`` trusts this machine's clock (Dogs' behaviour).
    ``progress_interval``
        The least time between two writes that carry a job's progress (``ctx.progress``): a
        handler may report on every item, the latest report is written at most this often,
        riding the lock's renewal (1 s by default; :mod:`dogs_core.domain.progress`).
    ``registry_enabled``
        Keep this instance's document in the store's workers' registry (host, pid, job names,
        slots, what it runs; one write per 10 s), where the store has one: ``dogs workers``
        and the dashboard's Workers page list it, and an operator can quiet or stop it from
        there. Off: no document, and no remote quiet or stop.
    ``startup_timeout``
        How long starting workers wait for the store to answer (its setup, its capabilities,
        the first clock measure), retrying with a WARNING line per failed attempt, before they
        stop with :class:`~dogs_core.errors.StartupTimeoutError` (``dogs worker`` exits 2).
        30 s by default, PyMongo's server selection timeout, so that a worker started during a
        brief outage rides it out as a running one does; ``None`` waits until the store
        answers or :meth:`~dogs_core.runtime.Workers.stop` is called.
    ``on_max_tries_reached``
        Called (sync or async) with the claimed job when an event job is marked
        ``maxTriesReached``; its errors are logged and swallowed.
    ``cooldown_period``
        Accepted for parity with Dogs and ignored (deprecated there since 4.6.0): a
        ``DeprecationWarning`` says so.

    A bad value raises :class:`~dogs_core.errors.InvalidOptionError` naming the option; so does
    an unknown option. The settings are frozen.
    """

    workers_count: int = field(
        metadata=_option(
            4,
            v.positive_int,
            "Most jobs running at once.",
            flag="--workers-count",
            short="-c",
            from_text=_int_text,
        )
    )
    poll_interval: timedelta = field(
        metadata=_option(
            timedelta(seconds=3),
            v.positive_duration,
            "Idle wait between sweeps, e.g. 3s.",
            flag="--poll-interval",
        )
    )
    default_lock_time: timedelta = field(
        metadata=_option(
            timedelta(seconds=30),
            v.positive_duration,
            "Lock written at claim, e.g. 30s.",
            flag="--lock-time",
        )
    )
    n_partitions: int = field(
        metadata=_option(
            1,
            v.positive_int,
            "Acquisition partitions: the same for every worker and scheduler of the database.",
            flag="--n-partitions",
            from_text=_int_text,
        )
    )
    max_tries: int | None = field(
        metadata=_option(
            DEFAULT_MAX_TRIES,
            v.optional(v.positive_int),
            "Attempt limit of event jobs that set none, or 'unlimited'.",
            flag="--max-tries",
            from_text=_tries_text,
        )
    )
    max_tries_reached_retention: timedelta | None = field(
        metadata=_option(
            DEFAULT_RETENTION, v.optional(v.duration), "How long terminal event records are kept."
        )
    )
    on_max_tries_reached: MaxTriesHook | None = field(
        metadata=_option(
            None, v.optional(v.callable_value), "Called with the job when it reaches max_tries."
        )
    )
    claim_concurrency: int = field(
        metadata=_option(
            None,
            v.optional(v.positive_int),
            "Claims kept in flight while capacity is free (default: adapts up to 8).",
            derive=lambda values: min(values["workers_count"], CONCURRENCY_CEILING),
        )
    )
    claim_batch_size: int = field(
        metadata=_option(
            None,
            v.optional(v.positive_int),
            "Most jobs one claim call may take (default: adapts up to 64).",
            derive=lambda values: min(values["workers_count"], BATCH_CEILING),
        )
    )
    completions_in_flight: int = field(
        metadata=_option(
            None,
            v.optional(v.non_negative_int),
            "Finished jobs whose settlement may still be on its way while their slots run "
            "new jobs (default: workers_count; 0: a slot frees once its settlement is written).",
            derive=lambda values: values["workers_count"],
        )
    )
    probe_interval: timedelta = field(
        metadata=_option(
            timedelta(minutes=30), v.positive_duration, "Wait between index-hint probes."
        )
    )
    probe_enabled: bool = field(
        metadata=_option(True, v.boolean, "Run the adaptive index-hint probe.")
    )
    reconcile_enabled: bool = field(
        metadata=_option(True, v.boolean, "Run the partition reconciler.")
    )
    watch_changes: bool = field(
        metadata=_option(
            True, v.boolean, "Wake on the store's change feed (polling stays the safety net)."
        )
    )

    log_jobs: bool = field(
        metadata=_option(False, v.boolean, "Log a line as each job starts and ends.")
    )
    release_workflows: bool = field(
        metadata=_option(
            True, v.boolean, "Release workflow steps as their dependencies end (docs/workflows.md)."
        )
    )
    workflow_sweep_interval: timedelta = field(
        metadata=_option(
            timedelta(seconds=5),
            v.positive_duration,
            "Wait between the workflow release's sweeps (its safety net).",
        )
    )
    clock_sync_interval: timedelta | None = field(
        metadata=_option(
            DEFAULT_CLOCK_SYNC_INTERVAL,
            v.optional(v.positive_duration),
            "How often to measure this machine's clock against the database's.",
        )
    )
    progress_interval: timedelta = field(
        metadata=_option(
            timedelta(seconds=DEFAULT_PROGRESS_INTERVAL),
            v.positive_duration,
            "Least time between two writes of a job's progress, e.g. 1s.",
            flag="--progress-interval",
        )
    )
    registry_enabled: bool = field(
        metadata=_option(
            True,
            v.boolean,
            "Keep a document in the workers' registry (one write per 10 s; remote quiet/stop).",
        )
    )
    startup_timeout: timedelta | None = field(
        metadata=_option(
            timedelta(seconds=30),
            v.optional(v.positive_duration),
            "How long starting workers wait for the database before giving up, e.g. 30s "
            "(dogs worker then exits 2), or 'none' to wait until it answers.",
            flag="--startup-timeout",
            from_text=_duration_or_none_text,
        )
    )
    adaptive_claims: frozenset[str] = field(default=frozenset())
    """Which of ``claim_batch_size`` and ``claim_concurrency`` adapt (those not given); their
    values are then the ceilings."""

    def __init__(self, **options: Unpack[WorkerOptions]) -> None:
        given: dict[str, Any] = dict(options)
        if given.pop("cooldown_period", None) is not None:
            warnings.warn(
                "cooldown_period is ignored: one scheduler loop per Workers claims back to back",
                DeprecationWarning,
                stacklevel=2,
            )
        check_names(given, "unknown worker option")
        values: dict[str, Any] = {}
        for option in WORKER_OPTIONS:
            values[option.name] = option.check(option.name, given.get(option.name, option.default))
        adaptive = frozenset(name for name in ADAPTIVE if values[name] is None)
        for option in WORKER_OPTIONS:
            if option.derive is not None and values[option.name] is None:
                values[option.name] = option.derive(values)
        values["adaptive_claims"] = adaptive
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in sorted(_BY_NAME))
        return f"WorkerSettings({fields})"


class WorkerOptions(TypedDict, total=False):
    """The keyword arguments of :class:`WorkerSettings` (what each accepts)."""

    workers_count: int
    poll_interval: DurationLike
    default_lock_time: DurationLike
    n_partitions: int
    max_tries: int | None
    max_tries_reached_retention: DurationLike | None
    on_max_tries_reached: MaxTriesHook | None
    claim_concurrency: int | None
    claim_batch_size: int | None
    completions_in_flight: int | None
    probe_interval: DurationLike
    probe_enabled: bool
    reconcile_enabled: bool
    watch_changes: bool
    log_jobs: bool
    release_workflows: bool
    workflow_sweep_interval: DurationLike
    clock_sync_interval: DurationLike | None
    progress_interval: DurationLike
    registry_enabled: bool
    startup_timeout: DurationLike | None
    cooldown_period: object


def _table() -> tuple[WorkerOption, ...]:
    rows = []
    for spec in dataclasses.fields(WorkerSettings):
        if "option" not in spec.metadata:
            continue  # adaptive_claims: what the options say, not an option
        default, check, help, cli = spec.metadata["option"]
        rows.append(WorkerOption(spec.name, default, check, help, **cli))
    return tuple(rows)


#: Every worker option, in declaration order (the one table; see :class:`WorkerOption`).
WORKER_OPTIONS: Final[tuple[WorkerOption, ...]] = _table()
_BY_NAME: Final = {option.name: option for option in WORKER_OPTIONS}
#: The keyword arguments ``WorkerSettings`` accepts (the options and the ignored
#: ``cooldown_period``).
ACCEPTED_NAMES: Final = frozenset(_BY_NAME) | {"cooldown_period"}


def check_names(options: Mapping[str, object], reason: str) -> None:
    """Raise :class:`InvalidOptionError` naming the first of ``options`` that is not a worker
    option."""
    unknown = sorted((name for name in options if name not in ACCEPTED_NAMES), key=str)
    if unknown:
        raise InvalidOptionError(
            str(unknown[0]),
            options[unknown[0]],
            f"{reason}; expected one of {', '.join(sorted(ACCEPTED_NAMES))}",
        )


def worker_option(name: str) -> WorkerOption:
    """The row of the worker option ``name``."""
    return _BY_NAME[name]


def check_worker_arguments(jobs: object, settings: object, options: dict[str, Any]) -> None:
    """The arguments of ``Workers(store, jobs, settings=..., **options)``, before anything else."""
    if settings is not None and options:
        raise InvalidOptionError(
            "options", sorted(options), "pass either settings or keyword options, not both"
        )
    if not isinstance(jobs, Jobs):
        raise InvalidOptionError("jobs", jobs, "must be a dogs_core.Jobs registry")
    if len(jobs) == 0:
        raise InvalidOptionError("jobs", jobs, "the registry has no jobs to run")
