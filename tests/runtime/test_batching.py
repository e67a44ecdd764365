"""Group commit: concurrent submissions coalesce into batches, each submitter gets its own
result, a failed batch fails every item in it, and a lone item goes out at once."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dogs_core.errors import TransientStoreError
from dogs_core.runtime.plumbing.batching import GroupCommit

from .conftest import now

pytestmark = pytest.mark.anyio


class Recorder:
    """A store call that takes ``latency`` seconds and doubles each item."""

    def __init__(self, latency: float = 0.01, fail_on: set[int] | None = None) -> None:
        self.latency = latency
        self.fail_on = fail_on or set()
        self.batches: list[list[int]] = []

    async def write(self, items: list[int]) -> list[int]:
        self.batches.append(list(items))
        await anyio.sleep(self.latency)
        if self.fail_on & set(items):
            raise TransientStoreError("boom", write_may_have_applied=False)
        return [item * 2 for item in items]


async def test_a_lone_item_is_written_at_once() -> None:
    recorder = Recorder()
    commit: GroupCommit[int, int] = GroupCommit(recorder.write, what="test")
    async with anyio.create_task_group() as group:
        group.start_soon(commit.run)
        started = now()
        assert await commit.submit(21) == 42
        assert now() - started == pytest.approx(recorder.latency)
        group.cancel_scope.cancel()
    assert recorder.batches == [[21]]


async def test_items_queued_during_a_write_go_out_together() -> None:
    recorder = Recorder()
    commit: GroupCommit[int, int] = GroupCommit(recorder.write, what="test")
    results: dict[int, int] = {}

    async def submit(item: int) -> None:
        results[item] = await commit.submit(item)

    async with anyio.create_task_group() as group:
        group.start_soon(commit.run)
        async with anyio.create_task_group() as submitters:
            submitters.start_soon(submit, 0)
            await anyio.sleep(recorder.latency / 2)  # item 0's write is in flight
            for item in range(1, 10):
                submitters.start_soon(submit, item)
        group.cancel_scope.cancel()
    assert results == {item: item * 2 for item in range(10)}
    # The first item leaves alone; the nine that queued behind it share the next batch.
    assert [sorted(batch) for batch in recorder.batches] == [[0], list(range(1, 10))]
    assert commit.batches_sent == 2
    assert commit.items_sent == 10


async def test_batches_respect_the_size_limit_and_keep_order() -> None:
    recorder = Recorder()
    commit: GroupCommit[int, int] = GroupCommit(recorder.write, what="test", max_batch=3)
    results: dict[int, int] = {}

    async def submit(item: int) -> None:
        results[item] = await commit.submit(item)

    async with anyio.create_task_group() as group:
        group.start_soon(commit.run)
        async with anyio.create_task_group() as submitters:
            for item in range(8):
                submitters.start_soon(submit, item)
        group.cancel_scope.cancel()
    assert results == {item: item * 2 for item in range(8)}
    assert all(len(batch) <= 3 for batch in recorder.batches)
    assert sorted(item for batch in recorder.batches for item in batch) == list(range(8))


async def test_a_failed_batch_fails_each_of_its_items_only() -> None:
    recorder = Recorder(fail_on={5})
    commit: GroupCommit[int, int] = GroupCommit(recorder.write, what="test")
    outcomes: dict[int, object] = {}

    async def submit(item: int) -> None:
        try:
            outcomes[item] = await commit.submit(item)
        except TransientStoreError as error:
            outcomes[item] = error

    async with anyio.create_task_group() as group:
        group.start_soon(commit.run)
        async with anyio.create_task_group() as submitters:
            for item in range(8):
                submitters.start_soon(submit, item)
        # A later, separate submission is unaffected.
        assert await commit.submit(100) == 200
        group.cancel_scope.cancel()
    failed = {item for item, outcome in outcomes.items() if isinstance(outcome, Exception)}
    (holding_five,) = [batch for batch in recorder.batches if 5 in batch]
    assert failed == set(holding_five)  # the batch holding 5, and only it


async def test_a_writer_that_returns_the_wrong_count_is_an_error() -> None:
    async def short(items: list[int]) -> list[int]:
        return items[:-1]

    commit: GroupCommit[int, int] = GroupCommit(short, what="test")
    async with anyio.create_task_group() as group:
        group.start_soon(commit.run)
        with pytest.raises(RuntimeError, match="returned 0 result"):
            await commit.submit(1)
        group.cancel_scope.cancel()


async def test_a_write_past_the_timeout_fails_its_items() -> None:
    recorder = Recorder(latency=60)
    commit: GroupCommit[int, int] = GroupCommit(recorder.write, what="test", timeout=5)
    async with anyio.create_task_group() as group:
        group.start_soon(commit.run)
        with pytest.raises(TimeoutError):
            await commit.submit(1)
        group.cancel_scope.cancel()


async def test_a_cancelled_submitter_still_has_its_item_written() -> None:
    recorder = Recorder(latency=1)
    commit: GroupCommit[int, int] = GroupCommit(recorder.write, what="test")
    async with anyio.create_task_group() as group:
        group.start_soon(commit.run)
        with anyio.move_on_after(0.5):
            await commit.submit(7)
        await anyio.sleep(1)
        group.cancel_scope.cancel()
    assert recorder.batches == [[7]]


def test_max_batch_must_be_positive() -> None:
    async def write(items: list[int]) -> list[int]:
        return items

    with pytest.raises(ValueError, match="max_batch"):
        GroupCommit(write, what="test", max_batch=0)


@settings(max_examples=40, deadline=None)
@given(
    delays=st.lists(st.integers(min_value=0, max_value=5), min_size=1, max_size=30),
    max_batch=st.integers(min_value=1, max_value=8),
)
def test_every_item_is_written_once_with_its_own_result(delays: list[int], max_batch: int) -> None:
    """Whatever the interleaving of submissions and writes, each item is written exactly once,
    in submission order, in batches of at most ``max_batch``, and gets its own result."""
    import trio
    import trio.testing

    async def main() -> None:
        recorder = Recorder(latency=0.003)
        commit: GroupCommit[int, int] = GroupCommit(
            recorder.write, what="test", max_batch=max_batch
        )
        results: dict[int, int] = {}
        order: list[int] = []

        async def submit(item: int, delay: int) -> None:
            await anyio.sleep(delay / 1000)
            order.append(item)
            results[item] = await commit.submit(item)

        async with anyio.create_task_group() as group:
            group.start_soon(commit.run)
            async with anyio.create_task_group() as submitters:
                for item, delay in enumerate(delays):
                    submitters.start_soon(submit, item, delay)
            group.cancel_scope.cancel()
        assert results == {item: item * 2 for item in range(len(delays))}
        assert [item for batch in recorder.batches for item in batch] == order
        assert all(1 <= len(batch) <= max_batch for batch in recorder.batches)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
