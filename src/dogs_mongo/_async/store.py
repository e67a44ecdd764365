"""The MongoDB job store on PyMongo's ``AsyncMongoClient``: the collections and options, and
one base class per role of the port (``scheduling.py``, ``claims.py``, ``settle.py``,
``history.py``, ``feeds.py``, ``steering.py``, ``stats.py``, ``controls.py``, ``leases.py``,
``maintenance.py``, ``archive.py``, ``following.py``, ``workflows.py``, ``uniqueness.py``,
``schedules.py``, ``registry.py``, ``audit.py``, ``bulk.py``, ``inspection.py``, ``steps.py``),
which share
them.

The async adapter (``_async/store.py``) is the source of truth; the sync adapter
(``_sync/store.py``) is generated from it by ``scripts/generate_sync.py`` (unasync): edit the
async file, then regenerate. Every document it sends is built by
:mod:`dogs_mongo.queries`; every transient failure is raised as
:class:`~dogs_core.errors.TransientStoreError` (see :mod:`dogs_mongo.errors`).
"""

from __future__ import annotations

import logging
from datetime import UTC
from typing import Any, Final

import anyio
from bson.codec_options import CodecOptions
from pymongo import AsyncMongoClient, ReadPreference
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.read_concern import ReadConcern
from pymongo.write_concern import WriteConcern

from dogs_core.domain import validation
from dogs_core.errors import InvalidOptionError
from dogs_core.ports import Role, StoreCapabilities
from dogs_mongo import queries as q
from dogs_mongo._async.archive import MongoArchiver
from dogs_mongo._async.audit import MongoAudit
from dogs_mongo._async.bulk import MongoBulk
from dogs_mongo._async.claims import MongoClaims
from dogs_mongo._async.controls import MongoControls
from dogs_mongo._async.feeds import MongoFeeds
from dogs_mongo._async.following import MongoFollowing
from dogs_mongo._async.history import MongoHistory
from dogs_mongo._async.inspection import MongoInspection
from dogs_mongo._async.leases import MongoLeases
from dogs_mongo._async.maintenance import MongoMaintenance
from dogs_mongo._async.registry import MongoRegistry
from dogs_mongo._async.schedules import MongoSchedules
from dogs_mongo._async.scheduling import MongoScheduling
from dogs_mongo._async.settle import MongoSettle
from dogs_mongo._async.stats import MongoStats
from dogs_mongo._async.steering import MongoSteering
from dogs_mongo._async.steps import MongoSteps
from dogs_mongo._async.uniqueness import MongoUniqueness
from dogs_mongo._async.workflows import MongoWorkflows
from dogs_mongo.client_check import refuse_motor
from dogs_mongo.queries import uniqueness as qu
from dogs_mongo.queries import workflows as qw
from dogs_mongo.queries.claims import (
    CLAIM_PATH_FIND_ONE_AND_UPDATE,
    CLAIM_PATH_SORTED_UPDATE_ONE,
    choose_claim_path,
)

__all__ = [
    "CLAIM_PATH_FIND_ONE_AND_UPDATE",
    "CLAIM_PATH_SORTED_UPDATE_ONE",
    "AsyncMongoJobStore",
    "choose_claim_path",
]

log = logging.getLogger("dogs.mongo.store")

_CODEC_OPTIONS: CodecOptions[dict[str, Any]] = CodecOptions(
    document_class=dict, tz_aware=True, tzinfo=UTC
)

Document = dict[str, Any]

#: The rows a settlement batch carries are sent with ``w: 1``: the settlements sent after them
#: with the store's write concern carry their durability (see ``MongoSettle.settle_many``).
_ROWS_BEFORE_SETTLEMENTS: Final = WriteConcern(w=1)


