"""The public registry of job definitions and its decorators. No I/O.

>>> jobs = Jobs()
>>> @jobs.event(max_tries=5, lock_time="2m")
... async def send_welcome(params: dict, ctx: object) -> None: ...
>>> @jobs.recurrent(cron="0 3 * * *", timezone="Europe/Paris")
... def nightly_report(ctx: object) -> None: ...
>>> jobs.names
('send_welcome', 'nightly_report')

The decorators return the *definition* (not the function): pass it to the client's
``schedule(...)``. Class-based registration, like Dogs' ``@Jobs`` / ``@EventJob`` /
``@RecurrentJob``, marks methods with :func:`event_job_method` / :func:`recurrent_job_method`
and registers a service instance with :meth:`Jobs.add_service`; the job name is the method name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final, TypeVar, Unpack, overload

from dogs_core.domain.definitions import (
    EventJobDefinition,
    EventJobOptions,
    JobDefinition,
    RecurrentJobDefinition,
    RecurrentJobOptions,
)
from dogs_core.domain.records import JobType
from dogs_core.errors import DuplicateJobNameError, InvalidOptionError, UnknownJobError

__all__ = [
    "Jobs",
    "event_job",
    "event_job_method",
    "get_service_jobs",
    "recurrent_job",
    "recurrent_job_method",
]

F = TypeVar("F", bound=Callable[..., Any])

_MARKER: Final = "__dogs_job__"


def event_job(
    handler: Callable[..., Any], *, name: str | None = None, **options: Unpack[EventJobOptions]
) -> EventJobDefinition:
    """Build an event job definition without a registry; ``name`` defaults to the handler's
    ``__name__``. See :class:`~dogs_core.domain.definitions.EventJobDefinition` for options."""
    return EventJobDefinition(_job_name(handler, name), handler, **options)


def recurrent_job(
    handler: Callable[..., Any],
    *,
    name: str | None = None,
    **options: Unpack[RecurrentJobOptions],
) -> RecurrentJobDefinition:
    """Build a recurrent job definition without a registry; ``name`` defaults to the handler's
    ``__name__``. Give exactly one of ``run_every``, ``cron`` + ``timezone``, ``next_run`` or
    ``schedule``."""
    return RecurrentJobDefinition(_job_name(handler, name), handler, **options)


def _job_name(handler: object, name: str | None) -> str:
    if name is not None:
        return name
    derived = getattr(handler, "__name__", None)
    if not isinstance(derived, str):
        raise InvalidOptionError(
            "name", None, f"cannot derive a job name from {handler!r}; pass name=..."
        )
    return derived


class Jobs:
    """A registry of job definitions, keyed by unique job name, in registration order.

    Iterating yields the definitions. Registering the same definition object twice is a no-op;
    a *different* definition under a registered name raises :class:`DuplicateJobNameError`.
    """

    def __init__(self, definitions: Iterable[JobDefinition] = ()) -> None:
        self._definitions: dict[str, JobDefinition] = {}
        self.add(*definitions)

    # -- decorators -----------------------------------------------------------------------

    @overload
    def event(self, handler: Callable[..., Any], /) -> EventJobDefinition: ...

    @overload
    def event(
        self, /, *, name: str | None = None, **options: Unpack[EventJobOptions]
    ) -> Callable[[Callable[..., Any]], EventJobDefinition]: ...

    def event(
        self,
        handler: Callable[..., Any] | None = None,
        /,
        *,
        name: str | None = None,
        **options: Unpack[EventJobOptions],
    ) -> EventJobDefinition | Callable[[Callable[..., Any]], EventJobDefinition]:
        """Register ``handler(params, ctx)`` as an event job: ``@jobs.event`` or
        ``@jobs.event(name=..., max_tries=..., ...)``. Returns the definition."""

        def register(func: Callable[..., Any]) -> EventJobDefinition:
            definition = event_job(func, name=name, **options)
            self.add(definition)
            return definition

        return register if handler is None else register(handler)

    @overload
    def recurrent(self, handler: Callable[..., Any], /) -> RecurrentJobDefinition: ...

    @overload
    def recurrent(
        self, /, *, name: str | None = None, **options: Unpack[RecurrentJobOptions]
    ) -> Callable[[Callable[..., Any]], RecurrentJobDefinition]: ...

    def recurrent(
        self,
        handler: Callable[..., Any] | None = None,
        /,
        *,
        name: str | None = None,
        **options: Unpack[RecurrentJobOptions],
    ) -> RecurrentJobDefinition | Callable[[Callable[..., Any]], RecurrentJobDefinition]:
        """Register ``handler(ctx)`` as a recurrent job:
        ``@jobs.recurrent(run_every="5m")`` or ``@jobs.recurrent(cron=..., timezone=...)``;
        ``misfire=`` (with ``misfire_grace``, ``max_catch_up``) says what becomes of the runs it
        misses. Returns the definition. (Bare ``@jobs.recurrent`` fails: a schedule is
        required.)"""

        def register(func: Callable[..., Any]) -> RecurrentJobDefinition:
            definition = recurrent_job(func, name=name, **options)
            self.add(definition)
            return definition

        return register if handler is None else register(handler)

    # -- registration ---------------------------------------------------------------------

    def add(self, *definitions: JobDefinition) -> None:
        """Register definitions; all or nothing (nothing is added when one is rejected)."""
        pending: dict[str, JobDefinition] = {}
        for definition in definitions:
            if not isinstance(definition, EventJobDefinition | RecurrentJobDefinition):
                raise InvalidOptionError(
                    "definition",
                    definition,
                    "expected an EventJobDefinition or RecurrentJobDefinition "
                    "(made by @jobs.event, @jobs.recurrent, event_job or recurrent_job)",
                )
            existing = pending.get(definition.name, self._definitions.get(definition.name))
            if existing is not None and existing is not definition:
                raise DuplicateJobNameError(definition.name)
            pending[definition.name] = definition
        self._definitions.update(pending)

    def add_service(self, instance: object) -> tuple[JobDefinition, ...]:
        """Register the marked methods of ``instance`` (see :func:`event_job_method`) and return
        their definitions. The job names are the method names."""
        definitions = tuple(get_service_jobs(instance).values())
        self.add(*definitions)
        return definitions

    @classmethod
    def merge(cls, *registries: Jobs) -> Jobs:
        """A new registry with the definitions of all ``registries`` (names must not clash)."""
        merged = cls()
        merged.add(*(definition for registry in registries for definition in registry))
        return merged

    # -- lookup ---------------------------------------------------------------------------

    def get(self, name: str) -> JobDefinition:
        """The definition registered under ``name``; :class:`UnknownJobError` otherwise."""
        definition = self._definitions.get(name) if isinstance(name, str) else None
        if definition is None:
            raise UnknownJobError(name, list(self._definitions))
        return definition

    def __getitem__(self, name: str) -> JobDefinition:
        return self.get(name)

    @property
    def names(self) -> tuple[str, ...]:
        """The registered job names, in registration order."""
        return tuple(self._definitions)

    def __iter__(self) -> Iterator[JobDefinition]:
        return iter(tuple(self._definitions.values()))

    def __len__(self) -> int:
        return len(self._definitions)

    def __contains__(self, item: object) -> bool:
        """``"name" in jobs`` or ``definition in jobs`` (that very definition is registered)."""
        if isinstance(item, str):
            return item in self._definitions
        if isinstance(item, EventJobDefinition | RecurrentJobDefinition):
            return self._definitions.get(item.name) is item
        return False

    def __repr__(self) -> str:
        return f"Jobs({', '.join(self._definitions) or ''})"


# -- class-based registration -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _JobMarker:
    type: JobType
    options: dict[str, Any]


@overload
def event_job_method(func: F, /) -> F: ...


@overload
def event_job_method(**options: Unpack[EventJobOptions]) -> Callable[[F], F]: ...


def event_job_method(
    func: F | None = None, /, **options: Unpack[EventJobOptions]
) -> F | Callable[[F], F]:
    """Mark a method ``(self, params, ctx)`` as an event job, bare or with options; register
    an instance with :meth:`Jobs.add_service`. Options are validated at registration."""
    return _mark(func, JobType.EVENT, dict(options))


@overload
def recurrent_job_method(func: F, /) -> F: ...


@overload
def recurrent_job_method(**options: Unpack[RecurrentJobOptions]) -> Callable[[F], F]: ...


def recurrent_job_method(
    func: F | None = None, /, **options: Unpack[RecurrentJobOptions]
) -> F | Callable[[F], F]:
    """Mark a method ``(self, ctx)`` as a recurrent job (a schedule option is required)."""
    return _mark(func, JobType.RECURRENT, dict(options))


def _mark(func: F | None, kind: JobType, options: dict[str, Any]) -> F | Callable[[F], F]:
    def mark(target: F) -> F:
        setattr(target, _MARKER, _JobMarker(kind, options))
        return target

    return mark if func is None else mark(func)


def get_service_jobs(instance: object) -> dict[str, JobDefinition]:
    """Definitions for the marked methods of ``instance``, by job name (the method name).

    Raises :class:`InvalidOptionError` for a class (pass an instance) or an instance without
    marked methods (Dogs' ``getServiceJobs`` throws for an undecorated class too).
    """
    if isinstance(instance, type):
        raise InvalidOptionError(
            "service", instance, "pass an instance of the class, not the class itself"
        )
    cls = type(instance)
    found: dict[str, JobDefinition] = {}
    for attribute in dir(cls):
        marker = getattr(getattr(cls, attribute, None), _MARKER, None)
        if not isinstance(marker, _JobMarker):
            continue
        bound = getattr(instance, attribute)
        if marker.type is JobType.EVENT:
            found[attribute] = event_job(bound, name=attribute, **marker.options)
        else:
            found[attribute] = recurrent_job(bound, name=attribute, **marker.options)
    if not found:
        raise InvalidOptionError(
            "service",
            instance,
            f"{cls.__name__} has no methods marked with @event_job_method or @recurrent_job_method",
        )
    return found
