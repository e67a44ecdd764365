"""The workflows role of the MongoDB store (:class:`~dogs_core.ports.AsyncWorkflowStore`):
workflows and steps in collections of their own, each step's record inserted into Dogs'
records collection only when it is released.

Atomic writes. Inserting a workflow (its document, its steps and the records of the steps that
start at once) and retrying one are MongoDB transactions: the caller's with ``session=``, else
one of this store (``with_transaction``, which retries a transient conflict). So a replica set
is needed (as for change streams); a standalone server raises
:class:`~dogs_core.errors.TransactionsNotSupportedError`. A release is no transaction
(:meth:`MongoWorkflows.release_steps`: a dead releaser's open transaction would hold its steps
until MongoDB aborts it), and each of its operations is bounded
(:data:`WORKFLOW_OPERATION_SECONDS`), so that no release waits on a transaction it does not own.
Every other write is one compare-and-set per step (a ``bulkWrite`` of ``updateOne`` s whose
filter repeats the state and the fence), and a call learns which of them it wrote itself from
a token it stamps (``writtenBy``).

Part of the async adapter (the source of truth): ``scripts/generate_sync.py`` generates
``_sync/workflows.py`` from this module. :class:`MongoWorkflows` is a base of the store class.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from contextlib import nullcontext
from datetime import UTC, datetime
from typing import Any, Final

import pymongo
from pymongo import ASCENDING, DESCENDING, ReturnDocument, UpdateOne
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import BulkWriteError

from dogs_core.domain.records import HistoryRecord, JobRecord, JobStatus, NewJob, to_millis
from dogs_core.domain.workflow_records import (
    Dependent,
    FinishedWorkflow,
    Gate,
    NewWorkflow,
    ReleasedStep,
    StepEnding,
    StepRecord,
    StepRelease,
    StepSkip,
    StepState,
    WorkflowState,
    WorkflowSummary,
    WorkflowView,
)
from dogs_core.domain.workflow_release import workflow_end
from dogs_core.domain.workflow_start import release_job
from dogs_core.domain.workflows import FailurePolicy
from dogs_core.ids import new_execution_id
from dogs_mongo import queries as q
from dogs_mongo._async.feeds import _feed
from dogs_mongo._async.scheduling import _checked_document, _in_transaction
from dogs_mongo._async.transactions import CONFLICT_SECONDS, run_transaction
from dogs_mongo.errors import translate_errors
from dogs_mongo.queries import workflows as qw

__all__ = ["CONFLICT_SECONDS", "WORKFLOW_OPERATION_SECONDS", "MongoWorkflows"]

#: Seconds each operation of a release may take (``pymongo.timeout``: ``maxTimeMS`` on the
#: server): a write that waits on a document another process's transaction holds (a killed
#: one's stays open until MongoDB aborts it) gives up, and the workflow waits for a later
#: round while the others go on.
WORKFLOW_OPERATION_SECONDS: Final = 5.0

Document = dict[str, Any]
_DUPLICATE_KEY: Final = 11000

#: The states a retry puts back to blocked, and the workflow states it retries.
_RETRIED: Final = [StepState.FAILED.value, StepState.SKIPPED.value, StepState.CANCELLED.value]
_RETRYABLE: Final = [
    WorkflowState.FAILED.value,
    WorkflowState.COMPLETED.value,
    WorkflowState.CANCELLED.value,
]
_RELEASED_FIELDS: Final = {
    "childCount": 1,
    "workflowId": 1,
    "recordId": 1,
    "policy": 1,
    "generation": 1,
    "releasedAt": 1,
}


class MongoWorkflows:
    """Workflows and their steps (the optional workflows role)."""

    _client: Any
    _records: AsyncCollection[Document]
    _fenced: AsyncCollection[Document]
    _history: AsyncCollection[Document]
    _workflows: AsyncCollection[Document]
    _steps: AsyncCollection[Document]
    _steps_fast: AsyncCollection[Document]
    _before_durable: dict[str, AsyncCollection[Document]]
    workflow_operation_seconds: float = WORKFLOW_OPERATION_SECONDS
    """Bounds each operation of a release (:data:`WORKFLOW_OPERATION_SECONDS`)."""
    release_fault: Callable[[str], Awaitable[None]] | None = None

    @property
    def workflows_collection(self) -> AsyncCollection[Document]:
        return self._workflows

    @property
    def workflow_steps_collection(self) -> AsyncCollection[Document]:
        return self._steps

    async def setup_workflows(self) -> None:
        with translate_errors("setup_workflows", write=True):
            for collection, specs in (
                (self.workflows_collection, qw.WORKFLOW_INDEXES),
                (self.workflow_steps_collection, qw.STEP_INDEXES),
            ):
                await collection.create_indexes([spec.as_index_model() for spec in specs])

    # -- inserting ------------------------------------------------------------------------------

    async def insert_workflows(
        self, workflows: Sequence[NewWorkflow], *, session: Any = None
    ) -> None:
        documents = [_documents(workflow) for workflow in workflows]
        if not documents:
            return
        if _in_transaction(session):
            await self._insert_all(documents, session)
            return

        async def body(own: Any) -> None:
            ids = [workflow["_id"] for workflow, _, _ in documents]
            cursor = self.workflows_collection.find({"_id": {"$in": ids}}, {"_id": 1}, session=own)
            stored = {doc["_id"] async for doc in cursor}  # a retry of an insert that landed
            await self._insert_all([d for d in documents if d[0]["_id"] not in stored], own)

        await self._transaction("insert_workflows", body)

    async def _insert_all(
        self, documents: list[tuple[Document, list[Document], list[Document]]], session: Any
    ) -> None:
        if not documents:
            return
        await self.workflows_collection.insert_many(
            [workflow for workflow, _, _ in documents], session=session
        )
        await self.workflow_steps_collection.insert_many(
            [step for _, steps, _ in documents for step in steps], session=session
        )
        records = [record for _, _, records in documents for record in records]
        if records:
            await self._records.insert_many(records, session=session)

    async def _transaction(self, operation: str, body: Any) -> Any:
        """``body(session)`` in a transaction of this store's client (inserting workflows,
        retrying one: never a release): :func:`~dogs_mongo._async.transactions.run_transaction`."""
        return await run_transaction(
            self._client, self._fenced.write_concern, operation, body, feature="workflows"
        )

    # -- reading --------------------------------------------------------------------------------

    async def get_workflow(self, workflow_id: str) -> WorkflowView | None:
        with translate_errors("get_workflow", write=False):
            doc = await self.workflows_collection.find_one({"_id": workflow_id})
            if doc is None:
                return None
            cursor = self.workflow_steps_collection.find({"workflowId": workflow_id}).sort(
                "seq", ASCENDING
            )
            steps = [qw.step_from_document(step) async for step in cursor]
        return WorkflowView(workflow=qw.workflow_from_document(doc), steps=tuple(steps))

    async def find_workflows(
        self, *, state: WorkflowState | None = None, limit: int = 50, skip: int = 0
    ) -> list[WorkflowSummary]:
        if limit < 0 or skip < 0:
            raise ValueError(f"limit={limit!r}, skip={skip!r}: must not be negative")
        filter_: Document = {} if state is None else {"state": WorkflowState(state).value}
        with translate_errors("find_workflows", write=False):
            cursor = (
                self.workflows_collection.find(filter_)
                .sort([("createdAt", DESCENDING), ("_id", DESCENDING)])
                .skip(skip)
                .limit(limit)
            )
            workflows = [qw.workflow_from_document(doc) async for doc in cursor]
            if not workflows:
                return []
            counts = await self._counts([workflow.id for workflow in workflows])
        return [
            WorkflowSummary(workflow=workflow, counts=counts.get(workflow.id, _zero()))
            for workflow in workflows
        ]

    async def _counts(self, workflow_ids: list[str]) -> dict[str, dict[StepState, int]]:
        pipeline: list[Document] = [
            {"$match": {"workflowId": {"$in": workflow_ids}}},
            {"$group": {"_id": {"w": "$workflowId", "s": "$state"}, "n": {"$sum": 1}}},
        ]
        counts: dict[str, dict[StepState, int]] = {}
        cursor = await self.workflow_steps_collection.aggregate(pipeline)
        async for row in cursor:
            key = row["_id"]
            counts.setdefault(key["w"], _zero())[StepState(key["s"])] = int(row["n"])
        return counts

    async def released_steps(
        self,
        *,
        record_ids: Sequence[str] | None = None,
        workflow_id: str | None = None,
        after: str | None = None,
        limit: int = 1000,
    ) -> list[ReleasedStep]:
        if limit < 0:
            raise ValueError(f"limit={limit!r}: must not be negative")
        filter_: Document = {"state": StepState.RELEASED.value}
        if record_ids is not None:
            filter_["recordId"] = {"$in": list(dict.fromkeys(record_ids))}
        if workflow_id is not None:
            filter_["workflowId"] = workflow_id
        if after is not None:
            filter_["_id"] = {"$gt": after}
        with translate_errors("released_steps", write=False):
            cursor = (
                self.workflow_steps_collection.find(filter_, _RELEASED_FIELDS)
                .sort("_id", ASCENDING)
                .limit(limit)
            )
            return [_released(doc) async for doc in cursor]

    async def step_evidence(
        self, record_ids: Sequence[str]
    ) -> dict[str, tuple[JobRecord | None, HistoryRecord | None]]:
        ids = list(dict.fromkeys(record_ids))
        if not ids:
            return {}
        with translate_errors("step_evidence", write=False):
            cursor = self._records.find({"_id": {"$in": ids}}, {"params": 0})
            records = {str(doc["_id"]): q.record_from_document(doc) async for doc in cursor}
            pipeline: list[Document] = [
                {"$match": {"jobId": {"$in": ids}}},
                {"$sort": {"jobId": 1, "startedAt": -1}},
                {"$project": {"params": 0, "errorTraceback": 0}},
                {"$group": {"_id": "$jobId", "row": {"$first": "$$ROOT"}}},
            ]
            rows: dict[str, HistoryRecord] = {}
            async for doc in await self._history.aggregate(pipeline):
                rows[str(doc["_id"])] = q.history_from_document(doc["row"])
        return {record_id: (records.get(record_id), rows.get(record_id)) for record_id in ids}

    # -- ends, dependents, releases -------------------------------------------------------------

    async def end_steps(self, endings: Sequence[StepEnding], *, now: datetime) -> list[StepEnding]:
        if not endings:
            return []
        token = new_execution_id()
        at = to_millis(now)
        requests = [
            (
                {
                    "_id": ending.step_id,
                    "state": StepState.RELEASED.value,
                    "recordId": ending.record_id,
                },
                {
                    "$set": {
                        "state": ending.state.value,
                        "gate": ending.gate.value,
                        "endedAt": at,
                        "outcome": qw.outcome_document(ending.outcome),
                        "pending": True,
                        "writtenBy": token,
                    }
                },
            )
            for ending in endings
        ]
        ids = [ending.step_id for ending in endings]
        with self._bounded():
            written = await self._stamped("end_steps", requests, ids, token)
        return [ending for ending in endings if ending.step_id in written]

    async def _stamped(
        self,
        operation: str,
        requests: list[tuple[Document, Document]],
        ids: list[str],
        token: str,
        session: Any = None,
        *,
        durable: bool = False,
    ) -> dict[str, Document]:
        """Send the compare-and-sets ``requests`` (filter, update) on the steps ``ids``, each
        stamping ``token``; the documents of the steps they wrote, by id (one request: one
        ``findOneAndUpdate``; more: a ``bulkWrite``, then the stamped ones read, unless every
        request wrote and only the ids are asked for, outside a transaction). Outside a
        transaction with ``w: 1``: a decision is written again after a failover rolled it back
        (the sweep), and nothing follows from it before a majority write that carries it;
        ``durable`` under the store's write concern (a release: the record is made due
        next, which must never follow a write a failover may roll back)."""
        fast = session is None and not durable
        steps = self._steps_fast if fast else self.workflow_steps_collection
        projection = None if session is not None else {"_id": 1}
        # Inside a transaction PyMongo's errors pass as they are: with_transaction retries on
        # their labels (the transaction's own translate_errors translates what is left).
        translated = translate_errors(operation, write=True) if session is None else nullcontext()
        with translated:
            if len(requests) == 1:
                ((filter_, update),) = requests
                doc = await steps.find_one_and_update(
                    filter_,
                    update,
                    projection=projection,
                    return_document=ReturnDocument.AFTER,
                    session=session,
                )
                return {} if doc is None else {str(doc["_id"]): doc}
            bulk = [UpdateOne(filter_, update) for filter_, update in requests]
            result = await steps.bulk_write(bulk, ordered=False, session=session)
            if result.modified_count == 0:
                return {}
            if session is None and result.modified_count == len(ids):
                # Each request writes one step at most: all of them wrote (the usual case).
                return {step_id: {"_id": step_id} for step_id in ids}
            stamped = {"_id": {"$in": ids}, "writtenBy": token}
            cursor = steps.find(stamped, projection, session=session)
            return {str(doc["_id"]): doc async for doc in cursor}

    async def dependents(self, step_ids: Sequence[str]) -> list[Dependent]:
        ids = list(dict.fromkeys(step_ids))
        if not ids:
            return []
        with translate_errors("dependents", write=False):
            cursor = self.workflow_steps_collection.find({"_id": {"$in": ids}}, {"children": 1})
            children: dict[str, None] = {}
            async for doc in cursor:
                children.update(dict.fromkeys(str(child) for child in doc.get("children") or ()))
            return await self._views(list(children))

    async def blocked_steps(self, step_ids: Sequence[str]) -> list[Dependent]:
        with translate_errors("blocked_steps", write=False):
            return await self._views(list(dict.fromkeys(step_ids)))

    async def _views(self, step_ids: list[str]) -> list[Dependent]:
        """The blocked ones of ``step_ids`` and their dependencies' gates: read at once for
        a small fan-in, through the ``{children, gate}`` index for a large one."""
        if not step_ids:
            return []
        steps = self.workflow_steps_collection
        projection = {
            "workflowId": 1,
            "generation": 1,
            "after": {"$cond": [{"$lte": ["$parentCount", qw.SMALL_FAN_IN]}, "$after", []]},
            "parentCount": 1,
        }
        blocked = [
            doc
            async for doc in steps.find(
                {"_id": {"$in": step_ids}, "state": StepState.BLOCKED.value}, projection
            )
        ]
        small = {str(p) for doc in blocked if _small(doc) for p in doc.get("after") or ()}
        gates: dict[str, str] = {}
        if small:
            async for doc in steps.find({"_id": {"$in": list(small)}}, {"gate": 1}):
                gates[str(doc["_id"])] = str(doc.get("gate"))
        views = []
        for doc in blocked:
            if _small(doc):
                mine = {
                    gates.get(str(parent), Gate.WAIT.value) for parent in doc.get("after") or ()
                }
                waiting, skipping = Gate.WAIT.value in mine, Gate.SKIP.value in mine
            else:
                waiting = await self._any_parent(doc["_id"], Gate.WAIT)
                skipping = not waiting and await self._any_parent(doc["_id"], Gate.SKIP)
            views.append(
                Dependent(
                    id=str(doc["_id"]),
                    workflow_id=str(doc["workflowId"]),
                    generation=int(doc.get("generation") or 0),
                    waiting=waiting,
                    skipping=skipping,
                )
            )
        return views

    async def _any_parent(self, step_id: str, gate: Gate) -> bool:
        found = await self.workflow_steps_collection.find_one(
            {"children": step_id, "gate": gate.value}, {"_id": 1}
        )
        return found is not None

    async def release_steps(
        self, releases: Sequence[StepRelease], *, now: datetime
    ) -> list[StepRelease]:
        """No transaction (a killed releaser's open transaction would hold its steps until
        MongoDB aborts it, ``transactionLifetimeLimitSeconds``): three single-document writes
        per step, in an order a crash may cut anywhere (:meth:`repair_releases` finishes or
        undoes what it leaves): the record inserted *staged* (due at
        :data:`~dogs_mongo.queries.workflows.STAGED_UNTIL`, which no claim of ours or of Dogs
        4.6.8 matches), the step's compare-and-set ``blocked -> released`` with that record id,
        then the record made due. A record is made due only once its step is released with it,
        and a staged record never ran, so making it due again is safe; the record of a
        release that lost its compare-and-set is removed while still staged."""
        if not releases:
            return []
        with self._bounded():
            return await self._release(releases, now)

    async def _release(self, releases: Sequence[StepRelease], now: datetime) -> list[StepRelease]:
        at = to_millis(now)
        by_step = {release.step_id: release for release in releases}
        steps = self.workflow_steps_collection
        blocked: list[Document] = []
        written: set[str] = set()
        with translate_errors("release_steps", write=False):
            async for doc in steps.find({"_id": {"$in": list(by_step)}}):
                release = by_step[str(doc["_id"])]
                if doc.get("recordId") == release.record_id:
                    written.add(release.step_id)  # an earlier attempt of this call released it
                elif doc.get("state") == StepState.BLOCKED.value and (
                    int(doc.get("generation") or 0) == release.generation
                ):
                    blocked.append(doc)
        for doc in blocked:
            doc.update(recordId=by_step[str(doc["_id"])].record_id, releasedAt=at)
        if blocked:
            written |= await self._stage_and_release(blocked, by_step, at)
        with translate_errors("release_steps", write=True):
            mine = [by_step[step_id].record_id for step_id in written]
            if mine:
                # The store's write concern: the records feed reports the record once it is
                # majority-committed, which w: 1 would leave to the next journal flush.
                await self._fenced.update_many(qw.staged_filter(mine), qw.unstage_update(at))
            others = [
                by_step[str(doc["_id"])].record_id
                for doc in blocked
                if str(doc["_id"]) not in written
            ]
            if others:
                await self._before_durable["records"].delete_many(qw.staged_filter(others))
        return [release for release in releases if release.step_id in written]

    async def _stage_and_release(
        self, blocked: list[Document], by_step: dict[str, StepRelease], at: datetime
    ) -> set[str]:
        """The staged records of ``blocked`` inserted, then their steps' compare-and-sets:
        the steps this call released."""
        jobs = await self._release_jobs(blocked, at, None)
        staged = [qw.staged_record(_checked_document(job), at) for job in jobs]
        with translate_errors("release_steps", write=True):
            try:
                # w: 1: the majority write of the step's release below carries it (oplog order).
                await self._before_durable["records"].insert_many(staged, ordered=False)
            except BulkWriteError as error:
                # A retry of an insert that landed (the record ids are this call's own).
                if any(e.get("code") != _DUPLICATE_KEY for e in error.details["writeErrors"]):
                    raise
        await self._release_fault("staged")
        token = new_execution_id()
        requests = [
            (
                {
                    "_id": str(doc["_id"]),
                    "state": StepState.BLOCKED.value,
                    "generation": by_step[str(doc["_id"])].generation,
                },
                {
                    "$set": {
                        "state": StepState.RELEASED.value,
                        "recordId": doc["recordId"],
                        "releasedAt": at,
                        "writtenBy": token,
                    }
                },
            )
            for doc in blocked
        ]
        ids = [str(doc["_id"]) for doc in blocked]
        written = await self._stamped("release_steps", requests, ids, token, durable=True)
        await self._release_fault("released")
        return set(written)

    async def repair_releases(self, *, limit: int = 1000) -> int:
        if limit < 0:
            raise ValueError(f"limit={limit!r}: must not be negative")
        with self._bounded(), translate_errors("repair_releases", write=True):
            cursor = self._records.find(
                qw.staged_filter(), {"_id": 1, "workflow.step": 1, "workflow.stagedAt": 1}
            ).limit(limit)
            staged = {
                str(doc["_id"]): str((doc.get("workflow") or {}).get("step"))
                async for doc in cursor
            }
            if not staged:
                return 0
            cursor = self.workflow_steps_collection.find(
                {"_id": {"$in": list(set(staged.values()))}}, {"state": 1, "recordId": 1}
            )
            steps = {str(doc["_id"]): doc async for doc in cursor}
            due: list[str] = []
            gone: list[str] = []
            for record_id, step_id in staged.items():
                step = steps.get(step_id)
                if step is not None and step.get("recordId") == record_id:
                    if step.get("state") == StepState.RELEASED.value:
                        due.append(record_id)
                elif step is None or step.get("state") != StepState.BLOCKED.value:
                    gone.append(record_id)
            at = to_millis(datetime.now(UTC))
            repaired = 0
            if due:
                result = await self._fenced.update_many(
                    qw.staged_filter(due), qw.unstage_update(at)
                )
                repaired += result.modified_count
            if gone:
                removed = await self._fenced.delete_many(qw.staged_filter(gone))
                repaired += removed.deleted_count
        return repaired

    def _bounded(self) -> Any:
        """Each operation of the release bounded (``maxTimeMS`` and the client's own timeout):
        a write that waits on a document held by a transaction it does not own (another
        process's, even a dead one's) gives up, and the round goes on without that workflow."""
        return pymongo.timeout(self.workflow_operation_seconds)

    async def _release_fault(self, point: str) -> None:
        """A test's hook between the release's writes (``staged``, ``released``): a process
        killed there (see tests/mongo/test_workflow_stalls.py)."""
        if self.release_fault is not None:
            await self.release_fault(point)

    async def _release_jobs(
        self, documents: list[Document], now: datetime, session: Any
    ) -> list[NewJob]:
        """The records of the steps being released (their dependencies' outcomes as stored)."""
        steps = self.workflow_steps_collection
        released = [qw.step_from_document(doc) for doc in documents]
        parent_ids = {parent for step in released if not step.summary for parent in step.after}
        parents: dict[str, StepRecord] = {}
        if parent_ids:
            fields = {"after": 0, "children": 0, "params": 0}
            cursor = steps.find({"_id": {"$in": list(parent_ids)}}, fields, session=session)
            parents = {str(doc["_id"]): _parent(doc) async for doc in cursor}
        jobs = []
        for step in released:
            assert step.record_id is not None
            if step.summary:
                batch = await self._batch(step.id, session)
                jobs.append(release_job(step, record_id=step.record_id, now=now, batch=batch))
            else:
                upstream = [parents[parent] for parent in step.after if parent in parents]
                jobs.append(release_job(step, record_id=step.record_id, now=now, upstream=upstream))
        return jobs

    async def _batch(self, step_id: str, session: Any) -> tuple[dict[StepState, int], list[str]]:
        """A batch callback's items: their counts per state and the failed ones' ids."""
        steps = self.workflow_steps_collection
        pipeline: list[Document] = [
            {"$match": {"children": step_id}},
            {"$group": {"_id": "$state", "n": {"$sum": 1}}},
        ]
        counts = _zero()
        async for row in await steps.aggregate(pipeline, session=session):
            counts[StepState(row["_id"])] = int(row["n"])
        failed = [StepState.FAILED.value, StepState.CANCELLED.value]
        cursor = steps.find(
            {"children": step_id, "state": {"$in": failed}}, {"_id": 1}, session=session
        )
        return counts, [str(doc["_id"]) async for doc in cursor]

    async def skip_steps(self, skips: Sequence[StepSkip], *, now: datetime) -> list[StepSkip]:
        if not skips:
            return []
        token = new_execution_id()
        at = to_millis(now)
        requests = [
            (
                {
                    "_id": skip.step_id,
                    "state": StepState.BLOCKED.value,
                    "generation": skip.generation,
                },
                {
                    "$set": {
                        "state": StepState.SKIPPED.value,
                        "gate": Gate.SKIP.value,
                        "endedAt": at,
                        "pending": True,
                        "writtenBy": token,
                    }
                },
            )
            for skip in skips
        ]
        ids = [skip.step_id for skip in skips]
        with self._bounded():
            written = await self._stamped("skip_steps", requests, ids, token)
        return [skip for skip in skips if skip.step_id in written]

    # -- the workflow's end ---------------------------------------------------------------------

    async def fail_workflow(self, workflow_id: str, *, now: datetime) -> bool:
        at = to_millis(now)
        with self._bounded(), translate_errors("fail_workflow", write=True):
            # The blocked steps first: once none is, nothing can be released any more.
            await self.workflow_steps_collection.update_many(
                {"workflowId": workflow_id, "state": StepState.BLOCKED.value},
                {
                    "$set": {
                        "state": StepState.SKIPPED.value,
                        "gate": Gate.SKIP.value,
                        "endedAt": at,
                    }
                },
            )
            result = await self.workflows_collection.update_one(
                {"_id": workflow_id, "state": WorkflowState.RUNNING.value},
                {"$set": {"state": WorkflowState.FAILED.value, "endedAt": at}},
            )
        return result.modified_count == 1

    async def finish_workflows(
        self, workflow_ids: Sequence[str], *, now: datetime
    ) -> list[FinishedWorkflow]:
        ids = list(dict.fromkeys(workflow_ids))
        if not ids:
            return []
        with self._bounded(), translate_errors("finish_workflows", write=True):
            # The counts tell which are still live: a step only leaves blocked and released
            # (until a retry, which needs the workflow ended first), so an end read here holds.
            counts = await self._counts(ids)
            done = [i for i in ids if workflow_end(counts.get(i, _zero())) is not None]
            if not done:
                return []
            failing = set(
                await self.workflow_steps_collection.distinct(
                    "workflowId", qw.failing_step_filter(done)
                )
            )
            ends: dict[str, WorkflowState] = {}
            for workflow_id in done:
                end = workflow_end(counts.get(workflow_id, _zero()), failing=workflow_id in failing)
                if end is not None:
                    ends[workflow_id] = end
            token = new_execution_id()
            at = to_millis(now)
            requests = [
                UpdateOne(
                    {"_id": workflow_id, "state": WorkflowState.RUNNING.value},
                    {"$set": {"state": end.value, "endedAt": at, "writtenBy": token}},
                )
                for workflow_id, end in ends.items()
            ]
            result = await self.workflows_collection.bulk_write(requests, ordered=False)
            if result.modified_count == len(requests):
                written = set(ends)
            elif result.modified_count == 0:
                written = set()
            else:
                cursor = self.workflows_collection.find(
                    {"_id": {"$in": done}, "writtenBy": token}, {"_id": 1}
                )
                written = {str(doc["_id"]) async for doc in cursor}
        return [
            FinishedWorkflow(workflow_id, end)
            for workflow_id, end in ends.items()
            if workflow_id in written
        ]

    async def settle_steps(self, step_ids: Sequence[str]) -> None:
        ids = list(dict.fromkeys(step_ids))
        if not ids:
            return
        with self._bounded(), translate_errors("settle_steps", write=True):
            await self._steps_fast.update_many(
                {"_id": {"$in": ids}, "pending": True}, {"$unset": {"pending": ""}}
            )

    async def pending_steps(self, *, limit: int = 1000) -> list[StepRecord]:
        if limit < 0:
            raise ValueError(f"limit={limit!r}: must not be negative")
        with translate_errors("pending_steps", write=False):
            cursor = (
                self.workflow_steps_collection.find({"pending": True}, {"params": 0})
                .sort("_id", ASCENDING)
                .limit(limit)
            )
            return [qw.step_from_document(doc) async for doc in cursor]

    # -- operators ------------------------------------------------------------------------------

    async def cancel_workflow(self, workflow_id: str, *, now: datetime) -> bool:
        at = to_millis(now)
        workflows = self.workflows_collection
        with translate_errors("cancel_workflow", write=True):
            result = await workflows.update_one(
                {"_id": workflow_id, "state": WorkflowState.RUNNING.value},
                {"$set": {"state": WorkflowState.CANCELLED.value, "endedAt": at}},
            )
            changed = result.modified_count == 1
            if not changed:
                found = await workflows.find_one({"_id": workflow_id}, {"state": 1})
                if found is None or found.get("state") != WorkflowState.CANCELLED.value:
                    return False
            # Also when cancelled already: a cancel cut short before this line is finished.
            await self.workflow_steps_collection.update_many(
                {"workflowId": workflow_id, "state": StepState.BLOCKED.value},
                {
                    "$set": {
                        "state": StepState.CANCELLED.value,
                        "gate": Gate.SKIP.value,
                        "endedAt": at,
                    }
                },
            )
        return changed

    async def retry_workflow(self, workflow_id: str, *, now: datetime) -> list[str] | None:
        async def body(session: Any) -> list[str] | None:
            workflows, steps = self.workflows_collection, self.workflow_steps_collection
            found = await workflows.find_one(
                {"_id": workflow_id, "state": {"$in": _RETRYABLE}}, {"state": 1}, session=session
            )
            if found is None:
                return None
            filter_ = {"workflowId": workflow_id, "state": {"$in": _RETRIED}}
            cursor = steps.find(filter_, {"recordId": 1}, session=session).sort("seq", ASCENDING)
            reset = [doc async for doc in cursor]
            records = [str(doc["recordId"]) for doc in reset if doc.get("recordId")]
            if records:
                await self._records.delete_many(
                    {"_id": {"$in": records}, "status": JobStatus.MAX_TRIES_REACHED.value},
                    session=session,
                )
            await steps.update_many(
                filter_,
                {
                    "$set": {"state": StepState.BLOCKED.value, "gate": Gate.WAIT.value},
                    "$inc": {"generation": 1},
                    "$unset": {
                        "recordId": "",
                        "releasedAt": "",
                        "endedAt": "",
                        "outcome": "",
                        "pending": "",
                    },
                },
                session=session,
            )
            await workflows.update_one(
                {"_id": workflow_id, "state": found["state"]},
                {
                    "$set": {"state": WorkflowState.RUNNING.value},
                    "$unset": {"endedAt": ""},
                    "$inc": {"generation": 1},
                },
                session=session,
            )
            return [str(doc["_id"]) for doc in reset]

        result: list[str] | None = await self._transaction("retry_workflow", body)
        return result

    # -- feeds ----------------------------------------------------------------------------------

    def watch_step_rows(
        self, *, except_instance: str | None = None
    ) -> AsyncGenerator[list[HistoryRecord], None]:
        """The rows that may end a step (see :func:`~dogs_mongo.queries.workflows.
        step_changes_pipeline`)."""
        return _feed(
            "watch_step_rows",
            self._history,
            lambda: qw.step_changes_pipeline(except_instance),
            q.history_change,
        )

    def watch_workflows(self, workflow_ids: Sequence[str]) -> AsyncGenerator[list[str], None]:
        ids = list(dict.fromkeys(workflow_ids))
        return _feed(
            "watch_workflows",
            self.workflows_collection,
            lambda: qw.workflow_changes_pipeline(ids),
            qw.workflow_change,
        )


def _documents(workflow: NewWorkflow) -> tuple[Document, list[Document], list[Document]]:
    """The documents of a new workflow: its own, its steps' (in order) and its first records'."""
    steps = [qw.step_document(step, seq) for seq, step in enumerate(workflow.steps)]
    records = [_checked_document(job) for job in workflow.records]
    return qw.workflow_document(workflow.workflow), steps, records


def _zero() -> dict[StepState, int]:
    return dict.fromkeys(StepState, 0)


def _small(doc: Mapping[str, Any]) -> bool:
    return int(doc.get("parentCount") or 0) <= qw.SMALL_FAN_IN


def _released(doc: Mapping[str, Any]) -> ReleasedStep:
    return ReleasedStep(
        id=str(doc["_id"]),
        workflow_id=str(doc["workflowId"]),
        record_id=str(doc["recordId"]),
        policy=FailurePolicy(doc.get("policy") or FailurePolicy.FAIL.value),
        generation=int(doc.get("generation") or 0),
        released_at=doc["releasedAt"],
        leaf=doc.get("childCount") == 0,
    )


def _parent(doc: Mapping[str, Any]) -> StepRecord:
    """A dependency read without its lists and params (what a release carries of it)."""
    return qw.step_from_document({**doc, "after": [], "children": [], "params": None})
