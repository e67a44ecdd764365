"""The job store: every required role in one protocol. The runtime and the clients consume
:class:`AsyncJobStore`; a custom adapter implements it (and ``dogs_testing.contract`` checks it,
one part per role)."""

from __future__ import annotations

from typing import Literal, Protocol, overload, runtime_checkable

from dogs_core.ports.archive import AsyncArchiveStore
from dogs_core.ports.audit import AsyncAuditStore
from dogs_core.ports.bulk import AsyncBulkStore
from dogs_core.ports.claims import AsyncClaimStore
from dogs_core.ports.common import Role, check_role
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
from dogs_core.ports.uniqueness import AsyncUniquenessStore
from dogs_core.ports.workflows import AsyncWorkflowStore

__all__ = ["AsyncJobStore", "require_role"]


@runtime_checkable
class AsyncJobStore(
    AsyncSchedulingStore,
    AsyncClaimStore,
    AsyncSettleStore,
    AsyncHistoryStore,
    AsyncFeedStore,
    AsyncSteeringStore,
    AsyncStatsStore,
    AsyncControlStore,
    AsyncLeaseStore,
    AsyncMaintenanceStore,
    Protocol,
):
    """The async job-store port: the union of the required roles
    (:data:`~dogs_core.ports.common.REQUIRED_ROLES`)."""


@overload
def require_role(store: object, role: Literal[Role.ARCHIVE], feature: str) -> AsyncArchiveStore: ...


@overload
def require_role(
    store: object, role: Literal[Role.FOLLOWING], feature: str
) -> AsyncFollowingStore: ...


@overload
def require_role(
    store: object, role: Literal[Role.WORKFLOWS], feature: str
) -> AsyncWorkflowStore: ...


@overload
def require_role(
    store: object, role: Literal[Role.UNIQUENESS], feature: str
) -> AsyncUniquenessStore: ...


@overload
def require_role(
    store: object, role: Literal[Role.SCHEDULES], feature: str
) -> AsyncScheduleStore: ...


@overload
def require_role(
    store: object, role: Literal[Role.REGISTRY], feature: str
) -> AsyncRegistryStore: ...


@overload
def require_role(store: object, role: Literal[Role.AUDIT], feature: str) -> AsyncAuditStore: ...


@overload
def require_role(store: object, role: Literal[Role.BULK], feature: str) -> AsyncBulkStore: ...


@overload
def require_role(
    store: object, role: Literal[Role.INSPECTION], feature: str
) -> AsyncInspectionStore: ...


@overload
def require_role(store: object, role: Literal[Role.STEPS], feature: str) -> AsyncStepStore: ...


def require_role(store: object, role: Role, feature: str) -> object:
    """``store`` as the port of its optional ``role``, typed by the role; raises
    :class:`~dogs_core.errors.MissingRoleError` naming ``feature`` when the store does not list
    it (:func:`~dogs_core.ports.common.check_role`). The one way a client part, a worker or a
    tool asks for an optional role."""
    check_role(store, role, feature)
    return store
