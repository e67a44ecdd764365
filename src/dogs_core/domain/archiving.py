"""Archiving: which history rows and failed records leave the live collections, and what a run
reports. Pure: the stores move the rows (:class:`~dogs_core.ports.AsyncArchiveStore`), the
clients loop over batches (:mod:`dogs_core.runtime.client._async.archive`).

The cutoff rule (``now - older_than``, to the millisecond):

- a history row is archived when its ``started_at`` is before the cutoff: Dogs' own history
  index ``{jobName: 1, startedAt: 1}`` serves the batch reads, so no index is added to a
  collection Node workers share. A run that started before the cutoff and ended after it is
  archived with the others (runs are short next to thresholds of days);
- a failed record (an event record in status ``maxTriesReached``) is archived when its
  ``max_tries_reached_at`` is before the cutoff. A record whose anchor is missing is left alone.

TTL is not raced: the live collections keep their TTL indexes, and a row whose ``expires_at``
comes before it is old enough is deleted by MongoDB first. Choose ``older_than`` shorter than
the shortest retention (``save_executions_for``, 7 days by default) minus the time between two
runs; :func:`outlives_default_retention` says when it is not (the CLI warns).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from dogs_core.domain import validation
from dogs_core.domain.records import DEFAULT_RETENTION, to_millis
from dogs_core.errors import InvalidOptionError

__all__ = [
    "DEFAULT_ARCHIVE_BATCH_SIZE",
    "MAX_ARCHIVE_BATCH_SIZE",
    "ArchiveKind",
    "ArchiveOptions",
    "ArchiveReport",
    "archive_cutoff",
    "archive_options",
    "check_archive_batch",
    "check_archived_at",
    "check_cutoff",
    "check_kind",
    "outlives_default_retention",
]

#: Rows moved per batch when none is given: one read, one bulk write and one delete of 500
#: documents each (a few MB at most), short enough not to hold a replica set's oplog back.
DEFAULT_ARCHIVE_BATCH_SIZE = 500
#: The largest batch accepted: a batch is read whole into memory before it is copied.
MAX_ARCHIVE_BATCH_SIZE = 10_000


class ArchiveKind(enum.StrEnum):
    """What an archive run moves: history rows, failed (``maxTriesReached``) event records."""

    HISTORY = "history"
    FAILED_RECORDS = "failed_records"


@dataclass(frozen=True, slots=True)
class ArchiveOptions:
    """A checked archive request (see :func:`archive_options`)."""

    older_than: timedelta
    batch_size: int = DEFAULT_ARCHIVE_BATCH_SIZE
    kinds: tuple[ArchiveKind, ...] = (ArchiveKind.HISTORY, ArchiveKind.FAILED_RECORDS)
    dry_run: bool = False
    max_batches: int | None = None


def archive_options(
    *,
    older_than: object,
    batch_size: object = DEFAULT_ARCHIVE_BATCH_SIZE,
    kinds: object = (ArchiveKind.HISTORY, ArchiveKind.FAILED_RECORDS),
    dry_run: object = False,
    max_batches: object = None,
) -> ArchiveOptions:
    """The options of one run, checked: ``older_than`` a duration > 0 (timedelta, seconds or
    ``"30d"``), ``batch_size`` 1..:data:`MAX_ARCHIVE_BATCH_SIZE`, ``kinds`` a non-empty
    collection of :class:`ArchiveKind` (or their names), ``max_batches`` ``None`` or >= 1.
    Raises :class:`~dogs_core.errors.InvalidOptionError` naming the field and the value."""
    age = validation.positive_duration("older_than", older_than)
    size = check_archive_batch(batch_size)
    chosen = _kinds(kinds)
    run_dry = validation.boolean("dry_run", dry_run)
    limit = (
        None if max_batches is None else validation.integer("max_batches", max_batches, minimum=1)
    )
    return ArchiveOptions(
        older_than=age, batch_size=size, kinds=chosen, dry_run=run_dry, max_batches=limit
    )


def check_archive_batch(batch_size: object) -> int:
    """``batch_size`` as an int in 1..:data:`MAX_ARCHIVE_BATCH_SIZE` (what every store checks
    before it writes anything)."""
    size = validation.integer("batch_size", batch_size, minimum=1)
    if size > MAX_ARCHIVE_BATCH_SIZE:
        raise InvalidOptionError(
            "batch_size", batch_size, f"must be at most {MAX_ARCHIVE_BATCH_SIZE}"
        )
    return size


def _kinds(kinds: object) -> tuple[ArchiveKind, ...]:
    if isinstance(kinds, str | ArchiveKind) or not isinstance(kinds, Iterable):
        raise InvalidOptionError(
            "kinds", kinds, "must be a collection of 'history', 'failed_records'"
        )
    chosen: list[ArchiveKind] = []
    for kind in kinds:
        try:
            value = ArchiveKind(kind)
        except ValueError:
            raise InvalidOptionError(
                "kinds", kinds, f"{kind!r} is not one of 'history', 'failed_records'"
            ) from None
        if value not in chosen:
            chosen.append(value)
    if not chosen:
        raise InvalidOptionError("kinds", kinds, "must name at least one kind")
    return tuple(chosen)


def archive_cutoff(now: datetime, older_than: timedelta) -> datetime:
    """Rows older than this (strictly before it) are archived: ``now - older_than`` in
    milliseconds. ``now`` must be timezone-aware."""
    if not isinstance(now, datetime) or now.tzinfo is None:
        raise InvalidOptionError("now", now, "must be a timezone-aware datetime")
    return to_millis(now - older_than)


def check_cutoff(cutoff: object) -> datetime:
    """A store's check of the ``cutoff`` it is given (timezone-aware)."""
    if not isinstance(cutoff, datetime) or cutoff.tzinfo is None:
        raise InvalidOptionError("cutoff", cutoff, "must be a timezone-aware datetime")
    return to_millis(cutoff)


