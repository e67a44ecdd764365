"""Prometheus metrics of Dogs: counters and histograms from telemetry events, gauges from the store.

:class:`PrometheusMetrics` is a telemetry subscriber (``dogs_core.runtime.plumbing.telemetry``)::

    from dogs_integrations.prometheus import PrometheusMetrics, serve_metrics
    metrics = PrometheusMetrics()
    metrics.attach()                     # the process-wide hub the workers use by default
    serve_metrics(9464)                  # or an existing /metrics endpoint of the application
    task_group.start_soon(metrics.refresh_gauges, store)   # due, running, stale ... per name

Counters and histograms count what *this process* saw (sum them over the fleet in PromQL); the
gauges are read from the store, so they are the fleet's, and every process that refreshes them
reports the same values (use ``max`` over instances, not ``sum``). They are refreshed at most
once per ``interval`` by :meth:`PrometheusMetrics.refresh_gauges` (two small aggregate reads,
``status_counts`` and ``paused_names``, and one read of the workers' registry where the store
has one: ``dogs_workers``, ``dogs_worker_slots``, ``dogs_worker_slots_in_use``), never at
scrape time: a scrape costs the store nothing.

The registry defaults to ``prometheus_client.REGISTRY``, the one ``start_http_server`` and most
frameworks' ``/metrics`` endpoints serve, so the metrics appear beside the process ones with no
wiring. That registry accepts each metric name once: a second ``PrometheusMetrics`` on it raises
:class:`~dogs_core.errors.InvalidOptionError`; give each one a ``CollectorRegistry()`` of its own
(as tests do) or another ``namespace``.
"""

from __future__ import annotations

import functools
import logging
import math
import re
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Final, TypedDict, cast

import anyio
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client import start_http_server as _start_http_server

from dogs_core.domain.events import (
    ClaimSwept,
    Event,
    ExecutionEnded,
    JobExpired,
    JobScheduled,
    JobStarted,
    LockLost,
    StepEnded,
    StepReplayed,
    StoreErrored,
    WorkflowFinished,
    WorkflowStartEnded,
    WorkflowStepReleased,
)
from dogs_core.domain.records import NameStatus
from dogs_core.domain.registry import WorkerInfo, WorkerState, liveness
from dogs_core.errors import InvalidOptionError
from dogs_core.ports import AsyncJobStore, AsyncRegistryStore, Clock, Role, has_role
from dogs_core.runtime.plumbing.clock import SystemClock
from dogs_core.runtime.plumbing.telemetry import TELEMETRY, Telemetry
from dogs_core.runtime.worker.workers import Workers

__all__ = ["GAUGE_STATES", "PrometheusMetrics", "serve_metrics", "worker_metrics"]

logger = logging.getLogger("dogs.integrations.prometheus")

GAUGE_STATES: Final = ("due", "scheduled", "running", "held", "stale", "failed")
"""The ``state`` label values of ``dogs_jobs``, each a field of :class:`NameStatus` (``held``:
given back by a fleet-wide limit, ``failed``: at the attempt limit; the words of ``dogs status``
and of the dashboard)."""

ALL_NAMES: Final = "*"
"""The job name of a fleet-wide pause of every name (``dogs pause '*'``)."""

EXECUTION_BUCKETS: Final = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
CLAIM_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
LAG_BUCKETS: Final = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)

_NAMESPACE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")

_EVENT_KINDS: Final = (
    ExecutionEnded,
    JobStarted,
    ClaimSwept,
    JobScheduled,
    LockLost,
    StepEnded,
    StepReplayed,
    StoreErrored,
    WorkflowStartEnded,
    WorkflowStepReleased,
    WorkflowFinished,
    JobExpired,
)


class _Common(TypedDict):
    """The arguments every metric of one :class:`PrometheusMetrics` shares."""

    namespace: str
    registry: CollectorRegistry


def _state_counts(status: NameStatus) -> tuple[int, ...]:
    """The values of :data:`GAUGE_STATES`, in that order."""
    return (
        status.due,
        status.scheduled_later,
        status.running,
        status.held,
        status.stale,
        status.terminal,
    )


