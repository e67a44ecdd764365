"""What every store's change feeds and history reads share: the heartbeat and the input checks.

A change feed (``watch_records``, ``watch_history``, ``watch_pauses``) yields ``[]`` at least
every :data:`FEED_HEARTBEAT_SECONDS` while nothing happens, so that its consumer can check its
own deadlines (and, for a sync store run in threads, so that no ``next()`` keeps a thread long).
A consumer that checks none reads its feed inside
:func:`dogs_core.runtime.plumbing.watching.without_heartbeats`, and an async feed may then leave the
heartbeats out (the in-memory store's do: under a virtual clock each is a step of the clock);
the ``[]`` once open and the batches are owed all the same.
The checks refuse the same inputs with the same words in every store, as
:mod:`dogs_core.domain.batches` does for the batch methods: a refusal is an
:class:`~dogs_core.errors.InvalidOptionError` naming the field.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from dogs_core.domain.records import HistoryStatus
from dogs_core.errors import InvalidOptionError

__all__ = [
    "FEED_HEARTBEAT_SECONDS",
    "check_feed_names",
    "check_history_filter",
    "check_history_status",
    "check_optional_feed_names",
]

#: Longest wait, in seconds, of a feed with nothing to report before it yields ``[]``.
FEED_HEARTBEAT_SECONDS: Final = 1.0


def check_feed_names(field: str, names: object) -> tuple[str, ...]:
    """``names`` (job names or ids) as a tuple without repeats, in order. A bare string is
    refused (it would be read as its characters), so is anything but strings."""
    if isinstance(names, str | bytes) or not isinstance(names, Iterable):
        raise InvalidOptionError(field, names, "must be a list of strings")
    checked = tuple(dict.fromkeys(names))
    for index, name in enumerate(checked):
        if not isinstance(name, str):
            raise InvalidOptionError(f"{field}[{index}]", name, "must be a string")
    return checked


def check_optional_feed_names(field: str, names: object) -> tuple[str, ...] | None:
    """``None`` (no filter), or :func:`check_feed_names` of ``names`` (an empty list matches
    nothing)."""
    return None if names is None else check_feed_names(field, names)


def check_history_filter(job_name: object, job_id: object) -> None:
    """The filters of a history read (``read_history``, ``client.get_executions``): at least one
    of ``job_name`` and ``job_id``, each a string when given."""
    if job_name is None and job_id is None:
        raise InvalidOptionError("job_name", None, "get_executions needs job_name, job_id or both")
    for field, value in (("job_name", job_name), ("job_id", job_id)):
        if value is not None and not isinstance(value, str):
            raise InvalidOptionError(field, value, "must be a string")


def check_history_status(value: object) -> HistoryStatus | None:
    """A history read's ``status`` filter: ``None``, or a :class:`HistoryStatus` or its value."""
    if value is None:
        return None
    if isinstance(value, str):  # a HistoryStatus is one too
        try:
            return HistoryStatus(value)
        except ValueError:
            pass
    choices = ", ".join(status.value for status in HistoryStatus)
    raise InvalidOptionError("status", value, f"expected one of {choices}")
