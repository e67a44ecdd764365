"""The one exception hierarchy of Dogs for Python.

Every public entry point raises a subclass of :class:`DogsError`. Validation errors name the
field and the offending value so that the message alone tells the user what to fix.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

__all__ = [
    "AmbiguousBulkInsert",
    "ChangeFeedUnavailableError",
    "DogsError",
    "DuplicateJobNameError",
    "EmptySelectionError",
    "ExecutionCancelledError",
    "InvalidIdError",
    "InvalidOptionError",
    "InvalidParamsError",
    "InvalidProgressError",
    "InvalidScheduleError",
    "InvalidTagsError",
    "InvalidWorkflowError",
    "JobNotFoundError",
    "JobNotRegisteredError",
    "JobTimeoutError",
    "LockLostError",
    "MissingRoleError",
    "NondeterminismError",
    "QueryTooBroadError",
    "RenewalProtocolError",
    "ScheduleInCodeError",
    "ScheduleNotFoundError",
    "ScheduleOutcomeUnknownError",
    "SessionNotSupportedError",
    "StartupTimeoutError",
    "StepError",
    "StoreError",
    "StoreUnavailableError",
    "TransactionsNotSupportedError",
    "TransientStoreError",
    "UniqueContendedError",
    "UniqueError",
    "UnknownJobError",
    "ValidationError",
    "WaitTimeoutError",
    "WorkersStateError",
    "WorkflowNotFoundError",
    "WorkflowStateError",
    "WorkflowTimeoutError",
    "WorkflowUpstreamError",
]


class DogsError(Exception):
    """Base class of every error raised by Dogs for Python."""


class ValidationError(DogsError, ValueError):
    """Input was rejected before anything was written.

    ``field`` names the option or argument, ``value`` is what was given and ``reason`` says what
    is wrong with it. The message is ``field=value: reason`` unless ``message`` is given, for the
    callers whose field already shows the value (a params key: ``params['$x']: ...``).
    """

    def __init__(self, field: str, value: Any, reason: str, *, message: str | None = None) -> None:
        self.field = field
        self.value = value
        self.reason = reason
        if message is None:
            message = f"{field}={_short_repr(value)}: {reason}"
        super().__init__(message)


class InvalidOptionError(ValidationError):
    """A job definition, worker or scheduling option is out of range or of the wrong type."""


class InvalidIdError(InvalidOptionError):
    """An id argument (a job's, a workflow's, an audit entry's) that is not an id: record ids
    are UUIDs (any case), so anything else could only find nothing. ``field`` names the
    argument, ``value`` is what was given."""


class InvalidScheduleError(ValidationError):
    """A duration, cron expression, timezone or next-run rule cannot be used."""


class ScheduleNotFoundError(DogsError, LookupError):
    """No recurring schedule has this id (``client.schedules``, ``dogs schedules``)."""

    def __init__(self, schedule_id: str) -> None:
        self.schedule_id = schedule_id
        super().__init__(f"no schedule {schedule_id!r}")


class ScheduleInCodeError(DogsError, ValueError):
    """The id is a recurrent job defined in code: a runtime schedule cannot take it, and it is
    changed, paused or removed in code (or paused fleet-wide with ``dogs pause``), not here.
    Nothing was written."""

    def __init__(self, schedule_id: str, action: str) -> None:
        self.schedule_id = schedule_id
        super().__init__(
            f"{action} {schedule_id!r}: it is a recurrent job defined in code; change it in "
            "code (or pause it fleet-wide: client.pause / dogs pause)"
        )


class InvalidParamsError(ValidationError):
    """Job params fail the job's model or cannot be stored as a BSON document."""


class StepError(ValidationError):
    """A durable step (``ctx.step``) was called in a way that cannot be recorded: a bad or
    reused name, a result that cannot be stored or is too large, too many steps, two steps at
    once, or a step after the handler ended. Nothing was recorded. ``field`` is ``"step"`` and
    ``value`` the step's name."""

    def __init__(self, job: str, step: object, reason: str) -> None:
        super().__init__("step", step, reason, message=f"job {job}: step {step!r} {reason}")


class NondeterminismError(DogsError, RuntimeError):
    """A handler run again called its steps in another order than the run that recorded them:
    step number ``index`` was recorded as ``recorded`` and is now called ``called``. Replaying
    it would hand one step's result to another, so the job fails (and is retried by its
    policy; a handler whose steps changed on purpose needs a new job name or its record's
    steps cleared)."""

    def __init__(self, job_name: str, job_id: str, index: int, recorded: str, called: str) -> None:
        self.job_name, self.job_id = job_name, job_id
        self.index, self.recorded, self.called = index, recorded, called
        super().__init__(
            f"job {job_name!r} ({job_id}): step {index + 1} was recorded as {recorded!r} but "
            f"this run calls {called!r}: the handler must call its steps in the same order on "
            "every run"
        )


class UnknownJobError(DogsError, LookupError):
    """A job name that no registry in this process knows."""

    def __init__(self, name: object, known: list[str] | None = None) -> None:
        self.name = name
        hint = f"; known jobs: {', '.join(sorted(known))}" if known else ""
        super().__init__(f"unknown job name {name!r}{hint}")


class DuplicateJobNameError(DogsError, ValueError):
    """Two different definitions were registered under one job name."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"a different job is already registered under the name {name!r}")


class JobNotRegisteredError(DogsError):
    """A definition was used for scheduling before it was added to a registry."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(
            f"job {name!r} has not been registered in a Jobs registry; "
            "add it with @jobs.event / @jobs.recurrent or jobs.add(...)"
        )


