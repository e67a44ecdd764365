"""A ``Workers`` instance in the store's registry (:mod:`dogs_core.domain.registry`): its
document written when it starts, then once per :data:`~dogs_core.domain.registry.BEAT_INTERVAL`
(never more often: the cost is one write per process per 10 s), and a last time when it stops;
the operator's command each beat returns handed to the workers (quiet, stop) once.

Nothing here is on a job's path: the beacon reads what the workers already keep (their
running executions, their slots) when it beats. A failing beat is logged once per run of
failures and tried again at the next beat; the workers never depend on it.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol, cast

import anyio

from dogs_core.domain.records import ClaimedJob, Owner
from dogs_core.domain.registry import (
    BEAT_INTERVAL,
    EXPIRES_AFTER,
    MAX_LISTED_EXECUTIONS,
    STOPPED_KEPT,
    RunningExecution,
    WorkerCommand,
    WorkerInfo,
    WorkerState,
)
from dogs_core.jobs import Jobs
from dogs_core.ports import AsyncJobStore, AsyncRegistryStore, Clock, Role, has_role
from dogs_core.runtime.plumbing.settings import WorkerSettings

__all__ = ["FINAL_BEAT_TIMEOUT", "Presence", "WorkerBeacon", "beacon_for", "package_version"]

logger = logging.getLogger("dogs.workers")

#: Seconds the last beat (state ``stopped``) may take before the workers stop without it.
FINAL_BEAT_TIMEOUT = 2.0


@dataclass(frozen=True, slots=True)
class Presence:
    """What the workers say of themselves at a beat: their state, the slots in use and the
    executions running, each with the loop time it started at."""

    state: WorkerState
    slots_in_use: int
    running: Sequence[tuple[ClaimedJob, float]]


class WorkerBeacon:
    """The registry document of one ``Workers`` instance, kept by its beats."""

    def __init__(
        self,
        registry: AsyncRegistryStore,
        *,
        owner: Owner,
        version: str,
        job_names: Sequence[str],
        workers_count: int,
        clock: Clock,
        presence: Callable[[], Presence],
        obey: Callable[[WorkerCommand], None],
        interval: timedelta = BEAT_INTERVAL,
    ) -> None:
        self._registry = registry
        self._owner = owner
        self._version = version
        self._names = tuple(job_names)
        self._workers_count = workers_count
        self._clock = clock
        self._presence = presence
        self._obey = obey
        self._interval = interval
        self._started_at = clock.now()
        self._seen: WorkerCommand | None = None
        self._failing = False
        self._set_up = False
        self.beats = 0
        """Registry writes made so far (the beats' cost, measured)."""

    async def run(self) -> None:
        """Beat now, then every interval, until cancelled. The first beat waits for nothing
        but the store: a worker appears in the registry as soon as it starts."""
        while True:
            next_at = anyio.current_time() + self._interval.total_seconds()
            await self.beat()
            await anyio.sleep_until(next_at)

    async def beat(self, state: WorkerState | None = None) -> None:
        """Write the document once (``state`` overrides what the workers say)."""
        info = self._info(state)
        try:
            if not self._set_up:
                await self._registry.setup_registry()
                self._set_up = True
            command = await self._registry.beat_worker(info)
        except Exception as error:
            if not self._failing:
                logger.warning(
                    "the workers' registry beat failed (tried again every %ss): %r",
                    f"{self._interval.total_seconds():g}",
                    error,
                )
            self._failing = True
            return
        self.beats += 1
        if self._failing:
            logger.info("the workers' registry beat works again")
        self._failing = False
        if command is not None and command != self._seen:
            self._seen = command
            logger.warning(
                "remote %s requested by %s at %s",
                command.action.value,
                command.requested_by,
                command.requested_at.isoformat(),
            )
            self._obey(command)

    async def stopped(self) -> None:
        """The last beat: the document says ``stopped`` (bounded by :data:`FINAL_BEAT_TIMEOUT`;
        skipped while beats fail: a store that is down does not hold the stop up)."""
        if self._failing:
            return
        with anyio.move_on_after(FINAL_BEAT_TIMEOUT):
            await self.beat(WorkerState.STOPPED)

    def _kept(self, state: WorkerState | None) -> timedelta:
        if state is WorkerState.STOPPED:
            return STOPPED_KEPT
        return max(EXPIRES_AFTER, 6 * self._interval)

    def _info(self, state: WorkerState | None) -> WorkerInfo:
        now = self._clock.now()
        presence = self._presence()
        loop_now = anyio.current_time()
        running = sorted(presence.running, key=lambda pair: pair[1])
        executions = tuple(
            RunningExecution(
                job_id=job.job_id,
                job_name=job.job_name,
                execution_id=job.execution_id,
                started_at=now - timedelta(seconds=max(loop_now - began, 0.0)),
            )
            for job, began in running[:MAX_LISTED_EXECUTIONS]
        )
        return WorkerInfo(
            instance_id=self._owner.instance_id,
            host=self._owner.host,
            pid=self._owner.pid,
            version=self._version,
            job_names=self._names,
            workers_count=self._workers_count,
            slots_in_use=presence.slots_in_use,
            executions=executions,
            executions_total=len(running),
            started_at=self._started_at,
            last_beat=now,
            state=state or presence.state,
            expires_at=now + self._kept(state),
            beat_interval=self._interval,
        )


@functools.cache
def package_version() -> str:
    """The installed version of Dogs for Python (what a registry document says it runs)."""
    try:
        return importlib.metadata.version("dogs-py")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class _Registered(Protocol):
    """What :func:`beacon_for` reads of a ``Workers`` instance."""

    @property
    def owner(self) -> Owner: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def settings(self) -> WorkerSettings: ...

    @property
    def jobs(self) -> Jobs: ...


def beacon_for(
    store: AsyncJobStore,
    workers: _Registered,
    *,
    presence: Callable[[], Presence],
    obey: Callable[[WorkerCommand], None],
) -> WorkerBeacon | None:
    """The beacon of a ``Workers`` instance, or ``None`` when its ``registry_enabled`` is off
    or the store has no registry role (nothing is written then)."""
    if not workers.settings.registry_enabled or not has_role(store, Role.REGISTRY):
        return None
    return WorkerBeacon(
        cast(AsyncRegistryStore, store),
        owner=workers.owner,
        version=package_version(),
        job_names=[definition.name for definition in workers.jobs],
        workers_count=workers.settings.workers_count,
        clock=workers.clock,
        presence=presence,
        obey=obey,
    )
