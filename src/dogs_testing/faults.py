"""A fault-injecting job store: transient errors and delays at chosen or random port calls.

:class:`FaultyJobStore` wraps any :class:`~dogs_core.ports.AsyncJobStore` and, following a
:class:`FaultPlan`, makes some of its calls fail or slow down the way a database does:

``ERROR_BEFORE``
    Raise :class:`~dogs_core.errors.TransientStoreError` *before* the inner call: nothing was
    applied (``write_may_have_applied=False``), as when no server could be selected.
``ERROR_AFTER``
    Make the inner call, then raise: the write **was** applied but the caller cannot know
    (``write_may_have_applied=True`` for writes), as when the connection drops before the reply.
    This is the "did my write land?" case every retry path must handle.
``DELAY_BEFORE`` / ``DELAY_AFTER``
    ``anyio.sleep`` before the call reaches the inner store (the request is slow to arrive: the
    store sees it late) or after it (the reply is slow: the caller learns late). Under a virtual
    clock (trio's ``MockClock``) the delays take no real time.

``FEED_UNAVAILABLE``
    Raise :class:`~dogs_core.errors.ChangeFeedUnavailableError` from a change feed, as a
    standalone MongoDB server does (feeds only).

A change feed (``watch_records``, ``watch_history``, ``watch_pauses``) is one call per batch
asked for: each ``__anext__`` of the feed is matched against the plan like a call of its method
(so ``fail_next("watch_records", skip_calls=2)`` fails the third batch, the first being the open
signal). An error ends the feed, as a change stream that could not be resumed does; delays slow
the batch; a disconnected store fails the next batch.

Besides the plan, :meth:`FaultyJobStore.disconnect` cuts the store off (every call fails before
reaching the inner store, and a reply still on its way is lost) to play a crashed or partitioned
worker: its locks stay in the store until they expire.

Every injected fault is counted per method and kind in :class:`FaultStats`; several wrappers may
share one ``stats`` object so that a test can print one closing report::

    stats = FaultStats()
    plan = FaultPlan.random(error_rate=0.05, ambiguous_rate=0.05, delay_rate=0.1, max_delay=2.0)
    store = FaultyJobStore(InMemoryJobStore(), plan, rng=random.Random(7), stats=stats)
    store.fail_next("settle_many", FaultKind.ERROR_AFTER)  # a chosen call, once
    ...
    print(stats.report())

``close`` is never faulted (teardown must work).
"""

from __future__ import annotations

import enum
import inspect
import math
import random
from collections import Counter
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Final, TypeVar

import anyio

from dogs_core.errors import ChangeFeedUnavailableError, InvalidOptionError, TransientStoreError
from dogs_core.ports import AsyncArchiveStore, AsyncJobStore
from dogs_testing.wrapper import JobStoreWrapper

__all__ = [
    "FEED_METHODS",
    "FENCED_METHODS",
    "PORT_METHODS",
    "READ_METHODS",
    "WRITE_METHODS",
    "FaultKind",
    "FaultPlan",
    "FaultRule",
    "FaultStats",
    "FaultyJobStore",
]

T = TypeVar("T")


def _port_methods() -> tuple[frozenset[str], frozenset[str]]:
    """Every method of the port's roles (the archive's included), read off the role
    protocols, and those that open a feed (not coroutine functions)."""
    methods: dict[str, object] = {}
    for protocol in (AsyncJobStore, AsyncArchiveStore):
        for role in protocol.__mro__:
            if role.__module__.startswith("dogs_core.ports"):
                methods.update(
                    (name, member)
                    for name, member in vars(role).items()
                    if callable(member) and not name.startswith("_")
                )
    feeds = {name for name, member in methods.items() if not inspect.iscoroutinefunction(member)}
    return frozenset(methods) - {"close"}, frozenset(feeds)


_ALL_METHODS, _FEEDS = _port_methods()

