"""The worker registry on MongoDB (:mod:`dogs_core.domain.registry`): one document per
``Workers`` instance in an additive collection that Node Dogs never reads, keyed by the
instance id, removed by a TTL on ``expiresAt`` once its beats stop."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Final

from dogs_core.domain.records import to_millis
from dogs_core.domain.registry import (
    RunningExecution,
    WorkerAction,
    WorkerCommand,
    WorkerInfo,
    WorkerState,
)
from dogs_mongo.queries.indexes import IndexSpec

__all__ = [
    "DEFAULT_WORKERS_COLLECTION",
    "REGISTRY_INDEXES",
    "command_document",
    "command_from_document",
    "commandable_filter",
    "worker_beat_update",
    "worker_from_document",
]

#: The registry's collection (additive: docs/differences.md).
DEFAULT_WORKERS_COLLECTION: Final = "orionjs.jobs_dogs_workers"

REGISTRY_INDEXES: Final = (
    IndexSpec("jobs_dogs_workers_expires_at_ttl", (("expiresAt", 1),), {"expireAfterSeconds": 0}),
)


def worker_beat_update(info: WorkerInfo) -> dict[str, Any]:
    """The beat's ``$set``: every field of ``info`` but the command (kept as stored)."""
    return {
        "$set": {
            "host": info.host,
            "pid": int(info.pid),
            "version": info.version,
            "jobNames": list(info.job_names),
            "workersCount": int(info.workers_count),
            "slotsInUse": int(info.slots_in_use),
            "executions": [
                {
                    "jobId": one.job_id,
                    "jobName": one.job_name,
                    "executionId": one.execution_id,
                    "startedAt": to_millis(one.started_at),
                }
                for one in info.executions
            ],
            "executionsTotal": int(info.executions_total),
            "startedAt": to_millis(info.started_at),
            "lastBeat": to_millis(info.last_beat),
            "state": info.state.value,
            "expiresAt": to_millis(info.expires_at),
            "beatIntervalMs": int(info.beat_interval / timedelta(milliseconds=1)),
        }
    }


def command_document(command: WorkerCommand) -> dict[str, Any]:
    return {
        "action": command.action.value,
        "requestedAt": to_millis(command.requested_at),
        "requestedBy": command.requested_by,
        "graceMs": None
        if command.grace is None
        else int(command.grace / timedelta(milliseconds=1)),
    }


def command_from_document(document: Mapping[str, Any] | None) -> WorkerCommand | None:
    if not document:
        return None
    grace = document.get("graceMs")
    return WorkerCommand(
        action=WorkerAction(document["action"]),
        requested_at=document["requestedAt"],
        requested_by=str(document.get("requestedBy", "")),
        grace=None if grace is None else timedelta(milliseconds=int(grace)),
    )


def commandable_filter(instance_id: str, now: datetime) -> dict[str, Any]:
    """The document of a live worker: not stopped, not expired at ``now``."""
    return {
        "_id": instance_id,
        "state": {"$ne": WorkerState.STOPPED.value},
        "expiresAt": {"$gt": to_millis(now)},
    }


def worker_from_document(document: Mapping[str, Any]) -> WorkerInfo:
    executions = tuple(
        RunningExecution(
            job_id=str(one["jobId"]),
            job_name=str(one["jobName"]),
            execution_id=str(one["executionId"]),
            started_at=one["startedAt"],
        )
        for one in document.get("executions") or ()
    )
    return WorkerInfo(
        instance_id=str(document["_id"]),
        host=str(document.get("host", "")),
        pid=int(document.get("pid", 0)),
        version=str(document.get("version", "")),
        job_names=tuple(str(name) for name in document.get("jobNames") or ()),
        workers_count=int(document.get("workersCount", 0)),
        slots_in_use=int(document.get("slotsInUse", 0)),
        executions=executions,
        executions_total=int(document.get("executionsTotal", len(executions))),
        started_at=document["startedAt"],
        last_beat=document["lastBeat"],
        state=WorkerState(document.get("state", WorkerState.RUNNING.value)),
        expires_at=document["expiresAt"],
        command=command_from_document(document.get("command")),
        beat_interval=timedelta(milliseconds=int(document.get("beatIntervalMs", 10_000))),
    )
