"""The telemetry of what a workflow release wrote (shared by the releaser and the clients)."""

from __future__ import annotations

from dogs_core.domain.events import WorkflowFinished, WorkflowStepReleased
from dogs_core.runtime._async.advance import Advanced as AsyncAdvanced
from dogs_core.runtime._sync.advance import Advanced as SyncAdvanced
from dogs_core.runtime.telemetry import Telemetry

__all__ = ["tell_advanced"]


def tell_advanced(telemetry: Telemetry, advanced: AsyncAdvanced | SyncAdvanced) -> None:
    """A :class:`WorkflowStepReleased` per step released and a :class:`WorkflowFinished` per
    workflow ended by the call that returned ``advanced`` (nothing when nobody listens)."""
    if not telemetry.active:
        return
    for release in advanced.released:
        telemetry.emit(
            WorkflowStepReleased(release.workflow_id, release.step_id, release.record_id)
        )
    for finished in advanced.finished:
        telemetry.emit(WorkflowFinished(finished.workflow_id, finished.state.value))
