"""The release of workflow steps in a running instance: :class:`WorkflowReleaser`.

Every ``Workers`` runs one (``release_workflows``) when its store has the workflows role, so
a step is released when its dependencies end whoever ran them, and whether or not the worker
that ran them survived. Three paths, one rule:

* **the history feed** (``watch_step_rows``: a MongoDB change stream on the history, matching
  the rows of steps' executions and every row a Node worker writes, but not this instance's
  own rows when its settle path hands them over, below): each batch of rows is
  looked up among the released steps (one read), a success row ends its step at once; any
  other row is decided with the step's record (:func:`~dogs_core.domain.workflow_release.
  evidence_ending`: a failed attempt whose job will retry ends nothing). A row whose
  execution still holds its record (the settlement that follows the row is on its way) is
  read again a few milliseconds later;
* **this instance's own settlements** (:meth:`WorkflowReleaser.offer`, told by the settle
  path once a step's final settlement landed): the same work as a feed batch, without waiting
  for the feed to report the row, which then leaves it out (``instance_id``): a busy fleet
  neither reads each of its own rows from a change stream nor looks each end up twice. A row
  of this instance that no settlement handed over (a row written another way) is found by
  the other instances' feeds and by the sweep;
* **the sweep**, every ``sweep_interval`` and at start: the releases a crash cut between
  their writes (``repair_releases``), the steps whose end's consequences a crashed releaser
  left half written (``pending_steps``), then a page of released steps read
  with their records and newest rows (what the feed missed: a gap in the feed, a Node
  worker's job marked failed without a row, a record deleted by hand). While sweeps find no
  workflow under way (no pending and no released step), the wait between them doubles up to
  :data:`MAX_IDLE_SWEEP_INTERVAL`, and any step row (fed or offered) brings it back: an idle
  fleet, or a test that runs days of virtual time, does not wake every few seconds for nothing.

What an end leads to is written by :func:`~dogs_core.runtime.plumbing._async.advance.end_steps`,
every
write fenced, so several releasers (one per instance) may see the same row: one writes each
decision, and the others write nothing. Each workflow's consequences are written apart
(:meth:`WorkflowReleaser._advance`), so one that cannot be written now (a document another
process's transaction holds) waits for a later round without holding up the others. A record
gone without any row ends its step only :data:`~dogs_core.domain.workflow_release.
MISSING_ROW_GRACE` after this releaser first saw it so: a Node worker removes a record before
it writes its row.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Final

import anyio
import anyio.abc

from dogs_core.domain.records import HistoryRecord, JobRecord
from dogs_core.domain.workflow_records import ReleasedStep, StepEnding
from dogs_core.domain.workflow_release import Advanced, Ended, evidence_ending, row_ending
from dogs_core.errors import ChangeFeedUnavailableError
from dogs_core.ports import AsyncWorkflowStore, Clock, Role, has_role
from dogs_core.runtime.plumbing._async.advance import advance, end_steps
from dogs_core.runtime.plumbing._async.retry import retry_transient
from dogs_core.runtime.plumbing.clock import SystemClock
from dogs_core.runtime.plumbing.loop import Signal
from dogs_core.runtime.plumbing.outage import log_store_failure
from dogs_core.runtime.plumbing.telemetry import TELEMETRY, Telemetry, tell_advanced
from dogs_core.runtime.plumbing.watching import without_heartbeats

__all__ = [
    "DEFAULT_SWEEP_INTERVAL",
    "MAX_IDLE_SWEEP_INTERVAL",
    "RECHECK_DELAYS",
    "ROWS_PAGE",
    "SWEEP_PAGE",
    "WORKFLOWS_AT_ONCE",
    "WorkflowReleaser",
]

logger = logging.getLogger("dogs.workflows")

#: Seconds between sweeps (the ``workflow_sweep_interval`` worker option's default).
DEFAULT_SWEEP_INTERVAL: Final = 5.0
#: The longest wait between two sweeps that found no workflow under way.
MAX_IDLE_SWEEP_INTERVAL: Final = 300.0
#: Released steps a sweep reads per round (it goes on from there at the next round).
SWEEP_PAGE: Final = 500
#: Seconds after which a row whose execution still held its record is decided again.
RECHECK_DELAYS: Final = (0.005, 0.02, 0.1, 0.5, 2.0)
#: Rows looked up together (a round of a busy fleet may bring more: they go in pages).
ROWS_PAGE: Final = 1000
#: Workflows whose ends' consequences one round writes at the same time.
WORKFLOWS_AT_ONCE: Final = 16
#: Seconds before a failed feed is opened again.
_REOPEN_DELAY: Final = 1.0
#: Seconds after which a record first seen gone without a row is forgotten (seen so again, its
#: grace starts over: a later failure, never an earlier one).
_FORGET_MISSING: Final = 600.0


class WorkflowReleaser:
    """Releases the steps of every workflow of ``store`` as their dependencies end (see the
    module documentation). ``run`` until cancelled; a store without the workflows role makes
    it return at once. ``watch=False`` leaves the sweep alone (a store without feeds)."""

    def __init__(
        self,
        store: object,
        *,
        clock: Clock | None = None,
        telemetry: Telemetry | None = None,
        sweep_interval: float = DEFAULT_SWEEP_INTERVAL,
        watch: bool = True,
        sweep_page: int = SWEEP_PAGE,
        on_released: Callable[[], None] | None = None,
        instance_id: str | None = None,
    ) -> None:
        self.store = store
        self.instance_id = instance_id
        """The ``Workers`` instance whose settle path :meth:`offer` s its steps' rows: the
        feed leaves that instance's rows out (``None``: the feed brings every row)."""
        self.on_released = on_released
        """Told after a call released steps (their records are written): the instance's own
        claimers look at once instead of waiting for the records' feed to report them."""
        self.clock: Clock = SystemClock() if clock is None else clock
        self.telemetry = TELEMETRY if telemetry is None else telemetry
        self.sweep_interval = sweep_interval
        self.watch = watch
        self.sweep_page = sweep_page
        self._cursor: str | None = None
        self._group: anyio.abc.TaskGroup | None = None
        self._offered: list[HistoryRecord] = []
        self._offers = Signal()
        self._rows_seen = Signal()
        self._idle = False
        self._missing: dict[str, datetime] = {}
        """Record ids of released steps first seen gone without any history row, and when."""
        self.watching = False
        """Whether the history feed is open."""

    @property
    def enabled(self) -> bool:
        """Whether the store has workflows at all."""
        return has_role(self.store, Role.WORKFLOWS)

    @property
    def _store(self) -> AsyncWorkflowStore:
        return self.store  # type: ignore[return-value]

    async def run(self) -> None:
        """Release steps until cancelled."""
        if not self.enabled:
            return
        async with anyio.create_task_group() as group:
            self._group = group
            if self.watch:
                group.start_soon(self._watch_rows, name="dogs workflow release feed")
            group.start_soon(self._sweep_loop, name="dogs workflow sweep")
            group.start_soon(self._offered_rows, name="dogs workflow release of own ends")

    # -- this instance's own ends -------------------------------------------------------------

    def offer(self, row: HistoryRecord) -> None:
        """The row of a step's execution whose final settlement this instance just wrote:
        release what follows at once (from any task of the loop; never blocks)."""
        if self._group is None:
            return
        self._offered.append(row)
        self._offers.notify()

    async def _offered_rows(self) -> None:
        while True:
            while not self._offered:
                await self._offers.wait()
            rows, self._offered = self._offered, []
            await self._rows_safely(rows)

    # -- the feed ---------------------------------------------------------------------------

    async def _watch_rows(self) -> None:
        while True:
            try:
                feed = self._store.watch_step_rows(except_instance=self.instance_id)
                async with contextlib.aclosing(feed):
                    # No deadline is checked between batches (the sweep has its own timer).
                    with without_heartbeats():
                        async for rows in feed:
                            self.watching = True
                            if rows:
                                await self._rows_safely(rows)
            except ChangeFeedUnavailableError as error:
                logger.warning("workflow release without a change feed (sweeps only): %s", error)
                self.watching = False
                return
            except Exception as error:
                log_store_failure(logger, "workflow release feed failed; reopening it", error)
            self.watching = False
            await anyio.sleep(_REOPEN_DELAY)

    async def _rows_safely(self, rows: Sequence[HistoryRecord]) -> None:
        self._rows_seen.notify()  # a workflow is under way: the sweep keeps its pace
        try:
            await self.rows(rows)
        except Exception as error:  # the sweep finds whatever this left
            log_store_failure(logger, "workflow release of a feed batch failed", error)

    async def rows(self, rows: Sequence[HistoryRecord]) -> Advanced:
        """Release what ``rows`` (first writes of history rows) make releasable."""
        advanced = Advanced()
        for start in range(0, len(rows), ROWS_PAGE):
            advanced.add(await self._page(rows[start : start + ROWS_PAGE]))
        return advanced

    async def _page(self, rows: Sequence[HistoryRecord]) -> Advanced:
        newest: dict[str, HistoryRecord] = {}
        for row in rows:
            held = newest.get(row.job_id)
            if held is None or (row.started_at, row.ended_at) >= (held.started_at, held.ended_at):
                newest[row.job_id] = row
        store = self._store
        steps = await retry_transient(
            lambda: store.released_steps(record_ids=list(newest), limit=len(newest)),
            what="read the released steps of history rows",
        )
        if not steps:
            return Advanced()
        endings: list[StepEnding] = []
        unsure: list[ReleasedStep] = []
        for step in steps:
            ending = row_ending(step, newest[step.record_id])
            if ending is not None:
                endings.append(ending)
            else:
                unsure.append(step)
        settling: list[ReleasedStep] = []
        if unsure:
            decided, settling = await self._decide(unsure, newest)
            endings.extend(decided)
        advanced = await self._end(endings)
        if settling and self._group is not None:
            self._group.start_soon(self._recheck, settling, newest)
        return advanced

    async def _decide(
        self, steps: Sequence[ReleasedStep], rows: dict[str, HistoryRecord] | None = None
    ) -> tuple[list[StepEnding], list[ReleasedStep]]:
        """The ends of ``steps`` read from their records and newest rows; and the steps whose
        record is still held by the execution of the row in hand (its settlement follows)."""
        store = self._store
        evidence = await retry_transient(
            lambda: store.step_evidence([step.record_id for step in steps]),
            what="read workflow steps' records",
        )
        now = self.clock.now()
        endings: list[StepEnding] = []
        settling: list[ReleasedStep] = []
        for step in steps:
            record, newest = evidence.get(step.record_id, (None, None))
            missing_since = self._missing_since(step, record, newest, now)
            ending = evidence_ending(step, record, newest, now=now, missing_since=missing_since)
            if ending is not None:
                self._missing.pop(step.record_id, None)
                endings.append(ending)
            elif rows is not None and record is not None:
                row = rows.get(step.record_id)
                if row is not None and record.lock_id == row.execution_id:
                    settling.append(step)
        return endings, settling

    async def _recheck(self, steps: Sequence[ReleasedStep], rows: dict[str, HistoryRecord]) -> None:
        """Decide again, a few times at growing delays, steps whose settlement was on its way."""
        left = list(steps)
        for delay in RECHECK_DELAYS:
            await anyio.sleep(delay)
            try:
                endings, left = await self._decide(left, rows)
                await self._end(endings)
            except Exception as error:
                log_store_failure(logger, "workflow release recheck failed", error)
                return
            if not left:
                return

    def _missing_since(
        self,
        step: ReleasedStep,
        record: JobRecord | None,
        newest: HistoryRecord | None,
        now: datetime,
    ) -> datetime | None:
        """Since when this releaser has seen ``step``'s record gone without a row of it
        (``None``: it is there, or has a row). A Node worker removes the record before it
        writes the row: a look between the two is a first sight, which ends nothing."""
        if record is not None or (newest is not None and newest.job_id == step.record_id):
            self._missing.pop(step.record_id, None)
            return None
        return self._missing.setdefault(step.record_id, now)

    def _forget_missing(self, now: datetime) -> None:
        horizon = now - timedelta(seconds=_FORGET_MISSING)
        for record_id, since in list(self._missing.items()):
            if since < horizon:
                del self._missing[record_id]

    async def _end(self, endings: Sequence[StepEnding]) -> Advanced:
        advanced = await end_steps(self._store, endings, now=self.clock.now, then=self._advance)
        self._tell(advanced)
        return advanced

    async def _advance(self, ended: Sequence[Ended], budget: float | None = None) -> Advanced:
        """:func:`~dogs_core.runtime.plumbing._async.advance.advance` for each workflow apart and at
        once (at most :data:`WORKFLOWS_AT_ONCE`): a workflow
        whose writes fail or wait (on a document another process's transaction holds, say)
        keeps its steps ``pending`` for a later round while the others go on; past ``budget``
        seconds it is left for a later round (every write is fenced and a release's are
        repaired, so cutting one anywhere is safe). Raises only when every workflow failed."""
        by_workflow: dict[str, list[Ended]] = {}
        for step in ended:
            by_workflow.setdefault(step.workflow_id, []).append(step)
        done = Advanced()
        if len(by_workflow) <= 1 and budget is None:
            return await advance(self._store, ended, now=self.clock.now)
        failures: list[tuple[str, Exception | None]] = []
        limiter = anyio.CapacityLimiter(WORKFLOWS_AT_ONCE)

        async def one(workflow_id: str, steps: list[Ended]) -> None:
            async with limiter:
                with anyio.move_on_after(math.inf if budget is None else budget) as scope:
                    try:
                        done.add(await advance(self._store, steps, now=self.clock.now))
                    except Exception as error:
                        failures.append((workflow_id, error))
                if scope.cancelled_caught:
                    failures.append((workflow_id, None))

        async with anyio.create_task_group() as group:
            for workflow_id, steps in by_workflow.items():
                group.start_soon(one, workflow_id, steps)
        if failures:
            workflow_id, error = failures[0]
            if len(failures) == len(by_workflow) and error is not None:
                raise error
            left = f"workflow release: {len(failures)} of {len(by_workflow)} workflows left "
            if error is None:
                logger.warning("%sfor a later round (%s over its %gs)", left, workflow_id, budget)
            else:
                log_store_failure(logger, f"{left}for a later round ({workflow_id})", error)
        return done

    def _tell(self, advanced: Advanced) -> None:
        tell_advanced(self.telemetry, advanced)
        if advanced.released and self.on_released is not None:
            self.on_released()

    # -- the sweep --------------------------------------------------------------------------

    async def _sweep_loop(self) -> None:
        wait = self.sweep_interval
        while True:
            try:
                await self.sweep()
            except Exception as error:
                self._idle = False
                log_store_failure(logger, "workflow sweep failed; trying again later", error)
            if not self._idle:
                wait = self.sweep_interval
                await anyio.sleep(wait)
            elif await self._rows_seen.wait(wait):
                wait = self.sweep_interval  # rows of steps: sweep now, then at the usual pace
            else:
                wait = min(wait * 2, max(MAX_IDLE_SWEEP_INTERVAL, self.sweep_interval))

    async def sweep(self) -> Advanced:
        """One round: finish what crashed releasers left, then decide a page of released
        steps from their records and rows."""
        store = self._store
        try:
            await store.repair_releases(limit=self.sweep_page)
        except Exception as error:  # the next round tries again; the rest does not need it
            log_store_failure(logger, "workflow sweep: repairing releases failed", error)
        self._forget_missing(self.clock.now())
        pending = await retry_transient(
            lambda: store.pending_steps(limit=self.sweep_page), what="read pending steps"
        )
        ended = [Ended.of_step(step) for step in pending]
        done = await self._advance(ended, budget=max(self.sweep_interval, 1.0))
        self._tell(done)
        cursor = self._cursor
        page = await retry_transient(
            lambda: store.released_steps(after=cursor, limit=self.sweep_page),
            what="read released steps",
        )
        self._cursor = page[-1].id if len(page) == self.sweep_page else None
        self._idle = not pending and not page
        logger.debug("workflow sweep: %d pending, %d released steps", len(pending), len(page))
        if page:
            endings, _ = await self._decide(page)
            done.add(await self._end(endings))
        return done
