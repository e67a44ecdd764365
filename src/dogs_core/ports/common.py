"""What every role of the store port shares: the capabilities a store reports, the clock the
runtime computes on, and the one lookup of the roles a store has.

A store is the only coordination point between workers; the port is cut into roles (one module
each, named by the words the code and the docs use) so that a storage operation is written three
times by hand: its role here, the MongoDB store, the in-memory store. Everything else (the sync
twin of each role, the forwarding wrapper every store wrapper builds on) is generated from the
role modules by ``scripts/generate_sync.py`` and checked in CI.

Conventions every role follows:

Fencing
    Every write made on behalf of an execution matches both the record's id and the claim's
    ``lock_id``, and reports ``False`` when it matched nothing (the execution lost its lock).
Errors
    Adapters raise :class:`~dogs_core.errors.TransientStoreError` for conditions worth retrying
    (network, primary step-down, write conflict, timeout) and let anything else propagate.
    Refused input (a malformed batch, a negative ``limit``) raises ``ValueError``; the shared
    checks of :mod:`dogs_core.domain.batches`, :mod:`dogs_core.domain.settle` and
    :mod:`dogs_core.domain.validation` raise its subclass
    :class:`~dogs_core.errors.InvalidOptionError`, naming the field and the value, before
    anything is written.
Times
    Timezone-aware UTC ``datetime`` values; stores may truncate them to milliseconds.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Protocol

from dogs_core.errors import MissingRoleError

__all__ = [
    "OPTIONAL_ROLES",
    "REQUIRED_ROLES",
    "Clock",
    "Role",
    "StoreCapabilities",
    "check_role",
    "has_role",
    "store_roles",
]


class Role(enum.StrEnum):
    """The roles of the store port, one module of :mod:`dogs_core.ports` each."""

    SCHEDULING = "scheduling"
    """Inserting records (:mod:`dogs_core.ports.scheduling`)."""
    CLAIMS = "claims"
    """Taking due records and keeping their locks (:mod:`dogs_core.ports.claims`)."""
    SETTLE = "settle"
    """The fenced writes that end executions (:mod:`dogs_core.ports.settle`)."""
    HISTORY = "history"
    """The rows executions leave (:mod:`dogs_core.ports.history`)."""
    FEEDS = "feeds"
    """Change notifications (:mod:`dogs_core.ports.feeds`)."""
    STEERING = "steering"
    """The operators' reads and writes of records (:mod:`dogs_core.ports.steering`)."""
    STATS = "stats"
    """Counts of records and of history (:mod:`dogs_core.ports.stats`)."""
    CONTROLS = "controls"
    """Fleet-wide pauses, concurrency slots and rate windows (:mod:`dogs_core.ports.controls`)."""
    LEASES = "leases"
    """Distributed locks with fencing tokens (:mod:`dogs_core.ports.leases`)."""
    MAINTENANCE = "maintenance"
    """Setup, capabilities, the clock and upkeep (:mod:`dogs_core.ports.maintenance`)."""
    ARCHIVE = "archive"
    """Optional: moving old rows to archive collections (:mod:`dogs_core.ports.archive`)."""
    FOLLOWING = "following"
    """Optional: progress on records, executions' log lines (:mod:`dogs_core.ports.following`)."""
    WORKFLOWS = "workflows"
    """Optional: workflows and their steps (:mod:`dogs_core.ports.workflows`)."""
    UNIQUENESS = "uniqueness"
    """Optional: unique keys' windows, throttles, replace and debounce
    (:mod:`dogs_core.ports.uniqueness`)."""
    SCHEDULES = "schedules"
    """Optional: recurring schedules managed at run time (:mod:`dogs_core.ports.schedules`)."""
    INSPECTION = "inspection"
    """Optional: the operators' searches across jobs, errors and the archive
    (:mod:`dogs_core.ports.inspection`)."""

    # -- the operator's console (issue 29) --
    REGISTRY = "registry"
    """Optional: the workers' registry and their commands (:mod:`dogs_core.ports.registry`)."""
    AUDIT = "audit"
    """Optional: the operators' audit trail (:mod:`dogs_core.ports.audit`)."""
    BULK = "bulk"
    """Optional: bulk actions by filter, chunk by chunk (:mod:`dogs_core.ports.bulk`)."""

    # -- durable jobs (issue 37) --
    STEPS = "steps"
    """Optional: durable steps recorded on records (:mod:`dogs_core.ports.steps`)."""


#: The roles a store may lack: a feature that needs one raises
#: :class:`~dogs_core.errors.MissingRoleError` naming it.
OPTIONAL_ROLES: Final = frozenset(
    {
        Role.ARCHIVE,
        Role.FOLLOWING,
        Role.WORKFLOWS,
        Role.UNIQUENESS,
        Role.SCHEDULES,
        Role.REGISTRY,
        Role.AUDIT,
        Role.BULK,
        Role.INSPECTION,
        Role.STEPS,
    }
)

#: The roles every store has: :class:`~dogs_core.ports.store.AsyncJobStore` is their union.
REQUIRED_ROLES: Final = frozenset(Role) - OPTIONAL_ROLES


def has_role(store: object, role: Role) -> bool:
    """Whether ``store`` lists ``role`` (:func:`store_roles`, through every wrapper)."""
    return role in store_roles(store)


def check_role(store: object, role: Role, feature: str) -> None:
    """Raise :class:`~dogs_core.errors.MissingRoleError` naming ``feature`` unless ``store``
    lists ``role`` (:func:`store_roles`, through every wrapper). The one check behind
    :func:`~dogs_core.ports.store.require_role` and its sync twin."""
    if not has_role(store, role):
        raise MissingRoleError(role.value, feature, store)


def store_roles(store: object) -> frozenset[Role]:
    """The roles ``store`` has: its ``roles`` attribute, else the required ones.

    The one lookup for optional roles: a store that has one says so in ``roles``, and every
    store wrapper (forwarding, threaded, observed, faulty) reports the roles of what it wraps,
    so a caller asks the store in hand, never what it wraps."""
    roles = getattr(store, "roles", None)
    if roles is None:
        return REQUIRED_ROLES
    return frozenset(roles)


@dataclass(frozen=True, slots=True)
class StoreCapabilities:
    """What a store found out about its backend, once, after its indexes were set up.

    ``claim_path`` names the claim implementation in use (for logs and benchmarks), for example
    ``"sorted_update_one"``, ``"find_one_and_update"`` or ``"memory"``. ``supports_probe`` is
    false for a store whose probes mean nothing (the runtime then never probes).
    """

    claim_path: str
    supports_probe: bool = True
    server_version: str | None = None


class Clock(Protocol):
    """A clock. The runtime computes eligibility and lock deadlines on the store's clock: this
    one plus the offset it measures (:class:`dogs_core.runtime.plumbing.clock.ServerClock`)."""

    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        ...
