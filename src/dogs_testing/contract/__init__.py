"""The job-store contract: one pytest suite every store must pass (ours and a user's).

Subclass :class:`JobStoreContract` in a test module (the subclass name must start with ``Test``)
and provide a ``store`` fixture (``anyio_backend`` has a default):

``store``
    A fresh, empty, set-up :class:`~dogs_core.ports.AsyncJobStore` for each test (a sync
    :class:`~dogs_core.ports.JobStore` wrapped in
    :class:`~dogs_core.runtime.plumbing.wrappers.ThreadedJobStore`). May be an async (generator)
    fixture.
``anyio_backend``
    ``"asyncio"`` unless overridden (PyMongo's async client needs asyncio); override it with
    ``"trio"`` or a parametrized fixture to run the suite on other backends.

Optionally override :meth:`JobStoreContract.seed_record` to insert a raw record: a few tests need
shapes the port never writes (a missing partition, a recurrent record with a legacy
``maxTriesReached`` status, a terminal record without its retention anchor); they are skipped
when the store cannot seed. ``probe_hints`` lists the hint names the store must accept.
``knows_previous_attempt`` (``True`` by default) says that every stale claim hands out the
``previous_attempt`` it took over; a store that cannot know it sets it to ``False`` (the port
lets it leave ``None``).

One module per role of the port, as the port itself (:mod:`dogs_core.ports`) and our two
stores are cut: :mod:`~dogs_testing.contract.scheduling`, ``.claims``, ``.settle``,
``.history``, ``.feeds``, ``.steering``, ``.stats``, ``.controls``, ``.leases``,
``.maintenance``; each part is a class of its own (``SettleContract``...), so a store being
written can run the parts of the roles it has so far. The optional archive role has its own
part, :class:`ArchiveContract` (:mod:`dogs_testing.contract.archive`), for a store that lists
:attr:`~dogs_core.ports.Role.ARCHIVE` in its ``roles``; so has the optional following role,
:class:`FollowingContract` (:mod:`dogs_testing.contract.following`), for a store that lists
:attr:`~dogs_core.ports.Role.FOLLOWING`; so has the optional workflows role,
:class:`WorkflowContract` (:mod:`dogs_testing.contract.workflows`); and so have the optional
uniqueness and schedules roles, :class:`UniquenessContract` and :class:`SchedulesContract`
(:mod:`dogs_testing.contract.shaping`, whose :class:`ShapedFieldsContract` part, the additive
record fields, is in the whole suite); so has the optional inspection role,
:class:`InspectionContract` (:mod:`dogs_testing.contract.inspection`); so has the optional
steps role, :class:`StepsContract` (:mod:`dogs_testing.contract.steps`).

Example::

    class TestMyStore(JobStoreContract):
        @pytest.fixture
        async def store(self) -> AsyncIterator[AsyncJobStore]:
            store = MyStore(...)
            await store.setup()
            yield store
            await store.close()

Every test uses explicit times around :data:`T0` (far in the future, so a real TTL monitor never
deletes a row during a test) and never sleeps; the feed tests
(:mod:`dogs_testing.contract.feeds`) wait for what a feed reports, under a generous safety
timeout, and the release tests use the real current time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, cast

import pytest

from dogs_core.ports import AsyncJobStore, Role, store_roles
from dogs_core.runtime.plumbing.wrappers import ThreadedJobStore
from dogs_testing.contract.archive import ArchiveContract, ArchiveUnderTest, ThreadedArchive
from dogs_testing.contract.audit import AuditContract
from dogs_testing.contract.base import T0, ContractBase
from dogs_testing.contract.bulk import BulkContract
from dogs_testing.contract.claims import ClaimContract
from dogs_testing.contract.controls import ControlsContract
from dogs_testing.contract.feeds import FeedContract
from dogs_testing.contract.following import FollowingContract
from dogs_testing.contract.history import HistoryContract
from dogs_testing.contract.inspection import InspectionContract
from dogs_testing.contract.leases import LeaseContract
from dogs_testing.contract.maintenance import MaintenanceContract
from dogs_testing.contract.registry import RegistryContract
from dogs_testing.contract.scheduling import SchedulingContract
from dogs_testing.contract.settle import SettleContract
from dogs_testing.contract.shaping import (
    SchedulesContract,
    ShapedFieldsContract,
    UniquenessContract,
)
from dogs_testing.contract.stats import StatsContract
from dogs_testing.contract.steering import SteeringContract
from dogs_testing.contract.steps import StepsContract
from dogs_testing.contract.workflows import WorkflowContract

__all__ = [
    "PART_ROLES",
    "T0",
    "ArchiveContract",
    "ArchiveUnderTest",
    "AuditContract",
    "BulkContract",
    "ClaimContract",
    "ControlsContract",
    "FeedContract",
    "FollowingContract",
    "HistoryContract",
    "InspectionContract",
    "JobStoreContract",
    "LeaseContract",
    "MaintenanceContract",
    "RegistryContract",
    "SchedulesContract",
    "SchedulingContract",
    "SettleContract",
    "ShapedFieldsContract",
    "StatsContract",
    "SteeringContract",
    "StepsContract",
    "StoreContract",
    "ThreadedArchive",
    "UniquenessContract",
    "WorkflowContract",
]


class JobStoreContract(
    SchedulingContract,
    ClaimContract,
    SettleContract,
    HistoryContract,
    FeedContract,
    SteeringContract,
    StatsContract,
    ControlsContract,
    LeaseContract,
    MaintenanceContract,
    ShapedFieldsContract,
):
    """The adapter contract suite: one part per required role of :mod:`dogs_core.ports`, each
    also usable alone (a store under construction may run the parts of the roles it has). See
    the module documentation for how to run it; the fixtures, hooks and helpers come from
    :class:`dogs_testing.contract.base.ContractBase`."""


#: The roles each part of the suite tests (a store must list all of them for the part to run).
PART_ROLES: Final[Mapping[type[ContractBase], frozenset[Role]]] = {
    SchedulingContract: frozenset({Role.SCHEDULING}),
    ClaimContract: frozenset({Role.CLAIMS}),
    SettleContract: frozenset({Role.SETTLE}),
    HistoryContract: frozenset({Role.HISTORY}),
    FeedContract: frozenset({Role.FEEDS}),
    SteeringContract: frozenset({Role.STEERING}),
    StatsContract: frozenset({Role.STATS}),
    ControlsContract: frozenset({Role.CONTROLS}),
    LeaseContract: frozenset({Role.LEASES}),
    MaintenanceContract: frozenset({Role.MAINTENANCE}),
    ShapedFieldsContract: frozenset({Role.SCHEDULING}),
    ArchiveContract: frozenset({Role.ARCHIVE}),
    FollowingContract: frozenset({Role.FOLLOWING}),
    InspectionContract: frozenset({Role.INSPECTION, Role.ARCHIVE}),
    WorkflowContract: frozenset({Role.WORKFLOWS}),
    UniquenessContract: frozenset({Role.UNIQUENESS}),
    SchedulesContract: frozenset({Role.SCHEDULES}),
    BulkContract: frozenset({Role.BULK}),
    RegistryContract: frozenset({Role.REGISTRY}),
    AuditContract: frozenset({Role.AUDIT}),
    StepsContract: frozenset({Role.STEPS}),
}


def _roles_of(test_class: type, name: str) -> frozenset[Role]:
    """The roles the part that defines the test ``name`` of ``test_class`` calls for (none for
    a test of the user's own)."""
    for klass in test_class.__mro__:
        if name in vars(klass):
            return PART_ROLES.get(klass, frozenset())
    return frozenset()


class StoreContract(
    JobStoreContract,
    ArchiveContract,
    FollowingContract,
    InspectionContract,
    WorkflowContract,
    UniquenessContract,
    SchedulesContract,
    BulkContract,
    RegistryContract,
    AuditContract,
    StepsContract,
):
    """The one entry point of the contract: every part of the suite, each run when the store
    lists the roles it calls for (:data:`PART_ROLES`, :func:`~dogs_core.ports.store_roles`)
    and skipped, saying which role is missing, when it does not. Subclass it (the name must
    start with ``Test``) and provide the ``store`` fixture, as for :class:`JobStoreContract`;
    a store with optional roles is set up for them too (``setup_archive()``...).

    The ``archive`` fixture of :class:`ArchiveContract` (the archive port plus two test hooks,
    :class:`ArchiveUnderTest`) defaults to the store itself when it has the hooks, or for a
    :class:`~dogs_core.runtime.plumbing.wrappers.ThreadedJobStore` to a
    :class:`ThreadedArchive` of the sync store it runs in threads; override it for a store
    whose archive is another object (a wrapper: the store it wraps), else the archive tests
    are skipped, saying so. Every run collects the same tests whatever the store, so
    the number of tests run and skipped says how much of the port a store has."""

    @pytest.fixture(autouse=True)
    def _declared_roles(self, request: pytest.FixtureRequest, store: AsyncJobStore) -> None:
        missing = _roles_of(type(self), request.function.__name__) - store_roles(store)
        if missing:
            names = ", ".join(sorted(role.value for role in missing))
            pytest.skip(f"the store does not list the role(s) {names} in its roles")

    @pytest.fixture
    def archive(self, store: AsyncJobStore) -> ArchiveUnderTest:
        if isinstance(store, ThreadedJobStore):
            return cast(ArchiveUnderTest, ThreadedArchive(store.sync_store))
        if isinstance(store, ArchiveUnderTest):
            return store
        pytest.skip(
            "the archive part drives the store's copy_batch and archived_keys test hooks, "
            "which this store lacks: override the archive fixture"
        )
