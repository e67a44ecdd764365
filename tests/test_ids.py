"""Execution ids have Dogs' shape and are drawn uniformly from its alphabet."""

from __future__ import annotations

import uuid
from collections import Counter

import pytest

from dogs_core.ids import _ID_ALPHABET, new_execution_id, new_execution_ids, new_record_id


def test_execution_ids_are_17_characters_of_the_alphabet_and_unique() -> None:
    ids = [new_execution_id() for _ in range(5000)]
    assert all(len(i) == 17 and set(i) <= set(_ID_ALPHABET) for i in ids)
    assert len(set(ids)) == len(ids)


def test_every_symbol_is_used_about_equally() -> None:
    counts = Counter("".join(new_execution_id() for _ in range(4000)))
    expected = 4000 * 17 / len(_ID_ALPHABET)
    assert set(counts) == set(_ID_ALPHABET)
    assert all(0.8 * expected < n < 1.2 * expected for n in counts.values())


@pytest.mark.parametrize("count", [0, 1, 2, 32, 500])
def test_a_batch_of_execution_ids_has_the_same_shape(count: int) -> None:
    ids = new_execution_ids(count)
    assert len(ids) == count
    assert all(len(i) == 17 and set(i) <= set(_ID_ALPHABET) for i in ids)
    assert len(set(ids)) == count


def test_batches_use_every_symbol_about_equally() -> None:
    counts = Counter("".join("".join(new_execution_ids(40)) for _ in range(100)))
    expected = 4000 * 17 / len(_ID_ALPHABET)
    assert set(counts) == set(_ID_ALPHABET)
    assert all(0.8 * expected < n < 1.2 * expected for n in counts.values())


def test_record_ids_are_uuid7_strings() -> None:
    assert uuid.UUID(new_record_id()).version == 7
