"""A worker's runtime schedules: which are due soon, and what each run calls.

Runtime schedules are recurrent records named by their ids (:mod:`dogs_core.domain.
runtime_schedules`), which no definition of the worker names. So a worker that knows event jobs
reads, every poll interval, the schedules of those jobs due within two poll intervals (one
indexed query, :meth:`~dogs_core.ports.AsyncScheduleStore.due_schedules`) and offers their ids
in its claims besides its own names (:meth:`~dogs_core.domain.capacity.CapacityLedger.
set_dynamic`): no code change to add a tenant's schedule, and the claims' ``$in`` lists grow by
the schedules due now, not by every schedule stored.

A claimed schedule runs as a recurrent job built from the spec its record carried at the claim
(:func:`schedule_definition`): the event job's handler called with the record's params (loaded
into its model), its lock time, timeout, heartbeat, retry and history options, and the
schedule's rule and misfire policy; so the overlap guarantee (one record, one lock) and the
misfire policy are a code-defined recurrent job's. A worker without the store's schedules role,
or without event jobs, reads nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, Final, Protocol, cast

import anyio

from dogs_core.domain.capacity import CapacityLedger
from dogs_core.domain.definitions import (
    DEFAULT_RECURRENT_PRIORITY,
    EventJobDefinition,
    JobDefinition,
    RecurrentJobDefinition,
    is_async_callable,
    load_params,
)
from dogs_core.domain.records import ClaimedJob
from dogs_core.domain.runtime_schedules import ScheduleSpec
from dogs_core.errors import UnknownJobError
from dogs_core.ports import AsyncJobStore, AsyncScheduleStore, Clock, Role, has_role

__all__ = ["MAX_DUE", "ScheduleBook", "WorkersLike", "definition_of", "schedule_definition"]

logger = logging.getLogger("dogs.workers")

#: The most schedules offered at once (the soonest due): a claim's ``$in`` list stays short.
MAX_DUE: Final = 500


class WorkersLike(Protocol):
    """What the book uses of its ``Workers``."""

    @property
    def clock(self) -> Clock: ...

    def wake(self, partitions: Sequence[int] = ()) -> None: ...


class ScheduleBook:
    """The runtime schedules one ``Workers`` instance offers and runs (see the module)."""

    def __init__(
        self,
        store: AsyncScheduleStore,
        definitions: Mapping[str, JobDefinition],
        ledger: CapacityLedger,
        *,
        interval: float,
        clock: Clock,
        wake: Callable[[], None],
    ) -> None:
        self._store = store
        self._events = {
            name: d for name, d in definitions.items() if isinstance(d, EventJobDefinition)
        }
        self._known = frozenset(definitions)
        self._ledger = ledger
        self._interval = interval
        self._horizon = timedelta(seconds=2 * interval)
        self._clock = clock
        self._wake = wake
        self._built: dict[tuple[str, ScheduleSpec], RecurrentJobDefinition] = {}

    @classmethod
    def of(
        cls,
        store: AsyncJobStore,
        definitions: Mapping[str, JobDefinition],
        ledger: CapacityLedger,
        interval: float,
        workers: WorkersLike,
    ) -> ScheduleBook | None:
        """The book of ``workers`` (their clock, their ``wake``), refreshed every ``interval``
        seconds, or ``None`` when it has nothing to read (no event job, or a store without the
        schedules role)."""
        has_events = any(isinstance(d, EventJobDefinition) for d in definitions.values())
        if not has_events or not has_role(store, Role.SCHEDULES):
            return None
        schedules = cast(AsyncScheduleStore, store)
        return cls(
            schedules,
            definitions,
            ledger,
            interval=interval,
            clock=workers.clock,
            wake=workers.wake,
        )

    async def refresh(self) -> None:
        """Offer the schedules due within the horizon (wake the lanes when one is new)."""
        until = self._clock.now() + self._horizon
        due = await self._store.due_schedules(list(self._events), until=until, limit=MAX_DUE)
        names = [schedule_id for schedule_id, _ in due if schedule_id not in self._known]
        if self._ledger.set_dynamic(names):
            self._wake()

    async def run(self) -> None:
        """Refresh every interval until cancelled (a failed read is logged and retried)."""
        while True:
            try:
                await self.refresh()
            except Exception as error:
                logger.warning("could not read the runtime schedules: %r", error)
            await anyio.sleep(self._interval)

    def definition_for(self, job: ClaimedJob) -> RecurrentJobDefinition | None:
        """What a claimed schedule runs by (``None``: the record is no runtime schedule)."""
        spec = job.schedule
        if spec is None:
            return None
        key = (job.job_name, spec)
        built = self._built.get(key)
        if built is None:
            event = self._events.get(spec.job)
            built = schedule_definition(job.job_name, spec, event, job.priority)
            if len(self._built) > 4 * MAX_DUE:
                self._built.clear()  # specs change: keep the cache bounded
            self._built[key] = built
        return built


def definition_of(book: ScheduleBook | None, job: ClaimedJob) -> JobDefinition:
    """The definition of a claimed record no definition of the workers names: a runtime
    schedule's (only names offered are claimed, so one is always found)."""
    definition = None if book is None else book.definition_for(job)
    if definition is None:
        raise UnknownJobError(job.job_name)
    return definition


