"""The worker registry, decided without I/O: what a ``Workers`` instance says about itself,
when it says it, and what an operator asks of it.

Each ``Workers`` instance keeps one document in the store's registry
(:class:`~dogs_core.ports.AsyncRegistryStore`, an optional role): its host, pid, version, job
names, slots and slots in use, the executions it runs and since when, when it started and its
last beat. It writes it when it starts, then at most once per :data:`BEAT_INTERVAL` (one write
per process per 10 s), and once more when it stops; ``expires_at`` lets the store's TTL remove
the document of a process that died without saying so. :func:`liveness` tells a live worker
from one whose beats stopped (``lost``) before the TTL removes it.

An operator's :class:`WorkerCommand` (``quiet``: stop claiming, finish what runs; ``stop``:
drain with a grace period, then stop) is written into the worker's document; the worker reads
it back with each beat (the beat's write returns it), so a command takes effect within one beat
interval, as Sidekiq's quiet and stop do.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Final

from dogs_core.domain import validation
from dogs_core.domain.values import value
from dogs_core.errors import InvalidOptionError

__all__ = [
    "BEAT_INTERVAL",
    "DEFAULT_STOP_GRACE",
    "EXPIRES_AFTER",
    "LOST_AFTER",
    "MAX_LISTED_EXECUTIONS",
    "STOPPED_KEPT",
    "RunningExecution",
    "WorkerAction",
    "WorkerCommand",
    "WorkerInfo",
    "WorkerState",
    "check_instance_id",
    "liveness",
    "shown_state",
    "uptime",
    "worker_command",
]

#: How often a worker writes its registry document: the bound of its cost, one write per
#: process per interval.
BEAT_INTERVAL: Final = timedelta(seconds=10)
#: A worker whose last beat is older than this is shown as ``lost`` (three beats missed).
LOST_AFTER: Final = 3 * BEAT_INTERVAL
#: ``expires_at`` of a beat: the store's TTL removes the document of a dead process after it
#: (MongoDB's TTL monitor runs once a minute, so up to a minute later).
EXPIRES_AFTER: Final = 6 * BEAT_INTERVAL
#: How long a stopped worker's document stays listed (``stopped``) before the TTL removes it.
STOPPED_KEPT: Final = timedelta(minutes=15)
#: The executions a document lists (the count is always whole).
MAX_LISTED_EXECUTIONS: Final = 100
#: The grace of a remote stop when the operator gives none (``dogs worker``'s ``--grace``).
DEFAULT_STOP_GRACE: Final = timedelta(seconds=30)


class WorkerState(enum.StrEnum):
    """What a worker says it is doing (:func:`liveness` adds ``lost``)."""

    RUNNING = "running"
    QUIET = "quiet"
    """Claims nothing more; what runs finishes."""
    STOPPING = "stopping"
    """Draining: claims nothing, running jobs get their grace."""
    STOPPED = "stopped"
    LOST = "lost"
    """Shown, never written: no beat for :data:`LOST_AFTER` (the process died or hangs)."""


class WorkerAction(enum.StrEnum):
    QUIET = "quiet"
    STOP = "stop"


@value
class RunningExecution:
    """One execution a worker runs: the job, its name, the execution (lock) id, since when."""

    job_id: str
    job_name: str
    execution_id: str
    started_at: datetime


@dataclass(frozen=True, slots=True)
class WorkerCommand:
    """What an operator asked of a worker, by whom and when (``grace``: of a stop)."""

    action: WorkerAction
    requested_at: datetime
    requested_by: str
    grace: timedelta | None = None


@value
class WorkerInfo:
    """One worker's registry document."""

    instance_id: str
    host: str
    pid: int
    version: str
    job_names: tuple[str, ...]
    workers_count: int
    slots_in_use: int
    executions: tuple[RunningExecution, ...]
    executions_total: int
    started_at: datetime
    last_beat: datetime
    state: WorkerState
    expires_at: datetime
    command: WorkerCommand | None = None
    beat_interval: timedelta = BEAT_INTERVAL

    def with_command(self, command: WorkerCommand | None) -> WorkerInfo:
        return replace(self, command=command)


def liveness(info: WorkerInfo, now: datetime) -> WorkerState:
    """``info.state``, or ``lost`` when a worker that did not say it stopped missed its beats."""
    if info.state is WorkerState.STOPPED:
        return info.state
    if now - info.last_beat > max(LOST_AFTER, 3 * info.beat_interval):
        return WorkerState.LOST
    return info.state


def shown_state(info: WorkerInfo, now: datetime) -> str:
    """What an operator reads: :func:`liveness`, and a command the worker has not acted on yet
    (``running -> quiet``: it will at its next beat)."""
    state = liveness(info, now)
    command = info.command
    if command is None or state in (WorkerState.STOPPED, WorkerState.LOST):
        return state.value
    wanted = WorkerState.QUIET if command.action is WorkerAction.QUIET else WorkerState.STOPPING
    if state is wanted or (wanted is WorkerState.QUIET and state is WorkerState.STOPPING):
        return state.value
    return f"{state.value} -> {command.action.value}"


def uptime(info: WorkerInfo, now: datetime) -> timedelta:
    """How long it has run (until its last beat, once it stopped or was lost)."""
    end = info.last_beat if liveness(info, now) in (WorkerState.STOPPED, WorkerState.LOST) else now
    return max(end - info.started_at, timedelta(0))


def check_instance_id(value: object) -> str:
    text = validation.text("instance_id", value)
    if len(text) > 100 or any(character.isspace() for character in text):
        raise InvalidOptionError("instance_id", value, "is not a worker instance id")
    return text


def worker_command(
    action: WorkerAction | str,
    *,
    requested_at: datetime,
    requested_by: str,
    grace: timedelta | None = None,
) -> WorkerCommand:
    """A checked :class:`WorkerCommand` (``grace`` only with ``stop``)."""
    try:
        chosen = WorkerAction(action)
    except ValueError:
        raise InvalidOptionError("action", action, "expected quiet or stop") from None
    if grace is not None:
        if chosen is not WorkerAction.STOP:
            raise InvalidOptionError("grace", grace, "only a stop has a grace period")
        grace = validation.duration("grace", grace)
    validation.text("requested_by", requested_by)
    return WorkerCommand(chosen, requested_at, requested_by, grace)
