"""The operator's console actions: quiet or stop a worker, start a bulk action by filter,
resume one that stopped early. Only by POST to ``/ops/{action}``, checked as the job actions
are (:mod:`dogs_dashboard.actions`): read-only mode or a read-only user (403), the CSRF token
(403), the action and its fields (400), then the confirmation (a confirm page without
JavaScript). Each is recorded in the audit trail under the request's user.

A bulk delete or cancel removes records, so a bare "OK" does not start it (Sidekiq Web's rule):
the operator types the number of records it will remove, or the job name it is limited to
(``typed``), and the server counts the selection again and refuses (400, the confirm page
again, nothing written) unless what was typed is that count or that name. A selection without
a filter needs its "every job" box (``all=yes``).

A bulk action runs on the server, chunk after chunk, after the response: the browser goes to its
progress page at once (``/bulk/{audit_id}``), which follows the action's audit entry live. If
the server dies meanwhile the entry stops moving, and after a minute the page offers Resume.
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response

from dogs_core.domain.audit import AuditEntry
from dogs_core.domain.bulk import BulkAction, counts_in_words
from dogs_core.domain.registry import DEFAULT_STOP_GRACE
from dogs_core.domain.validation import duration
from dogs_core.errors import DogsError, InvalidOptionError, MissingRoleError
from dogs_core.ports import Role, has_role
from dogs_core.runtime.client._async.client import DogsClient
from dogs_core.runtime.plumbing.actors import acting_as
from dogs_dashboard.actions import MAX_FORM_BYTES, _form, _safe_next
from dogs_dashboard.console import DESTRUCTIVE, FILTER_FIELDS, selection_of
from dogs_dashboard.context import Dashboard
from dogs_dashboard.csrf import COOKIE_NAME, FIELD_NAME

__all__ = ["OPS", "perform"]

logger = logging.getLogger("dogs.dashboard")

#: Action -> the field naming its target.
OPS: dict[str, str] = {
    "quiet": "instance_id",
    "stop": "instance_id",
    "bulk": "action",
    "bulk-resume": "audit_id",
}


async def perform(dash: Dashboard, request: Request) -> Response:
    """Check and run one console action (see the module docstring)."""
    if not dash.can_act(request):
        return dash.error(request, 403, "actions are disabled for this user or dashboard")
    form = await _form(request)
    if form is None:
        return dash.error(request, 413, f"form larger than {MAX_FORM_BYTES} bytes")
    if not dash.csrf.is_valid(request.cookies.get(COOKIE_NAME), form.get(FIELD_NAME)):
        return dash.error(request, 403, "missing or invalid CSRF token: reload the page")
    op = str(request.path_params["action"])
    if op not in OPS:
        return dash.error(request, 404, f"no action {op!r}")
    target = form.get(OPS[op], "").strip()
    if not target:
        return dash.error(request, 400, f"{OPS[op]}: missing for {op}")
    back = _safe_next(request, form.get("next"))
    if op == "bulk" and target in DESTRUCTIVE:
        refused = await _typed_confirmation(dash, request, target, form)
        if refused is not None:
            return refused
    elif form.get("confirmed") != "yes":
        kept = {key: value for key, value in form.items() if key not in (FIELD_NAME, "confirmed")}
        return dash.render(
            request,
            "ops_confirm.html",
            "ops_confirm.html",
            op=op,
            fields=kept,
            question=_question(op, target, form),
        )
    user = dash.user(request).name
    try:
        with acting_as(user, source="dashboard"):
            if op in ("quiet", "stop"):
                message, level = await _worker(dash.client, op, target, form)
                return dash.redirect_with(back, message, level, request)
            entry = await _start_bulk(dash.client, op, target, form)
    except (DogsError, ValueError) as error:
        return dash.redirect_with(back, str(error), "error", request)
    progress = dash.link(request, f"/bulk/{entry.id}")
    response = dash.redirect_with(
        progress, f"Started: {entry.action} of {entry.target}", "ok", request
    )
    response.background = BackgroundTask(_run, dash.client, entry)
    logger.info("dashboard: %s by %s: %s (%s)", op, user, entry.target, entry.id)
    return response


async def _typed_confirmation(
    dash: Dashboard, request: Request, action: str, form: dict[str, str]
) -> Response | None:
    """``None`` when the operator typed what the selection removes now (its count, or its job
    name); else the confirm page asking for it (400 when something else was typed)."""
    try:
        selection = selection_of(
            {field: form.get(field, "") for field in FILTER_FIELDS}, dash.client.clock.now()
        )
        taken, _ = await dash.client.bulk_counts(selection)
    except (DogsError, ValueError) as error:
        return dash.redirect_with(
            _safe_next(request, form.get("next")), str(error), "error", request
        )
    total = sum(taken.values())
    if total == 0:
        return dash.redirect_with(
            _safe_next(request, form.get("next")),
            f"Nothing to {action}: no {selection.describe()} match now",
            "error",
            request,
        )
    typed = form.get("typed", "").strip()
    if form.get("confirmed") == "yes" and (
        typed == str(total) or (selection.job_name is not None and typed == selection.job_name)
    ):
        return None
    name = selection.job_name
    ask = f"Type {total}" + (f" or {name}" if name else "") + f" to {action} them."
    problem = None
    if typed:
        problem = f"You typed {typed!r}: {total} match now. " + ask
    kept = {
        key: value
        for key, value in form.items()
        if key not in (FIELD_NAME, "confirmed", "typed", "count")
    }
    return dash.render(
        request,
        "ops_confirm.html",
        "ops_confirm.html",
        400 if form.get("confirmed") == "yes" else 200,
        op=action,
        fields={**kept, "count": str(total)},
        question=(
            f"{action.capitalize()} {counts_in_words(taken)} ({selection.describe()})? "
            + ("They are kept in the archive. " if action == "delete" else "")
            + "Running jobs are left alone"
            + (" (cancel stops them)" if action == "cancel" else "")
            + ". "
            + ask
        ),
        typed_required=True,
        problem=problem,
    )


def _question(op: str, target: str, form: dict[str, str]) -> str:
    if op == "quiet":
        return f"Quiet worker {target}? It claims nothing more; what it runs finishes."
    if op == "stop":
        grace = form.get("grace") or f"{int(DEFAULT_STOP_GRACE.total_seconds())}s"
        return f"Stop worker {target}? Its jobs get {grace} to finish, then it stops."
    if op == "bulk-resume":
        return f"Resume bulk action {target} from where it stopped?"
    count = form.get("count") or "every"
    return f"{target.capitalize()} {count} matching job(s)? This cannot be undone."


async def _worker(
    client: DogsClient, op: str, target: str, form: dict[str, str]
) -> tuple[str, str]:
    if op == "quiet":
        info = await client.quiet_worker(target)
    else:
        grace = duration("grace", form.get("grace") or DEFAULT_STOP_GRACE)
        info = await client.stop_worker(target, grace=grace)
    if info is None:
        return f"No live worker {target}: nothing to {op}", "error"
    return (
        f"Asked {info.instance_id} ({info.host}:{info.pid}) to {op}; it takes it within 10 s",
        "ok",
    )


async def _start_bulk(client: DogsClient, op: str, target: str, form: dict[str, str]) -> AuditEntry:
    if not has_role(client.store, Role.AUDIT):
        raise MissingRoleError(Role.AUDIT.value, "a bulk action from the dashboard", client.store)
    if op == "bulk-resume":
        return await client.take_over_bulk(target)
    action = BulkAction(target)
    selection = selection_of(
        {field: form.get(field, "") for field in FILTER_FIELDS}, client.clock.now()
    )
    options: dict[str, Any] = {}
    if action is BulkAction.RESCHEDULE:
        if form.get("run_in"):
            options["run_in"] = form["run_in"]
        if form.get("priority"):
            options["priority"] = _integer("priority", form["priority"])
    return await client.prepare_bulk(action, selection, **options)


def _integer(field: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise InvalidOptionError(field, text, "must be an integer") from None


async def _run(client: DogsClient, entry: AuditEntry) -> None:
    """The bulk action, after the response (its entry holds its progress and any error)."""
    try:
        await client.run_bulk(entry)
    except Exception:
        logger.exception("dashboard: bulk action %s stopped", entry.id)