#: Port methods that only read (every other method is taken for a write).
READ_METHODS: Final = frozenset(
    {
        "capabilities",
        "server_time",
        "probe",
        "read_history",
        "get_record",
        "find_records",
        "status_counts",
        "job_stats",
        "paused_names",
        "held_slots",
        "get_lease",
        "count_archivable",
        "count_archived",
    }
)
#: Port methods that open a change feed (faulted batch by batch).
FEED_METHODS: Final = _FEEDS
#: Port methods that change the store (an ``ERROR_AFTER`` on them is ambiguous).
WRITE_METHODS: Final = _ALL_METHODS - READ_METHODS - FEED_METHODS
#: Every port method a plan may name (``close`` is never faulted).
PORT_METHODS: Final = _ALL_METHODS

#: The fenced writes an execution makes on behalf of its lock.
FENCED_METHODS: Final = frozenset({"extend_lock", "settle_many"})


class FaultKind(enum.StrEnum):
    """What a fault does to one call (see the module documentation)."""

    ERROR_BEFORE = "error_before"
    ERROR_AFTER = "error_after"
    DELAY_BEFORE = "delay_before"
    DELAY_AFTER = "delay_after"
    FEED_UNAVAILABLE = "feed_unavailable"
    DISCONNECTED = "disconnected"
    """Counted for calls refused (or replies lost) while the store is disconnected."""

    @property
    def is_error(self) -> bool:
        return self in (
            FaultKind.ERROR_BEFORE,
            FaultKind.ERROR_AFTER,
            FaultKind.FEED_UNAVAILABLE,
            FaultKind.DISCONNECTED,
        )

    @property
    def is_delay(self) -> bool:
        return self in (FaultKind.DELAY_BEFORE, FaultKind.DELAY_AFTER)


@dataclass(frozen=True, slots=True)
class FaultRule:
    """One kind of fault applied to some port calls.

    ``methods``
        Port method names the rule applies to; ``None`` for every port method.
    ``probability``
        Chance, in ``[0, 1]``, that a matching call gets the fault (drawn from the store's rng).
    ``max_count``
        Stop after injecting this many faults (``None``: no limit).
    ``skip_calls``
        Let this many matching calls through before the rule may fire (to fail "the 3rd claim").
    ``delay``
        Seconds for a delay kind: a number, or ``(low, high)`` for a uniform draw.
    """

    kind: FaultKind
    methods: frozenset[str] | None = None
    probability: float = 1.0
    max_count: int | None = None
    skip_calls: int = 0
    delay: float | tuple[float, float] = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.kind, FaultKind) or self.kind is FaultKind.DISCONNECTED:
            raise InvalidOptionError(
                "kind",
                self.kind,
                "must be ERROR_BEFORE, ERROR_AFTER, DELAY_BEFORE, DELAY_AFTER or FEED_UNAVAILABLE",
            )
        if self.methods is not None:
            methods = (
                frozenset({self.methods})
                if isinstance(self.methods, str)
                else frozenset(self.methods)
            )
            unknown = sorted(methods - PORT_METHODS)
            if unknown:
                raise InvalidOptionError(
                    "methods", unknown, f"not port methods; expected some of {sorted(PORT_METHODS)}"
                )
            if self.kind is FaultKind.FEED_UNAVAILABLE and methods - FEED_METHODS:
                raise InvalidOptionError(
                    "methods", sorted(methods - FEED_METHODS), "FEED_UNAVAILABLE faults only feeds"
                )
            object.__setattr__(self, "methods", methods)
        if (
            isinstance(self.probability, bool)
            or not isinstance(self.probability, int | float)
            or not 0 <= self.probability <= 1
        ):
            raise InvalidOptionError("probability", self.probability, "must be within [0, 1]")
        for name, value in (("max_count", self.max_count), ("skip_calls", self.skip_calls)):
            if value is None and name == "max_count":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidOptionError(name, value, "must be a non-negative int")
        low, high = self.delay if isinstance(self.delay, tuple) else (self.delay, self.delay)
        if not all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
            for v in (low, high)
        ) or (low > high):
            raise InvalidOptionError(
                "delay", self.delay, "must be seconds >= 0, or a (low, high) range"
            )
        if self.kind.is_delay and high == 0:
            raise InvalidOptionError("delay", self.delay, f"a {self.kind} rule needs a delay > 0")

    def applies_to(self, method: str) -> bool:
        if self.kind is FaultKind.FEED_UNAVAILABLE and method not in FEED_METHODS:
            return False
        return self.methods is None or method in self.methods

    def draw_delay(self, rng: random.Random) -> float:
        if isinstance(self.delay, tuple):
            low, high = self.delay
            return rng.uniform(low, high)
        return float(self.delay)


