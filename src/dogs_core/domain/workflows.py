"""Workflows as the user builds them: steps, their dependencies and failure policies (pure).

A :class:`Workflow` is a graph of steps; each step is one run of an event job with its params.
``wf.add(job, params, after=[...], on_failure=...)`` adds a step and returns its
:class:`Step` handle, which later steps name in ``after`` (a step name works too, also of a
step added later). A :class:`Batch` is a workflow of independent steps and one callback
(:meth:`Batch.then`) that runs once they have all ended, whatever their outcome, and reads
their counts (``ctx.batch``). :func:`chain` and :meth:`Workflow.chain` add steps one after the
other.

Failure policies (what a step's failure, after its last attempt, does to its dependents):

``"fail"`` (the default)
    the workflow fails: no step is released any more, the blocked ones are skipped; steps
    already released run to their end.
``"skip"``
    its dependents are skipped (and theirs, transitively); the rest of the workflow goes on.
``"continue"``
    its dependents run as if it had succeeded (``ctx.upstream(step).state`` says it failed).

:meth:`Workflow.validate` (called by ``client.start_workflow`` before anything is written)
checks the graph as a whole: every name in ``after`` is a step of this workflow, no step
depends on itself, there is no cycle, the workflow has at least one step and at most
:data:`MAX_WORKFLOW_STEPS`. It raises :class:`~dogs_core.errors.InvalidWorkflowError`
naming the step. What ``add`` can check alone (a policy, a name, a priority) it checks at once.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias

from dogs_core.domain import validation
from dogs_core.domain.definitions import EventJobDefinition, RecurrentJobDefinition
from dogs_core.errors import InvalidOptionError, InvalidWorkflowError

__all__ = [
    "MAX_NAME_LENGTH",
    "MAX_WORKFLOW_STEPS",
    "Batch",
    "FailurePolicy",
    "JobRef",
    "Step",
    "StepSpec",
    "Workflow",
    "chain",
    "job_name_of",
]

#: Most steps in one workflow (a batch's callback included). A workflow is written in one
#: transaction (its steps and the records of the steps that can start at once): 20,000 steps
#: of small params is a few MB, well inside MongoDB's limits; split larger work into
#: several workflows (see docs/workflows.md).
MAX_WORKFLOW_STEPS: Final = 20_000
#: Longest workflow or step name.
MAX_NAME_LENGTH: Final = 200

JobRef: TypeAlias = EventJobDefinition | str
"""A step's job: its definition (from ``@jobs.event``), or its name with a client that has a
``Jobs`` registry."""


class FailurePolicy(enum.StrEnum):
    """What a step's failure does to the steps after it (see the module documentation)."""

    FAIL = "fail"
    SKIP = "skip"
    CONTINUE = "continue"


@dataclass(frozen=True, slots=True, eq=False)
class Step:
    """The handle of one step of a workflow being built (what :meth:`Workflow.add` returns):
    name it in a later step's ``after``."""

    name: str
    index: int
    workflow: Workflow

    def __repr__(self) -> str:
        return f"Step({self.name!r})"


@dataclass(frozen=True, slots=True)
class StepSpec:
    """One step as given: its job, params (validated by the client at start), dependencies
    (step names), failure policy, priority (``None``: the job's) and whether it is a batch's
    callback (it reads a summary of its dependencies instead of their results)."""

    name: str
    job: JobRef
    params: object
    after: tuple[str, ...]
    on_failure: FailurePolicy
    priority: int | None = None
    summary: bool = False


_After: TypeAlias = Step | str | Iterable[Step | str] | None


