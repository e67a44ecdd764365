"""pytest plugin of Dogs for Python (registered through the ``pytest11`` entry point)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dogs_testing.memory import InMemoryJobStore


@pytest.fixture
def dogs_memory_store() -> Iterator[InMemoryJobStore]:
    """A fresh, empty in-memory job store."""
    yield InMemoryJobStore()
