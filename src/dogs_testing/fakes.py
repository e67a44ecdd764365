"""Fakes for tests that run no workers: a clock moved by hand and a job context that records.

:class:`ManualClock`
    A :class:`~dogs_core.ports.Clock` you move by hand, for code that takes a clock but runs no
    event loop (a scheduling client under test, a custom ``next_run`` function).
:class:`FakeJobContext`
    The :class:`~dogs_core.runtime.execution.context.JobContext` surface, recording lock extensions
    and clears, so a test can check that a long job keeps its lock, and durable steps
    (``recorded_steps``; ``steps=`` replays recorded ones, as a retry would) and sleeps (a
    ``ctx.sleep`` records its step and raises ``Snooze``, as on a worker).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import anyio
import anyio.lowlevel

from dogs_core.domain.definitions import JobDefinition
from dogs_core.domain.records import DEFAULT_PRIORITY, ClaimedJob, JobType, to_millis
from dogs_core.domain.schedules import parse_duration
from dogs_core.domain.steps import RecordedStep
from dogs_core.errors import ExecutionCancelledError, InvalidOptionError, LockLostError, StepError
from dogs_core.ids import new_execution_id, new_record_id
from dogs_core.ports import Clock
from dogs_core.runtime.execution.context import JobContext
from dogs_core.runtime.plumbing.clock import SystemClock
from dogs_core.runtime.plumbing.settings import DurationLike

__all__ = ["DEFAULT_START", "FakeJobContext", "LockExtension", "ManualClock"]

DEFAULT_START: Final = datetime(2030, 1, 1, tzinfo=UTC)
"""Where a :class:`ManualClock` and a :class:`~dogs_testing.harness.JobsHarness` start when not
told otherwise."""

_DEFAULT_LOCK_TIME: Final = timedelta(seconds=30)


# --------------------------------------------------------------------------------------------
# Clocks


class ManualClock:
    """A clock that moves only when told to (a :class:`~dogs_core.ports.Clock`).

    >>> clock = ManualClock(datetime(2030, 1, 1, tzinfo=UTC))
    >>> clock.advance("90s")
    datetime.datetime(2030, 1, 1, 0, 1, 30, tzinfo=datetime.timezone.utc)
    >>> clock.set(datetime(2030, 6, 1, tzinfo=UTC)); clock.now().month
    6
    """

    def __init__(self, start: datetime = DEFAULT_START) -> None:
        self._now = _aware("start", start)

    def now(self) -> datetime:
        return self._now

    def advance(self, duration: DurationLike) -> datetime:
        """Move forward by ``duration`` (a ``timedelta``, seconds, or ``"5m"``); returns now."""
        self._now += parse_duration(duration, field="duration")
        return self._now

    def set(self, moment: datetime) -> None:
        """Jump to ``moment`` (any timezone-aware time, also one in the past: clock skew)."""
        self._now = _aware("moment", moment)


def _aware(field: str, value: object) -> datetime:
    if not isinstance(value, datetime) or value.utcoffset() is None:
        raise InvalidOptionError(field, value, "must be a timezone-aware datetime")
    return value.astimezone(UTC)


# --------------------------------------------------------------------------------------------
# The fake context


@dataclass(frozen=True, slots=True)
class LockExtension:
    """One lock extension asked of a :class:`FakeJobContext`.

    ``granted`` is what the call returned; ``automatic`` marks the renewals made by the
    simulated heartbeat of :func:`run_job_inline` (``heartbeat=True`` jobs).
    """

    duration: timedelta
    at: datetime
    granted: bool
    automatic: bool = False


class FakeJobContext(JobContext):
    """A :class:`~dogs_core.runtime.execution.context.JobContext` for tests: same surface, no
    execution.

    Give a ``definition`` (its name, type, priority and lock time are used) or a ``job_name``;
    ``params`` are the params *as stored* (what ``ctx.params`` returns). Extensions are granted
    and recorded in :attr:`lock_extensions` until the lock is lost (:meth:`lose_lock`), the
    stale timeout was cleared, or the run finished, as the real context refuses them then.
    ``clock`` dates the extensions (the wall clock by default).

    It is a real ``JobContext`` subclass, so ``isinstance`` checks pass and, during
    :func:`run_job_inline`, :func:`~dogs_core.runtime.execution.context.current_job` returns it.
    """

    def __init__(
        self,
        *,
        definition: JobDefinition | None = None,
        job_name: str | None = None,
        params: Mapping[str, Any] | None = None,
        tries: int = 1,
        was_stale: bool = False,
        job_id: str | None = None,
        execution_id: str | None = None,
        lock_time: DurationLike | None = None,
        clock: Clock | None = None,
        steps: Sequence[RecordedStep] = (),
    ) -> None:
        # JobContext.__init__ needs an Execution; every member it provides is overridden here.
        if isinstance(tries, bool) or not isinstance(tries, int) or tries < 1:
            raise InvalidOptionError("tries", tries, "must be an int >= 1 (1 = the first run)")
        name = job_name if job_name is not None else (definition.name if definition else "job")
        if lock_time is not None:
            lock = parse_duration(lock_time, field="lock_time")
        elif definition is not None:
            lock = definition.effective_lock_time(_DEFAULT_LOCK_TIME)
        else:
            lock = _DEFAULT_LOCK_TIME
        self._given_definition = definition
        self._clock: Clock = clock or SystemClock()
        self._lock_time = lock
        self._locked_until = self._clock.now() + lock
        self._record = ClaimedJob(
            job_id=job_id or new_record_id(),
            execution_id=execution_id or new_execution_id(),
            job_name=name,
            type=definition.type if definition is not None else JobType.EVENT,
            params=params,
            tries=tries,
            priority=definition.priority if definition is not None else DEFAULT_PRIORITY,
            locked_until=self._locked_until,
            was_stale=was_stale,
            steps=tuple(steps),
        )
        self._cancelled = False
        self._lock_lost = False
        self._finished = False
        self.lock_extensions: list[LockExtension] = []
        """Every extension asked for, in order (granted or not)."""
        self.stale_timeout_cleared = False
        """Whether :meth:`clear_stale_timeout` was called."""
        self.recorded_steps: list[RecordedStep] = []
        """The steps this run recorded (``ctx.step``), in order; ``steps`` given at creation
        are replayed, as a retry of the job would."""
        self.logger: logging.LoggerAdapter[logging.Logger] = logging.LoggerAdapter(
            logging.getLogger(f"dogs.job.{name}"),
            {"job_name": name, "job_id": self._record.job_id, "execution_id": self.execution_id},
        )

    # -- the JobContext surface ------------------------------------------------------------------

    @property
    def record(self) -> ClaimedJob:
        return self._record

    @property
    def definition(self) -> JobDefinition:
        if self._given_definition is None:
            raise AttributeError("this FakeJobContext was built without definition=...")
        return self._given_definition

    @property
    def job_id(self) -> str:
        return self._record.job_id

    @property
    def execution_id(self) -> str:
        return self._record.execution_id

    @property
    def job_name(self) -> str:
        return self._record.job_name

    @property
    def tries(self) -> int:
        return self._record.tries

    @property
    def was_stale(self) -> bool:
        return self._record.was_stale

    @property
    def params(self) -> Mapping[str, Any] | None:
        return self._record.params

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    async def extend_lock_time(self, duration: DurationLike) -> bool:
        seconds = parse_duration(duration, field="duration")
        await anyio.lowlevel.checkpoint()
        return self._extend(seconds, automatic=False)

    def extend_lock_time_blocking(self, duration: DurationLike) -> bool:
        return self._extend(parse_duration(duration, field="duration"), automatic=False)

    def clear_stale_timeout(self) -> None:
        self.stale_timeout_cleared = True

    def raise_if_cancelled(self) -> None:
        if self._cancelled:
            raise ExecutionCancelledError(
                f"execution {self.execution_id} of {self.job_name} was cancelled"
            )

    # -- test controls ---------------------------------------------------------------------------

    @property
    def locked_until(self) -> datetime:
        """The lock deadline: claim time + lock time, moved by each granted extension."""
        return self._locked_until

    @property
    def granted_extensions(self) -> list[LockExtension]:
        """The extensions that were granted."""
        return [extension for extension in self.lock_extensions if extension.granted]

    def cancel(self) -> None:
        """Request cancellation, as the workers do at shutdown: :attr:`cancelled` turns true."""
        self._cancelled = True

    def lose_lock(self) -> None:
        """Simulate a lost lock (another worker took the job): later extensions are refused and
        the execution is cancelled, as for a job with ``cancel_on_stale=True``."""
        self._lock_lost = True
        self._cancelled = True

    def _check_open(self) -> None:
        if self._finished:
            raise StepError(repr(self.job_name), None, "was called after its handler ended")
        if self._lock_lost:
            raise LockLostError(self.job_name, self.job_id, self.execution_id)

    def _check_steps(self) -> None:
        return None

    async def _record_step(
        self, index: int, name: str, result: Any, duration_ms: int
    ) -> RecordedStep:
        self._check_open()
        step = RecordedStep(name, result, self._clock.now(), self.execution_id, duration_ms)
        self.recorded_steps.append(step)
        return step

    async def _record_step_in_transaction(
        self, index: int, name: str, call: Callable[[Any], Any], stored: Callable[[object], Any]
    ) -> RecordedStep:
        # No database here: the function gets ``session=None`` (give it your own fake).
        started = self._clock.now()
        result = call(None)
        if inspect.isawaitable(result):
            result = await result
        elapsed = round((self._clock.now() - started).total_seconds() * 1000)
        return await self._record_step(index, name, stored(result), elapsed)

    async def _record_sleep(
        self, index: int, name: str, wake: timedelta | datetime
    ) -> tuple[RecordedStep, datetime | None]:
        # The run ends in the sleep as on a worker (Snooze, whose run_at is the wake-up); replay
        # past it with FakeJobContext(steps=ctx.recorded_steps).
        now = self._clock.now()
        until = to_millis(now + wake if isinstance(wake, timedelta) else wake)
        step = await self._record_step(index, name, until, 0)
        return step, until if until > now else None

    def _extend(self, duration: timedelta, *, automatic: bool) -> bool:
        now = self._clock.now()
        granted = not (self._lock_lost or self._finished or self.stale_timeout_cleared)
        if granted:
            self._locked_until = now + duration
        self.lock_extensions.append(LockExtension(duration, now, granted, automatic))
        return granted

    def _finish(self) -> None:
        self._finished = True
