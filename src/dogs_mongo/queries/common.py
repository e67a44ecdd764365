"""Constants shared by every builder, and the small coercions of stored values."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from dogs_core.domain.records import Hold, HoldReason, JobType, Owner, to_millis

DEFAULT_RECORDS_COLLECTION: Final = "orionjs.jobs_dogs_records"
DEFAULT_HISTORY_COLLECTION: Final = "orionjs.jobs_dogs_history"

#: The largest document a MongoDB server accepts (``hello.maxBsonObjectSize``).
MAX_BSON_DOCUMENT_SIZE: Final = 16 * 1024 * 1024

#: Most items per command of a batch method (``complete_many``, ``write_history_many``): larger
#: inputs are sent as several commands.
MAX_BATCH_SIZE: Final = 1000

#: ``maxTimeMS`` of an explain probe (Dogs 4.6.2+).
PROBE_MAX_TIME_MS: Final = 1000

#: The claim order: priority descending, then next run ascending (docs/concepts.md#the-claim).
CLAIM_SORT: Final[Mapping[str, int]] = {"priority": -1, "nextRunAt": 1}

LOCK_ID_INDEX_NAME: Final = "jobs_dogs_records_lock_id"

#: Every field of a lock, unset when a lock ends (a reschedule, a terminal mark, ``unlock_all``):
#: Dogs' three, then ours (additive, docs/differences.md): who holds it, when it was given
#: back, and the attempt a stale claim took over.
_LOCK_FIELDS_UNSET: Final[Mapping[str, str]] = {
    "lockId": "",
    "lockedUntil": "",
    "claimWasStale": "",
    "lockOwner": "",
    "lockReleasedAt": "",
    "staleAttempt": "",
}


# --------------------------------------------------------------------------------------------
# Small coercions
# --------------------------------------------------------------------------------------------


def _job_type(value: Any) -> JobType:
    if value is None:
        return JobType.EVENT
    return JobType(value)


def _params(doc: Mapping[str, Any]) -> Mapping[str, Any] | None:
    params = doc.get("params")
    return params if isinstance(params, Mapping) else None


def _trace_context(doc: Mapping[str, Any]) -> Mapping[str, str] | None:
    """Our additive ``traceContext``: string keys and values only (anything else is ignored,
    whoever wrote it)."""
    value = doc.get("traceContext")
    if not isinstance(value, Mapping):
        return None
    return {str(k): v for k, v in value.items() if isinstance(v, str)} or None


def _workflow(doc: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """Our additive ``workflow`` of a step's record (a document), or ``None``."""
    value = doc.get("workflow")
    return value if isinstance(value, Mapping) and value else None


def _int(value: Any, default: int) -> int:
    if value is None:
        return default
    return int(value)


def _optional_int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return int(value)


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _require_int(name: str, value: int) -> int:
    """BSON int, never double: integral floats are converted, anything else is refused."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise TypeError(f"{name} must be an int, got {value!r}")


def _optional_datetime(value: Any) -> datetime | None:
    return value if isinstance(value, datetime) else None


# --------------------------------------------------------------------------------------------
# Owners (additive ``lockOwner`` on records, ``owner`` on history rows)
# --------------------------------------------------------------------------------------------


def _owner_document(owner: Owner | None, *, lock_id: str | None = None) -> dict[str, Any] | None:
    """``{host, pid, instanceId}`` (``pid`` a BSON int), or ``None``. A record's ``lockOwner``
    also names the ``lockId`` it owns: a Node Dogs worker's later claim changes ``lockId`` but
    leaves ``lockOwner`` alone, and the mismatch then tells readers the owner is unknown."""
    if owner is None:
        return None
    document: dict[str, Any] = {
        "host": str(owner.host),
        "pid": _require_int("owner.pid", owner.pid),
        "instanceId": str(owner.instance_id),
    }
    if lock_id is not None:
        document["lockId"] = lock_id
    return document


def _owner(value: Any, *, lock_id: object = None) -> Owner | None:
    """The :class:`Owner` of a stored owner document; ``None`` when it is missing or is not
    one (another writer's shape is read as no owner rather than refused), or when it names a
    ``lockId`` other than ``lock_id`` (it owned an earlier lock: a Node worker took it since)."""
    if not isinstance(value, Mapping):
        return None
    if "lockId" in value and value.get("lockId") != lock_id:
        return None
    host, pid, instance_id = value.get("host"), value.get("pid"), value.get("instanceId")
    if not isinstance(host, str) or not isinstance(instance_id, str):
        return None
    if isinstance(pid, bool) or not isinstance(pid, int | float) or not math.isfinite(pid):
        return None
    return Owner(host=host, pid=int(pid), instance_id=instance_id)


# --------------------------------------------------------------------------------------------
# Holds (the ``held`` state; additive ``heldBack``, docs/differences.md)
# --------------------------------------------------------------------------------------------

#: The hold a fleet limit's refusal writes on a record: ``{reason, since, until}``.
HELD_FIELD: Final = "heldBack"


def hold_document(hold: Hold) -> dict[str, Any]:
    """``{reason, since, until}`` (BSON dates)."""
    return {
        "reason": HoldReason(hold.reason).value,
        "since": to_millis(hold.since),
        "until": to_millis(hold.until),
    }


def _hold(value: Any) -> Hold | None:
    """The :class:`Hold` of a stored ``heldBack``; ``None`` for a missing or foreign shape."""
    if not isinstance(value, Mapping):
        return None
    since, until = _optional_datetime(value.get("since")), _optional_datetime(value.get("until"))
    try:
        reason = HoldReason(str(value.get("reason")))
    except ValueError:
        return None
    if since is None or until is None:
        return None
    return Hold(reason=reason, since=since, until=until)
