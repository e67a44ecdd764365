"""The workers' registry's pure rules (dogs_core.domain.registry): when a worker is lost, what
an operator reads of a command not taken yet, uptime, and the checks of ids and commands."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from dogs_core.domain.registry import (
    LOST_AFTER,
    WorkerAction,
    WorkerCommand,
    WorkerInfo,
    WorkerState,
    check_instance_id,
    liveness,
    shown_state,
    uptime,
    worker_command,
)
from dogs_core.errors import InvalidOptionError

NOW = datetime(2030, 5, 1, 12, 0, tzinfo=UTC)
S = timedelta(seconds=1)


def info(state: WorkerState = WorkerState.RUNNING, **changes: object) -> WorkerInfo:
    base = WorkerInfo(
        "w1", "host", 1, "v", ("a",), 4, 1, (), 1, NOW - 60 * S, NOW, state, NOW + 60 * S
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def command(action: WorkerAction) -> WorkerCommand:
    return worker_command(action, requested_at=NOW, requested_by="alice (cli)")


def test_a_worker_is_lost_after_three_missed_beats() -> None:
    assert liveness(info(), NOW + LOST_AFTER) is WorkerState.RUNNING
    assert liveness(info(), NOW + LOST_AFTER + S) is WorkerState.LOST
    assert liveness(info(WorkerState.STOPPED), NOW + timedelta(days=1)) is WorkerState.STOPPED
    slow = info(beat_interval=timedelta(minutes=1))
    assert liveness(slow, NOW + timedelta(minutes=2)) is WorkerState.RUNNING


def test_what_an_operator_reads() -> None:
    assert shown_state(info(), NOW) == "running"
    assert shown_state(info(command=command(WorkerAction.QUIET)), NOW) == "running -> quiet"
    assert shown_state(info(command=command(WorkerAction.STOP)), NOW) == "running -> stop"
    assert shown_state(info(WorkerState.QUIET, command=command(WorkerAction.QUIET)), NOW) == (
        "quiet"
    )
    assert shown_state(info(WorkerState.QUIET, command=command(WorkerAction.STOP)), NOW) == (
        "quiet -> stop"
    )
    assert shown_state(info(WorkerState.STOPPING, command=command(WorkerAction.QUIET)), NOW) == (
        "stopping"
    )
    assert shown_state(info(command=command(WorkerAction.STOP)), NOW + timedelta(hours=1)) == (
        "lost"
    )


def test_uptime_ends_at_the_last_beat_once_stopped_or_lost() -> None:
    assert uptime(info(), NOW + 5 * S) == 65 * S
    assert uptime(info(WorkerState.STOPPED), NOW + timedelta(hours=1)) == 60 * S
    assert uptime(info(started_at=NOW + S), NOW) == timedelta(0)


def test_ids_and_commands_are_checked() -> None:
    assert check_instance_id("w1") == "w1"
    for bad in ("", "a b", "x" * 101, 3):
        with pytest.raises(InvalidOptionError, match="instance_id"):
            check_instance_id(bad)
    stop = worker_command("stop", requested_at=NOW, requested_by="a", grace=5 * S)
    assert (stop.action, stop.grace) == (WorkerAction.STOP, 5 * S)
    with pytest.raises(InvalidOptionError, match="action"):
        worker_command("explode", requested_at=NOW, requested_by="a")
    with pytest.raises(InvalidOptionError, match="only a stop"):
        worker_command("quiet", requested_at=NOW, requested_by="a", grace=5 * S)
    with pytest.raises(InvalidOptionError, match="requested_by"):
        worker_command("quiet", requested_at=NOW, requested_by="")
    assert info().with_command(stop).command == stop
