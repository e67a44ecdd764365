"""The contract suite, the steps role (optional): a durable step recorded on its record by a
fenced write, the steps handed to the next claim in order, a retried write landing once, a
result stored as given (``$``-strings included), and what clears them: a reset of the tries
does, a retry does not (:class:`~dogs_core.ports.AsyncStepStore`).

Not part of :class:`~dogs_testing.contract.JobStoreContract` (a store need not record steps).
Subclass :class:`StepsContract` (name starting with ``Test``) and provide the ``store``
fixture: a set-up store that lists :attr:`~dogs_core.ports.Role.STEPS` in its ``roles``.
"""

from __future__ import annotations

from typing import Any, cast

import pytest

from dogs_core.domain.records import JobState, JobType
from dogs_core.domain.steering import JobChange
from dogs_core.domain.steps import RecordedStep
from dogs_core.errors import InvalidOptionError
from dogs_core.ids import new_execution_id
from dogs_core.ports import AsyncJobStore, AsyncStepStore, Role, has_role, store_roles
from dogs_testing.contract.base import _H, _MIN, _S, T0, ContractBase, _job, _scheduled_id
from dogs_testing.settling import rescheduled, settle_one

__all__ = ["StepsContract", "step_of"]


def step_of(name: str, execution_id: str, result: Any = None) -> RecordedStep:
    return RecordedStep(
        name=name, result=result, recorded_at=T0, execution_id=execution_id, duration_ms=12
    )


def _steps(store: AsyncJobStore) -> AsyncStepStore:
    assert has_role(store, Role.STEPS), store_roles(store)
    return cast(AsyncStepStore, store)


class StepsContract(ContractBase):
    """Durable steps on records."""

    async def test_record_step_is_fenced_and_the_next_claim_hands_the_steps_back(
        self, store: AsyncJobStore
    ) -> None:
        steps = _steps(store)
        await store.insert_job(_job())
        claimed = await self.claim(store)
        assert claimed.steps == ()
        stranger = new_execution_id()
        assert not await steps.record_step(claimed.job_id, stranger, 0, step_of("x", stranger))
        first = step_of("charge", claimed.lock_id, {"id": "ch_1", "amounts": [1, 2.5]})
        second = step_of("ship", claimed.lock_id, "$not-a-field-path")
        assert await steps.record_step(claimed.job_id, claimed.lock_id, 0, first)
        assert await steps.record_step(claimed.job_id, claimed.lock_id, 1, second)
        assert (await self.record(store, claimed.job_id)).steps == (first, second)
        # the lock expires; the next claim (a takeover) gets the steps, in order
        again = await self.claim(store, now=T0 + 2 * _MIN)
        assert again.job_id == claimed.job_id
        assert again.steps == (first, second)

    async def test_a_retried_write_lands_once_and_drops_what_came_after(
        self, store: AsyncJobStore
    ) -> None:
        steps = _steps(store)
        await store.insert_job(_job())
        claimed = await self.claim(store)
        one, two = step_of("one", claimed.lock_id, 1), step_of("two", claimed.lock_id, 2)
        for step, index in ((one, 0), (one, 0), (two, 1), (two, 1)):
            assert await steps.record_step(claimed.job_id, claimed.lock_id, index, step)
        assert (await self.record(store, claimed.job_id)).steps == (one, two)
        other = step_of("other", claimed.lock_id, 3)
        assert await steps.record_step(claimed.job_id, claimed.lock_id, 1, other)
        assert (await self.record(store, claimed.job_id)).steps == (one, other)

    async def test_a_retry_keeps_the_steps_and_a_reset_of_the_tries_clears_them(
        self, store: AsyncJobStore
    ) -> None:
        steps = _steps(store)
        await store.insert_job(_job())
        claimed = await self.claim(store)
        step = step_of("one", claimed.lock_id, 1)
        assert await steps.record_step(claimed.job_id, claimed.lock_id, 0, step)
        retry = rescheduled(T0 + _S)
        assert await settle_one(store, claimed.job_id, claimed.lock_id, retry)
        again = await self.claim(store, now=T0 + 2 * _S)
        assert again.steps == (step,)
        ended = rescheduled(T0 + 3 * _S, reset_tries=True)
        assert await settle_one(store, again.job_id, again.lock_id, ended)
        record = await self.record(store, again.job_id)
        assert record.type is JobType.EVENT
        assert record.steps == ()

    async def test_a_recorded_sleep_makes_the_record_sleeping_until_it_wakes(
        self, store: AsyncJobStore
    ) -> None:
        """``record_step(..., sleep_until=...)`` and the snooze that follows leave the record
        ``sleeping``: only ``state=sleeping`` finds it, no claim takes it before then, it is
        claimed at its time with its steps, and moving it (a retry now) wakes it early."""
        steps = _steps(store)
        sleepy, woken = [_scheduled_id(await store.insert_job(_job(partition=p))) for p in (0, 1)]
        for partition, job_id in enumerate((sleepy, woken)):
            claimed = await self.claim(store, partition=partition)
            sleep = step_of(f"sleep:{partition}", claimed.lock_id)
            assert await steps.record_step(job_id, claimed.lock_id, 0, sleep, sleep_until=T0 + _H)
            assert await settle_one(
                store, job_id, claimed.lock_id, rescheduled(T0 + _H, tries=claimed.tries - 1)
            )
        record = await self.record(store, sleepy)
        assert (record.next_run_at, record.sleeping) == (T0 + _H, T0 + _H)
        assert record.state(T0) is JobState.SLEEPING
        found = {state: await store.find_records(state=state, now=T0) for state in JobState}
        assert {s: [r.id for r in rs] for s, rs in found.items() if rs} == {
            JobState.SLEEPING: sorted((sleepy, woken))
        }
        assert (
            await store.delete_records(job_name="a", state=JobState.SLEEPING, now=T0, dry_run=True)
            == 2
        )
        assert await store.claim(self.request(partition=0, now=T0 + _MIN)) is None
        moved = await store.modify_record(woken, JobChange(next_run_at=T0), now=T0)
        assert moved is not None
        assert (moved.state(T0), moved.sleeping) == (JobState.DUE, None)
        claimed = await self.claim(store, partition=0, now=T0 + _H)
        assert claimed.job_id == sleepy
        assert [s.name for s in claimed.steps] == ["sleep:0"]

    async def test_bad_arguments_write_nothing(self, store: AsyncJobStore) -> None:
        steps = _steps(store)
        await store.insert_job(_job())
        claimed = await self.claim(store)
        with pytest.raises(InvalidOptionError, match="index"):
            await steps.record_step(claimed.job_id, claimed.lock_id, -1, step_of("x", "e"))
        with pytest.raises(InvalidOptionError, match="step"):
            await steps.record_step(claimed.job_id, claimed.lock_id, 0, "x")  # type: ignore[arg-type]
        assert (await self.record(store, claimed.job_id)).steps == ()