def check_kind(kind: object) -> ArchiveKind:
    """``kind`` as an :class:`ArchiveKind` (or its name)."""
    if isinstance(kind, str):
        try:
            return ArchiveKind(kind)
        except ValueError:
            pass
    raise InvalidOptionError("kind", kind, "must be 'history' or 'failed_records'")


def check_archived_at(archived_at: object) -> datetime:
    """The ``archived_at`` stamp a store is given (timezone-aware), to the millisecond."""
    if not isinstance(archived_at, datetime) or archived_at.tzinfo is None:
        raise InvalidOptionError("archived_at", archived_at, "must be a timezone-aware datetime")
    return to_millis(archived_at)


def outlives_default_retention(older_than: timedelta) -> bool:
    """Whether rows kept for Dogs' default retention (7 days) expire before they are
    ``older_than`` old: TTL then deletes them before any archive run sees them."""
    return older_than >= DEFAULT_RETENTION


@dataclass(frozen=True, slots=True)
class ArchiveReport:
    """What one run did: documents moved per kind (counted, not moved, on a dry run), the batches
    sent, the cutoff used and the time it took."""

    cutoff: datetime
    moved: Mapping[ArchiveKind, int] = field(default_factory=dict)
    batches: int = 0
    elapsed: timedelta = timedelta(0)
    dry_run: bool = False
    complete: bool = True
    """``False`` when ``max_batches`` stopped the run before every old row was moved."""

    @property
    def total(self) -> int:
        return sum(self.moved.values())

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON-ready values (``dogs archive --json``)."""
        return {
            "cutoff": self.cutoff.isoformat(),
            "moved": {kind.value: count for kind, count in self.moved.items()},
            "total": self.total,
            "batches": self.batches,
            "elapsed_seconds": round(self.elapsed.total_seconds(), 3),
            "dry_run": self.dry_run,
            "complete": self.complete,
        }
