"""The registry of the in-memory store (:class:`~dogs_core.ports.RegistryStore`): one entry per
``Workers`` instance, each call atomic under the state's lock; with a clock, an entry whose
``expires_at`` has passed is gone at the next call (MongoDB's TTL is later than that)."""

from __future__ import annotations

import dataclasses
from datetime import datetime

from dogs_core.domain.records import to_millis
from dogs_core.domain.registry import (
    RunningExecution,
    WorkerCommand,
    WorkerInfo,
    WorkerState,
    check_instance_id,
)
from dogs_core.errors import InvalidOptionError
from dogs_testing._memory_state import MemoryState

__all__ = ["MemoryRegistry"]


def _stored(info: WorkerInfo, command: WorkerCommand | None) -> WorkerInfo:
    return dataclasses.replace(
        info,
        started_at=to_millis(info.started_at),
        last_beat=to_millis(info.last_beat),
        expires_at=to_millis(info.expires_at),
        executions=tuple(
            RunningExecution(e.job_id, e.job_name, e.execution_id, to_millis(e.started_at))
            for e in info.executions
        ),
        command=command,
    )


class MemoryRegistry(MemoryState):
    """The workers' registry over :class:`MemoryState`, kept beside it."""

    def _workers(self) -> dict[str, WorkerInfo]:
        workers: dict[str, WorkerInfo] = self.__dict__.setdefault("_registry", {})
        if self._clock is not None:
            now = to_millis(self._clock.now())
            for key in [key for key, info in workers.items() if info.expires_at <= now]:
                del workers[key]
        return workers

    def setup_registry(self) -> None:
        """Nothing to create in memory."""

    def beat_worker(self, info: WorkerInfo) -> WorkerCommand | None:
        if not isinstance(info, WorkerInfo):
            raise InvalidOptionError("info", info, "must be a WorkerInfo")
        key = check_instance_id(info.instance_id)
        with self._state():
            workers = self._workers()
            old = workers.get(key)
            command = None if old is None else old.command
            workers[key] = _stored(info, command)
            return command

    def list_workers(self) -> list[WorkerInfo]:
        with self._state():
            workers = list(self._workers().values())
        return sorted(workers, key=lambda info: info.started_at, reverse=True)

    def get_worker(self, instance_id: str) -> WorkerInfo | None:
        key = check_instance_id(instance_id)
        with self._state():
            return self._workers().get(key)

    def command_worker(
        self, instance_id: str, command: WorkerCommand, *, now: datetime
    ) -> WorkerInfo | None:
        if not isinstance(command, WorkerCommand):
            raise InvalidOptionError("command", command, "must be a WorkerCommand")
        key = check_instance_id(instance_id)
        at = to_millis(now)
        stored_command = dataclasses.replace(command, requested_at=to_millis(command.requested_at))
        with self._state():
            workers = self._workers()
            info = workers.get(key)
            if info is None or info.state is WorkerState.STOPPED or info.expires_at <= at:
                return None
            workers[key] = info.with_command(stored_command)
            return workers[key]