class WorkersStateError(DogsError, RuntimeError):
    """Workers were used in a state that does not allow it (started twice, not started...)."""


class StoreError(DogsError):
    """A job store failed in a way that is not worth retrying."""


class TransientStoreError(StoreError):
    """A job store failed in a way that may succeed when retried (network, step-down, conflict).

    Adapters raise this for every retryable condition so the runtime needs to know one type only.
    ``write_may_have_applied`` is true when the write may have landed before the failure.
    """

    def __init__(self, message: str, *, write_may_have_applied: bool = True) -> None:
        self.write_may_have_applied = write_may_have_applied
        super().__init__(message)


class StoreUnavailableError(TransientStoreError):
    """No database server answered in time: none could be selected (refused, unreachable, no
    primary). Nothing was written, so retrying is safe; the message says where and why in one
    line (no topology dump), because it is logged once per retry while a server is down."""

    def __init__(self, message: str) -> None:
        super().__init__(message, write_may_have_applied=False)


class StartupTimeoutError(StoreError, TimeoutError):
    """Starting workers could not reach the store within ``startup_timeout`` (seconds): they
    retried it, logging each failed attempt, then stopped without claiming anything.
    ``last_error`` is the last failure (``None``: an attempt was still pending)."""

    def __init__(self, startup_timeout: float, last_error: BaseException | None) -> None:
        self.startup_timeout = startup_timeout
        self.last_error = last_error
        why = "no answer yet" if last_error is None else str(last_error)
        super().__init__(
            f"the store did not answer within {startup_timeout:g}s of starting "
            f"(startup_timeout): {why}"
        )


class ChangeFeedUnavailableError(StoreError):
    """The store cannot watch for changes here (MongoDB: a standalone server, or a user
    without the permission to open a change stream). Callers fall back to polling."""


class SessionNotSupportedError(StoreError, TypeError):
    """A store was given a database session (``session=``) it cannot join: nothing was
    written. The in-memory store has no transactions; use a MongoDB store."""


class ExecutionCancelledError(DogsError):
    """Raised inside a sync handler that checks for cancellation (stale lock or shutdown)."""


class ScheduleOutcomeUnknownError(StoreError):
    """An insert failed after it may have landed, and the job may already have run and been
    deleted: re-sending it could run the job twice, so the caller has to decide.

    Rare (the reply of an insert lost, then the job claimed, run and completed before the
    read-back). Look for ``job_id`` in the job's history before scheduling it again.
    """

    def __init__(self, job_id: str, job_name: str) -> None:
        self.job_id = job_id
        self.job_name = job_name
        super().__init__(
            f"the insert of {job_name} job {job_id} may have landed and already run; it was not "
            "re-sent, so that it cannot run twice (check its history before scheduling again)"
        )


class JobNotFoundError(DogsError, LookupError):
    """No record and no history row of a job id: it never existed, or it ended without
    history (``save_executions_for`` of zero) and its record is gone."""

    def __init__(self, job_id: str, detail: str = "no record and no history") -> None:
        self.job_id = job_id
        super().__init__(f"job {job_id!r}: {detail}")


class JobContendedError(DogsError, RuntimeError):
    """An operator action gave up because the job's record kept changing under it (claims,
    renewals or another operator in between); nothing was changed, and trying again is safe."""

    def __init__(self, action: str, job_id: str, rounds: int) -> None:
        self.action = action
        self.job_id = job_id
        super().__init__(
            f"{action} of job {job_id!r}: its record changed {rounds} times in a row while "
            "trying; nothing was changed, try again"
        )