class Workflow:
    """A graph of steps, built with :meth:`add` (and :meth:`chain`), started by
    ``client.start_workflow(wf)``. ``name`` is optional (ids are generated); it shows in
    ``dogs workflows list`` and the dashboard."""

    _default_policy: FailurePolicy = FailurePolicy.FAIL

    def __init__(self, name: str | None = None) -> None:
        self.name: str | None = _optional_name("name", name)
        self._specs: list[StepSpec] = []
        self._names: dict[str, int] = {}
        self._repeats: dict[str, int] = {}  # job name -> the last number its steps got

    # -- building -----------------------------------------------------------------------------

    def add(
        self,
        job: JobRef,
        params: object = None,
        *,
        after: _After = None,
        on_failure: FailurePolicy | str | None = None,
        name: str | None = None,
        priority: int | None = None,
    ) -> Step:
        """Add a step running ``job`` with ``params`` once every step of ``after`` has ended
        as its policy requires (a step handle or name, or a list of them; none: at the
        start). ``on_failure`` is ``"fail"`` (the default), ``"skip"`` or ``"continue"``.
        ``name`` defaults to the job's name (``name-2``, ``name-3``... when it repeats)."""
        return self._add(job, params, after, on_failure, name, priority, summary=False)

    def chain(
        self,
        *links: JobRef | tuple[JobRef, object],
        after: _After = None,
        on_failure: FailurePolicy | str | None = None,
    ) -> list[Step]:
        """Add one step per link, each after the one before (the first after ``after``): a
        link is a job, or a ``(job, params)`` pair. Returns the steps in order."""
        if not links:
            raise InvalidOptionError("links", links, "a chain needs at least one job")
        steps: list[Step] = []
        previous: _After = after
        for position, link in enumerate(links):
            job, params = _link(position, link)
            step = self.add(job, params, after=previous, on_failure=on_failure)
            steps.append(step)
            previous = step
        return steps

    def _add(
        self,
        job: object,
        params: object,
        after: object,
        on_failure: object,
        name: object,
        priority: object,
        *,
        summary: bool,
    ) -> Step:
        job_ref = _job_ref(job)
        step_name = self._name_for(job_ref, name)
        policy = _policy(step_name, self._default_policy if on_failure is None else on_failure)
        parents = _after_names(self, step_name, after)
        level = None if priority is None else validation.priority("priority", priority)
        if len(self._specs) >= MAX_WORKFLOW_STEPS:
            raise InvalidWorkflowError(
                step_name, len(self._specs) + 1, f"more than {MAX_WORKFLOW_STEPS} steps"
            )
        spec = StepSpec(step_name, job_ref, params, parents, policy, level, summary)
        self._names[step_name] = len(self._specs)
        self._specs.append(spec)
        return Step(step_name, len(self._specs) - 1, self)

    def _name_for(self, job: JobRef, name: object) -> str:
        if name is not None:
            chosen = _optional_name("name", name)
            assert chosen is not None
            if chosen in self._names:
                raise InvalidWorkflowError(chosen, name, "another step has this name")
            return chosen
        base = job_name_of(job)
        chosen, number = base, self._repeats.get(base, 1)
        while chosen in self._names:
            number += 1
            chosen = f"{base}-{number}"
        self._repeats[base] = number
        return chosen

    # -- reading ------------------------------------------------------------------------------

    @property
    def steps(self) -> tuple[StepSpec, ...]:
        """The steps, in the order they were added."""
        return tuple(self._specs)

    def __len__(self) -> int:
        return len(self._specs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {len(self._specs)} steps)"

    def validate(self) -> None:
        """Check the whole graph (see the module documentation); raises
        :class:`~dogs_core.errors.InvalidWorkflowError` naming the first bad step."""
        if not self._specs:
            raise InvalidWorkflowError("steps", [], "a workflow needs at least one step")
        for spec in self._specs:
            for parent in spec.after:
                if parent not in self._names:
                    known = ", ".join(sorted(self._names)[:10])
                    raise InvalidWorkflowError(
                        spec.name, parent, f"after names no step of this workflow (steps: {known})"
                    )
        cycle = find_cycle({spec.name: spec.after for spec in self._specs})
        if cycle is not None:
            path = " -> ".join([*cycle, cycle[0]])
            raise InvalidWorkflowError(cycle[0], path, "the steps depend on each other in a cycle")


class Batch(Workflow):
    """Many independent steps and one callback once they have all ended (:meth:`then`).

    Steps added with :meth:`add` default to ``on_failure="continue"`` (one failed item does not
    stop the others, and the callback runs anyway); the callback reads the outcome as
    ``ctx.batch``: how many succeeded and failed, and the ids of the failed steps."""

    _default_policy = FailurePolicy.CONTINUE

    def __init__(self, name: str | None = None) -> None:
        super().__init__(name)
        self._callback: Step | None = None

    def add(
        self,
        job: JobRef,
        params: object = None,
        *,
        after: _After = None,
        on_failure: FailurePolicy | str | None = None,
        name: str | None = None,
        priority: int | None = None,
    ) -> Step:
        """Add one item of the batch (see :meth:`Workflow.add`); items added after the
        callback are refused."""
        if self._callback is not None:
            raise InvalidWorkflowError(
                self._callback.name, job_name_of(_job_ref(job)), "add items before then()"
            )
        return super().add(
            job, params, after=after, on_failure=on_failure, name=name, priority=priority
        )

    def then(
        self,
        job: JobRef,
        params: object = None,
        *,
        name: str | None = None,
        priority: int | None = None,
    ) -> Step:
        """The callback: runs once every step added so far has ended (succeeded, failed or
        was skipped); its handler reads ``ctx.batch``. One per batch."""
        if self._callback is not None:
            raise InvalidWorkflowError(
                self._callback.name, job_name_of(_job_ref(job)), "a batch has one callback"
            )
        items = [spec.name for spec in self._specs]
        if not items:
            raise InvalidWorkflowError("steps", [], "add the batch's items before then()")
        step = self._add(job, params, items, FailurePolicy.FAIL, name, priority, summary=True)
        self._callback = step
        return step

    @property
    def callback(self) -> Step | None:
        return self._callback


