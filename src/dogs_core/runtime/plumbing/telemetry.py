"""The telemetry hub: subscribers of the events of :mod:`dogs_core.domain.events`.

The runtime checks :attr:`Telemetry.active` (a plain attribute) before it builds an event, so a
hub nobody subscribed to costs one attribute read per emission point and nothing else.
Subscribers are plain callables, called inline by :meth:`Telemetry.emit`; one that raises is
logged (its first failure with the traceback, then every 1000th) and stays subscribed: telemetry
never fails a job.

``Workers`` and ``DogsClient`` use the process-wide :data:`TELEMETRY` unless given a hub of
their own (``telemetry=``), so ``dogs_core.subscribe(handler)`` is all an application needs.

``tell_advanced`` tells what a workflow release wrote (shared by the releaser and the clients).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Sequence
from typing import Final, Protocol

from dogs_core.domain.events import Event, WorkflowFinished, WorkflowStepReleased
from dogs_core.domain.workflow_records import FinishedWorkflow, StepRelease
from dogs_core.errors import InvalidOptionError

__all__ = ["TELEMETRY", "Subscriber", "Telemetry", "next_call_id", "subscribe", "tell_advanced"]


logger = logging.getLogger("dogs.telemetry")


Subscriber = Callable[[Event], object]


_LOG_EVERY: Final = 1000


_call_ids = itertools.count(1)


def next_call_id() -> int:
    """A process-unique id that pairs a :class:`SchedulingStarted` with its end."""
    return next(_call_ids)


class Telemetry:
    """Subscribers of telemetry events, each for every event or for some event classes."""

    __slots__ = ("_errors", "_subscriptions", "active", "trace_id_source")

    def __init__(self) -> None:
        self._subscriptions: tuple[tuple[Subscriber, tuple[type[Event], ...]], ...] = ()
        self._errors: dict[int, int] = {}
        #: Whether anyone listens; emission points skip building events when it is false.
        self.active = False
        #: Set by a tracing subscriber: the current trace id (32 hex digits) in the caller's
        #: context, or ``None``; the log lines an execution keeps carry it.
        self.trace_id_source: Callable[[], str | None] | None = None

    def subscribe(self, subscriber: Subscriber, *kinds: type[Event]) -> Callable[[], None]:
        """Call ``subscriber(event)`` for every event (or, given ``kinds``, for events that are
        instances of one of them: ``ExecutionEnded`` covers all its subclasses). Returns a
        function that unsubscribes it."""
        if not callable(subscriber):
            raise InvalidOptionError("subscriber", subscriber, "must be callable")
        for kind in kinds:
            if not (isinstance(kind, type) and issubclass(kind, Event)):
                raise InvalidOptionError("kinds", kind, "must be event classes")
        entry = (subscriber, kinds)
        self._subscriptions = (*self._subscriptions, entry)
        self.active = True

        def unsubscribe() -> None:
            self._subscriptions = tuple(s for s in self._subscriptions if s is not entry)
            self.active = bool(self._subscriptions)

        return unsubscribe

    def wants(self, kind: type[Event]) -> bool:
        """Whether any subscriber takes events of class ``kind`` (for events that cost
        something to build even when the hub is active)."""
        return any(not kinds or issubclass(kind, kinds) for _, kinds in self._subscriptions)

    def emit(self, event: Event) -> None:
        """Hand ``event`` to each subscriber that takes it, in subscription order."""
        for subscriber, kinds in self._subscriptions:
            if kinds and not isinstance(event, kinds):
                continue
            try:
                subscriber(event)
            except Exception:
                self._log_failure(subscriber, event)

    def _log_failure(self, subscriber: Subscriber, event: Event) -> None:
        key = id(subscriber)
        count = self._errors.get(key, 0) + 1
        self._errors[key] = count
        if count == 1 or count % _LOG_EVERY == 0:
            logger.exception(
                "telemetry subscriber %r raised on %s (%d times so far); it stays subscribed",
                subscriber,
                event.kind,
                count,
            )


#: The process-wide hub, used by workers and clients given no ``telemetry=``.
TELEMETRY: Final = Telemetry()


def subscribe(subscriber: Subscriber, *kinds: type[Event]) -> Callable[[], None]:
    """Subscribe to the process-wide hub :data:`TELEMETRY` (see :meth:`Telemetry.subscribe`)."""
    return TELEMETRY.subscribe(subscriber, *kinds)


class Written(Protocol):
    """What one call of the release wrote (``advance.Advanced``, async or sync)."""

    @property
    def released(self) -> Sequence[StepRelease]: ...

    @property
    def finished(self) -> Sequence[FinishedWorkflow]: ...


def tell_advanced(telemetry: Telemetry, advanced: Written) -> None:
    """A :class:`WorkflowStepReleased` per step released and a :class:`WorkflowFinished` per
    workflow ended by the call that returned ``advanced`` (nothing when nobody listens)."""
    if not telemetry.active:
        return
    for release in advanced.released:
        released = WorkflowStepReleased(release.workflow_id, release.step_id, release.record_id)
        telemetry.emit(released)
    for finished in advanced.finished:
        telemetry.emit(WorkflowFinished(finished.workflow_id, finished.state.value))
