"""Progress reports: what ``check_progress`` refuses and keeps, and the pacer's rule (latest wins,
at most one write per interval, single flight, nothing forgotten) over arbitrary interleavings
of reports, renewals (that may carry them), write ends, flushes and lost pulses."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from dogs_core.domain.progress import (
    MAX_PROGRESS_DATA_BYTES,
    MAX_PROGRESS_MESSAGE,
    FlushAt,
    Progress,
    ProgressPacer,
    ProgressStep,
    WriteNow,
    check_progress,
    progress_interval,
)
from dogs_core.errors import InvalidOptionError, InvalidProgressError

INTERVAL = 1.0


# -- check_progress -----------------------------------------------------------------------------


def test_a_report_is_normalized_and_its_data_copied() -> None:
    data = {"rows": 12, "file": {"name": "a.csv"}}
    fraction, message, kept = check_progress(1, "chunk 1/1", data)
    assert (fraction, message, kept) == (1.0, "chunk 1/1", data)
    assert isinstance(fraction, float)
    assert kept is not data
    data["rows"] = 13
    assert kept == {"rows": 12, "file": {"name": "a.csv"}}
    assert check_progress(None, "warming up", None) == (None, "warming up", None)
    assert check_progress(0, None, None) == (0.0, None, None)


@pytest.mark.parametrize(
    ("fraction", "message", "data", "field_name"),
    [
        (None, None, None, "fraction"),
        (-0.01, None, None, "fraction"),
        (1.5, None, None, "fraction"),
        (math.nan, None, None, "fraction"),
        (math.inf, None, None, "fraction"),
        (True, None, None, "fraction"),
        ("50%", None, None, "fraction"),
        (0.5, 42, None, "message"),
        (0.5, "x" * (MAX_PROGRESS_MESSAGE + 1), None, "message"),
        (0.5, "a\x00b", None, "message"),
        (0.5, None, [1, 2], "data"),
        (0.5, None, {"when": {1, 2}}, "data.when"),
        (0.5, None, {"$set": 1}, "data"),
        (0.5, None, {"big": 2**60}, "data.big"),
        (0.5, None, {"blob": "x" * MAX_PROGRESS_DATA_BYTES}, "data"),
    ],
)
def test_bad_reports_name_their_field(
    fraction: object, message: object, data: object, field_name: str
) -> None:
    with pytest.raises(InvalidProgressError) as raised:
        check_progress(fraction, message, data, job="import")
    assert raised.value.field.startswith(field_name), raised.value.field


def test_progress_interval_is_a_positive_number() -> None:
    assert progress_interval("i", 2) == 2.0
    for bad in (0, -1, math.nan, math.inf, True, "1s"):
        with pytest.raises(InvalidOptionError):
            progress_interval("progress_interval", bad)
    with pytest.raises(InvalidOptionError):
        ProgressPacer(0)


def test_percent() -> None:
    at = datetime(2030, 1, 1, tzinfo=UTC)
    assert Progress(0.25, None, None, at, "e").percent == 25.0
    assert Progress(None, "m", None, at, "e").percent is None


# -- the pacer, by example ----------------------------------------------------------------------


def test_the_first_report_is_written_at_once_the_next_after_the_interval() -> None:
    pacer = ProgressPacer(INTERVAL)
    assert pacer.staged(0.0) == WriteNow()
    assert pacer.staged(0.1) is None  # the pulse is out: the write will carry the latest
    assert pacer.write_started(0.2)
    assert pacer.staged(0.3) is None  # single flight: after the write
    assert pacer.write_ended(0.4) == FlushAt(1.2)  # not before the interval from the start
    assert pacer.staged(0.5) is None  # under the flush
    assert pacer.flush_due(1.2) == WriteNow()
    assert pacer.write_started(1.2)
    assert pacer.write_ended(1.25) is None  # nothing staged since


def test_a_renewal_carries_a_staged_report_for_free() -> None:
    pacer = ProgressPacer(INTERVAL)
    assert pacer.staged(0.0) == WriteNow()
    assert pacer.write_started(0.0)
    assert pacer.write_ended(0.1) is None
    assert pacer.staged(0.2) == FlushAt(1.0)
    assert pacer.write_started(0.5)  # a heartbeat's renewal carries it, before the interval
    assert pacer.write_ended(0.6) is None
    assert pacer.flush_due(1.0) is None  # nothing left to write
    assert pacer.staged(1.1) == FlushAt(1.5)  # an interval after the heartbeat's write


def test_a_lost_pulse_is_asked_again() -> None:
    pacer = ProgressPacer(INTERVAL)
    assert pacer.staged(0.0) == WriteNow()
    assert pacer.pulse_lost(0.1) == WriteNow()


# -- the pacer, every interleaving ----------------------------------------------------------------


@dataclass
class _Timeline:
    carried_starts: list[tuple[float, bool]] = field(default_factory=list)
    """When each write that carried a report started, and whether it was pulsed for it."""


class PacerInterleavings(RuleBasedStateMachine):
    """Drives a pacer the way the runtime does (one flush timer, writes that start and end,
    heartbeats that start writes of their own) and checks its rules after every step."""

    def __init__(self) -> None:
        super().__init__()
        self.pacer = ProgressPacer(INTERVAL)
        self.now = 0.0
        self.timeline = _Timeline()
        self.pulse_out = False  # a WriteNow was given; its write has not started
        self.carrying = False  # a write carrying a report is in flight
        self.flush: float | None = None
        self.staged_value: int | None = None  # the latest staged report (a counter)
        self.reported = 0
        self.last_written: int | None = None

    def _perform(self, step: ProgressStep) -> None:
        if isinstance(step, WriteNow):
            assert not self.pulse_out, "two pulses for one report"
            self.pulse_out = True
        elif isinstance(step, FlushAt):
            assert self.flush is None, "two flush timers"
            assert step.at >= self.now
            self.flush = step.at

    @rule(dt=st.floats(min_value=0, max_value=2.5))
    def time_passes(self, dt: float) -> None:
        self.now += dt

    @rule()
    def report(self) -> None:
        self.reported += 1
        self.staged_value = self.reported
        self._perform(self.pacer.staged(self.now))

    @precondition(lambda self: not self.carrying)
    @rule(pulsed=st.booleans())
    def a_write_starts(self, pulsed: bool) -> None:
        """The pulsed write starts (or, ``pulsed`` false, a heartbeat's own write)."""
        if pulsed and not self.pulse_out:
            return
        if pulsed:
            self.pulse_out = False
        carried = self.pacer.write_started(self.now)
        self.pulse_out = self.pulse_out and not carried and not pulsed
        if carried:
            assert self.staged_value is not None
            self.carrying = True
            self.timeline.carried_starts.append((self.now, pulsed))
            self.last_written, self.staged_value = self.staged_value, None
        else:
            self.pulse_out = False if pulsed else self.pulse_out

    @precondition(lambda self: self.carrying)
    @rule()
    def the_write_ends(self) -> None:
        self.carrying = False
        self._perform(self.pacer.write_ended(self.now))

    @precondition(lambda self: self.flush is not None)
    @rule()
    def the_flush_fires(self) -> None:
        assert self.flush is not None
        self.now = max(self.now, self.flush)
        self.flush = None
        self._perform(self.pacer.flush_due(self.now))

    @precondition(lambda self: self.pulse_out)
    @rule()
    def the_pulse_is_lost(self) -> None:
        self.pulse_out = False
        self._perform(self.pacer.pulse_lost(self.now))

    @invariant()
    def a_write_of_its_own_waits_an_interval(self) -> None:
        starts = self.timeline.carried_starts
        for (before, _), (after, pulsed) in itertools.pairwise(starts):
            if pulsed:
                assert after - before >= INTERVAL - 1e-9, starts

    @invariant()
    def a_staged_report_is_never_forgotten(self) -> None:
        if self.staged_value is not None and not self.carrying:
            assert self.pulse_out or self.flush is not None, "a staged report with nothing due"

    @invariant()
    def the_pacer_agrees(self) -> None:
        assert self.pacer.writing == self.carrying
        assert self.pacer.has_staged == (self.staged_value is not None)
        assert self.pacer.flush_at == self.flush


TestPacerInterleavings = PacerInterleavings.TestCase
TestPacerInterleavings.settings = settings(max_examples=200, stateful_step_count=40, deadline=None)
