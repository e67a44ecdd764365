"""Constants shared by every builder, and the small coercions of stored values."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

from dogs_core.domain.records import JobType

DEFAULT_RECORDS_COLLECTION: Final = "orionjs.jobs_dogs_records"
DEFAULT_HISTORY_COLLECTION: Final = "orionjs.jobs_dogs_history"

#: The largest document a MongoDB server accepts (``hello.maxBsonObjectSize``).
MAX_BSON_DOCUMENT_SIZE: Final = 16 * 1024 * 1024

#: Most items per command of a batch method (``complete_many``, ``write_history_many``): larger
#: inputs are sent as several commands.
MAX_BATCH_SIZE: Final = 1000

#: ``maxTimeMS`` of an explain probe (Dogs 4.6.2+).
PROBE_MAX_TIME_MS: Final = 1000

#: The claim order: priority descending, then next run ascending (Dogs §3.1).
CLAIM_SORT: Final[Mapping[str, int]] = {"priority": -1, "nextRunAt": 1}

LOCK_ID_INDEX_NAME: Final = "jobs_dogs_records_lock_id"

_LOCK_FIELDS_UNSET: Final[Mapping[str, str]] = {
    "lockId": "",
    "lockedUntil": "",
    "claimWasStale": "",
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