class PrometheusMetrics:
    """The Dogs metrics on a Prometheus registry, fed by telemetry events and by the store.

    Every metric name starts with ``namespace`` (``dogs``): ``dogs_executions_total``, ...
    (``docs/tracing-and-metrics.md`` lists them all).
    """

    def __init__(
        self, *, registry: CollectorRegistry | None = None, namespace: str = "dogs"
    ) -> None:
        if registry is not None and not isinstance(registry, CollectorRegistry):
            raise InvalidOptionError("registry", registry, "must be a prometheus CollectorRegistry")
        if not isinstance(namespace, str) or not _NAMESPACE.match(namespace):
            raise InvalidOptionError(
                "namespace", namespace, "must be a metric name prefix such as 'dogs'"
            )
        self.registry: CollectorRegistry = REGISTRY if registry is None else registry
        """The registry the metrics are on (serve it with :func:`serve_metrics`)."""
        self.namespace = namespace
        try:
            self._create_job_metrics()
            self._create_fleet_metrics()
        except ValueError as error:  # a name the registry already has
            raise InvalidOptionError(
                "registry",
                registry,
                f"already has Dogs metrics under namespace {namespace!r} ({error}); give this "
                "PrometheusMetrics a CollectorRegistry() of its own or another namespace",
            ) from None
        self._gauge_names: set[str] = set()
        self._paused_names: set[str] = set()
        self._worker_labels: set[tuple[str, str]] = set()
        self._failing = False

    def _create_job_metrics(self) -> None:
        """What this process's calls and executions count."""
        common = _Common(namespace=self.namespace, registry=self.registry)
        self.jobs_scheduled = Counter(
            "jobs_scheduled", "Records inserted by schedule calls.", ["job_name"], **common
        )
        self.executions = Counter(
            "executions", "Executions ended, by outcome.", ["job_name", "outcome"], **common
        )
        self.store_errors = Counter(
            "store_errors", "Store calls that raised.", ["operation", "transient"], **common
        )
        self.jobs_expired = Counter(
            "jobs_expired",
            "Event jobs discarded unrun: not started by their start_before deadline.",
            ["job_name"],
            **common,
        )
        self.lock_lost = Counter(
            "lock_lost", "Executions whose lock was lost (stale).", ["job_name"], **common
        )
        self.execution_duration = Histogram(
            "execution_duration_seconds",
            "Seconds from an execution's start to its outcome.",
            ["job_name"],
            buckets=EXECUTION_BUCKETS,
            **common,
        )
        self.claim_duration = Histogram(
            "claim_duration_seconds",
            "Seconds of one claim round trip to the store.",
            buckets=CLAIM_BUCKETS,
            **common,
        )
        self.pickup_lag = Histogram(
            "pickup_lag_seconds",
            "Seconds a job had been due (held by a fleet limit included) when it started; "
            "one observation per execution.",
            ["job_name"],
            buckets=LAG_BUCKETS,
            **common,
        )
        self.steps = Counter(
            "steps",
            "Durable steps ended: recorded, failed (its function raised) or replayed.",
            ["job_name", "outcome"],
            **common,
        )
        self.step_duration = Histogram(
            "step_duration_seconds",
            "Seconds of a durable step that ran: its function and its record write.",
            ["job_name"],
            buckets=EXECUTION_BUCKETS,
            **common,
        )

    def _create_fleet_metrics(self) -> None:
        """What the store says of the fleet (the refreshed gauges), and workflows."""
        common = _Common(namespace=self.namespace, registry=self.registry)
        self.jobs = Gauge(
            "jobs", "Records per job name and state, read from the store.", ["job_name", "state"],
            **common,
        )  # fmt: skip
        self.job_paused = Gauge(
            "job_paused", "1 when the job name is paused fleet-wide.", ["job_name"], **common
        )
        self.oldest_due_age = Gauge(
            "oldest_due_age_seconds",
            "Seconds the oldest due, held or stale record of the job name has waited (0: none).",
            ["job_name"],
            **common,
        )
        self.workflows_started = Counter(
            "workflows_started", "Workflows started by this process.", **common
        )
        self.workflow_steps_released = Counter(
            "workflow_steps_released",
            "Blocked workflow steps released (their record inserted) by this process.",
            **common,
        )
        self.workflows_finished = Counter(
            "workflows_finished",
            "Workflows this process saw end, by end state.",
            ["state"],
            **common,
        )
        # the fleet, from the workers' registry (issue 29), where the store has one
        self.workers = Gauge(
            "workers", "Workers in the registry by state (lost: no beat for 30 s).", ["state"],
            **common,
        )  # fmt: skip
        self.worker_slots = Gauge(
            "worker_slots", "Slots (workers_count) of each live worker.", ["instance", "host"],
            **common,
        )  # fmt: skip
        self.worker_slots_in_use = Gauge(
            "worker_slots_in_use",
            "Slots in use of each live worker, as of its last beat.",
            ["instance", "host"],
            **common,
        )
        self.gauges_refreshed = Gauge(
            "gauges_refreshed_timestamp_seconds",
            "Unix time of the last successful refresh of the store gauges.",
            **common,
        )

    # -- events ---------------------------------------------------------------------------------

    def attach(self, telemetry: Telemetry = TELEMETRY) -> Callable[[], None]:
        """Subscribe to ``telemetry`` (the process-wide hub by default) for the events these
        metrics count; returns the function that unsubscribes them."""
        if not isinstance(telemetry, Telemetry):
            raise InvalidOptionError("telemetry", telemetry, "must be a dogs Telemetry hub")
        return telemetry.subscribe(self, *_EVENT_KINDS)

    def __call__(self, event: Event) -> None:
        """Count one event; other events are ignored."""
        if isinstance(event, ExecutionEnded):
            name = event.job.job_name
            self.executions.labels(name, event.outcome).inc()
            self.execution_duration.labels(name).observe(max(event.duration, 0.0))
        elif isinstance(event, JobStarted):
            # Once per execution that starts (a held job is claimed again and again).
            if event.pickup_lag is not None:
                self.pickup_lag.labels(event.job.job_name).observe(max(event.pickup_lag, 0.0))
        elif isinstance(event, ClaimSwept):
            self.claim_duration.observe(max(event.duration, 0.0))
        elif isinstance(event, JobScheduled):
            if event.outcome == "scheduled":  # not a duplicate, replace or debounce
                self.jobs_scheduled.labels(event.job_name).inc()
        elif isinstance(event, JobExpired):
            self.jobs_expired.labels(event.job.job_name).inc()
        elif isinstance(event, LockLost):
            self.lock_lost.labels(event.job.job_name).inc()
        elif isinstance(event, StepEnded):
            outcome = "recorded" if event.error is None else "failed"
            self.steps.labels(event.job.job_name, outcome).inc()
            self.step_duration.labels(event.job.job_name).observe(max(event.duration, 0.0))
        elif isinstance(event, StepReplayed):
            self.steps.labels(event.job.job_name, "replayed").inc()
        elif isinstance(event, StoreErrored):
            self.store_errors.labels(event.operation, "true" if event.transient else "false").inc()
        elif isinstance(event, WorkflowStartEnded):
            if event.error is None:
                self.workflows_started.inc()
        elif isinstance(event, WorkflowStepReleased):
            self.workflow_steps_released.inc()
        elif isinstance(event, WorkflowFinished):
            self.workflows_finished.labels(event.state).inc()

    # -- gauges from the store ------------------------------------------------------------------

    async def refresh_gauges(
        self, store: AsyncJobStore, *, interval: float = 15.0, clock: Clock | None = None
    ) -> None:
        """Refresh the store gauges now and then every ``interval`` seconds, until cancelled.

        Refreshes start at least ``interval`` apart (on the event loop's clock, so a virtual
        clock drives it in tests); one that takes longer is followed by the next at once,
        never by a burst. A failing store is logged once per run of failures and leaves the
        gauges at their last values. ``clock`` gives "now" for the due counts (the wall clock
        by default).
        """
        _check_interval(interval)
        if clock is not None and not callable(getattr(clock, "now", None)):
            raise InvalidOptionError("clock", clock, "must have a now() method")
        wall = SystemClock() if clock is None else clock
        while True:
            next_at = anyio.current_time() + interval
            await self.refresh(store, now=wall.now())
            await anyio.sleep_until(next_at)

    async def refresh(self, store: AsyncJobStore, *, now: datetime) -> bool:
        """Read the store once and set the gauges; ``False`` (gauges kept) when it raised."""
        try:
            statuses = await store.status_counts(now=now)
            paused = await store.paused_names()
            workers = await _registry(store)
        except Exception:
            if not self._failing:
                logger.warning(
                    "refreshing the Dogs gauges failed; they keep their last values until the "
                    "store answers again",
                    exc_info=True,
                )
            self._failing = True
            return False
        if self._failing:
            logger.info("refreshing the Dogs gauges works again")
        self._failing = False
        self._set_gauges(statuses, paused, now)
        if workers is not None:
            self._set_worker_gauges(workers, now)
        return True

    def _set_worker_gauges(self, workers: Iterable[WorkerInfo], now: datetime) -> None:
        counts = dict.fromkeys(WorkerState, 0)
        labels: set[tuple[str, str]] = set()
        for info in workers:
            state = liveness(info, now)
            counts[state] += 1
            if state in (WorkerState.STOPPED, WorkerState.LOST):
                continue
            label = (info.instance_id, info.host)
            labels.add(label)
            self.worker_slots.labels(*label).set(info.workers_count)
            self.worker_slots_in_use.labels(*label).set(info.slots_in_use)
        for state, count in counts.items():
            self.workers.labels(state.value).set(count)
        for gone in self._worker_labels - labels:
            self.worker_slots.remove(*gone)
            self.worker_slots_in_use.remove(*gone)
        self._worker_labels = labels

    def _set_gauges(
        self, statuses: Iterable[NameStatus], paused: frozenset[str], now: datetime
    ) -> None:
        names: set[str] = set()
        for status in statuses:
            names.add(status.job_name)
            for state, count in zip(GAUGE_STATES, _state_counts(status), strict=True):
                self.jobs.labels(status.job_name, state).set(count)
            age = 0.0
            if status.oldest_due_at is not None:
                age = max((now - status.oldest_due_at).total_seconds(), 0.0)
            self.oldest_due_age.labels(status.job_name).set(age)
        for gone in self._gauge_names - names:
            for state in GAUGE_STATES:
                self.jobs.remove(gone, state)
            self.oldest_due_age.remove(gone)
        self._gauge_names = names
        every = ALL_NAMES in paused
        paused_rows = names | set(paused)
        for name in paused_rows:
            self.job_paused.labels(name).set(1 if every or name in paused else 0)
        for gone in self._paused_names - paused_rows:
            self.job_paused.remove(gone)
        self._paused_names = paused_rows
        self.gauges_refreshed.set(now.timestamp())


