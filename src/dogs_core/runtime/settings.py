"""Worker options: one plain, validated settings object (in the style of arq)."""

from __future__ import annotations

import warnings
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from dogs_core.domain.partitions import validate_n_partitions
from dogs_core.domain.records import DEFAULT_RETENTION
from dogs_core.domain.schedules import DEFAULT_MAX_TRIES, parse_duration
from dogs_core.errors import InvalidOptionError

__all__ = ["DurationLike", "WorkerSettings"]

DurationLike = timedelta | int | float | str

#: Called with the claimed job when an event job is marked maxTriesReached.
MaxTriesHook = Callable[[Any], Awaitable[None] | None]


def _positive_int(field: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidOptionError(field, value, "must be an integer")
    if value < 1:
        raise InvalidOptionError(field, value, "must be at least 1")
    return value


def _duration(field: str, value: DurationLike, *, allow_zero: bool = False) -> timedelta:
    duration = parse_duration(value, field=field, error=InvalidOptionError)
    if not allow_zero and duration <= timedelta(0):
        raise InvalidOptionError(field, value, "must be greater than zero")
    return duration


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
        Claims kept in flight at once while capacity is free (Dogs awaits one at a time,
        which bounds a worker by one round trip per job). Per-name caps are reserved before
        each claim is sent, so they are never exceeded.
    ``claim_batch_size``
        Most jobs one claim call may take (default ``min(workers_count, 16)``; never more than
        the free slots). A claim for several jobs is a store round trip or three instead of one
        per job; ``1`` claims one job at a time, as Dogs does.
    ``probe_interval``, ``probe_enabled``
        The adaptive index-hint probe (every 30 minutes by default).
    ``reconcile_enabled``
        The partition reconciler that gives a partition to records missing one.
    ``on_max_tries_reached``
        Called (sync or async) with the claimed job when an event job is marked
        ``maxTriesReached``; its errors are logged and swallowed.
    ``cooldown_period``
        Accepted for parity with Dogs and ignored (deprecated there since 4.6.0): a
        ``DeprecationWarning`` says so.
    """

    __slots__ = (
        "claim_batch_size",
        "claim_concurrency",
        "default_lock_time",
        "max_tries",
        "max_tries_reached_retention",
        "n_partitions",
        "on_max_tries_reached",
        "poll_interval",
        "probe_enabled",
        "probe_interval",
        "reconcile_enabled",
        "workers_count",
    )

    def __init__(
        self,
        *,
        workers_count: int = 4,
        poll_interval: DurationLike = timedelta(seconds=3),
        default_lock_time: DurationLike = timedelta(seconds=30),
        n_partitions: int = 1,
        max_tries: int | None = DEFAULT_MAX_TRIES,
        max_tries_reached_retention: DurationLike | None = DEFAULT_RETENTION,
        on_max_tries_reached: MaxTriesHook | None = None,
        claim_concurrency: int | None = None,
        claim_batch_size: int | None = None,
        probe_interval: DurationLike = timedelta(minutes=30),
        probe_enabled: bool = True,
        reconcile_enabled: bool = True,
        cooldown_period: object = None,
    ) -> None:
        if cooldown_period is not None:
            warnings.warn(
                "cooldown_period is ignored: one scheduler loop per Workers claims back to back",
                DeprecationWarning,
                stacklevel=2,
            )
        self.workers_count = _positive_int("workers_count", workers_count)
        self.n_partitions = validate_n_partitions(n_partitions)
        self.poll_interval = _duration("poll_interval", poll_interval)
        self.default_lock_time = _duration("default_lock_time", default_lock_time)
        self.probe_interval = _duration("probe_interval", probe_interval)
        self.max_tries = None if max_tries is None else _positive_int("max_tries", max_tries)
        self.max_tries_reached_retention = (
            None
            if max_tries_reached_retention is None
            else _duration(
                "max_tries_reached_retention", max_tries_reached_retention, allow_zero=True
            )
        )
        if on_max_tries_reached is not None and not callable(on_max_tries_reached):
            raise InvalidOptionError(
                "on_max_tries_reached", on_max_tries_reached, "must be callable"
            )
        self.on_max_tries_reached = on_max_tries_reached
        self.claim_concurrency = (
            min(self.workers_count, 8)
            if claim_concurrency is None
            else _positive_int("claim_concurrency", claim_concurrency)
        )
        self.claim_batch_size = (
            min(self.workers_count, 16)
            if claim_batch_size is None
            else _positive_int("claim_batch_size", claim_batch_size)
        )
        for flag, value in (
            ("probe_enabled", probe_enabled),
            ("reconcile_enabled", reconcile_enabled),
        ):
            if not isinstance(value, bool):
                raise InvalidOptionError(flag, value, "must be True or False")
        self.probe_enabled = probe_enabled
        self.reconcile_enabled = reconcile_enabled

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in sorted(self.__slots__))
        return f"WorkerSettings({fields})"