@dataclass(frozen=True, slots=True)
class FaultPlan:
    """An ordered set of :class:`FaultRule`. Per call, every matching rule is tried in order:
    delays add up, and the first error that fires is the one raised."""

    rules: tuple[FaultRule, ...] = ()

    def __init__(self, *rules: FaultRule | Iterable[FaultRule]) -> None:
        flat: list[FaultRule] = []
        for rule in rules:
            if isinstance(rule, FaultRule):
                flat.append(rule)
            else:
                flat.extend(rule)
        for rule in flat:
            if not isinstance(rule, FaultRule):
                raise InvalidOptionError("rules", rule, "must be FaultRule instances")
        object.__setattr__(self, "rules", tuple(flat))

    @classmethod
    def random(
        cls,
        *,
        error_rate: float = 0.0,
        ambiguous_rate: float = 0.0,
        delay_rate: float = 0.0,
        max_delay: float = 1.0,
        methods: Iterable[str] | None = None,
        delay_methods: Iterable[str] | None = None,
    ) -> FaultPlan:
        """Random faults on ``methods`` (default: every port method): ``error_rate`` of the
        calls fail before the inner call, ``ambiguous_rate`` fail after it (writes applied), and
        ``delay_rate`` of the calls of ``delay_methods`` (default: ``methods``) are slowed by up
        to ``max_delay`` seconds, half before and half after the inner call."""
        chosen = None if methods is None else frozenset(methods)
        delayed = chosen if delay_methods is None else frozenset(delay_methods)
        rules: list[FaultRule] = []
        if delay_rate > 0:
            rules.append(
                FaultRule(FaultKind.DELAY_BEFORE, delayed, delay_rate / 2, delay=(0.0, max_delay))
            )
            rules.append(
                FaultRule(FaultKind.DELAY_AFTER, delayed, delay_rate / 2, delay=(0.0, max_delay))
            )
        if error_rate > 0:
            rules.append(FaultRule(FaultKind.ERROR_BEFORE, chosen, error_rate))
        if ambiguous_rate > 0:
            after = (chosen if chosen is not None else PORT_METHODS) & WRITE_METHODS
            rules.append(FaultRule(FaultKind.ERROR_AFTER, frozenset(after), ambiguous_rate))
        return cls(*rules)

    def __add__(self, other: FaultPlan) -> FaultPlan:
        return FaultPlan(*self.rules, *other.rules)


@dataclass
class FaultStats:
    """Calls seen and faults injected, per method and kind. Shareable between wrappers."""

    calls: Counter[str] = field(default_factory=Counter)
    injected: Counter[tuple[str, FaultKind]] = field(default_factory=Counter)

    @property
    def total(self) -> int:
        """Faults injected, all kinds."""
        return sum(self.injected.values())

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())

    def by_kind(self) -> dict[FaultKind, int]:
        result: Counter[FaultKind] = Counter()
        for (_, kind), count in self.injected.items():
            result[kind] += count
        return dict(result)

    def by_method(self) -> dict[str, int]:
        result: Counter[str] = Counter()
        for (method, _), count in self.injected.items():
            result[method] += count
        return dict(result)

    def count(self, method: str | None = None, kind: FaultKind | None = None) -> int:
        return sum(
            n
            for (m, k), n in self.injected.items()
            if (method is None or m == method) and (kind is None or k == kind)
        )

    def merge(self, other: FaultStats) -> None:
        self.calls.update(other.calls)
        self.injected.update(other.injected)

    def report(self) -> str:
        """A small table: one line per method with the count of each kind, then totals."""
        kinds = [kind for kind in FaultKind if any(k == kind for _, k in self.injected)]
        if not kinds:
            return f"no faults injected ({self.total_calls} calls)"
        methods = sorted({m for m, _ in self.injected})
        width = max(len(m) for m in [*methods, "method", "total"])
        header = f"{'method':<{width}}  {'calls':>6}  " + "  ".join(f"{k:>13}" for k in kinds)
        lines = [header, "-" * len(header)]
        for method in methods:
            cells = "  ".join(f"{self.injected[(method, k)]:>13}" for k in kinds)
            lines.append(f"{method:<{width}}  {self.calls[method]:>6}  {cells}")
        by_kind = self.by_kind()
        cells = "  ".join(f"{by_kind.get(k, 0):>13}" for k in kinds)
        lines.append(f"{'total':<{width}}  {self.total_calls:>6}  {cells}")
        lines.append(f"{self.total} faults injected in {self.total_calls} calls")
        return "\n".join(lines)