def chain(*links: JobRef | tuple[JobRef, object], name: str | None = None) -> Workflow:
    """A workflow of steps one after the other: ``chain(fetch, (parse, {"n": 1}), report)``."""
    workflow = Workflow(name)
    workflow.chain(*links)
    return workflow


def job_name_of(job: JobRef) -> str:
    """The job name of a step's job reference."""
    return job if isinstance(job, str) else job.name


def find_cycle(edges: Mapping[str, Sequence[str]]) -> list[str] | None:
    """A cycle of ``edges`` (node -> the nodes it depends on), as the list of its nodes, or
    ``None``. Iterative (a deep chain does not hit the recursion limit); edges to unknown nodes
    are ignored."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in edges:
        if state.get(root):
            continue
        path: list[str] = [root]
        iterators = [iter(edges[root])]
        state[root] = 1
        while iterators:
            node = next(iterators[-1], None)
            if node is None:
                state[path.pop()] = 2
                iterators.pop()
                continue
            if node not in edges:
                continue
            if state.get(node) == 1:
                return path[path.index(node) :]
            if not state.get(node):
                state[node] = 1
                path.append(node)
                iterators.append(iter(edges[node]))
    return None


# -- checks -----------------------------------------------------------------------------------


def _optional_name(field: str, name: object) -> str | None:
    if name is None:
        return None
    if not isinstance(name, str) or not name.strip():
        raise InvalidOptionError(field, name, "must be a non-empty string")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidOptionError(field, name, f"must be at most {MAX_NAME_LENGTH} characters")
    if any(ord(char) < 32 for char in name):
        raise InvalidOptionError(field, name, "must not contain control characters")
    return name


def _job_ref(job: object) -> JobRef:
    if isinstance(job, EventJobDefinition):
        return job
    if isinstance(job, RecurrentJobDefinition):
        raise InvalidOptionError(
            "job", job.name, "a workflow step must be an event job (recurrent jobs run alone)"
        )
    if isinstance(job, str) and job.strip():
        return job
    raise InvalidOptionError(
        "job", job, "must be an event job definition (from @jobs.event) or a job name"
    )


def _policy(step: str, on_failure: object) -> FailurePolicy:
    try:
        return FailurePolicy(on_failure)  # type: ignore[arg-type]
    except ValueError:
        choices = ", ".join(repr(policy.value) for policy in FailurePolicy)
        raise InvalidWorkflowError(
            step, on_failure, f"on_failure must be one of {choices}"
        ) from None


def _after_names(workflow: Workflow, step: str, after: object) -> tuple[str, ...]:
    if after is None:
        return ()
    given = [after] if isinstance(after, Step | str) else after
    if not isinstance(given, Iterable) or isinstance(given, Mapping):
        raise InvalidWorkflowError(step, after, "after must be a step, a step name or a list")
    names: list[str] = []
    for item in given:
        if isinstance(item, Step):
            if item.workflow is not workflow:
                raise InvalidWorkflowError(step, item, "after names a step of another workflow")
            parent = item.name
        elif isinstance(item, str) and item:
            parent = item
        else:
            raise InvalidWorkflowError(step, item, "after must hold steps or step names")
        if parent == step:
            raise InvalidWorkflowError(step, parent, "a step cannot depend on itself")
        if parent not in names:
            names.append(parent)
    return tuple(names)


def _link(position: int, link: object) -> tuple[JobRef, object]:
    if isinstance(link, tuple):
        if len(link) != 2:
            raise InvalidOptionError(f"links[{position}]", link, "expected a job or (job, params)")
        return _job_ref(link[0]), link[1]
    return _job_ref(link), None
