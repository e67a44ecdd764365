"""The work of an instance beside its claims: startup bootstrap and the background loops.

- the records of recurrent jobs are made sure of at startup (:func:`ensure_recurrent_records`);
- terminal records get their retention once (:func:`give_terminal_records_retention`);
- the partition reconciler moves records without a valid partition (:func:`reconcile_loop`,
  paced by :func:`dogs_core.domain.reconcile.next_reconcile_delay`);
- the hint probe times the claim query under each index hint (:func:`probe_loop`, deciding with
  :class:`dogs_core.domain.hints.HintSelector`);
- the clock's offset to the store's is measured before the first claim (:func:`prepare_store`)
  and every ``clock_sync_interval`` after (:func:`clock_sync_loop`);
- the workflows' steps are released as their dependencies end
  (:class:`~dogs_core.runtime.worker.releaser.WorkflowReleaser`).
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from functools import partial
from typing import TypeVar

import anyio
import anyio.abc

from dogs_core.domain.definitions import JobDefinition
from dogs_core.domain.hints import DecisionReason, Hint, HintDecision, HintSelector
from dogs_core.domain.partitions import assign_partition
from dogs_core.domain.reconcile import BATCH_SIZE, next_reconcile_delay
from dogs_core.domain.records import JobType
from dogs_core.errors import StartupTimeoutError, TransientStoreError
from dogs_core.ports import AsyncJobStore, Clock, Role, StoreCapabilities, has_role
from dogs_core.runtime.execution import Settler
from dogs_core.runtime.plumbing._async.clock_sync import sync_clock
from dogs_core.runtime.plumbing._async.retry import retry_transient
from dogs_core.runtime.plumbing.clock import ServerClock
from dogs_core.runtime.plumbing.outage import log_store_failure
from dogs_core.runtime.plumbing.settings import WorkerSettings
from dogs_core.runtime.plumbing.telemetry import Telemetry
from dogs_core.runtime.worker.releaser import WorkflowReleaser

__all__ = [
    "clock_sync_loop",
    "ensure_recurrent_records",
    "give_terminal_records_retention",
    "prepare_store",
    "probe_loop",
    "reconcile_loop",
    "start_maintenance",
]

logger = logging.getLogger("dogs.workers")

T = TypeVar("T")


def start_maintenance(
    group: anyio.abc.TaskGroup,
    store: AsyncJobStore,
    names: Sequence[str],
    hints: HintSelector,
    *,
    settings: WorkerSettings,
    clock: Clock,
    rng: random.Random,
    probe: bool,
    telemetry: Telemetry | None = None,
    settler: Settler | None = None,
    wake: Callable[[], None] | None = None,
    instance_id: str | None = None,
) -> None:
    """Start the background loops in ``group``: the hint probe (when enabled and the store's
    probes mean something), the partition reconciler (when enabled), the retention backfill,
    the clock's measurements (for a :class:`ServerClock` with an interval), the workflows'
    release (when enabled and the store has workflows; ``wake`` tells the claimers of this
    instance that it released steps; ``settler``, of the instance ``instance_id``, hands its
    steps' ends to the release)."""
    if isinstance(clock, ServerClock) and clock.tracker.interval is not None:
        group.start_soon(clock_sync_loop, store, clock, name="dogs clock sync")
    if settings.probe_enabled and probe:
        group.start_soon(
            partial(probe_loop, store, names, hints, settings=settings, clock=clock, rng=rng)
        )
    if settings.reconcile_enabled:
        group.start_soon(
            partial(
                reconcile_loop,
                store,
                names,
                n_partitions=settings.n_partitions,
                clock=clock,
                rng=rng,
            )
        )
    group.start_soon(give_terminal_records_retention, store, settings, clock)
    if settings.release_workflows and has_role(store, Role.WORKFLOWS):
        releaser = WorkflowReleaser(
            store,
            clock=clock,
            telemetry=telemetry,
            sweep_interval=settings.workflow_sweep_interval.total_seconds(),
            watch=settings.watch_changes,
            on_released=wake,
            instance_id=None if settler is None else instance_id,
        )
        if settler is not None:
            settler.step_ended = releaser.offer
        group.start_soon(releaser.run, name="dogs workflow release")


async def ensure_recurrent_records(
    store: AsyncJobStore,
    definitions: Sequence[JobDefinition],
    *,
    n_partitions: int,
    clock: Clock,
    rng: random.Random,
) -> None:
    """Create the one record of every recurrent job that has none (waiting out outages)."""
    now = clock.now()
    for definition in definitions:
        if definition.type is not JobType.RECURRENT:
            continue
        partition = assign_partition(n_partitions, rng)

        async def ensure(
            definition: JobDefinition = definition, partition: int = partition
        ) -> None:
            await store.ensure_recurrent(
                definition.name, priority=definition.priority, partition=partition, now=now
            )

        await retry_transient(
            ensure, what=f"ensure recurrent record {definition.name}", attempts=None
        )


async def prepare_store(
    store: AsyncJobStore, clock: ServerClock, *, startup_timeout: timedelta | None = None
) -> StoreCapabilities:
    """The store set up, its capabilities, and the clock's first offset: each retried (a
    WARNING line per failed attempt, backed off) until the database answers, since claims must
    not start before all three; for at most ``startup_timeout`` (``None``: until it answers),
    then :class:`~dogs_core.errors.StartupTimeoutError` with the last failure. The three are
    safe to cut off midway (an index build, two reads)."""
    failures: list[TransientStoreError] = []

    async def noted(operation: Callable[[], Awaitable[T]]) -> T:
        try:
            return await operation()
        except TransientStoreError as error:
            failures.append(error)
            del failures[:-1]
            raise

    bound = math.inf if startup_timeout is None else startup_timeout.total_seconds()
    waiting = "" if startup_timeout is None else f" (workers starting: up to {bound:g}s)"
    with anyio.move_on_after(bound):
        await retry_transient(
            lambda: noted(store.setup), what=f"store setup{waiting}", attempts=None
        )
        capabilities = await retry_transient(
            lambda: noted(store.capabilities), what=f"capability detection{waiting}", attempts=None
        )
        await retry_transient(
            lambda: noted(lambda: sync_clock(store, clock)),
            what=f"clock sync{waiting}",
            attempts=None,
        )
        return capabilities
    raise StartupTimeoutError(bound, failures[-1] if failures else None)


async def clock_sync_loop(store: AsyncJobStore, clock: ServerClock) -> None:
    """Forever: measure the clock's offset again every interval (a failed round keeps the
    offset in force and is logged)."""
    interval = clock.tracker.interval
    assert interval is not None  # started only with an interval
    while True:
        await anyio.sleep(interval.total_seconds())
        try:
            await sync_clock(store, clock)
        except Exception as error:
            log_store_failure(logger, "clock sync failed", error, unexpected=logging.WARNING)


async def give_terminal_records_retention(
    store: AsyncJobStore, settings: WorkerSettings, clock: Clock
) -> None:
    """Give terminal records written by older versions their retention (logged, never fatal)."""
    try:
        modified = await retry_transient(
            lambda: store.backfill_retention(
                retention=settings.max_tries_reached_retention, now=clock.now()
            ),
            what="retention backfill",
        )
        logger.debug("retention backfill updated %d terminal record(s)", modified)
    except Exception as error:
        log_store_failure(logger, "retention backfill failed", error)


async def reconcile_loop(
    store: AsyncJobStore,
    names: Sequence[str],
    *,
    n_partitions: int,
    clock: Clock,
    rng: random.Random,
) -> None:
    """Forever: move one batch of records without a valid partition, then pause."""
    while True:
        try:
            modified: int | None = await store.reconcile_partitions(
                job_names=names,
                n_partitions=n_partitions,
                now=clock.now(),
                limit=BATCH_SIZE,
                choose_partition=lambda: assign_partition(n_partitions, rng),
            )
            if modified:
                logger.info("partition reconciler moved %d record(s)", modified)
        except Exception as error:
            log_store_failure(
                logger, "partition reconciler batch failed", error, unexpected=logging.WARNING
            )
            modified = None
        delay = next_reconcile_delay(modified, rng.random())
        await anyio.sleep(delay.total_seconds())


async def probe_loop(
    store: AsyncJobStore,
    names: Sequence[str],
    hints: HintSelector,
    *,
    settings: WorkerSettings,
    clock: Clock,
    rng: random.Random,
) -> None:
    """Forever: probe the claim query's hints, then wait ``probe_interval``."""
    while True:
        await probe_once(
            store, names, hints, n_partitions=settings.n_partitions, clock=clock, rng=rng
        )
        await anyio.sleep(settings.probe_interval.total_seconds())


async def probe_once(
    store: AsyncJobStore,
    names: Sequence[str],
    hints: HintSelector,
    *,
    n_partitions: int,
    clock: Clock,
    rng: random.Random,
) -> None:
    """Time the claim query under each hint as the selector's plan says, and feed it back."""
    plan = hints.next_plan(rng, n_partitions)
    samples: dict[Hint, list[float]] = {hint: [] for hint in Hint}
    try:
        for step in plan:
            for hint in step.order:
                elapsed = await store.probe(
                    hint=str(hint), job_names=names, partition=step.partition, now=clock.now()
                )
                samples[hint].append(elapsed)
    except Exception as error:
        decision = hints.on_probe_failed()
        logger.warning("hint probe failed, keeping %s: %s", decision.hint, error)
        return
    decision = hints.on_probe_result(samples)
    if decision.reason is DecisionReason.FAILED:
        logger.warning("hint probe gave unusable timings, keeping %s", decision.hint)
    elif decision.reason is DecisionReason.INITIAL or decision.changed:
        logger.info("acquisition hint %s selected (%s)", decision.hint, _medians(decision))
    else:
        logger.debug("keeping acquisition hint %s (%s)", decision.hint, _medians(decision))


def _medians(decision: HintDecision) -> str:
    medians = decision.medians or {}
    return ", ".join(f"{hint}: {value:g} ms" for hint, value in medians.items())
