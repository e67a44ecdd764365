"""The job store: every required role in one protocol. The runtime and the clients consume
:class:`AsyncJobStore`; a custom adapter implements it (and ``dogs_testing.contract`` checks it,
one part per role)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from dogs_core.ports.claims import AsyncClaimStore
from dogs_core.ports.controls import AsyncControlStore
from dogs_core.ports.feeds import AsyncFeedStore
from dogs_core.ports.history import AsyncHistoryStore
from dogs_core.ports.leases import AsyncLeaseStore
from dogs_core.ports.maintenance import AsyncMaintenanceStore
from dogs_core.ports.scheduling import AsyncSchedulingStore
from dogs_core.ports.settle import AsyncSettleStore
from dogs_core.ports.stats import AsyncStatsStore
from dogs_core.ports.steering import AsyncSteeringStore

__all__ = ["AsyncJobStore"]


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