def schedule_definition(
    schedule_id: str, spec: ScheduleSpec, event: EventJobDefinition | None, priority: int
) -> RecurrentJobDefinition:
    """The recurrent job a schedule runs as: ``event``'s handler and options on ``spec``'s
    rule and misfire policy. Without ``event`` (the schedule names a job this worker does not
    know), each run fails with :class:`~dogs_core.errors.UnknownJobError` in its history and
    the schedule keeps its rule. ``priority``: the record's (a demoted one, 0, gets the
    recurrent jobs' default back at its next success)."""
    handler = _handler(spec.job, event)
    options: dict[str, Any] = {}
    if event is not None:
        options = {
            "lock_time": event.lock_time,
            "save_executions_for": event.save_executions_for,
            "retry": event.retry,
            "cancel_on_stale": event.cancel_on_stale,
            "heartbeat": event.heartbeat,
            "timeout": event.timeout,
            "on_error": _with_params(event, event.on_error, 3),
            "on_stale": _with_params(event, event.on_stale, 2),
        }
    return RecurrentJobDefinition(
        schedule_id,
        handler,
        schedule=spec.rule,
        misfire=spec.misfire,
        misfire_grace=spec.misfire_grace,
        max_catch_up=spec.max_catch_up,
        priority=priority or DEFAULT_RECURRENT_PRIORITY,
        **options,
    )


def _handler(name: str, event: EventJobDefinition | None) -> Callable[..., Any]:
    """``handler(ctx)`` calling the event handler with the record's params."""
    if event is None:

        def unknown(ctx: Any) -> None:
            raise UnknownJobError(name)

        return unknown
    run = event.handler
    if event.is_async:

        async def run_async(ctx: Any) -> Any:
            return await run(load_params(event, ctx.params), ctx)

        return run_async

    def run_sync(ctx: Any) -> Any:
        return run(load_params(event, ctx.params), ctx)

    return run_sync


def _with_params(
    event: EventJobDefinition, callback: Callable[..., Any] | None, arity: int
) -> Callable[..., Any] | None:
    """``on_error(error, params, ctx)`` (``arity`` 3) or ``on_stale(params, ctx)`` given the
    record's params (a recurrent job's callbacks get ``None``), sync or async as given."""
    if callback is None:
        return None
    target = callback

    def params_of(ctx: Any) -> Any:
        return load_params(event, ctx.params)

    if is_async_callable(target):
        if arity == 3:

            async def on_error(error: Any, params: Any, ctx: Any) -> Any:
                return await target(error, params_of(ctx), ctx)

            return on_error

        async def on_stale(params: Any, ctx: Any) -> Any:
            return await target(params_of(ctx), ctx)

        return on_stale
    if arity == 3:

        def on_error_sync(error: Any, params: Any, ctx: Any) -> Any:
            return target(error, params_of(ctx), ctx)

        return on_error_sync

    def on_stale_sync(params: Any, ctx: Any) -> Any:
        return target(params_of(ctx), ctx)

    return on_stale_sync