async def _registry(store: AsyncJobStore) -> list[WorkerInfo] | None:
    """The workers' registry documents, or ``None`` when the store keeps none."""
    if not has_role(store, Role.REGISTRY):
        return None
    return await cast(AsyncRegistryStore, store).list_workers()


def _check_interval(interval: object) -> None:
    if isinstance(interval, bool) or not isinstance(interval, int | float):
        raise InvalidOptionError("interval", interval, "must be a number of seconds")
    if not math.isfinite(interval) or interval <= 0:
        raise InvalidOptionError("interval", interval, "must be a positive number of seconds")


def serve_metrics(
    port: int, host: str = "0.0.0.0", *, registry: CollectorRegistry | None = None
) -> tuple[str, int, Callable[[], None]]:
    """Serve ``registry`` (the default one) over HTTP on ``host:port`` in a daemon thread, as
    ``prometheus_client.start_http_server`` does (any path answers with the metrics). Port 0
    takes a free port. Returns the bound host, the bound port and a function that stops it."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise InvalidOptionError("port", port, "must be an integer from 0 to 65535")
    if not isinstance(host, str) or not host:
        raise InvalidOptionError("host", host, "must be a host name or address")
    if registry is not None and not isinstance(registry, CollectorRegistry):
        raise InvalidOptionError("registry", registry, "must be a prometheus CollectorRegistry")
    try:
        server, thread = _start_http_server(port, addr=host, registry=registry or REGISTRY)
    except OSError as error:
        raise InvalidOptionError("port", port, f"cannot serve metrics on {host}: {error}") from None

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(5)

    return host, int(server.server_port), stop


@asynccontextmanager
async def worker_metrics(
    workers: Workers,
    *,
    port: int,
    host: str = "0.0.0.0",
    interval: float = 15.0,
    metrics: PrometheusMetrics | None = None,
) -> AsyncIterator[PrometheusMetrics]:
    """While inside: ``metrics`` (a new one on the default registry) attached to the hub of
    ``workers``, served on ``host:port``, its store gauges refreshed every ``interval`` seconds
    from the workers' store, on their clock. What ``dogs worker --metrics-port`` runs beside
    the workers."""
    if not isinstance(workers, Workers):
        raise InvalidOptionError("workers", workers, "must be a dogs Workers instance")
    _check_interval(interval)
    metrics = PrometheusMetrics() if metrics is None else metrics
    bound_host, bound_port, stop = serve_metrics(port, host, registry=metrics.registry)
    unsubscribe = metrics.attach(workers.telemetry)
    logger.info("serving Prometheus metrics on http://%s:%d/metrics", bound_host, bound_port)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(
                functools.partial(
                    metrics.refresh_gauges, workers.store, interval=interval, clock=workers.clock
                )
            )
            yield metrics
            group.cancel_scope.cancel()
    finally:
        unsubscribe()
        stop()
