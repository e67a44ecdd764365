"""The import paths that moved in the house's third cut still work for one release: each warns
and gives the very module at its new place (so a class or an exception is the same object)."""

from __future__ import annotations

import importlib
import sys

import pytest

from dogs_core._moved import MOVED, new_path


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_runtime_path_warns_and_is_the_module_at_its_new_place(old: str) -> None:
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {MOVED[old]}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(MOVED[old])


def test_the_cli_left_the_adapter_and_its_old_path_still_runs_it() -> None:
    for name in [n for n in sys.modules if n.startswith("dogs_mongo.cli")]:
        sys.modules.pop(name)
    with pytest.warns(DeprecationWarning, match="dogs_mongo.cli.common moved to dogs_cli.common"):
        from dogs_mongo.cli.common import container_defaults  # type: ignore[import-not-found]
    import dogs_cli.common

    assert container_defaults is dogs_cli.common.container_defaults
    assert new_path("dogs_mongo.cli") == "dogs_cli"
    assert new_path("dogs_mongo.container") is None
