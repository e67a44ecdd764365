"""The dashboard's actions: cancel, retry now, delete, pause and resume (of a job name, or of a
runtime schedule: :mod:`dogs_dashboard.schedules`); cancel and retry a workflow.

Only by POST, each checked in this order: read-only mode or a read-only user (403), the CSRF
token (403), the
action and its target (400), then the confirmation: a form without ``confirmed=yes`` gets a
confirm page holding the same form (the page's script asks with ``confirm()`` first and sets
it, so a browser with JavaScript skips that page). Then one client call, and a redirect
(303) back to the page the form came from, which shows a line saying what happened (carried in a
signed cookie: :mod:`dogs_dashboard.flash`). The action is recorded in the audit trail under the
request's user (:mod:`dogs_dashboard.auth`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from urllib.parse import parse_qs, urlsplit

from starlette.requests import Request
from starlette.responses import Response

from dogs_core.domain.controls import EVERY_JOB
from dogs_core.domain.steering import (
    AlreadyFinished,
    Cancelled,
    CancelOutcome,
    Deleted,
    DeleteOutcome,
    NotFound,
    Rescheduled,
    RescheduleOutcome,
    Running,
)
from dogs_core.errors import DogsError
from dogs_core.runtime.plumbing.actors import acting_as
from dogs_dashboard.context import Dashboard, root_of
from dogs_dashboard.csrf import COOKIE_NAME, FIELD_NAME
from dogs_dashboard.schedules import SCHEDULE_ACTIONS, run_schedule_action

__all__ = ["ACTIONS", "MAX_FORM_BYTES", "perform"]

_Outcome = CancelOutcome | RescheduleOutcome | DeleteOutcome

logger = logging.getLogger("dogs.dashboard")

#: The largest form body accepted.
MAX_FORM_BYTES = 16 * 1024

#: Action -> (its target field, the question of the confirm step).
ACTIONS: dict[str, tuple[str, str]] = {
    "cancel": ("job_id", "Cancel job {target}? A running execution is stopped."),
    "retry": ("job_id", "Run job {target} now?"),
    "delete": ("job_id", "Delete job {target}? No history row is written."),
    "pause": ("name", "Pause {target} on every worker?"),
    "resume": ("name", "Resume {target}?"),
    "cancel_workflow": ("workflow_id", "Cancel workflow {target}? Its running jobs are stopped."),
    "retry_workflow": ("workflow_id", "Run the failed steps of workflow {target} again?"),
    **SCHEDULE_ACTIONS,
}


async def perform(dash: Dashboard, request: Request) -> Response:
    """Check and run one action (see the module docstring for the order of the checks)."""
    if not dash.can_act(request):
        return dash.error(request, 403, _no_actions(dash, request))
    form = await _form(request)
    if form is None:
        return dash.error(request, 413, f"form larger than {MAX_FORM_BYTES} bytes")
    if not dash.csrf.is_valid(request.cookies.get(COOKIE_NAME), form.get(FIELD_NAME)):
        return dash.error(request, 403, "missing or invalid CSRF token: reload the page")
    action = str(request.path_params["action"])
    if action not in ACTIONS:
        return dash.error(request, 404, f"no action {action!r}")
    field, question = ACTIONS[action]
    target = form.get(field, "").strip()
    if not target:
        return dash.error(request, 400, f"{field}: missing for {action}")
    back = _safe_next(request, form.get("next"))
    if form.get("confirmed") != "yes":
        return dash.render(
            request,
            "confirm.html",
            "confirm.html",
            action=action,
            field=field,
            target=target,
            question=question.format(target=_shown(target)),
            back=back,
        )
    try:
        with acting_as(dash.user(request).name, source="dashboard"):
            message, level = await _run(dash, action, target)
    except DogsError as error:
        message, level = str(error), "error"
    logger.info("dashboard: %s %s: %s", action, target, message)
    return dash.redirect_with(back, message, level, request)


def _no_actions(dash: Dashboard, request: Request) -> str:
    if dash.read_only:
        return "this dashboard is read-only: actions are disabled"
    return f"{dash.user(request).name} has a read-only role: actions are disabled"


async def _form(request: Request) -> dict[str, str] | None:
    """The urlencoded form (the first value of each field); ``None`` when too large."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return None
    fields = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True, max_num_fields=32)
    return {key: values[0] for key, values in fields.items() if values}


def _safe_next(request: Request, given: str | None) -> str:
    """Where to go back to: a path of this app, never another site."""
    root = root_of(request)
    home = root + "/"
    if not given:
        return home
    parts = urlsplit(given)
    if parts.scheme or parts.netloc or not parts.path.startswith(home) or "\\" in given:
        return home
    if given.startswith("//"):
        return home
    return given


def _shown(target: str) -> str:
    return "every job" if target == EVERY_JOB else target


async def _run(dash: Dashboard, action: str, target: str) -> tuple[str, str]:
    client = dash.client
    if action in SCHEDULE_ACTIONS:
        return await run_schedule_action(dash, action, target)
    if action in ("pause", "resume"):
        name = None if target == EVERY_JOB else target
        changed = await (client.pause(name) if action == "pause" else client.resume(name))
        done = f"{action}d {_shown(target)}".capitalize()
        return (done, "ok") if changed else (f"{_shown(target)}: nothing to {action}", "ok")
    if action == "cancel_workflow":
        cancelled = await client.cancel_workflow(target)
        if cancelled.cancelled:
            return f"Cancelled workflow {target} ({cancelled.stopped} jobs stopped)", "ok"
        return f"Workflow {target} is {cancelled.state.value}: not cancelled", "error"
    if action == "retry_workflow":
        retried = await client.retry_workflow(target)
        done = f"{len(retried.step_ids)} steps of workflow {target} run again"
        return f"{done} ({retried.released} released now)", "ok"
    calls: dict[str, Callable[[str], Awaitable[_Outcome]]] = {
        "cancel": lambda job_id: client.cancel(job_id),
        "retry": client.retry_now,
        "delete": client.delete,
    }
    return _describe(await calls[action](target), target)


def _describe(outcome: _Outcome, job_id: str) -> tuple[str, str]:
    """One line for the outcome of a job action, and whether it did what was asked."""
    match outcome:
        case Cancelled(job_name=name, was_running=running):
            tail = " (it was running: it stops at its next lock renewal)" if running else ""
            return f"Cancelled {name} {job_id}{tail}", "ok"
        case Rescheduled(record=record):
            return f"{record.job_name} {job_id} is due now", "ok"
        case Deleted(record=record):
            return f"Deleted {record.job_name} {job_id}", "ok"
        case NotFound():
            return f"No job {job_id}", "error"
        case AlreadyFinished(status=status):
            return f"Job {job_id} has already finished ({status})", "error"
        case Running(record=record):
            return f"{record.job_name} {job_id} is running: not changed (cancel stops it)", "error"
    raise TypeError(f"unexpected outcome {outcome!r}")  # pragma: no cover
