"""The archive's pure rules: options, the cutoff, the report (dogs_core.domain.archiving)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from dogs_core.domain.archiving import (
    DEFAULT_ARCHIVE_BATCH_SIZE,
    MAX_ARCHIVE_BATCH_SIZE,
    ArchiveKind,
    ArchiveReport,
    archive_cutoff,
    archive_options,
    check_archive_batch,
    check_archived_at,
    check_cutoff,
    check_kind,
    outlives_default_retention,
)
from dogs_core.errors import InvalidOptionError

NOW = datetime(2030, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)


def test_defaults() -> None:
    options = archive_options(older_than="30d")
    assert options.older_than == timedelta(days=30)
    assert options.batch_size == DEFAULT_ARCHIVE_BATCH_SIZE == 500
    assert options.kinds == (ArchiveKind.HISTORY, ArchiveKind.FAILED_RECORDS)
    assert not options.dry_run
    assert options.max_batches is None


def test_kinds_by_name_deduplicated_in_order() -> None:
    options = archive_options(
        older_than=60, kinds=["failed_records", ArchiveKind.HISTORY, "history"]
    )
    assert options.kinds == (ArchiveKind.FAILED_RECORDS, ArchiveKind.HISTORY)
    assert options.older_than == timedelta(minutes=1)


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"older_than": 0}, "older_than"),
        ({"older_than": "-1d"}, "older_than"),
        ({"older_than": "soon"}, "older_than"),
        ({"older_than": timedelta(0)}, "older_than"),
        ({"older_than": "1d", "batch_size": 0}, "batch_size"),
        ({"older_than": "1d", "batch_size": MAX_ARCHIVE_BATCH_SIZE + 1}, "batch_size"),
        ({"older_than": "1d", "batch_size": True}, "batch_size"),
        ({"older_than": "1d", "batch_size": 1.5}, "batch_size"),
        ({"older_than": "1d", "kinds": []}, "kinds"),
        ({"older_than": "1d", "kinds": "history"}, "kinds"),
        ({"older_than": "1d", "kinds": ["rows"]}, "kinds"),
        ({"older_than": "1d", "kinds": 3}, "kinds"),
        ({"older_than": "1d", "dry_run": "yes"}, "dry_run"),
        ({"older_than": "1d", "max_batches": 0}, "max_batches"),
    ],
)
def test_bad_options_name_the_field(options: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidOptionError) as raised:
        archive_options(**options)
    assert raised.value.field == field


def test_batch_bounds() -> None:
    assert check_archive_batch(1) == 1
    assert check_archive_batch(MAX_ARCHIVE_BATCH_SIZE) == MAX_ARCHIVE_BATCH_SIZE


def test_cutoff_is_now_minus_the_age_in_milliseconds() -> None:
    cutoff = archive_cutoff(NOW, timedelta(days=30))
    assert cutoff == datetime(2030, 4, 1, 12, 0, 0, 123000, tzinfo=UTC)
    with pytest.raises(InvalidOptionError, match="now"):
        archive_cutoff(NOW.replace(tzinfo=None), timedelta(days=1))


def test_store_side_checks() -> None:
    assert check_cutoff(NOW).microsecond == 123000
    assert check_archived_at(NOW).microsecond == 123000
    assert check_kind("history") is ArchiveKind.HISTORY
    for bad in (None, "rows", 1):
        with pytest.raises(InvalidOptionError, match="kind"):
            check_kind(bad)
    with pytest.raises(InvalidOptionError, match="cutoff"):
        check_cutoff("2030-01-01")
    with pytest.raises(InvalidOptionError, match="archived_at"):
        check_archived_at(NOW.replace(tzinfo=None))


def test_default_retention_warning() -> None:
    assert outlives_default_retention(timedelta(days=7))
    assert not outlives_default_retention(timedelta(days=6, hours=23))


def test_report() -> None:
    report = ArchiveReport(
        cutoff=NOW,
        moved={ArchiveKind.HISTORY: 1200, ArchiveKind.FAILED_RECORDS: 3},
        batches=5,
        elapsed=timedelta(seconds=1.23456),
    )
    assert report.total == 1203
    assert report.as_dict() == {
        "cutoff": NOW.isoformat(),
        "moved": {"history": 1200, "failed_records": 3},
        "total": 1203,
        "batches": 5,
        "elapsed_seconds": 1.235,
        "dry_run": False,
        "complete": True,
    }