class LockHeldError(DogsError):
    """``client.lock(name)`` found the lease held by someone else (after its ``wait``)."""

    def __init__(self, name: str, held: object = None) -> None:
        self.name = name
        self.held = held
        owner = getattr(held, "owner", None)
        detail = "" if owner is None else f" by {owner} until {getattr(held, 'expires_at', '?')}"
        super().__init__(f"lock {name!r} is held{detail}")


class WaitTimeoutError(DogsError, TimeoutError):
    """``wait_for`` gave up: the job had not ended within its ``timeout``."""

    def __init__(self, job_id: str, timeout: float) -> None:
        self.job_id = job_id
        self.timeout = timeout
        super().__init__(f"job {job_id!r} had not ended after {timeout:g}s")


class JobTimeoutError(DogsError, TimeoutError):
    """The handler ran past the job's ``timeout`` and was cancelled (a failed attempt)."""


class RenewalProtocolError(DogsError, RuntimeError):
    """The runtime fed the lock-renewal machine an impossible event (a bug in the runtime,
    never user input): a result for a write that is not in flight, an event before
    ``RenewalMachine.start`` or a second ``start``, a non-finite time."""


# -- following a job (issue 28) ------------------------------------------------------------


class InvalidProgressError(ValidationError):
    """``ctx.progress(...)`` was given a fraction, a message or data it cannot keep (out of
    range, too long, not storable as BSON, too large); nothing was staged or written."""


class LockLostError(ExecutionCancelledError):
    """The execution no longer holds its job's lock: it went stale (its lock ran out, a renewal
    matched nothing, an operator cancelled the job). Raised by ``ctx.progress(...)`` once the
    runtime knows it, the condition ``ctx.extend_lock_time`` reports as ``False`` and
    ``ctx.raise_if_cancelled`` raises; the handler should stop, another execution may own the
    job now."""

    def __init__(self, job_name: str, job_id: str, execution_id: str) -> None:
        self.job_name = job_name
        self.job_id = job_id
        self.execution_id = execution_id
        super().__init__(
            f"execution {execution_id} of {job_name} ({job_id}) lost its lock; "
            "stop working on it (another execution may own the job now)"
        )


# -- workflows (docs/workflows.md) --------------------------------------------------------------


class InvalidWorkflowError(ValidationError):
    """A workflow was refused before anything was written: ``field`` names the step (or
    ``steps``), ``value`` is what was wrong (a name in ``after``, a cycle, a policy...)."""

    def __init__(self, step: str, value: Any, reason: str) -> None:
        super().__init__(
            step, value, reason, message=f"step {step!r}: {reason} ({_short_repr(value)})"
        )
        self.step = step


class WorkflowNotFoundError(DogsError, LookupError):
    """No workflow has this id (it never existed, or it was deleted)."""

    def __init__(self, workflow_id: str) -> None:
        self.workflow_id = workflow_id
        super().__init__(f"workflow {workflow_id!r}: not found")


class WorkflowStateError(DogsError):
    """An action that the workflow's state does not allow (retrying one that still runs)."""

    def __init__(self, workflow_id: str, state: str, reason: str) -> None:
        self.workflow_id = workflow_id
        self.state = state
        super().__init__(f"workflow {workflow_id!r} is {state}: {reason}")


class WorkflowTimeoutError(DogsError, TimeoutError):
    """``wait_for_workflow`` gave up: the workflow had not ended within its ``timeout``
    (``wait_for_workflows``: this one and ``others`` more had not)."""

    def __init__(self, workflow_id: str, timeout: float, *, others: int = 0) -> None:
        self.workflow_id = workflow_id
        self.timeout = timeout
        self.others = others
        more = f" (and {others} other{'s' if others != 1 else ''})" if others else ""
        super().__init__(f"workflow {workflow_id!r}{more} had not ended after {timeout:g}s")


class WorkflowUpstreamError(DogsError, LookupError):
    """``ctx.upstream(...)`` named no dependency of this step, or a result that was not
    carried to it (too large: read it with ``client.get_workflow``)."""


class TransactionsNotSupportedError(StoreError):
    """The MongoDB deployment has no transactions (a standalone ``mongod``), and the write
    needs one: starting a workflow and releasing its steps are atomic. Nothing was written;
    run a replica set (a single node is one). A store that lacks the workflows role raises
    :class:`MissingRoleError` instead."""


