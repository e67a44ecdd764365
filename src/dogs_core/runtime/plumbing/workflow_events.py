"""The telemetry of what a workflow release wrote (shared by the releaser and the clients)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from dogs_core.domain.events import WorkflowFinished, WorkflowStepReleased
from dogs_core.domain.workflow_records import FinishedWorkflow, StepRelease
from dogs_core.runtime.plumbing.telemetry import Telemetry

__all__ = ["tell_advanced"]


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
