"""Import paths that moved in the third cut of the house (release 0.1), kept one release.

``import dogs_core.runtime.workers`` or ``import dogs_mongo.cli.common`` (any path of the
tables) still works: it warns (``DeprecationWarning``, naming the new path) and gives the module
at its new place, the same module object, so a class compared or an exception caught is the one
the library uses. ``dogs_core`` installs the finder on import. Remove this module in the release
after next.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

#: old module -> new module: the runtime's modules before its four wings.
MOVED: dict[str, str] = {
    "dogs_core.runtime._async": "dogs_core.runtime.client._async",
    "dogs_core.runtime._async.advance": "dogs_core.runtime.plumbing._async.advance",
    "dogs_core.runtime._async.archive": "dogs_core.runtime.client._async.archive",
    "dogs_core.runtime._async.audit": "dogs_core.runtime.client._async.audit",
    "dogs_core.runtime._async.bulk": "dogs_core.runtime.client._async.bulk",
    "dogs_core.runtime._async.client": "dogs_core.runtime.client._async.client",
    "dogs_core.runtime._async.clock_sync": "dogs_core.runtime.plumbing._async.clock_sync",
    "dogs_core.runtime._async.following": "dogs_core.runtime.client._async.following",
    "dogs_core.runtime._async.inspection": "dogs_core.runtime.client._async.inspection",
    "dogs_core.runtime._async.pausing": "dogs_core.runtime.client._async.pausing",
    "dogs_core.runtime._async.registry": "dogs_core.runtime.client._async.registry",
    "dogs_core.runtime._async.retry": "dogs_core.runtime.plumbing._async.retry",
    "dogs_core.runtime._async.schedules": "dogs_core.runtime.client._async.schedules",
    "dogs_core.runtime._async.stats": "dogs_core.runtime.client._async.stats",
    "dogs_core.runtime._async.steering": "dogs_core.runtime.client._async.steering",
    "dogs_core.runtime._async.unique_scheduling": (
        "dogs_core.runtime.client._async.unique_scheduling"
    ),
    "dogs_core.runtime._async.workflows": "dogs_core.runtime.client._async.workflows",
    "dogs_core.runtime._sync": "dogs_core.runtime.client._sync",
    "dogs_core.runtime._sync.advance": "dogs_core.runtime.plumbing._sync.advance",
    "dogs_core.runtime._sync.archive": "dogs_core.runtime.client._sync.archive",
    "dogs_core.runtime._sync.audit": "dogs_core.runtime.client._sync.audit",
    "dogs_core.runtime._sync.bulk": "dogs_core.runtime.client._sync.bulk",
    "dogs_core.runtime._sync.client": "dogs_core.runtime.client._sync.client",
    "dogs_core.runtime._sync.clock_sync": "dogs_core.runtime.plumbing._sync.clock_sync",
    "dogs_core.runtime._sync.following": "dogs_core.runtime.client._sync.following",
    "dogs_core.runtime._sync.inspection": "dogs_core.runtime.client._sync.inspection",
    "dogs_core.runtime._sync.pausing": "dogs_core.runtime.client._sync.pausing",
    "dogs_core.runtime._sync.registry": "dogs_core.runtime.client._sync.registry",
    "dogs_core.runtime._sync.retry": "dogs_core.runtime.plumbing._sync.retry",
    "dogs_core.runtime._sync.schedules": "dogs_core.runtime.client._sync.schedules",
    "dogs_core.runtime._sync.stats": "dogs_core.runtime.client._sync.stats",
    "dogs_core.runtime._sync.steering": "dogs_core.runtime.client._sync.steering",
    "dogs_core.runtime._sync.unique_scheduling": (
        "dogs_core.runtime.client._sync.unique_scheduling"
    ),
    "dogs_core.runtime._sync.workflows": "dogs_core.runtime.client._sync.workflows",
    "dogs_core.runtime.actors": "dogs_core.runtime.plumbing.actors",
    "dogs_core.runtime.ahead": "dogs_core.runtime.worker.ahead",
    "dogs_core.runtime.batching": "dogs_core.runtime.plumbing.batching",
    "dogs_core.runtime.beacon": "dogs_core.runtime.worker.beacon",
    "dogs_core.runtime.blocking": "dogs_core.runtime",
    "dogs_core.runtime.claiming": "dogs_core.runtime.worker.claiming",
    "dogs_core.runtime.clock": "dogs_core.runtime.plumbing.clock",
    "dogs_core.runtime.context": "dogs_core.runtime.execution.context",
    "dogs_core.runtime.deadlines": "dogs_core.runtime.plumbing.deadlines",
    "dogs_core.runtime.deferrals": "dogs_core.runtime.execution.arrival",
    "dogs_core.runtime.execution": "dogs_core.runtime.execution.execution",
    "dogs_core.runtime.fleet": "dogs_core.runtime.worker.fleet",
    "dogs_core.runtime.forwarding": "dogs_core.runtime.plumbing.forwarding",
    "dogs_core.runtime.gates": "dogs_core.runtime.execution.gates",
    "dogs_core.runtime.health": "dogs_core.runtime.worker.health",
    "dogs_core.runtime.history_writes": "dogs_core.runtime.plumbing.writers",
    "dogs_core.runtime.holding": "dogs_core.runtime.execution.holding",
    "dogs_core.runtime.host": "dogs_core.runtime.worker.host",
    "dogs_core.runtime.invocation": "dogs_core.runtime.execution.invocation",
    "dogs_core.runtime.isolation": "dogs_core.runtime.plumbing.loop",
    "dogs_core.runtime.job_events": "dogs_core.runtime.execution.services",
    "dogs_core.runtime.job_logs": "dogs_core.runtime.worker.job_logs",
    "dogs_core.runtime.lanes": "dogs_core.runtime.worker.lanes",
    "dogs_core.runtime.leases": "dogs_core.runtime.client.leases",
    "dogs_core.runtime.lock": "dogs_core.runtime.plumbing.lock",
    "dogs_core.runtime.log_capture": "dogs_core.runtime.execution.log_capture",
    "dogs_core.runtime.log_shipping": "dogs_core.runtime.plumbing.writers",
    "dogs_core.runtime.loop": "dogs_core.runtime.plumbing.loop",
    "dogs_core.runtime.maintenance": "dogs_core.runtime.worker.maintenance",
    "dogs_core.runtime.milestones": "dogs_core.runtime.execution.services",
    "dogs_core.runtime.observing": "dogs_core.runtime.client.observing",
    "dogs_core.runtime.outage": "dogs_core.runtime.plumbing.outage",
    "dogs_core.runtime.progress": "dogs_core.runtime.execution.progress",
    "dogs_core.runtime.recording": "dogs_core.runtime.execution.ending",
    "dogs_core.runtime.releaser": "dogs_core.runtime.worker.releaser",
    "dogs_core.runtime.runners": "dogs_core.runtime.worker.runners",
    "dogs_core.runtime.schedule_book": "dogs_core.runtime.worker.schedule_book",
    "dogs_core.runtime.scheduling": "dogs_core.runtime.client.scheduling",
    "dogs_core.runtime.services": "dogs_core.runtime.execution.services",
    "dogs_core.runtime.settings": "dogs_core.runtime.plumbing.settings",
    "dogs_core.runtime.settle": "dogs_core.runtime.execution.settle",
    "dogs_core.runtime.shaping": "dogs_core.runtime.client.shaping",
    "dogs_core.runtime.signal": "dogs_core.runtime.plumbing.loop",
    "dogs_core.runtime.store_errors": "dogs_core.runtime.plumbing.wrappers",
    "dogs_core.runtime.takeover": "dogs_core.runtime.execution.arrival",
    "dogs_core.runtime.telemetry": "dogs_core.runtime.plumbing.telemetry",
    "dogs_core.runtime.threaded": "dogs_core.runtime.plumbing.wrappers",
    "dogs_core.runtime.unique_windows": "dogs_core.runtime.execution.ending",
    "dogs_core.runtime.verdicts": "dogs_core.runtime.execution.ending",
    "dogs_core.runtime.watching": "dogs_core.runtime.plumbing.watching",
    "dogs_core.runtime.workers": "dogs_core.runtime.worker.workers",
    "dogs_core.runtime.workflow_events": "dogs_core.runtime.plumbing.telemetry",
}

#: old package prefix -> new one: the CLI left the MongoDB adapter for a package of its own.
MOVED_PACKAGES: dict[str, str] = {"dogs_mongo.cli": "dogs_cli"}


def new_path(old: str) -> str | None:
    """Where the module ``old`` is now, or ``None`` when it did not move."""
    if old in MOVED:
        return MOVED[old]
    for prefix, new in MOVED_PACKAGES.items():
        if old == prefix or old.startswith(prefix + "."):
            return new + old.removeprefix(prefix)
    return None


class _Alias(importlib.abc.Loader):
    def __init__(self, new: str) -> None:
        self._new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self._new)

    def exec_module(self, module: ModuleType) -> None:
        """The module at its new place is already executed."""


class _OldPaths(importlib.abc.MetaPathFinder):
    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        new = new_path(fullname)
        if new is None:
            return None
        warnings.warn(
            f"{fullname} moved to {new}; the old path goes in the release after next",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.machinery.ModuleSpec(fullname, _Alias(new))


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, _OldPaths) for finder in sys.meta_path):
        sys.meta_path.insert(0, _OldPaths())
