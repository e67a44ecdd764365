"""OpenTelemetry tracing of Dogs: a span per scheduling call and a span per execution, linked.

:class:`OpenTelemetryTracing` is a telemetry subscriber (``dogs_core.runtime.plumbing.telemetry``)::

    from dogs_integrations.otel import OpenTelemetryTracing
    OpenTelemetryTracing().attach()          # the global tracer provider and propagator

- ``schedule <job name>`` (kind ``PRODUCER``) spans a ``schedule``/``schedule_many`` call. It is
  made current while the call runs, and its context is injected by the propagator into the
  event's carrier, which the client stores on every record of the call (``traceContext``).
- ``run <job name>`` (kind ``CONSUMER``) spans one execution, from its ``JobStarted`` to the
  event that ends it. It starts a trace of its own (an execution is not part of the request that
  scheduled it, which may have ended hours before) with a *link* to the scheduling span, read
  back from the claimed record's ``traceContext``, so across processes as well. It is made current
  in the execution's context, so the spans a handler opens are its children.
- ``workflow <name>`` (kind ``PRODUCER``) spans a ``start_workflow`` call; its context is stored
  on the workflow and on every record of its steps, and the ``run`` span of each step is its
  *child* (not a trace of its own): one trace per workflow, each step's run in it.

Status: ``ERROR`` for an execution whose handler raised, whether the job is retried
(``JobRetried``: this attempt failed, the job may not) or not (``JobFailed``), with the exception
recorded; ``ERROR`` for a stale execution (it lost its lock). Success, snooze and cancellation
leave it ``UNSET``, as instrumentation libraries should. ``dogs.job.outcome`` tells them apart.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Mapping
from contextvars import Token
from typing import Final

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import TextMapPropagator
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, TracerProvider
from opentelemetry.util.types import AttributeValue

from dogs_core.domain.events import (
    Event,
    ExecutionEnded,
    JobFailed,
    JobRetried,
    JobScheduled,
    JobStale,
    JobStarted,
    LockLost,
    LockRenewed,
    ProgressWritten,
    SchedulingEnded,
    SchedulingStarted,
    StepEnded,
    StepReplayed,
    StepStarted,
    WorkflowStartEnded,
    WorkflowStarting,
)
from dogs_core.domain.records import ClaimedJob
from dogs_core.errors import InvalidOptionError
from dogs_core.runtime.plumbing.telemetry import TELEMETRY, Telemetry

__all__ = ["OpenTelemetryTracing", "current_trace_id"]

SCOPE: Final = "dogs_integrations.otel"
"""The instrumentation scope of every span this module makes."""

MESSAGING_SYSTEM: Final = "dogs"

_EVENT_KINDS: Final = (
    SchedulingStarted,
    JobScheduled,
    SchedulingEnded,
    JobStarted,
    ExecutionEnded,
    LockRenewed,
    LockLost,
    ProgressWritten,
    StepStarted,
    StepEnded,
    StepReplayed,
    WorkflowStarting,
    WorkflowStartEnded,
)


def _version() -> str | None:
    try:
        return importlib.metadata.version("dogs-py")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a source checkout
        return None


class OpenTelemetryTracing:
    """Spans of scheduling calls and executions, from the events of a telemetry hub.

    ``tracer_provider`` defaults to the global one (``opentelemetry.trace``, looked up at every
    span, so one set after this object was made is used); ``propagator`` to the global
    propagator (``opentelemetry.propagate``, W3C ``traceparent`` unless configured).
    """

    __slots__ = ("_propagator", "_runs", "_schedules", "_steps", "_tracer")

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider | None = None,
        propagator: TextMapPropagator | None = None,
    ) -> None:
        if tracer_provider is not None and not isinstance(tracer_provider, TracerProvider):
            raise InvalidOptionError(
                "tracer_provider", tracer_provider, "must be an opentelemetry TracerProvider"
            )
        if propagator is not None and not isinstance(propagator, TextMapPropagator):
            raise InvalidOptionError(
                "propagator", propagator, "must be an opentelemetry TextMapPropagator"
            )
        self._tracer = trace.get_tracer(SCOPE, _version(), tracer_provider)
        self._propagator = propagator
        self._schedules: dict[int, tuple[Span, Token[Context], int]] = {}
        self._runs: dict[str, Span] = {}
        self._steps: dict[tuple[str, int], tuple[Span, Token[Context]]] = {}

    def attach(self, telemetry: Telemetry = TELEMETRY) -> Callable[[], None]:
        """Subscribe to ``telemetry`` (the process-wide hub by default) for the events this
        tracing reads, and give it the current trace id (the log lines executions keep carry
        it); returns the function that undoes both."""
        if not isinstance(telemetry, Telemetry):
            raise InvalidOptionError("telemetry", telemetry, "must be a dogs Telemetry hub")
        unsubscribe = telemetry.subscribe(self, *_EVENT_KINDS)
        telemetry.trace_id_source = current_trace_id

        def detach() -> None:
            unsubscribe()
            if telemetry.trace_id_source is current_trace_id:
                telemetry.trace_id_source = None

        return detach

    def __call__(self, event: Event) -> None:
        """Turn one event into span work; other events are ignored."""
        if isinstance(event, JobStarted):
            self._job_started(event)
        elif isinstance(event, ExecutionEnded):
            self._execution_ended(event)
        elif isinstance(event, LockRenewed):
            until = event.locked_until.isoformat()
            self._lock_event(event.job, "dogs.lock.renewed", {"dogs.lock.locked_until": until})
        elif isinstance(event, LockLost):
            self._lock_event(event.job, "dogs.lock.lost", {"dogs.lock.reason": event.reason})
        elif isinstance(event, ProgressWritten):
            self._lock_event(event.job, "dogs.progress", _progress_attributes(event))
        elif isinstance(event, StepStarted):
            self._step_started(event)
        elif isinstance(event, StepEnded):
            self._step_ended(event)
        elif isinstance(event, StepReplayed):
            replayed: dict[str, AttributeValue] = {
                "dogs.step.name": event.name,
                "dogs.step.index": event.index,
            }
            self._lock_event(event.job, "dogs.step.replayed", replayed)
        elif isinstance(event, SchedulingStarted):
            self._scheduling_started(event)
        elif isinstance(event, JobScheduled):
            self._job_scheduled(event)
        elif isinstance(event, SchedulingEnded):
            self._scheduling_ended(event)
        elif isinstance(event, WorkflowStarting):
            self._workflow_starting(event)
        elif isinstance(event, WorkflowStartEnded):
            self._workflow_start_ended(event)

    # -- scheduling -----------------------------------------------------------------------------

    def _scheduling_started(self, event: SchedulingStarted) -> None:
        names = sorted(set(event.job_names))
        attributes: dict[str, AttributeValue] = {
            "messaging.system": MESSAGING_SYSTEM,
            "messaging.operation.type": "send",
            "messaging.operation.name": "schedule",
            "dogs.schedule.count": event.count,
        }
        if len(names) == 1:
            attributes["dogs.job.name"] = names[0]
            attributes["messaging.destination.name"] = names[0]
        else:
            attributes["dogs.job.names"] = names
        if event.count != 1:
            attributes["messaging.batch.message_count"] = event.count
        name = f"schedule {names[0]}" if len(names) == 1 else "schedule"
        span = self._tracer.start_span(name, kind=SpanKind.PRODUCER, attributes=attributes)
        current = trace.set_span_in_context(span)
        token = otel_context.attach(current)
        self._schedules[event.call_id] = (span, token, event.count)
        if self._propagator is None:
            propagate.inject(event.trace_context, context=current)
        else:
            self._propagator.inject(event.trace_context, context=current)

    def _job_scheduled(self, event: JobScheduled) -> None:
        entry = self._schedules.get(event.call_id)
        if entry is None:
            return
        span, _, count = entry
        if count == 1:
            span.set_attribute("dogs.job.id", event.job_id)
            span.set_attribute("messaging.message.id", event.job_id)
            span.set_attribute("dogs.job.duplicate", event.duplicate)
            span.set_attribute("dogs.job.priority", event.priority)
            span.set_attribute("dogs.job.run_at", event.run_at.isoformat())
            if event.unique_key is not None:
                span.set_attribute("dogs.job.unique_key", event.unique_key)

    def _scheduling_ended(self, event: SchedulingEnded) -> None:
        entry = self._schedules.pop(event.call_id, None)
        if entry is None:
            return
        span, token, _ = entry
        span.set_attribute("dogs.schedule.scheduled", event.scheduled)
        span.set_attribute("dogs.schedule.duplicates", event.duplicates)
        if event.error is not None:
            _record_error(span, event.error)
        span.end()
        otel_context.detach(token)

    # -- workflows ------------------------------------------------------------------------------

    def _workflow_starting(self, event: WorkflowStarting) -> None:
        attributes: dict[str, AttributeValue] = {
            "messaging.system": MESSAGING_SYSTEM,
            "dogs.workflow.id": event.workflow_id,
            "dogs.workflow.steps": event.steps,
        }
        if event.name is not None:
            attributes["dogs.workflow.name"] = event.name
        span = self._tracer.start_span(
            f"workflow {event.name or event.workflow_id}",
            kind=SpanKind.PRODUCER,
            attributes=attributes,
        )
        current = trace.set_span_in_context(span)
        token = otel_context.attach(current)
        self._schedules[event.call_id] = (span, token, event.steps)
        if self._propagator is None:
            propagate.inject(event.trace_context, context=current)
        else:
            self._propagator.inject(event.trace_context, context=current)

    def _workflow_start_ended(self, event: WorkflowStartEnded) -> None:
        entry = self._schedules.pop(event.call_id, None)
        if entry is None:
            return
        span, token, _ = entry
        span.set_attribute("dogs.workflow.released", event.released)
        if event.error is not None:
            _record_error(span, event.error)
        span.end()
        otel_context.detach(token)

    # -- executions -----------------------------------------------------------------------------

    def _job_started(self, event: JobStarted) -> None:
        job = event.job
        step = job.workflow
        if step and job.trace_context:
            # A workflow's step: a child of the workflow's span (one trace per workflow).
            parent = self._extract(job.trace_context)
            links: list[Link] = []
        else:
            # A root of its own (an empty parent context): the execution is not part of
            # whatever was current where the workers started; the link leads to the call
            # that scheduled it.
            parent = Context()
            links = self._links(job.trace_context)
        attributes = _job_attributes(job)
        if step:
            attributes["dogs.workflow.id"] = str(step.get("id"))
            attributes["dogs.workflow.step"] = str(step.get("name"))
        span = self._tracer.start_span(
            f"run {job.job_name}",
            context=parent,
            kind=SpanKind.CONSUMER,
            attributes=attributes,
            links=links,
        )
        self._runs[job.execution_id] = span
        # Never detached: this runs in the execution's own context copy, discarded with it, and
        # its end may come on another task (a stale execution), where a detach would fail.
        otel_context.attach(trace.set_span_in_context(span))

    def _extract(self, carrier: Mapping[str, str]) -> Context:
        if self._propagator is None:
            return propagate.extract(carrier)
        return self._propagator.extract(carrier)

    def _links(self, carrier: Mapping[str, str] | None) -> list[Link]:
        if not carrier:
            return []
        extracted = self._extract(carrier)
        span_context = trace.get_current_span(extracted).get_span_context()
        if not span_context.is_valid:
            return []
        return [Link(span_context, {"dogs.link": "scheduled_by"})]

    def _execution_ended(self, event: ExecutionEnded) -> None:
        span = self._runs.pop(event.job.execution_id, None)
        if span is None:
            return
        span.set_attribute("dogs.job.outcome", event.outcome)
        if isinstance(event, JobFailed | JobRetried):
            _record_error(span, event.error, prefix=f"{event.outcome}: ")
            if isinstance(event, JobRetried):
                span.set_attribute("dogs.job.retry_at", event.retry_at.isoformat())
        elif isinstance(event, JobStale):
            span.set_attribute("dogs.job.stale_reason", event.reason)
            span.set_status(Status(StatusCode.ERROR, f"stale: {event.reason}"))
        span.end()

    # -- durable steps ---------------------------------------------------------------------------

    def _step_started(self, event: StepStarted) -> None:
        """A span per step that runs, a child of the run's span (current in the handler's
        context), made current while the step's function runs: what it traces nests under it.
        Its end comes in the same context (:class:`StepEnded`), so the detach is safe."""
        span = self._tracer.start_span(
            f"step {event.name}",
            kind=SpanKind.INTERNAL,
            attributes={
                "dogs.job.id": event.job.job_id,
                "dogs.job.name": event.job.job_name,
                "dogs.step.name": event.name,
                "dogs.step.index": event.index,
                "dogs.step.transactional": event.transactional,
            },
        )
        token = otel_context.attach(trace.set_span_in_context(span))
        self._steps[(event.job.execution_id, event.index)] = (span, token)

    def _step_ended(self, event: StepEnded) -> None:
        entry = self._steps.pop((event.job.execution_id, event.index), None)
        if entry is None:
            return
        span, token = entry
        if event.error is not None:
            _record_error(span, event.error)
        span.end()
        otel_context.detach(token)

    def _lock_event(
        self, job: ClaimedJob, name: str, attributes: dict[str, AttributeValue]
    ) -> None:
        span = self._runs.get(job.execution_id)
        if span is not None:
            span.add_event(name, attributes)


def current_trace_id() -> str | None:
    """The trace id of the current span (32 hex digits), or ``None`` outside of one."""
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


def _progress_attributes(event: ProgressWritten) -> dict[str, AttributeValue]:
    """A progress span event: its fraction and message (those reported)."""
    progress = event.progress
    attributes: dict[str, AttributeValue] = {}
    if progress.fraction is not None:
        attributes["dogs.progress.fraction"] = progress.fraction
    if progress.message is not None:
        attributes["dogs.progress.message"] = progress.message
    return attributes


def _job_attributes(job: ClaimedJob) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {
        "messaging.system": MESSAGING_SYSTEM,
        "messaging.operation.type": "process",
        "messaging.operation.name": "run",
        "messaging.destination.name": job.job_name,
        "messaging.message.id": job.job_id,
        "dogs.job.name": job.job_name,
        "dogs.job.id": job.job_id,
        "dogs.execution.id": job.execution_id,
        "dogs.job.tries": job.tries,
        "dogs.job.priority": job.priority,
        "dogs.job.type": str(job.type),
        "dogs.job.was_stale": job.was_stale,
    }
    if job.partition is not None:
        attributes["dogs.job.partition"] = job.partition
    if job.unique_identifier is not None:
        attributes["dogs.job.unique_key"] = job.unique_identifier
    return attributes


def _record_error(span: Span, error: BaseException, *, prefix: str = "") -> None:
    span.record_exception(error)
    span.set_status(Status(StatusCode.ERROR, f"{prefix}{type(error).__name__}: {error}"))
