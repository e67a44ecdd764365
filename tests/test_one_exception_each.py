"""Every exception exists once. The generated sync twins hold only methods that await or block,
so ``except dogs_core.X`` catches what the async client, the sync client and the blocking client
raise alike (the sync twin of ``UniqueContendedError`` was once a class of its own, which
``except dogs_core.UniqueContendedError`` did not catch)."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

import dogs_core
from dogs_core import Jobs, Unique, UniqueContendedError
from dogs_core.runtime import BlockingDogsClient, DogsClient, JobContext, SyncDogsClient
from dogs_testing import InMemoryJobStore, JobStoreWrapper

T = TypeVar("T")
SRC = Path(__file__).resolve().parents[1] / "src"
#: A handler's "run me again later": a value it returns or raises, not an error of the library.
SIGNALS = {"Snooze"}


def _classes(path: Path) -> list[ast.ClassDef]:
    return [node for node in ast.parse(path.read_text()).body if isinstance(node, ast.ClassDef)]


def _has_io(node: ast.ClassDef) -> bool:
    """A method awaits, or hands out an async iterator (a change feed), or the class is a
    store composed of role classes."""
    for item in ast.walk(node):
        if isinstance(item, ast.AsyncFunctionDef):
            return True
        if (
            isinstance(item, ast.FunctionDef)
            and item.returns is not None
            and "Async" in ast.unparse(item.returns)
        ):
            return True
    return node.name.endswith("JobStore")


def test_no_generated_module_defines_a_class_without_io() -> None:
    """A class of an ``_async`` module has a method that awaits (else it belongs in a
    hand-written module both faces import); no ``_async`` module defines an exception."""
    offenders = []
    for path in sorted(SRC.rglob("_async/*.py")):
        for node in _classes(path):
            bases = {ast.unparse(base) for base in node.bases}
            if any(base.endswith(("Error", "Exception")) for base in bases):
                offenders.append(f"{path.relative_to(SRC)}: exception {node.name}")
            elif "Protocol" not in bases and not _has_io(node):
                offenders.append(f"{path.relative_to(SRC)}: {node.name} has no I/O")
    assert offenders == []


def test_the_core_defines_its_exceptions_in_one_module() -> None:
    offenders = []
    for path in sorted((SRC / "dogs_core").rglob("*.py")):
        if path.name == "errors.py" and path.parent.name == "dogs_core":
            continue
        for node in _classes(path):
            bases = {ast.unparse(base) for base in node.bases}
            error = any(base.endswith(("Error", "Exception")) for base in bases)
            if error and node.name not in SIGNALS:
                offenders.append(f"{path.relative_to(SRC)}: {node.name}")
    assert offenders == []


def test_every_exception_the_core_exports_is_the_one_in_errors() -> None:
    exported = {
        name: getattr(dogs_core, name)
        for name in dogs_core.__all__
        if inspect.isclass(getattr(dogs_core, name))
        and issubclass(getattr(dogs_core, name), BaseException)
    }
    assert "UniqueContendedError" in exported
    for name, error in exported.items():
        if name not in SIGNALS:
            assert error.__module__ == "dogs_core.errors", name


# -- the same exception from every face --------------------------------------------------------

jobs = Jobs()


@jobs.event()
async def signup(params: dict[str, Any], ctx: JobContext) -> None: ...


class HolderAlwaysGone(JobStoreWrapper):
    async def around(self, method: str, call: Callable[[], Awaitable[T]]) -> T:
        if method == "get_record":
            return None  # type: ignore[return-value]
        return await call()


class SyncHolderAlwaysGone:
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def get_record(self, record_id: str) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _held() -> InMemoryJobStore:
    """A store whose key ``signup:42`` is held by a pending record."""
    store = InMemoryJobStore()
    with BlockingDogsClient(store, jobs) as client:
        client.schedule(signup, {}, unique=Unique("signup:42"))
    return store


@pytest.mark.anyio
async def test_the_async_client_raises_the_core_exception() -> None:
    client = DogsClient(HolderAlwaysGone(_held()), jobs)
    with pytest.raises(dogs_core.UniqueContendedError) as raised:
        await client.schedule(signup, {}, unique=Unique("signup:42", states=["pending", "running"]))
    assert type(raised.value) is UniqueContendedError


def test_the_sync_and_the_blocking_clients_raise_the_core_exception() -> None:
    store = _held()
    sync = SyncDogsClient(SyncHolderAlwaysGone(store.sync), jobs)
    with pytest.raises(dogs_core.UniqueContendedError) as raised:
        sync.schedule(signup, {}, unique=Unique("signup:42", states=["pending", "running"]))
    assert type(raised.value) is UniqueContendedError
    with (
        BlockingDogsClient(HolderAlwaysGone(store), jobs) as blocking,
        pytest.raises(dogs_core.UniqueContendedError) as raised,
    ):
        blocking.schedule(signup, {}, unique=Unique("signup:42", states=["pending", "running"]))
    assert type(raised.value) is UniqueContendedError
