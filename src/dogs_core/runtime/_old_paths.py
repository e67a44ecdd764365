"""The runtime's import paths before its four wings (release 0.1), kept one release.

``import dogs_core.runtime.workers`` (any path of the table) still works: it warns
(``DeprecationWarning``, naming the new path) and gives the module at its new place, the same
module object, so a class compared or an exception caught is the one the runtime uses. Remove
this module, and its install in ``runtime/__init__.py``, in the release after next.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

#: old path under ``dogs_core.runtime`` -> new path under it ("" is the package itself).
MOVED: dict[str, str] = {
    "_async": "client._async",
    "_async.advance": "plumbing._async.advance",
    "_async.archive": "client._async.archive",
    "_async.audit": "client._async.audit",
    "_async.bulk": "client._async.bulk",
    "_async.client": "client._async.client",
    "_async.clock_sync": "plumbing._async.clock_sync",
    "_async.following": "client._async.following",
    "_async.inspection": "client._async.inspection",
    "_async.pausing": "client._async.pausing",
    "_async.registry": "client._async.registry",
    "_async.retry": "plumbing._async.retry",
    "_async.schedules": "client._async.schedules",
    "_async.stats": "client._async.stats",
    "_async.steering": "client._async.steering",
    "_async.unique_scheduling": "client._async.unique_scheduling",
    "_async.workflows": "client._async.workflows",
    "_sync": "client._sync",
    "_sync.advance": "plumbing._sync.advance",
    "_sync.archive": "client._sync.archive",
    "_sync.audit": "client._sync.audit",
    "_sync.bulk": "client._sync.bulk",
    "_sync.client": "client._sync.client",
    "_sync.clock_sync": "plumbing._sync.clock_sync",
    "_sync.following": "client._sync.following",
    "_sync.inspection": "client._sync.inspection",
    "_sync.pausing": "client._sync.pausing",
    "_sync.registry": "client._sync.registry",
    "_sync.retry": "plumbing._sync.retry",
    "_sync.schedules": "client._sync.schedules",
    "_sync.stats": "client._sync.stats",
    "_sync.steering": "client._sync.steering",
    "_sync.unique_scheduling": "client._sync.unique_scheduling",
    "_sync.workflows": "client._sync.workflows",
    "actors": "plumbing.actors",
    "ahead": "worker.ahead",
    "batching": "plumbing.batching",
    "beacon": "worker.beacon",
    "blocking": "",
    "claiming": "worker.claiming",
    "clock": "plumbing.clock",
    "context": "execution.context",
    "deadlines": "plumbing.deadlines",
    "deferrals": "execution.deferrals",
    "execution": "execution.execution",
    "fleet": "worker.fleet",
    "forwarding": "plumbing.forwarding",
    "gates": "execution.gates",
    "health": "worker.health",
    "history_writes": "plumbing.history_writes",
    "holding": "execution.holding",
    "host": "worker.host",
    "invocation": "execution.invocation",
    "isolation": "plumbing.isolation",
    "job_events": "execution.job_events",
    "job_logs": "worker.job_logs",
    "lanes": "worker.lanes",
    "leases": "client.leases",
    "lock": "plumbing.lock",
    "log_capture": "execution.log_capture",
    "log_shipping": "plumbing.log_shipping",
    "loop": "plumbing.loop",
    "maintenance": "worker.maintenance",
    "milestones": "execution.milestones",
    "observing": "client.observing",
    "outage": "plumbing.outage",
    "progress": "execution.progress",
    "recording": "execution.recording",
    "releaser": "worker.releaser",
    "runners": "worker.runners",
    "schedule_book": "worker.schedule_book",
    "scheduling": "client.scheduling",
    "services": "execution.services",
    "settings": "plumbing.settings",
    "settle": "execution.settle",
    "shaping": "client.shaping",
    "signal": "plumbing.signal",
    "store_errors": "plumbing.store_errors",
    "takeover": "execution.takeover",
    "telemetry": "plumbing.telemetry",
    "threaded": "plumbing.threaded",
    "unique_windows": "execution.unique_windows",
    "verdicts": "execution.verdicts",
    "watching": "plumbing.watching",
    "workers": "worker.workers",
    "workflow_events": "plumbing.workflow_events",
}

_PREFIX = "dogs_core.runtime."


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
        if not fullname.startswith(_PREFIX):
            return None
        moved = MOVED.get(fullname.removeprefix(_PREFIX))
        if moved is None:
            return None
        new = f"{_PREFIX}{moved}" if moved else _PREFIX.rstrip(".")
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
