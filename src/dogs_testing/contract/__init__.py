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
:class:`InspectionContract` (:mod:`dogs_testing.contract.inspection`).

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

from dogs_testing.contract.archive import ArchiveContract, ArchiveUnderTest, ThreadedArchive
from dogs_testing.contract.base import T0
from dogs_testing.contract.claims import ClaimContract
from dogs_testing.contract.controls import ControlsContract
from dogs_testing.contract.feeds import FeedContract
from dogs_testing.contract.following import FollowingContract
from dogs_testing.contract.history import HistoryContract
from dogs_testing.contract.inspection import InspectionContract
from dogs_testing.contract.leases import LeaseContract
from dogs_testing.contract.maintenance import MaintenanceContract
from dogs_testing.contract.scheduling import SchedulingContract
from dogs_testing.contract.settle import SettleContract
from dogs_testing.contract.shaping import (
    SchedulesContract,
    ShapedFieldsContract,
    UniquenessContract,
)
from dogs_testing.contract.stats import StatsContract
from dogs_testing.contract.steering import SteeringContract
from dogs_testing.contract.workflows import WorkflowContract

__all__ = [
    "T0",
    "ArchiveContract",
    "ArchiveUnderTest",
    "ClaimContract",
    "ControlsContract",
    "FeedContract",
    "FollowingContract",
    "HistoryContract",
    "InspectionContract",
    "JobStoreContract",
    "LeaseContract",
    "MaintenanceContract",
    "SchedulesContract",
    "SchedulingContract",
    "SettleContract",
    "ShapedFieldsContract",
    "StatsContract",
    "SteeringContract",
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