class AsyncMongoJobStore(
    MongoScheduling,
    MongoClaims,
    MongoSettle,
    MongoHistory,
    MongoFeeds,
    MongoSteering,
    MongoStats,
    MongoControls,
    MongoLeases,
    MongoMaintenance,
    MongoArchiver,
    MongoFollowing,
    MongoWorkflows,
    MongoUniqueness,
    MongoSchedules,
    # the operator's console: the optional registry, audit and bulk roles
    MongoRegistry,
    MongoAudit,
    MongoBulk,
    MongoInspection,
    # durable jobs: the optional steps role
    MongoSteps,
):
    """:class:`~dogs_core.ports.AsyncJobStore` on MongoDB, storage-compatible with @orion-js/dogs.

    ``client`` is a PyMongo ``AsyncMongoClient``. A Motor client is refused with an
    :class:`InvalidOptionError` (Motor is deprecated upstream and past its end of bug fixes;
    PyMongo's async client replaces it: docs/differences.md). The store reads and writes
    ``database`` through its own
    codec options (timezone-aware UTC datetimes), whatever the client's. It does not close a
    client it was given; :meth:`from_uri` makes a store that owns (and closes) its client.

    ``write_concern`` applies to claims, every fenced write (lock extension, completion,
    rescheduling, terminal marking, demotion, release), the operators' writes (``delete_job``,
    ``modify_job``, ``delete_jobs``) and every write of the fleet controls (``controls_collection``:
    pauses, slots, rate tokens, leases; :class:`MongoControls`). ``None`` (the default) keeps the
    client's, which on a replica set is ``w: "majority"``: a claim then waits until a majority has
    journaled it (a few ms per claim on one node; throughput comes from concurrent claimers), and it
    survives a failover. ``WriteConcern(w=1)`` is faster, but a claim acknowledged by a primary that
    fails before replicating it is rolled back: the new primary sees the record unclaimed and
    another worker may run the job while the first execution still runs (its fenced writes then
    fail). Unacknowledged (``w=0``) concerns are refused: fencing needs the matched count.

    ``history_write_concern`` applies to the history rows alone (``None``: the client's). A row
    is never fenced and its loss at a failover loses a line of the story, not a job, so
    ``WriteConcern(w=1)`` there is a sound trade for throughput while claims stay majority.
    The rows a settlement batch carries (an execution's row, written just before its record is
    settled) go with ``w: 1`` when it is ``None``: the settlements sent after them under
    ``write_concern`` make them just as durable once acknowledged (MongoDB replicates and
    journals in oplog order), one journal wait per batch instead of two.

    ``claim_path`` forces a claim implementation (benchmarks, tests); ``"auto"`` detects it once
    per store: the MongoDB 8 sorted ``updateOne`` when ``hello.maxWireVersion >= 25`` and the
    ``jobs_dogs_records_lock_id`` index exists, ``findOneAndUpdate`` otherwise.
    """

    #: Every role of the port, the optional ones included (:func:`~dogs_core.ports.store_roles`).
    roles: Final = frozenset(Role)

    def __init__(
        self,
        client: AsyncMongoClient[Any],
        database: str,
        *,
        records_collection: str = q.DEFAULT_RECORDS_COLLECTION,
        history_collection: str = q.DEFAULT_HISTORY_COLLECTION,
        controls_collection: str = q.DEFAULT_CONTROLS_COLLECTION,
        unique_keys_collection: str = qu.DEFAULT_UNIQUE_KEYS_COLLECTION,
        write_concern: WriteConcern | None = None,
        history_write_concern: WriteConcern | None = None,
        claim_path: str = q.CLAIM_PATH_AUTO,
        owns_client: bool = False,
        workflows_collection: str = qw.DEFAULT_WORKFLOWS_COLLECTION,
        workflow_steps_collection: str = qw.DEFAULT_WORKFLOW_STEPS_COLLECTION,
    ) -> None:
        validation.choice("claim_path", claim_path, q.CLAIM_PATHS)
        refuse_motor(client)
        for field, concern in (
            ("write_concern", write_concern),
            ("history_write_concern", history_write_concern),
        ):
            if concern is not None and not concern.acknowledged:
                raise InvalidOptionError(
                    field, concern, "needs an acknowledged write concern (w >= 1)"
                )
        self._client = client
        self._owns_client = owns_client
        self._claim_path_option = claim_path
        self._db: AsyncDatabase[Document] = client.get_database(
            database, codec_options=_CODEC_OPTIONS
        )
        self._records: AsyncCollection[Document] = self._db.get_collection(records_collection)
        self._history: AsyncCollection[Document] = self._db.get_collection(
            history_collection, write_concern=history_write_concern
        )
        self._settled_rows: AsyncCollection[Document] = self._db.get_collection(
            history_collection,
            write_concern=history_write_concern or _ROWS_BEFORE_SETTLEMENTS,
        )
        self._fenced: AsyncCollection[Document] = (
            self._records
            if write_concern is None
            else self._records.with_options(write_concern=write_concern)
        )
        # The controls decide on the primary, under the claims' write concern.
        self._controls: AsyncCollection[Document] = self._db.get_collection(
            controls_collection,
            read_preference=ReadPreference.PRIMARY,
            write_concern=write_concern,
        )
        # The workflows (docs/workflows.md) decide on the primary, under the claims' concern.
        self._workflows: AsyncCollection[Document] = self._db.get_collection(
            workflows_collection,
            read_preference=ReadPreference.PRIMARY,
            write_concern=write_concern,
        )
        self._steps: AsyncCollection[Document] = self._db.get_collection(
            workflow_steps_collection,
            read_preference=ReadPreference.PRIMARY,
            write_concern=write_concern,
        )
        # The release's own decisions (MongoWorkflows._stamped): w: 1, carried by the majority
        # claims and settlements that follow them.
        self._steps_fast = self._steps.with_options(write_concern=_ROWS_BEFORE_SETTLEMENTS)
        # The holds of unique keys (issue 27): decided on the primary, under the claims' concern.
        self._unique_keys: AsyncCollection[Document] = self._db.get_collection(
            unique_keys_collection,
            read_preference=ReadPreference.PRIMARY,
            write_concern=write_concern,
        )
        # A throttle's hold and a parked record are always followed by a write under the
        # store's concern that makes them as durable (oplog order): w: 1 spares a journal wait.
        self._before_durable = {
            "keys": self._unique_keys.with_options(write_concern=_ROWS_BEFORE_SETTLEMENTS),
            "records": self._records.with_options(write_concern=_ROWS_BEFORE_SETTLEMENTS),
        }
        # Claim read-backs and reconciler scans read their own writes: primary, local.
        self._primary: AsyncCollection[Document] = self._records.with_options(
            read_preference=ReadPreference.PRIMARY, read_concern=ReadConcern("local")
        )
        self._setup_lock = anyio.Lock()
        self._capabilities_lock = anyio.Lock()
        self._setup_done = False
        self._capabilities: StoreCapabilities | None = None
        self._missing_hints: set[str] = set()  # indexes found missing by hinted reads
        self._missing_claim_hints: set[str] = set()  # claim hints whose index is missing
        self._claim_indexes_listed_at = 0.0

    @classmethod
    def from_uri(cls, uri: str, database: str, **options: Any) -> AsyncMongoJobStore:
        """A store owning a new client of ``uri`` (closed by :meth:`close`)."""
        client: AsyncMongoClient[Any] = AsyncMongoClient(uri, tz_aware=True)
        return cls(client, database, owns_client=True, **options)

    @property
    def database_name(self) -> str:
        return self._db.name

    @property
    def records_collection(self) -> AsyncCollection[Document]:
        return self._records

    @property
    def history_collection(self) -> AsyncCollection[Document]:
        return self._history

    @property
    def controls_collection(self) -> AsyncCollection[Document]:
        return self._controls

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} database={self._db.name!r} "
            f"records={self._records.name!r} history={self._history.name!r}>"
        )
