"""Durable steps (``ctx.step``): what a handler's run records, and how a later run of the same
job replays it (pure).

A step is a named call inside a handler whose result is kept on the job's record (the additive
``steps`` array, written fenced by the execution's lock) the first time it returns. Any later run
of the job (a retry, the takeover after a crash) walks its steps again in the same order: a step
already recorded hands back its result without calling the function; the first one not recorded
runs and is recorded. :class:`StepBook` is that walk for one run; it decides, the runtime writes.

Limits (each a :class:`~dogs_core.errors.StepError` naming the job and the step, raised before
anything is written): a name of 1 to :data:`MAX_STEP_NAME` characters, used once per run; a
result BSON can store, at most :data:`MAX_STEP_RESULT_BYTES` encoded; at most
:data:`MAX_STEPS` steps and :data:`MAX_STEPS_BYTES` of results per job (the record is one
MongoDB document, 16 MiB in all).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

from dogs_core.domain.params import bson_document_size, to_bson_storable
from dogs_core.domain.values import value
from dogs_core.errors import DogsError, NondeterminismError, StepError

__all__ = [
    "MAX_STEPS",
    "MAX_STEPS_BYTES",
    "MAX_STEP_NAME",
    "MAX_STEP_RESULT_BYTES",
    "RecordedStep",
    "StepBook",
]

MAX_STEP_NAME: Final = 200
"""The longest step name, in characters."""
MAX_STEP_RESULT_BYTES: Final = 256 * 1024
"""The largest result one step may record, as BSON."""
MAX_STEPS: Final = 1_000
"""The most steps one job may record."""
MAX_STEPS_BYTES: Final = 4 * 1024 * 1024
"""The most result bytes (as BSON) one job's steps may record in all."""


@value
class RecordedStep:
    """One step a run recorded: its name, its result as stored, when and by which execution,
    and how long its function ran (milliseconds)."""

    name: str
    result: Any
    recorded_at: datetime
    execution_id: str
    duration_ms: int = 0

    @property
    def size(self) -> int:
        """The result's size as BSON (what counts against the limits)."""
        return _result_size(self.result)


def _result_size(result: Any) -> int:
    return bson_document_size({"r": result}) - 8  # the wrapping document's own bytes


class StepBook:
    """The steps of one run of a job: those a previous run recorded (``recorded``, in order),
    then those this run records. :meth:`begin` says, for the step called next, whether its
    result is replayed (the :class:`RecordedStep`) or its function must run (``None``: then
    :meth:`check_result` and :meth:`recorded` follow once it returned)."""

    def __init__(self, job_name: str, job_id: str, recorded: Sequence[RecordedStep]) -> None:
        self._job_name, self._job_id = job_name, job_id
        self._steps: list[RecordedStep] = list(recorded)
        self._next = 0
        self._names: set[str] = set()
        self._bytes = sum(step.size for step in self._steps)
        self._running: str | None = None

    @property
    def next_index(self) -> int:
        """The position (from 0) of the step called next."""
        return self._next

    @property
    def steps(self) -> tuple[RecordedStep, ...]:
        """Every step recorded so far, the previous runs' and this run's."""
        return tuple(self._steps)

    def begin(self, name: object) -> RecordedStep | None:
        """Start step ``name``: its recorded step when a previous run recorded it (the walk
        moves past it), ``None`` when its function must run. Raises :class:`StepError` for a bad
        or reused name, a step begun while another runs, or one step too many, and
        :class:`NondeterminismError` when the recorded step at this position has another name."""
        checked = self._check_name(name)
        if self._running is not None:
            raise self._error(
                checked, f"begun while step {self._running!r} runs: steps run one at a time"
            )
        if checked in self._names:
            raise self._error(checked, "called twice in one run: give each step its own name")
        index = self._next
        if index < len(self._steps):
            recorded = self._steps[index]
            if recorded.name != checked:
                raise NondeterminismError(
                    self._job_name, self._job_id, index, recorded.name, checked
                )
            self._names.add(checked)
            self._next += 1
            return recorded
        if index >= MAX_STEPS:
            raise self._error(checked, f"one step too many: a job records at most {MAX_STEPS}")
        self._names.add(checked)
        self._running = checked
        return None

    def abandon(self) -> None:
        """The running step's function raised (or was cancelled): nothing is recorded, and a
        later run calls it again."""
        self._running = None

    def check_result(self, name: str, result: object) -> Any:
        """``result`` as it will be stored (a plain BSON-storable copy), or :class:`StepError`
        when it cannot be stored or is over a limit (the step stays not recorded)."""
        try:
            stored = to_bson_storable(result, path=f"step {name!r} result", job=self._job_name)
        except DogsError as error:
            self.abandon()
            raise self._error(name, f"returned a value that cannot be recorded: {error}") from None
        size = _result_size(stored)
        if size > MAX_STEP_RESULT_BYTES:
            self.abandon()
            raise self._error(
                name,
                f"returned {size} bytes as BSON; a step records at most {MAX_STEP_RESULT_BYTES} "
                "(keep large data in your own collection and return its id)",
            )
        if self._bytes + size > MAX_STEPS_BYTES:
            self.abandon()
            raise self._error(
                name, f"would take the job's step results past {MAX_STEPS_BYTES} bytes as BSON"
            )
        return stored

    def recorded(self, step: RecordedStep) -> None:
        """The running step's result was written: the walk moves past it."""
        assert self._running == step.name
        assert self._next == len(self._steps)
        self._steps.append(step)
        self._bytes += step.size
        self._next += 1
        self._running = None

    def _check_name(self, name: object) -> str:
        if not isinstance(name, str) or not name or len(name) > MAX_STEP_NAME:
            raise self._error(
                name, f"has no valid name: a string of 1 to {MAX_STEP_NAME} characters"
            )
        return name

    def _error(self, name: object, problem: str) -> StepError:
        return StepError(f"{self._job_name!r} ({self._job_id})", name, problem)
