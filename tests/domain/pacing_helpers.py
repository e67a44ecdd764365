"""The claim pacer tests' helpers: a pacer over a small ledger, claims until blocked, and a
random source that shuffles partitions into scripted orders."""

from __future__ import annotations

import random
from collections.abc import MutableSequence
from typing import Any

from dogs_core.domain.capacity import CapacityLedger
from dogs_core.domain.pacing import Claim, ClaimPacer, ClaimSizing, WaitForCapacity
from dogs_core.domain.partitions import PartitionRotation

__all__ = ["POLL", "ScriptedRandom", "adaptive", "claim", "claims_until_blocked", "make_pacer"]

POLL = 5.0


def make_pacer(
    *,
    partitions: int = 3,
    workers: int = 8,
    caps: dict[str, int | None] | None = None,
    batch_size: int = 1,
    poll_interval: float = POLL,
    rng: random.Random | None = None,
    sizing: ClaimSizing | None = None,
) -> ClaimPacer:
    return ClaimPacer(
        CapacityLedger(workers, {"a": None, "b": None} if caps is None else caps),
        PartitionRotation(partitions, rng or random.Random(7)),
        batch_size=None if sizing is not None else batch_size,
        poll_interval=poll_interval,
        sizing=sizing,
    )


def adaptive(batch: int = 64, concurrency: int = 8) -> ClaimSizing:
    return ClaimSizing(batch, concurrency, adapt_batch=True, adapt_concurrency=True)


def claim(pacer: ClaimPacer, now: float = 0.0) -> Claim:
    step = pacer.next(now)
    assert isinstance(step, Claim), step
    return step


def claims_until_blocked(pacer: ClaimPacer, now: float = 0.0) -> list[Claim]:
    sent: list[Claim] = []
    while isinstance(step := pacer.next(now), Claim):
        sent.append(step)
    assert step == WaitForCapacity()
    return sent


class ScriptedRandom(random.Random):
    """Shuffles into the given orders, one per shuffle of two or more partitions."""

    def __init__(self, *orders: list[int]) -> None:
        super().__init__(0)
        self.orders = list(orders)

    def shuffle(self, x: MutableSequence[Any]) -> None:
        if len(x) < 2:
            return
        order = self.orders.pop(0)
        assert sorted(order) == sorted(x)
        x[:] = order
