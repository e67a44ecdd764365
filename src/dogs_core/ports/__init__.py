"""The ports: everything the runtime and the scheduling API need from the outside world.

The job store is cut into roles, one module each, declared once (async):
:mod:`~dogs_core.ports.scheduling`, :mod:`~dogs_core.ports.claims`,
:mod:`~dogs_core.ports.settle`, :mod:`~dogs_core.ports.history`, :mod:`~dogs_core.ports.feeds`,
:mod:`~dogs_core.ports.steering`, :mod:`~dogs_core.ports.stats`,
:mod:`~dogs_core.ports.controls`, :mod:`~dogs_core.ports.leases`,
:mod:`~dogs_core.ports.maintenance`, and the optional :mod:`~dogs_core.ports.archive`,
:mod:`~dogs_core.ports.following`, :mod:`~dogs_core.ports.workflows`,
:mod:`~dogs_core.ports.uniqueness`, :mod:`~dogs_core.ports.schedules`,
:mod:`~dogs_core.ports.registry`, :mod:`~dogs_core.ports.audit`, :mod:`~dogs_core.ports.bulk`,
:mod:`~dogs_core.ports.inspection` and :mod:`~dogs_core.ports.steps`.
:class:`AsyncJobStore` is the union of the required ones; what the conventions of every role
are (fencing, errors, times) is in :mod:`dogs_core.ports.common`.

Everything else is generated from the role modules by ``scripts/generate_sync.py`` and checked
in CI: the sync twins (:class:`JobStore` and ``ClaimStore``..., in ``ports/_sync``, which the
blocking :class:`~dogs_core.runtime.client._sync.client.SyncDogsClient` calls in the caller's
thread)
and :class:`~dogs_core.runtime.plumbing.forwarding.ForwardingJobStore`, the base of every store
wrapper
(:class:`~dogs_core.runtime.plumbing.wrappers.ThreadedJobStore` runs a sync store's calls in worker
threads for the async runtime). A store tells which roles it has through one lookup,
:func:`store_roles`.
"""

from dogs_core.ports._sync.archive import ArchiveStore
from dogs_core.ports._sync.audit import AuditStore
from dogs_core.ports._sync.bulk import BulkStore
from dogs_core.ports._sync.claims import ClaimStore
from dogs_core.ports._sync.controls import ControlStore
from dogs_core.ports._sync.feeds import FeedStore
from dogs_core.ports._sync.following import FollowingStore
from dogs_core.ports._sync.history import HistoryStore
from dogs_core.ports._sync.inspection import InspectionStore
from dogs_core.ports._sync.leases import LeaseStore
from dogs_core.ports._sync.maintenance import MaintenanceStore
from dogs_core.ports._sync.registry import RegistryStore
from dogs_core.ports._sync.schedules import ScheduleStore
from dogs_core.ports._sync.scheduling import SchedulingStore
from dogs_core.ports._sync.settle import SettleStore
from dogs_core.ports._sync.stats import StatsStore
from dogs_core.ports._sync.steering import SteeringStore
from dogs_core.ports._sync.steps import StepStore
from dogs_core.ports._sync.store import JobStore
from dogs_core.ports._sync.uniqueness import UniquenessStore
from dogs_core.ports._sync.workflows import WorkflowStore
from dogs_core.ports.archive import AsyncArchiveStore
from dogs_core.ports.audit import AsyncAuditStore
from dogs_core.ports.bulk import AsyncBulkStore
from dogs_core.ports.claims import AsyncClaimStore
from dogs_core.ports.common import (
    OPTIONAL_ROLES,
    REQUIRED_ROLES,
    Clock,
    Role,
    StoreCapabilities,
    has_role,
    store_roles,
)
from dogs_core.ports.controls import AsyncControlStore
from dogs_core.ports.feeds import AsyncFeedStore
from dogs_core.ports.following import AsyncFollowingStore
from dogs_core.ports.history import AsyncHistoryStore
from dogs_core.ports.inspection import AsyncInspectionStore
from dogs_core.ports.leases import AsyncLeaseStore
from dogs_core.ports.maintenance import AsyncMaintenanceStore
from dogs_core.ports.registry import AsyncRegistryStore
from dogs_core.ports.schedules import AsyncScheduleStore
from dogs_core.ports.scheduling import AsyncSchedulingStore
from dogs_core.ports.settle import AsyncSettleStore
from dogs_core.ports.stats import AsyncStatsStore
from dogs_core.ports.steering import AsyncSteeringStore
from dogs_core.ports.steps import AsyncStepStore
from dogs_core.ports.store import AsyncJobStore, require_role
from dogs_core.ports.uniqueness import AsyncUniquenessStore
from dogs_core.ports.workflows import AsyncWorkflowStore

__all__ = [
    "OPTIONAL_ROLES",
    "REQUIRED_ROLES",
    "ArchiveStore",
    "AsyncArchiveStore",
    "AsyncAuditStore",
    "AsyncBulkStore",
    "AsyncClaimStore",
    "AsyncControlStore",
    "AsyncFeedStore",
    "AsyncFollowingStore",
    "AsyncHistoryStore",
    "AsyncInspectionStore",
    "AsyncJobStore",
    "AsyncLeaseStore",
    "AsyncMaintenanceStore",
    "AsyncRegistryStore",
    "AsyncScheduleStore",
    "AsyncSchedulingStore",
    "AsyncSettleStore",
    "AsyncStatsStore",
    "AsyncSteeringStore",
    "AsyncStepStore",
    "AsyncUniquenessStore",
    "AsyncWorkflowStore",
    "AuditStore",
    "BulkStore",
    "ClaimStore",
    "Clock",
    "ControlStore",
    "FeedStore",
    "FollowingStore",
    "HistoryStore",
    "InspectionStore",
    "JobStore",
    "LeaseStore",
    "MaintenanceStore",
    "RegistryStore",
    "Role",
    "ScheduleStore",
    "SchedulingStore",
    "SettleStore",
    "StatsStore",
    "SteeringStore",
    "StepStore",
    "StoreCapabilities",
    "UniquenessStore",
    "WorkflowStore",
    "has_role",
    "require_role",
    "store_roles",
]
