"""The shared watchdog heap: entries fire once at their deadline, cancelled ones never, an
earlier deadline armed while the timer sleeps is not missed, and cancelled entries do not pile
up."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dogs_core.runtime.plumbing.deadlines import Deadlines

from .conftest import now

pytestmark = pytest.mark.anyio


async def test_entries_fire_once_at_their_deadline_in_order() -> None:
    deadlines = Deadlines()
    fired: list[tuple[str, float]] = []
    async with anyio.create_task_group() as group:
        group.start_soon(deadlines.run)
        start = now()
        deadlines.arm(start + 3, lambda at: fired.append(("c", at - start)))
        deadlines.arm(start + 1, lambda at: fired.append(("a", at - start)))
        deadlines.arm(start + 2, lambda at: fired.append(("b", at - start)))
        await anyio.sleep(10)
        group.cancel_scope.cancel()
    assert [name for name, _ in fired] == ["a", "b", "c"]
    assert [at for _, at in fired] == pytest.approx([1, 2, 3])
    assert len(deadlines) == 0


async def test_an_earlier_deadline_armed_while_sleeping_wakes_the_timer() -> None:
    deadlines = Deadlines()
    fired: list[float] = []
    async with anyio.create_task_group() as group:
        group.start_soon(deadlines.run)
        start = now()
        deadlines.arm(start + 100, lambda at: fired.append(at - start))
        await anyio.sleep(1)  # the timer now sleeps until +100
        deadlines.arm(start + 2, lambda at: fired.append(at - start))
        await anyio.sleep(5)
        group.cancel_scope.cancel()
    assert fired == pytest.approx([2])


async def test_cancelled_entries_never_fire() -> None:
    deadlines = Deadlines()
    fired: list[str] = []
    async with anyio.create_task_group() as group:
        group.start_soon(deadlines.run)
        start = now()
        kept = deadlines.arm(start + 2, lambda _: fired.append("kept"))
        dropped = deadlines.arm(start + 1, lambda _: fired.append("dropped"))
        deadlines.cancel(dropped)
        deadlines.cancel(dropped)  # idempotent
        await anyio.sleep(5)
        deadlines.cancel(kept)  # after it fired: a no-op
        group.cancel_scope.cancel()
    assert fired == ["kept"]


async def test_a_raising_callback_does_not_stop_the_timer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    deadlines = Deadlines()
    fired: list[str] = []

    def explode(_: float) -> None:
        raise RuntimeError("boom")

    async with anyio.create_task_group() as group:
        group.start_soon(deadlines.run)
        start = now()
        deadlines.arm(start + 1, explode)
        deadlines.arm(start + 2, lambda _: fired.append("after"))
        await anyio.sleep(5)
        group.cancel_scope.cancel()
    assert fired == ["after"]
    assert "watchdog callback raised" in caplog.text


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(min_value=0, max_value=50), st.booleans()),
        min_size=1,
        max_size=300,
    )
)
def test_heap_stays_bounded_and_fires_exactly_the_live_entries(
    entries: list[tuple[int, bool]],
) -> None:
    """Arm many entries and cancel some: exactly the uncancelled ones fire, each once, in
    deadline order, and the heap never holds more than twice the live entries plus a margin."""
    deadlines = Deadlines()
    fired: list[int] = []

    def firing(index: int) -> Callable[[float], None]:
        return lambda _: fired.append(index)

    armed = [
        (deadlines.arm(float(at), firing(index)), cancel)
        for index, (at, cancel) in enumerate(entries)
    ]
    live = len(entries)
    for entry, cancel in armed:
        if cancel:
            deadlines.cancel(entry)
            live -= 1
            assert len(deadlines) == live
            assert len(deadlines._heap) <= max(2 * live, 64) + 1
    deadlines.fire_due(1000.0)
    expected = sorted(
        (index for index, (_, cancel) in enumerate(entries) if not cancel),
        key=lambda i: (entries[i][0], i),
    )
    assert fired == expected
    assert len(deadlines) == 0
