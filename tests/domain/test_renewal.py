"""The lock-renewal state machine: the Dogs 4.6.7 renewal scenarios, edge cases, and a stateful
hypothesis test over arbitrary interleavings.

Times in these tests are integer-valued floats (exact arithmetic); the machine only needs one
consistent unit, which is seconds in production.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from dogs_core.domain.renewal import (
    Accepted,
    ArmWatchdog,
    CancelWatchdog,
    Command,
    Commands,
    FailWaiters,
    InFlightWrite,
    RefusalReason,
    Refused,
    RenewalMachine,
    RenewalOutcome,
    RenewalProtocolError,
    ReportStale,
    ResolveWaiters,
    StaleReason,
    StartWrite,
    Watchdog,
    heartbeat_interval,
)
from dogs_core.errors import DogsError, InvalidOptionError

T0 = 1_000_000.0
LOCK = 10_000.0


@dataclass(frozen=True)
class Failed:
    error: object


@dataclass
class FakeRuntime:
    """Performs commands the way the real runtime does, with one timer slot and a hand-driven
    clock (the equivalent of the fake timers of Executor.lockTime.test.ts)."""

    now: float = T0
    lock_time: float = LOCK
    machine: RenewalMachine = field(init=False)
    timer: ArmWatchdog | None = None
    timer_due: float = 0.0
    in_flight: StartWrite | None = None
    writes: list[StartWrite] = field(default_factory=list)
    arms: list[ArmWatchdog] = field(default_factory=list)
    stale: list[StaleReason] = field(default_factory=list)
    settled: dict[int, RenewalOutcome | Failed] = field(default_factory=dict)
    on_settle: dict[int, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.machine = RenewalMachine(now=self.now, lock_time=self.lock_time)
        self.perform(self.machine.start())

    def perform(self, commands: Commands) -> None:
        for command in commands:
            self.apply(command)

    def apply(self, command: Command) -> None:
        match command:
            case StartWrite():
                assert self.in_flight is None, "two renewal writes in flight"
                self.in_flight = command
                self.writes.append(command)
            case ArmWatchdog():
                assert self.timer is None, "two watchdogs armed"
                self.timer = command
                self.timer_due = self.now + command.delay
                self.arms.append(command)
            case CancelWatchdog(generation=generation):
                assert self.timer is not None
                assert self.timer.generation == generation
                self.timer = None
            case ReportStale(reason=reason):
                self.stale.append(reason)
            case ResolveWaiters(ticket=ticket, outcome=outcome):
                self._settle(ticket, outcome)
            case FailWaiters(ticket=ticket, error=error):
                self._settle(ticket, Failed(error))

    def _settle(self, ticket: int, result: RenewalOutcome | Failed) -> None:
        assert ticket not in self.settled, f"ticket {ticket} settled twice"
        self.settled[ticket] = result
        callback = self.on_settle.pop(ticket, None)
        if callback is not None:
            callback()

    # events -----------------------------------------------------------------------------

    def pulse(self, extra: float) -> int | RefusalReason:
        result = self.machine.request(extra, self.now)
        if isinstance(result, Refused):
            assert result.commands == ()
            return result.reason
        self.perform(result.commands)
        return result.ticket

    def _take_write(self) -> StartWrite:
        write = self.in_flight
        assert write is not None
        self.in_flight = None
        return write

    def succeed(self) -> Commands:
        commands = self.machine.write_succeeded(self._take_write().write_id, self.now)
        self.perform(commands)
        return commands

    def lose(self) -> Commands:
        commands = self.machine.write_lost_lock(self._take_write().write_id, self.now)
        self.perform(commands)
        return commands

    def fail(self, error: object) -> Commands:
        commands = self.machine.write_failed(self._take_write().write_id, error, self.now)
        self.perform(commands)
        return commands

    def clear(self) -> Commands:
        commands = self.machine.clear()
        self.perform(commands)
        return commands

    def finish(self) -> Commands:
        commands = self.machine.finish()
        self.perform(commands)
        return commands

    def mark_stale(self) -> Commands:
        commands = self.machine.mark_stale()
        self.perform(commands)
        return commands

    def advance(self, dt: float) -> None:
        """Move the clock, firing the watchdog at its exact time if it comes due."""
        target = self.now + dt
        while self.timer is not None and self.timer_due <= target:
            timer = self.timer
            self.now = self.timer_due
            self.timer = None
            self.perform(self.machine.watchdog_fired(timer.generation, self.now))
        self.now = target

    def run_all_timers(self) -> None:
        if self.timer is not None:
            self.advance(self.timer_due - self.now)

    @property
    def timer_count(self) -> int:
        return 0 if self.timer is None else 1


# ------------------------------------------------------------------------------------------
# The scenarios of services/Executor.lockTime.test.ts (Dogs 4.6.7)
# ------------------------------------------------------------------------------------------


def test_overlapping_renewals_are_serialized_when_the_first_finishes_first() -> None:
    rt = FakeRuntime()
    assert rt.pulse(100) == 1
    assert rt.pulse(200) == 2
    assert len(rt.writes) == 1

    rt.succeed()
    assert len(rt.writes) == 2
    assert rt.settled == {1: RenewalOutcome.RENEWED}

    rt.succeed()
    assert rt.settled == {1: RenewalOutcome.RENEWED, 2: RenewalOutcome.RENEWED}
    assert rt.timer_count == 1
    rt.advance(199)
    assert rt.stale == []
    rt.advance(1)
    assert rt.stale == [StaleReason.WATCHDOG_EXPIRED]


def test_a_later_renewal_cannot_finish_before_the_in_flight_one() -> None:
    rt = FakeRuntime()
    rt.pulse(100)
    rt.pulse(200)
    # The second "DB write" settling first is impossible: it has not even started.
    with pytest.raises(RenewalProtocolError):
        rt.machine.write_succeeded(2, rt.now)
    assert len(rt.writes) == 1

    rt.succeed()
    rt.succeed()
    assert len(rt.writes) == 2
    assert rt.timer_count == 1
    rt.advance(100)
    assert rt.stale == []
    rt.advance(100)
    assert rt.stale == [StaleReason.WATCHDOG_EXPIRED]


@pytest.mark.parametrize("order", ["ascending", "descending"])
def test_a_hundred_pulses_during_a_write_coalesce_into_one_follow_up(order: str) -> None:
    rt = FakeRuntime()
    tickets = [rt.pulse(100)]
    extras = range(200, 300) if order == "ascending" else range(299, 199, -1)
    tickets += [rt.pulse(extra) for extra in extras]
    assert len(rt.writes) == 1
    assert set(tickets[1:]) == {2}

    rt.succeed()
    rt.succeed()
    assert len(rt.writes) == 2
    assert rt.writes[-1].extra == 299
    assert rt.timer_count == 1
    assert rt.settled == {1: RenewalOutcome.RENEWED, 2: RenewalOutcome.RENEWED}


def test_a_pulse_queued_while_the_first_write_settles_is_not_lost() -> None:
    rt = FakeRuntime()
    settlement_ticket: list[int | RefusalReason] = []
    assert rt.pulse(100) == 1
    rt.on_settle[1] = lambda: settlement_ticket.append(rt.pulse(200))

    rt.succeed()
    assert settlement_ticket == [2]
    assert len(rt.writes) == 2
    assert rt.writes[-1].extra == 200
    rt.succeed()
    assert rt.settled[2] is RenewalOutcome.RENEWED
    assert rt.timer_count == 1


def test_clearing_during_a_renewal_never_rearms_the_watchdog() -> None:
    rt = FakeRuntime()
    rt.pulse(100)
    assert rt.clear() == (CancelWatchdog(1),)
    assert rt.succeed() == (ResolveWaiters(1, RenewalOutcome.RENEWED),)

    assert rt.timer_count == 0
    rt.advance(10_000)
    assert rt.stale == []
    assert rt.pulse(200) is RefusalReason.CLEARED
    assert len(rt.writes) == 1


def test_stale_during_a_renewal_gives_no_rearm_and_no_further_write() -> None:
    rt = FakeRuntime()
    rt.pulse(100)
    rt.mark_stale()
    assert rt.stale == [StaleReason.EXTERNAL]
    rt.succeed()
    assert rt.pulse(200) is RefusalReason.STALE

    assert len(rt.writes) == 1
    assert rt.timer_count == 0
    rt.advance(10_000)
    assert rt.stale == [StaleReason.EXTERNAL]
    assert rt.settled == {1: RenewalOutcome.RENEWED}


def test_finishing_during_a_renewal_gives_no_rearm_and_no_further_write() -> None:
    rt = FakeRuntime()
    rt.pulse(100)
    rt.finish()
    rt.succeed()
    assert rt.pulse(200) is RefusalReason.FINISHED
    assert len(rt.writes) == 1
    assert rt.timer_count == 0
    rt.advance(10_000)
    assert rt.stale == []


def test_a_lost_lock_reports_stale_exactly_once_and_stops_writing() -> None:
    rt = FakeRuntime()
    rt.pulse(100)
    rt.pulse(200)
    rt.lose()
    assert rt.pulse(300) is RefusalReason.STALE
    rt.run_all_timers()

    assert len(rt.writes) == 1
    assert rt.stale == [StaleReason.LOCK_LOST]
    assert rt.timer_count == 0
    # Coalesced callers complete (they are not failed) but learn that the lock is lost.
    assert rt.settled == {1: RenewalOutcome.LOCK_LOST, 2: RenewalOutcome.LOCK_LOST}


def test_a_db_error_reports_stale_and_fails_every_waiter_with_that_error() -> None:
    rt = FakeRuntime()
    error = RuntimeError("Mongo renewal failed")
    rt.pulse(100)
    rt.pulse(200)
    rt.fail(error)
    assert rt.pulse(200) is RefusalReason.STALE
    rt.run_all_timers()

    assert len(rt.writes) == 1
    assert rt.stale == [StaleReason.WRITE_FAILED]
    assert rt.timer_count == 0
    assert set(rt.settled) == {1, 2}
    for result in rt.settled.values():
        assert isinstance(result, Failed)
        assert result.error is error


def test_overlapping_renewals_leave_no_orphan_watchdog() -> None:
    rt = FakeRuntime()
    rt.pulse(100)
    rt.pulse(200)
    rt.succeed()
    rt.succeed()
    assert rt.timer_count == 1
    # Every generation ever armed except the current one is dead: firing it does nothing.
    current = rt.machine.watchdog
    assert current is not None
    for arm in rt.arms:
        if arm.generation != current.generation:
            assert rt.machine.watchdog_fired(arm.generation, rt.now + 1e9) == ()
    assert rt.stale == []

    rt.advance(199)
    assert rt.stale == []
    assert rt.timer_count == 1
    rt.advance(1)
    assert rt.stale == [StaleReason.WATCHDOG_EXPIRED]


def test_the_watchdog_deadline_is_the_write_start_plus_extra_not_the_response_time() -> None:
    rt = FakeRuntime()
    rt.pulse(100)
    written = rt.writes[-1]
    assert written.deadline == T0 + 100
    rt.advance(40)
    assert rt.succeed() == (
        CancelWatchdog(1),
        ArmWatchdog(2, T0 + 100, 60),
        ResolveWaiters(1, RenewalOutcome.RENEWED),
    )
    rt.advance(59)
    assert rt.stale == []
    rt.advance(1)
    assert rt.now == written.deadline
    assert rt.stale == [StaleReason.WATCHDOG_EXPIRED]


# ------------------------------------------------------------------------------------------
# Edge cases and the rest of the API
# ------------------------------------------------------------------------------------------


def test_start_arms_the_initial_watchdog_once() -> None:
    machine = RenewalMachine(now=5.0, lock_time=30.0)
    assert machine.watchdog == Watchdog(1, 35.0)
    assert machine.start() == (ArmWatchdog(1, 35.0, 30.0),)
    assert machine.lock_time == 30.0
    assert machine.confirmed_deadline == 35.0
    assert machine.live
    assert machine.refusal_reason is None
    with pytest.raises(RenewalProtocolError):
        machine.start()


@pytest.mark.parametrize(
    "event",
    [
        lambda m: m.request(1.0, 0.0),
        lambda m: m.write_succeeded(1, 0.0),
        lambda m: m.write_lost_lock(1, 0.0),
        lambda m: m.write_failed(1, ValueError(), 0.0),
        lambda m: m.watchdog_fired(1, 0.0),
        lambda m: m.clear(),
        lambda m: m.finish(),
        lambda m: m.mark_stale(),
    ],
)
def test_events_before_start_are_a_protocol_error(event: Any) -> None:
    machine = RenewalMachine(now=0.0, lock_time=1.0)
    with pytest.raises(RenewalProtocolError) as info:
        event(machine)
    assert isinstance(info.value, DogsError)


@pytest.mark.parametrize("bad", [0, -1.0, math.nan, math.inf, -math.inf, True, "3", None])
def test_bad_durations_are_rejected(bad: Any) -> None:
    with pytest.raises(InvalidOptionError) as info:
        RenewalMachine(now=0.0, lock_time=bad)
    assert info.value.field == "lock_time"
    machine = RenewalMachine(now=0.0, lock_time=1.0)
    machine.start()
    with pytest.raises(InvalidOptionError) as info:
        machine.request(bad, 0.0)
    assert info.value.field == "extra"
    assert machine.in_flight is None


@pytest.mark.parametrize("bad", [math.nan, math.inf, True, "0", None])
def test_non_finite_times_are_a_protocol_error(bad: Any) -> None:
    with pytest.raises(RenewalProtocolError):
        RenewalMachine(now=bad, lock_time=1.0)
    machine = RenewalMachine(now=0.0, lock_time=1.0)
    machine.start()
    with pytest.raises(RenewalProtocolError):
        machine.request(1.0, bad)


def test_integer_inputs_are_accepted_as_seconds() -> None:
    machine = RenewalMachine(now=0, lock_time=30)
    machine.start()
    result = machine.request(10, 1)
    assert isinstance(result, Accepted)
    assert result.commands == (StartWrite(1, 10.0, 11.0),)


def test_results_for_a_write_that_is_not_in_flight_are_a_protocol_error() -> None:
    rt = FakeRuntime()
    with pytest.raises(RenewalProtocolError, match="not in flight"):
        rt.machine.write_succeeded(1, rt.now)
    with pytest.raises(RenewalProtocolError, match="not in flight"):
        rt.machine.write_lost_lock(1, rt.now)
    with pytest.raises(RenewalProtocolError, match="not in flight"):
        rt.machine.write_failed(1, ValueError(), rt.now)
    rt.pulse(100)
    rt.succeed()
    with pytest.raises(RenewalProtocolError):
        rt.machine.write_succeeded(1, rt.now)  # a second result for the same write


def test_the_watchdog_stays_at_the_confirmed_deadline_while_a_write_is_in_flight() -> None:
    rt = FakeRuntime(lock_time=100)
    # A write in flight proves nothing yet: the watchdog stays where the database's lock is
    # known to end, so a slow renewal cannot keep an execution alive past its lock.
    ticket = rt.machine.request(300, rt.now)
    assert ticket == Accepted(1, (StartWrite(1, 300, T0 + 300),))
    rt.perform(ticket.commands)
    assert rt.machine.in_flight == InFlightWrite(1, 300, T0, T0 + 300)
    assert rt.machine.watchdog_deadline == T0 + 100
    # Its success confirms the new deadline and moves the watchdog there.
    assert rt.succeed() == (
        CancelWatchdog(1),
        ArmWatchdog(2, T0 + 300, 300),
        ResolveWaiters(1, RenewalOutcome.RENEWED),
    )
    assert rt.machine.confirmed_deadline == T0 + 300
    # A shorter extension leaves the watchdog alone while in flight...
    rt.advance(10)
    shorter = rt.machine.request(50, rt.now)
    assert shorter == Accepted(2, (StartWrite(2, 50, T0 + 60),))
    rt.perform(shorter.commands)
    rt.advance(5)
    # ...and its success moves the watchdog back to what the database now holds.
    assert rt.succeed() == (
        CancelWatchdog(2),
        ArmWatchdog(3, T0 + 60, 45),
        ResolveWaiters(2, RenewalOutcome.RENEWED),
    )
    assert rt.machine.watchdog_deadline == T0 + 60


def test_a_renewal_slower_than_the_remaining_lock_reports_stale() -> None:
    rt = FakeRuntime(lock_time=100)
    rt.advance(90)
    rt.pulse(100)  # in flight, would hold the lock until T0 + 190
    rt.advance(10)  # the confirmed lock ends before the write answers
    assert rt.stale == [StaleReason.WATCHDOG_EXPIRED]


def test_a_success_after_the_deadline_arms_a_zero_delay() -> None:
    rt = FakeRuntime(lock_time=10_000)
    rt.pulse(100)
    rt.advance(500)  # slower than the write's own extra; the initial watchdog is still later
    assert rt.stale == []
    rt.succeed()
    assert rt.arms[-1] == ArmWatchdog(2, T0 + 100, 0.0)
    rt.advance(0)
    assert rt.stale == [StaleReason.WATCHDOG_EXPIRED]


def test_a_hung_write_cannot_hide_an_expired_lock() -> None:
    rt = FakeRuntime(lock_time=100)
    rt.pulse(100)
    rt.advance(50)
    assert rt.pulse(400) == 2  # pending follow-up
    rt.advance(50)  # the write's deadline: its outcome can no longer keep the lock
    assert rt.stale == [StaleReason.WATCHDOG_EXPIRED]
    assert rt.settled == {2: RenewalOutcome.ABANDONED}
    # The write completes late: it resolves its own waiters, arms nothing, reports nothing.
    assert rt.succeed() == (ResolveWaiters(1, RenewalOutcome.RENEWED),)
    assert rt.timer_count == 0
    assert len(rt.writes) == 1


@pytest.mark.parametrize("result", ["lost", "failed"])
def test_a_write_ending_badly_after_stale_does_not_report_twice(result: str) -> None:
    rt = FakeRuntime(lock_time=100)
    rt.pulse(100)
    rt.advance(100)
    assert rt.stale == [StaleReason.WATCHDOG_EXPIRED]
    error = OSError("boom")
    commands = rt.lose() if result == "lost" else rt.fail(error)
    assert len(commands) == 1
    assert rt.stale == [StaleReason.WATCHDOG_EXPIRED]
    expected = RenewalOutcome.LOCK_LOST if result == "lost" else Failed(error)
    assert rt.settled == {1: expected}


def test_a_watchdog_that_fires_early_is_rearmed_for_the_rest() -> None:
    rt = FakeRuntime(lock_time=100)
    assert rt.machine.watchdog_fired(1, T0 + 40) == (ArmWatchdog(2, T0 + 100, 60),)
    assert rt.machine.watchdog == Watchdog(2, T0 + 100)
    assert rt.machine.watchdog_fired(1, T0 + 100) == ()  # the old generation is dead
    assert rt.machine.watchdog_fired(2, T0 + 100) == (ReportStale(StaleReason.WATCHDOG_EXPIRED),)
    assert rt.machine.watchdog_fired(2, T0 + 200) == ()  # fired already: nothing armed
    assert rt.machine.stale_reason is StaleReason.WATCHDOG_EXPIRED


def test_a_watchdog_firing_after_it_was_cancelled_is_ignored() -> None:
    rt = FakeRuntime(lock_time=100)
    rt.finish()
    assert rt.machine.watchdog_fired(1, T0 + 1_000) == ()
    assert not rt.machine.stale_reported


def test_time_never_runs_backwards() -> None:
    rt = FakeRuntime(lock_time=100)
    rt.advance(30)
    rt.machine.watchdog_fired(999, rt.now)  # an event that only moves the machine's clock
    result = rt.machine.request(10, T0)  # an older timestamp
    assert isinstance(result, Accepted)
    assert result.commands == (StartWrite(1, 10, T0 + 40),)


def test_finish_abandons_the_pending_follow_up_and_defers_ownership_to_the_post_run_write() -> None:
    rt = FakeRuntime()
    rt.pulse(100)
    rt.pulse(200)
    assert rt.finish() == (CancelWatchdog(1), ResolveWaiters(2, RenewalOutcome.ABANDONED))
    assert rt.finish() == ()
    # The renewal racing the post-run write matches nothing: not stale by itself.
    assert rt.lose() == (ResolveWaiters(1, RenewalOutcome.LOCK_LOST),)
    assert rt.stale == []
    # The post-run fenced write decides.
    assert rt.mark_stale() == (ReportStale(StaleReason.EXTERNAL),)
    assert rt.mark_stale() == ()
    assert rt.stale == [StaleReason.EXTERNAL]


def test_a_db_error_after_finish_fails_the_waiters_without_stale() -> None:
    rt = FakeRuntime()
    rt.pulse(100)
    rt.finish()
    error = TimeoutError()
    assert rt.fail(error) == (FailWaiters(1, error),)
    assert rt.stale == []


def test_clear_is_permanent_but_a_lost_lock_in_flight_is_still_stale() -> None:
    rt = FakeRuntime()
    rt.pulse(100)
    rt.pulse(150)
    assert rt.clear() == (CancelWatchdog(1), ResolveWaiters(2, RenewalOutcome.ABANDONED))
    assert rt.clear() == ()
    assert rt.machine.cleared
    assert rt.lose() == (
        ReportStale(StaleReason.LOCK_LOST),
        ResolveWaiters(1, RenewalOutcome.LOCK_LOST),
    )
    assert rt.stale == [StaleReason.LOCK_LOST]


def test_mark_stale_abandons_the_pending_follow_up() -> None:
    rt = FakeRuntime()
    rt.pulse(100)
    rt.pulse(200)
    assert rt.mark_stale() == (
        CancelWatchdog(1),
        ReportStale(StaleReason.EXTERNAL),
        ResolveWaiters(2, RenewalOutcome.ABANDONED),
    )
    assert rt.machine.pending_extra is None
    assert rt.machine.pending_ticket is None


def test_refusal_reasons_take_stale_then_finished_then_cleared() -> None:
    rt = FakeRuntime()
    reasons = [rt.machine.refusal_reason]
    rt.clear()
    reasons.append(rt.machine.refusal_reason)
    rt.finish()
    reasons.append(rt.machine.refusal_reason)
    rt.mark_stale()
    reasons.append(rt.machine.refusal_reason)
    assert reasons == [None, RefusalReason.CLEARED, RefusalReason.FINISHED, RefusalReason.STALE]
    assert rt.machine.finished
    assert rt.pulse(1) is RefusalReason.STALE
    assert not rt.machine.live


def test_inspection_properties_and_repr() -> None:
    rt = FakeRuntime()
    assert rt.machine.pending_ticket is None
    rt.pulse(100)
    rt.pulse(300)
    rt.pulse(200)
    assert rt.machine.pending_extra == 300
    assert rt.machine.pending_ticket == 2
    assert rt.machine.writes_started == 1
    assert rt.machine.in_flight == InFlightWrite(1, 100, T0, T0 + 100)
    text = repr(rt.machine)
    assert "pending_extra=300" in text
    assert "RenewalMachine(" in text


def test_heartbeat_interval() -> None:
    assert heartbeat_interval(30.0) == pytest.approx(10.0)
    assert heartbeat_interval(30, 0.5) == 15.0
    for fraction in (0, 1, -0.1, 1.5, math.nan, True, "0.5"):
        with pytest.raises(InvalidOptionError) as info:
            heartbeat_interval(30.0, fraction)  # type: ignore[arg-type]
        assert info.value.field == "heartbeat_fraction"
    for lock_time in (0, -1.0, math.inf, math.nan):
        with pytest.raises(InvalidOptionError):
            heartbeat_interval(lock_time)


def test_a_heartbeat_through_the_machine_keeps_a_long_job_alive() -> None:
    rt = FakeRuntime(lock_time=30)
    interval = heartbeat_interval(30, 0.5)
    for _ in range(100):
        rt.advance(interval)
        assert isinstance(rt.pulse(30), int)
        rt.advance(1)  # DB latency
        rt.succeed()
    assert rt.stale == []
    assert len(rt.writes) == 100
    deadlines = [arm.deadline for arm in rt.arms]
    assert deadlines == sorted(deadlines)


def test_monotone_pulses_give_monotone_deadlines_even_with_slow_writes() -> None:
    # Each write answers 18 s after it starts; pulses of 60 s keep the confirmed lock ahead.
    rt = FakeRuntime(lock_time=60)
    for step in range(60):
        rt.advance(7)
        rt.pulse(60)
        if step % 3 == 2:
            rt.advance(4)
            rt.succeed()
    deadlines = [arm.deadline for arm in rt.arms]
    assert deadlines == sorted(deadlines)
    assert rt.stale == []


# ------------------------------------------------------------------------------------------
# Stateful: arbitrary interleavings
# ------------------------------------------------------------------------------------------


@dataclass
class Pulse:
    seq: int
    extra: float
    ticket: int


class RenewalInterleavings(RuleBasedStateMachine):
    """Drives the machine like a runtime would, through every interleaving of pulses, write
    results, timers (current, old and early), clear, finish and external stale, with a
    non-decreasing clock, and checks the guarantees after every step."""

    def __init__(self) -> None:
        super().__init__()
        self.seq = 0  # a global event counter ("happens before")
        self.now = 0.0
        self.monotone = False
        self.lock_time = 1.0
        self.machine = RenewalMachine(now=0.0, lock_time=1.0)
        self.timer: ArmWatchdog | None = None
        self.arm_history: list[ArmWatchdog] = []
        self.in_flight: StartWrite | None = None
        self.write_start_seq: dict[int, int] = {}
        self.writes: list[StartWrite] = []
        self.waiting: dict[int, list[Pulse]] = {}
        self.settled: dict[int, RenewalOutcome | Failed] = {}
        self.stale_reports: list[StaleReason] = []
        self.cleared = False
        self.finished = False
        self.stale = False
        self.confirmed = 0.0
        self.errors: dict[int, object] = {}

    @initialize(
        lock_time=st.integers(1, 50).map(float),
        start=st.integers(0, 1_000).map(float),
        monotone=st.booleans(),
    )
    def start(self, lock_time: float, start: float, monotone: bool) -> None:
        self.now = start
        self.lock_time = lock_time
        self.monotone = monotone
        self.machine = RenewalMachine(now=start, lock_time=lock_time)
        self.confirmed = start + lock_time
        self.perform(self.machine.start())

    # runtime side ----------------------------------------------------------------------

    def perform(
        self, commands: Commands, *, completed: int | None = None, result: str = ""
    ) -> None:
        """Perform ``commands``; ``completed`` and ``result`` name the write result that
        produced them, if one did."""
        for command in commands:
            self.seq += 1
            match command:
                case StartWrite(write_id=write_id, extra=extra, deadline=deadline):
                    assert self.in_flight is None, "two writes in flight"
                    assert self.sim_live, "a write started after the execution stopped being live"
                    assert write_id == len(self.writes) + 1
                    assert deadline == self.now + extra
                    pulses = self.waiting.get(write_id, [])
                    assert pulses, "a write nobody asked for"
                    assert extra == max(p.extra for p in pulses)
                    self.in_flight = command
                    self.write_start_seq[write_id] = self.seq
                    self.writes.append(command)
                case ArmWatchdog(generation=generation, deadline=deadline, delay=delay):
                    assert self.timer is None, "two watchdogs armed"
                    assert self.sim_live, "a watchdog armed after the execution stopped being live"
                    assert delay == max(0.0, deadline - self.now)
                    if self.arm_history:
                        assert generation > self.arm_history[-1].generation
                        if self.monotone:
                            assert deadline >= self.arm_history[-1].deadline
                    self.timer = command
                    self.arm_history.append(command)
                case CancelWatchdog(generation=generation):
                    assert self.timer is not None
                    assert self.timer.generation == generation
                    self.timer = None
                case ReportStale(reason=reason):
                    self.stale_reports.append(reason)
                    self.stale = True
                    assert len(self.stale_reports) == 1, "stale reported twice"
                case ResolveWaiters(ticket=ticket, outcome=RenewalOutcome.ABANDONED):
                    assert completed is None, "a write result abandons nothing"
                    assert ticket not in self.write_start_seq, "abandoned a started write"
                    self.settle(ticket, RenewalOutcome.ABANDONED, completed)
                case ResolveWaiters(ticket=ticket, outcome=RenewalOutcome.RENEWED):
                    assert result == "succeeded"
                    assert ticket == completed, "only a write's own ticket is renewed by it"
                    self.settle(ticket, RenewalOutcome.RENEWED, completed)
                case ResolveWaiters(ticket=ticket, outcome=outcome):
                    assert outcome is RenewalOutcome.LOCK_LOST
                    assert result == "lost"
                    assert completed is not None
                    assert ticket in (completed, completed + 1)
                    self.settle(ticket, outcome, completed)
                case FailWaiters(ticket=ticket, error=error):
                    assert result == "failed"
                    assert completed is not None
                    assert ticket in (completed, completed + 1)
                    assert error is self.errors[completed]
                    self.settle(ticket, Failed(error), completed)

    def settle(self, ticket: int, result: RenewalOutcome | Failed, completed: int | None) -> None:
        assert ticket not in self.settled, "a ticket settled twice"
        pulses = self.waiting.pop(ticket)
        assert pulses, "a ticket nobody waits on"
        self.settled[ticket] = result
        if completed == ticket and result is RenewalOutcome.RENEWED:
            # Answered by its own write, which started after every one of its pulses and
            # carried at least each of their durations.
            start_seq = self.write_start_seq[ticket]
            write = self.writes[ticket - 1]
            for pulse in pulses:
                assert pulse.seq < start_seq
                assert write.extra >= pulse.extra

    # rules -----------------------------------------------------------------------------

    # Few rules and no preconditions (a rule that does not apply is a no-op), and the events
    # that end the renewal life (stale, finish, clear) drawn less often than the others, so that
    # examples stay live long enough to interleave many writes, pulses and timers.

    @rule(dt=st.integers(0, 10).map(float))
    def advance(self, dt: float) -> None:
        self.now += dt

    @rule(extras=st.lists(st.integers(1, 60).map(float), min_size=1, max_size=4))
    def pulses(self, extras: list[float]) -> None:
        for extra in extras:
            self.request(self.lock_time if self.monotone else extra)

    def request(self, extra: float) -> None:
        self.seq += 1
        pulse_seq = self.seq
        result = self.machine.request(extra, self.now)
        if isinstance(result, Refused):
            assert result.commands == ()
            assert not self.sim_live
            expected = (
                RefusalReason.STALE
                if self.stale
                else RefusalReason.FINISHED
                if self.finished
                else RefusalReason.CLEARED
            )
            assert result.reason is expected
            return
        assert self.sim_live
        # The pulse waits for a write that has not started yet (or starts now).
        assert result.ticket not in self.write_start_seq
        self.waiting.setdefault(result.ticket, []).append(Pulse(pulse_seq, extra, result.ticket))
        self.perform(result.commands)

    @rule(
        result=st.sampled_from(["succeeded"] * 10 + ["lost", "failed"]),
        latency=st.integers(0, 20).map(float),
    )
    def write_completes(self, result: str, latency: float) -> None:
        if self.in_flight is None:
            return
        self.now += latency
        write = self.take_write()
        was_stale, finished = self.stale, self.finished
        if result == "succeeded":
            self.confirmed = write.deadline
            commands = self.machine.write_succeeded(write.write_id, self.now)
            self.perform(commands, completed=write.write_id, result=result)
            assert self.settled[write.write_id] is RenewalOutcome.RENEWED
            assert self.stale == was_stale
        elif result == "lost":
            commands = self.machine.write_lost_lock(write.write_id, self.now)
            self.perform(commands, completed=write.write_id, result=result)
            assert self.settled[write.write_id] is RenewalOutcome.LOCK_LOST
            assert self.stale == (was_stale or not finished)
            assert self.in_flight is None
        else:
            error = RuntimeError(f"write {write.write_id} failed")
            self.errors[write.write_id] = error
            commands = self.machine.write_failed(write.write_id, error, self.now)
            self.perform(commands, completed=write.write_id, result=result)
            assert self.settled[write.write_id] == Failed(error)
            assert self.stale == (was_stale or not finished)
            assert self.in_flight is None

    @rule(kind=st.sampled_from(["on_time"] + ["early"] * 5 + ["old"] * 6), data=st.data())
    def watchdog_fires(self, kind: str, data: st.DataObject) -> None:
        timer = self.timer
        if kind == "old" or timer is None:
            live = None if timer is None else timer.generation
            dead = [arm.generation for arm in self.arm_history if arm.generation != live]
            generation = data.draw(st.sampled_from(dead) if dead else st.integers(100, 200))
            self.now += data.draw(st.sampled_from([0.0, 1.0, 1e6]))
            assert self.machine.watchdog_fired(generation, self.now) == ()
        elif kind == "on_time":
            self.now = max(self.now, timer.deadline)
            self.timer = None
            self.perform(self.machine.watchdog_fired(timer.generation, self.now))
            assert self.stale
        elif timer.deadline > self.now:  # fires early (otherwise, "on_time" is the real firing)
            self.timer = None
            self.perform(self.machine.watchdog_fired(timer.generation, self.now))
            assert self.timer is not None
            assert self.timer.deadline == timer.deadline
            assert not self.stale

    @rule(kind=st.sampled_from(["clear", "finish", "mark_stale"] + ["nothing"] * 27))
    def execution_event(self, kind: str) -> None:
        if kind == "nothing":
            return
        if kind == "clear":
            self.cleared = True
            self.perform(self.machine.clear())
        elif kind == "finish":
            self.finished = True
            self.perform(self.machine.finish())
        else:
            was_stale = self.stale
            commands = self.machine.mark_stale()
            self.perform(commands)
            assert self.stale
            assert (commands == ()) == was_stale

    def take_write(self) -> StartWrite:
        write = self.in_flight
        assert write is not None
        self.in_flight = None
        self.seq += 1
        return write

    @property
    def sim_live(self) -> bool:
        """Live as far as the runtime knows (from its own calls and the commands it saw)."""
        return not (self.cleared or self.finished or self.stale)

    # invariants ------------------------------------------------------------------------

    @invariant()
    def the_machine_agrees_with_the_runtime(self) -> None:
        m = self.machine
        in_flight = m.in_flight
        if self.in_flight is None:
            assert in_flight is None
        else:
            assert in_flight is not None
            assert (in_flight.write_id, in_flight.extra, in_flight.deadline) == (
                self.in_flight.write_id,
                self.in_flight.extra,
                self.in_flight.deadline,
            )
        armed = m.watchdog
        if self.timer is None:
            assert armed is None
        else:
            assert armed == Watchdog(self.timer.generation, self.timer.deadline)
        assert m.stale_reported == self.stale
        assert m.cleared == self.cleared
        assert m.finished == self.finished
        assert m.live == self.sim_live
        assert m.confirmed_deadline == self.confirmed
        assert m.writes_started == len(self.writes)

    @invariant()
    def one_watchdog_exactly_while_live_at_the_confirmed_expiry(self) -> None:
        m = self.machine
        if m.live:
            assert m.watchdog_deadline == self.confirmed
        else:
            assert m.watchdog is None

    @invariant()
    def at_most_two_open_tickets_and_none_orphaned(self) -> None:
        open_tickets = set(self.waiting)
        allowed: set[int] = set()
        if self.in_flight is not None:
            allowed.add(self.in_flight.write_id)
        if self.machine.pending_ticket is not None:
            allowed.add(self.machine.pending_ticket)
        assert open_tickets <= allowed
        # A pending follow-up exists only behind a write in flight, while live.
        if self.machine.pending_extra is not None:
            assert self.in_flight is not None
            assert self.machine.live
            assert self.machine.pending_ticket in open_tickets

    @invariant()
    def the_state_has_constant_size(self) -> None:
        assert not hasattr(self.machine, "__dict__")
        for name in RenewalMachine.__slots__:
            value = getattr(self.machine, name)
            assert value is None or isinstance(
                value, bool | int | float | StaleReason | Watchdog | InFlightWrite
            ), (name, value)

    def teardown(self) -> None:
        # Drain: let every write in flight succeed. Every accepted pulse must then be settled.
        while self.in_flight is not None:
            write = self.take_write()
            self.confirmed = write.deadline
            commands = self.machine.write_succeeded(write.write_id, self.now)
            self.perform(commands, completed=write.write_id, result="succeeded")
        assert self.waiting == {}, "an accepted pulse was never settled"


TestRenewalInterleavings = RenewalInterleavings.TestCase
TestRenewalInterleavings.settings = settings(
    max_examples=200,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
