"""The contract suite, the registry role (optional): worker documents written by beats, the
commands operators leave in them (:class:`~dogs_core.ports.AsyncRegistryStore`).

Not part of :class:`~dogs_testing.contract.JobStoreContract`: subclass
:class:`RegistryContract` (name starting with ``Test``) and provide ``store``, an
:class:`~dogs_core.ports.AsyncJobStore` that also has the registry role.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import cast

import pytest

from dogs_core.domain.registry import (
    RunningExecution,
    WorkerAction,
    WorkerInfo,
    WorkerState,
    worker_command,
)
from dogs_core.errors import InvalidOptionError
from dogs_core.ports import AsyncJobStore, AsyncRegistryStore
from dogs_testing.contract.base import _MIN, _S, T0, ContractBase, defined_in

__all__ = ["RegistryContract"]


def _registry(store: AsyncJobStore) -> AsyncRegistryStore:
    return cast(AsyncRegistryStore, store)


def _info(instance: str = "w1", **changes: object) -> WorkerInfo:
    info = WorkerInfo(
        instance_id=instance,
        host="host-a",
        pid=4242,
        version="0.1.0",
        job_names=("a", "b"),
        workers_count=8,
        slots_in_use=1,
        executions=(RunningExecution("job-1", "a", "exec-1", T0 - _S),),
        executions_total=1,
        started_at=T0 - _MIN,
        last_beat=T0,
        state=WorkerState.RUNNING,
        expires_at=T0 + _MIN,
    )
    return dataclasses.replace(info, **changes)  # type: ignore[arg-type]


class RegistryContract(ContractBase):
    """The registry role's contract."""

    @pytest.fixture(autouse=True)
    async def _set_up_registry(self, request: pytest.FixtureRequest, store: AsyncJobStore) -> None:
        # Only for this part's tests: in StoreContract it sits beside every other part.
        if defined_in(RegistryContract, request):
            await _registry(store).setup_registry()

    async def test_a_beat_writes_the_document(self, store: AsyncJobStore) -> None:
        registry = _registry(store)
        assert await registry.beat_worker(_info()) is None
        assert await registry.get_worker("w1") == _info()
        later = _info(last_beat=T0 + 10 * _S, slots_in_use=0, executions=(), executions_total=0)
        assert await registry.beat_worker(later) is None
        assert await registry.get_worker("w1") == later
        assert await registry.get_worker("nobody") is None

    async def test_list_newest_first(self, store: AsyncJobStore) -> None:
        registry = _registry(store)
        await registry.beat_worker(_info("old", started_at=T0 - 2 * _MIN))
        await registry.beat_worker(_info("new", started_at=T0 - _S))
        assert [info.instance_id for info in await registry.list_workers()] == ["new", "old"]

    async def test_a_command_reaches_the_next_beat_and_stays(self, store: AsyncJobStore) -> None:
        registry = _registry(store)
        await registry.beat_worker(_info())
        stop = worker_command(
            WorkerAction.STOP, requested_at=T0, requested_by="ops", grace=timedelta(seconds=5)
        )
        after = await registry.command_worker("w1", stop, now=T0)
        assert after is not None
        assert after.command == stop
        assert await registry.beat_worker(_info(last_beat=T0 + _S)) == stop
        assert (await registry.get_worker("w1")) == _info(last_beat=T0 + _S, command=stop)
        # A newer command replaces it.
        quiet = worker_command(WorkerAction.QUIET, requested_at=T0 + _S, requested_by="ops")
        assert (await registry.command_worker("w1", quiet, now=T0 + _S)) is not None
        assert await registry.beat_worker(_info(last_beat=T0 + 2 * _S)) == quiet

    async def test_no_command_to_a_stopped_expired_or_unknown_worker(
        self, store: AsyncJobStore
    ) -> None:
        registry = _registry(store)
        quiet = worker_command("quiet", requested_at=T0, requested_by="ops")
        assert await registry.command_worker("ghost", quiet, now=T0) is None
        await registry.beat_worker(_info("gone", state=WorkerState.STOPPED))
        assert await registry.command_worker("gone", quiet, now=T0) is None
        await registry.beat_worker(_info("late", expires_at=T0 - _S))
        assert await registry.command_worker("late", quiet, now=T0) is None
        assert (await registry.get_worker("gone")) is not None

    async def test_bad_input_is_refused(self, store: AsyncJobStore) -> None:
        registry = _registry(store)
        with pytest.raises(InvalidOptionError):
            await registry.beat_worker(_info("has space"))
        with pytest.raises(InvalidOptionError):
            await registry.command_worker("w1", "stop", now=T0)  # type: ignore[arg-type]
