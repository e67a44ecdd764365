"""What follows steps' ends, written through the store's workflows role: the release of the
workflows, shared by the releaser of every ``Workers`` (:mod:`dogs_core.runtime.worker.releaser`)
and
the clients' ``cancel_workflow`` and ``retry_workflow``.

:func:`end_steps` writes ends (a compare-and-set each: of concurrent callers, one writes an
end) and :func:`advance` their consequences, in an order that a crash may cut anywhere:

1. a step that failed under ``fail`` fails its workflow (its blocked steps skipped first);
2. the blocked dependents are decided (:func:`~dogs_core.domain.workflow_release.
   decide_dependent`): released (the step and its record in one atomic write) or skipped, a
   skip going on to the skipped step's own dependents;
3. a workflow where a step nothing depends on ended (or a step was skipped) ends when none of
   its steps is blocked or released;
4. the ended steps' ``pending`` mark is cleared.

Every write is fenced (a step's state and generation, a workflow's state), so doing any of it
again writes nothing more; until step 4 a sweep finds the step in ``pending_steps`` and runs
:func:`advance` again. Transient store errors are retried (bounded, logged).

This module is the source of truth; ``_sync/advance.py`` is generated from it.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import datetime
from typing import TypeVar

from dogs_core.domain.workflow_records import (
    Dependent,
    FinishedWorkflow,
    StepEnding,
    StepRelease,
    StepSkip,
    StepState,
)
from dogs_core.domain.workflow_release import Advanced, Ended, decide_dependent
from dogs_core.ids import new_record_id
from dogs_core.ports import AsyncWorkflowStore
from dogs_core.runtime.plumbing._async.retry import retry_transient

__all__ = ["advance", "end_steps", "release_blocked"]

logger = logging.getLogger("dogs.workflows")

T = TypeVar("T")


async def end_steps(
    store: AsyncWorkflowStore,
    endings: Sequence[StepEnding],
    *,
    now: Callable[[], datetime],
    then: Callable[[list[Ended]], Awaitable[Advanced]] | None = None,
) -> Advanced:
    """Write ``endings`` and what follows the ones this call wrote (through ``then``, by
    default :func:`advance`)."""
    if not endings:
        return Advanced()
    written = await retry_transient(
        lambda: store.end_steps(endings, now=now()), what="end workflow steps"
    )
    ended = [Ended.of_ending(ending) for ending in written]
    advanced = await advance(store, ended, now=now) if then is None else await then(ended)
    advanced.ended[:0] = written
    return advanced


async def advance(
    store: AsyncWorkflowStore, ended: Iterable[Ended], *, now: Callable[[], datetime]
) -> Advanced:
    """Write the consequences of ``ended`` steps (see the module documentation)."""
    steps = list(ended)
    done = Advanced()
    if not steps:
        return done
    for workflow_id in dict.fromkeys(step.workflow_id for step in steps if step.fails_workflow):
        fail = _at_now(functools.partial(store.fail_workflow, workflow_id), now)
        if await retry_transient(fail, what="fail a workflow"):
            done.failed.append(workflow_id)
    settled = [step.step_id for step in steps]
    frontier = [step.step_id for step in steps if not step.leaf]
    while frontier:
        read = functools.partial(store.dependents, frontier)
        dependents = await retry_transient(read, what="read workflow dependents")
        step = await _decide(store, dependents, now)
        done.released.extend(step.released)
        done.skipped.extend(step.skipped)
        frontier = [skip.step_id for skip in step.skipped]
        settled.extend(frontier)
    # A workflow ends with the end of a step nothing depends on (or a skip: the cascade may
    # have reached its last steps): only those are checked.
    touched = [step.workflow_id for step in steps if step.leaf]
    touched += [skip.workflow_id for skip in done.skipped]
    done.finished = await _finish(store, touched, now)
    await retry_transient(lambda: store.settle_steps(settled), what="settle workflow steps")
    return done


async def release_blocked(
    store: AsyncWorkflowStore, step_ids: Sequence[str], *, now: Callable[[], datetime]
) -> Advanced:
    """Decide the blocked steps among ``step_ids`` (a retried workflow's steps) as
    :func:`advance` decides dependents, and end the workflows they belong to when nothing is
    left to run."""
    if not step_ids:
        return Advanced()
    blocked = await retry_transient(
        lambda: store.blocked_steps(step_ids), what="read blocked workflow steps"
    )
    done = await _decide(store, blocked, now)
    skipped = [Ended(skip.step_id, skip.workflow_id) for skip in done.skipped]
    if skipped:
        done.add(await advance(store, skipped, now=now))
    done.finished.extend(await _finish(store, [view.workflow_id for view in blocked], now))
    return done


async def _decide(
    store: AsyncWorkflowStore, dependents: Sequence[Dependent], now: Callable[[], datetime]
) -> Advanced:
    """Release or skip each dependent that may go (the others wait)."""
    releases: list[StepRelease] = []
    skips: list[StepSkip] = []
    for view in dependents:
        decided = decide_dependent(view)
        if decided is StepState.RELEASED:
            releases.append(
                StepRelease(view.id, view.workflow_id, view.generation, new_record_id())
            )
        elif decided is StepState.SKIPPED:
            skips.append(StepSkip(view.id, view.workflow_id, view.generation))
    done = Advanced()
    if releases:
        done.released = await retry_transient(
            lambda: store.release_steps(releases, now=now()), what="release workflow steps"
        )
    if skips:
        done.skipped = await retry_transient(
            lambda: store.skip_steps(skips, now=now()), what="skip workflow steps"
        )
    return done


async def _finish(
    store: AsyncWorkflowStore, workflow_ids: Iterable[str], now: Callable[[], datetime]
) -> list[FinishedWorkflow]:
    """End each of these running workflows none of whose steps is left to run."""
    ids = list(dict.fromkeys(workflow_ids))
    if not ids:
        return []
    finish = _at_now(functools.partial(store.finish_workflows, ids), now)
    return await retry_transient(finish, what="finish workflows")


def _at_now(
    call: Callable[..., Awaitable[T]], now: Callable[[], datetime]
) -> Callable[[], Awaitable[T]]:
    """``call(now=now())``, the time read at each attempt."""

    def attempt() -> Awaitable[T]:
        return call(now=now())

    return attempt
