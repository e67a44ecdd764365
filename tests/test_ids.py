"""Execution ids have Dogs' shape and are drawn uniformly from its alphabet."""

from __future__ import annotations

import uuid
from collections import Counter

from dogs_core.ids import _ID_ALPHABET, new_execution_id, new_record_id


def test_execution_ids_are_17_characters_of_the_alphabet_and_unique() -> None:
    ids = [new_execution_id() for _ in range(5000)]
    assert all(len(i) == 17 and set(i) <= set(_ID_ALPHABET) for i in ids)
    assert len(set(ids)) == len(ids)


def test_every_symbol_is_used_about_equally() -> None:
    counts = Counter("".join(new_execution_id() for _ in range(4000)))
    expected = 4000 * 17 / len(_ID_ALPHABET)
    assert set(counts) == set(_ID_ALPHABET)
    assert all(0.8 * expected < n < 1.2 * expected for n in counts.values())


def test_record_ids_are_uuid7_strings() -> None:
    assert uuid.UUID(new_record_id()).version == 7