class MissingRoleError(DogsError, LookupError):
    """The store lacks an optional role a feature needs (a custom store written before the
    role existed keeps working for everything else): ``role`` names it (a
    :class:`~dogs_core.ports.Role` value), ``feature`` says what needed it, ``roles`` are the
    ones the store lists. Raised before the feature writes anything."""

    def __init__(self, role: str, feature: str, store: object) -> None:
        # Role is a StrEnum, whose repr would show as <Role.X: 'x'> in the message.
        self.role = str(getattr(role, "value", role))
        self.feature = feature
        listed = getattr(store, "roles", None)
        self.roles = tuple(sorted(str(getattr(r, "value", r)) for r in listed or ()))
        have = f"its roles: {', '.join(self.roles)}" if self.roles else "it lists no roles"
        kind = type(store).__name__
        super().__init__(
            f"{feature} needs the store's {self.role!r} role, which {kind} does not have "
            f"({have}; a store lists its roles in `roles`: docs/architecture.md)"
        )


def _short_repr(value: Any, limit: int = 80) -> str:
    text = shown_value(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def shown_value(value: Any) -> str:
    """``value`` as a message shows it: a duration as the text the parsers accept (``90s`` is
    ``1m30s``, zero is ``0s``), a time in ISO 8601, anything else by its ``repr``; never a
    Python constructor such as ``datetime.timedelta(0)``."""
    if isinstance(value, timedelta):
        return duration_text(value)
    if isinstance(value, datetime):
        return value.isoformat()
    return repr(value)


def duration_text(value: timedelta) -> str:
    """``value`` as a duration the parsers read back: ``8d``, ``1h30m``, ``0.25s``, ``-5s``,
    ``0s``."""
    if value < timedelta(0):
        return "-" + duration_text(-value)
    whole, micros = divmod(value // timedelta(microseconds=1), 1_000_000)
    days, rest = divmod(whole, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, seconds = divmod(rest, 60)
    parts = [
        f"{days}d" if days else "",
        f"{hours}h" if hours else "",
        f"{minutes}m" if minutes else "",
    ]
    if seconds or micros or not any(parts):
        fraction = f"{micros / 1_000_000:.6f}".rstrip("0").rstrip(".")[1:] if micros else ""
        parts.append(f"{seconds}{fraction}s")
    return "".join(parts)


# -- finding (the inspection role) ----------------------------------------------------------------


class QueryTooBroadError(DogsError):
    """A search with filters no index serves (``filters``, e.g. ``("owner", "params")``)
    read rows for ``seconds`` without filling its page. Narrow it: a job name, a status, an
    error type or a shorter time range let an index find the rows."""

    def __init__(self, filters: tuple[str, ...], seconds: float) -> None:
        self.filters = filters
        self.seconds = seconds
        names = ", ".join(filters)
        super().__init__(
            f"the search by {names} (not served by an index) read rows for {seconds:g} s "
            "without filling a page: add a job name, a status, an error type or a shorter "
            "time range"
        )


class UniqueContendedError(DogsError, RuntimeError):
    """A unique schedule kept losing races on its key (``rounds`` rounds in a row,
    :data:`~dogs_core.domain.uniqueness.MAX_ROUNDS`): nothing of this call was written; trying
    again is safe."""

    def __init__(self, key: str, rounds: int) -> None:
        self.key = key
        self.rounds = rounds
        super().__init__(f"unique key {key!r}: lost {rounds} races in a row; try again")


class InvalidTagsError(InvalidOptionError):
    """Tags that cannot be stored: too many, too long, empty, or not strings."""


class UniqueError(InvalidOptionError):
    """A ``unique=`` option (or its combination with the other arguments of ``schedule``) that
    cannot be used; ``field`` is ``unique.<option>``. Nothing was written."""


class EmptySelectionError(ValidationError):
    """A bulk action without any filter, not marked as meant for every record: it refuses
    (``BulkSelection(all=True)``, ``dogs bulk ... --all``, the dashboard's "every job").
    Nothing was written."""

    def __init__(self, described: str) -> None:
        super().__init__(
            "selection",
            described,
            "no filter given: that would take every record",
            message=(
                f"no filter given: a bulk action would take all {described}; name a filter "
                "(--name, --state, --tag, --error-type, --since/--until), or say you mean "
                "every one (all=True, dogs bulk ... --all)"
            ),
        )


class AmbiguousBulkInsert(Exception):
    """A bulk insert failed after it may have been applied: settle its items one by one."""