@dataclass
class _RuleState:
    matched: int = 0
    injected: int = 0


class FaultyJobStore(JobStoreWrapper):
    """An :class:`~dogs_core.ports.AsyncJobStore` that injects faults into ``inner``'s calls.

    ``plan`` may be replaced at any time (:attr:`plan`; counters of the new plan start at 0);
    :attr:`enabled` switches injection off and on without losing the plan. ``rng`` makes the
    random draws reproducible. ``stats`` may be shared between several wrappers.
    """

    def __init__(
        self,
        inner: AsyncJobStore,
        plan: FaultPlan | None = None,
        *,
        rng: random.Random | None = None,
        stats: FaultStats | None = None,
        name: str = "faulty",
    ) -> None:
        if not isinstance(inner, AsyncJobStore):
            raise InvalidOptionError("inner", inner, "must implement dogs_core.ports.AsyncJobStore")
        super().__init__(inner)
        self.rng = rng if rng is not None else random.Random()
        self.stats = stats if stats is not None else FaultStats()
        self.name = name
        self.enabled = True
        self._connected = True
        self._plan = FaultPlan()
        self._states: list[_RuleState] = []
        self._one_shots: list[tuple[FaultRule, _RuleState]] = []
        self.plan = plan if plan is not None else FaultPlan()

    def __repr__(self) -> str:
        state = "connected" if self._connected else "disconnected"
        return f"<FaultyJobStore {self.name} {state} over {self.inner!r}>"

    # -- control ----------------------------------------------------------------------------------

    @property
    def plan(self) -> FaultPlan:
        return self._plan

    @plan.setter
    def plan(self, plan: FaultPlan) -> None:
        if not isinstance(plan, FaultPlan):
            raise InvalidOptionError("plan", plan, "must be a FaultPlan")
        self._plan = plan
        self._states = [_RuleState() for _ in plan.rules]

    def fail_next(
        self,
        method: str,
        kind: FaultKind = FaultKind.ERROR_BEFORE,
        *,
        count: int = 1,
        delay: float = 0.0,
        skip_calls: int = 0,
    ) -> None:
        """Inject ``kind`` into the next ``count`` calls of ``method`` (after ``skip_calls``
        calls pass). One-shot faults apply even when :attr:`enabled` is false and come before the
        plan's rules."""
        rule = FaultRule(
            kind,
            frozenset({method}),
            1.0,
            max_count=count,
            skip_calls=skip_calls,
            delay=delay,
        )
        self._one_shots.append((rule, _RuleState()))

    def disconnect(self) -> None:
        """Cut the store off: every call fails before reaching the inner store, and a call
        already past it loses its reply (``write_may_have_applied=True``)."""
        self._connected = False

    def reconnect(self) -> None:
        self._connected = True

    @property
    def connected(self) -> bool:
        return self._connected

    # -- the machinery ----------------------------------------------------------------------------

    def _decide(self, method: str) -> tuple[float, float, FaultKind | None]:
        """(delay before, delay after, error kind or None) for one call of ``method``."""
        before = after = 0.0
        error: FaultKind | None = None
        candidates: list[tuple[FaultRule, _RuleState]] = [
            (rule, state) for rule, state in self._one_shots if rule.applies_to(method)
        ]
        if self.enabled:
            candidates.extend(
                (rule, state)
                for rule, state in zip(self._plan.rules, self._states, strict=True)
                if rule.applies_to(method)
            )
        for rule, state in candidates:
            state.matched += 1
            if state.matched <= rule.skip_calls:
                continue
            if rule.max_count is not None and state.injected >= rule.max_count:
                continue
            if rule.kind.is_error and error is not None:
                continue
            if rule.probability < 1 and self.rng.random() >= rule.probability:
                continue
            state.injected += 1
            self.stats.injected[(method, rule.kind)] += 1
            if rule.kind is FaultKind.DELAY_BEFORE:
                before += rule.draw_delay(self.rng)
            elif rule.kind is FaultKind.DELAY_AFTER:
                after += rule.draw_delay(self.rng)
            else:
                error = rule.kind
        self._one_shots = [
            (rule, state)
            for rule, state in self._one_shots
            if rule.max_count is None or state.injected < rule.max_count
        ]
        return before, after, error

    def _refuse(self, method: str, *, applied: bool, what: str) -> TransientStoreError:
        return TransientStoreError(
            f"{self.name}: injected fault: {method} {what}",
            write_may_have_applied=applied and method in WRITE_METHODS,
        )

    def _check_connected(self, method: str, *, applied: bool) -> None:
        if not self._connected:
            self.stats.injected[(method, FaultKind.DISCONNECTED)] += 1
            raise self._refuse(
                method,
                applied=applied,
                what="lost its reply (disconnected)" if applied else "refused (disconnected)",
            )

    async def _enter(self, method: str) -> tuple[float, FaultKind | None]:
        """One call of ``method`` begins: count it, apply the plan's delay before it (the
        connection checked on both sides), and return its delay after and its fault."""
        self.stats.calls[method] += 1
        self._check_connected(method, applied=False)
        before, after, error = self._decide(method)
        if before > 0:
            await anyio.sleep(before)
            self._check_connected(method, applied=False)
        return after, error

    async def _leave(self, method: str, after: float) -> None:
        """The call reached the store: apply the delay after it (the connection checked)."""
        self._check_connected(method, applied=True)
        if after > 0:
            await anyio.sleep(after)
            self._check_connected(method, applied=True)

    async def around(self, method: str, call: Callable[[], Awaitable[T]]) -> T:
        after, error = await self._enter(method)
        if error is FaultKind.ERROR_BEFORE:
            raise self._refuse(method, applied=False, what="failed before reaching the store")
        result = await call()
        await self._leave(method, after)
        if error is FaultKind.ERROR_AFTER:
            raise self._refuse(method, applied=True, what="was applied, then its reply was lost")
        return result

    async def around_feed(
        self, method: str, feed: Callable[[], AsyncGenerator[T, None]]
    ) -> AsyncGenerator[T, None]:
        """Each batch asked for is one call of ``method`` for the plan (see the module
        documentation); the inner feed is opened at the first batch that gets through."""
        inner: AsyncGenerator[T, None] | None = None
        try:
            while True:
                after, error = await self._enter(method)
                self._raise_feed_error(method, error, before_batch=True)
                if inner is None:
                    inner = feed()
                try:
                    batch = await inner.__anext__()
                except StopAsyncIteration:
                    return
                await self._leave(method, after)
                self._raise_feed_error(method, error, before_batch=False)
                yield batch
        finally:
            if inner is not None:
                await inner.aclose()

    def _raise_feed_error(
        self, method: str, error: FaultKind | None, *, before_batch: bool
    ) -> None:
        if before_batch and error is FaultKind.FEED_UNAVAILABLE:
            raise ChangeFeedUnavailableError(f"{self.name}: injected fault: {method} unavailable")
        if before_batch and error is FaultKind.ERROR_BEFORE:
            raise self._refuse(method, applied=False, what="failed before its next batch")
        if not before_batch and error is FaultKind.ERROR_AFTER:
            raise self._refuse(method, applied=False, what="lost a batch, then failed")
