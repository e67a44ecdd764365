"""The operator's console pages (GET only: nothing here changes the store): the workers and
one worker (the registry), the audit trail, a bulk action's form with its dry-run count, and a
bulk action's progress; the token login and the favicon.

Each page with a live part (``_*_data.html``) is fetched again every ``refresh_seconds`` with
``?fragment=1``, as the other pages are. A store without the role a page needs (registry,
audit, bulk) gets the page with a line saying so, not an error.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime, timedelta
from importlib import resources
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from dogs_core.domain.audit import AuditAction, AuditEntry, outcome_words
from dogs_core.domain.bulk import (
    BulkAction,
    BulkSelection,
    TimeField,
    bulk_selection,
    counts_in_words,
)
from dogs_core.domain.records import JobState
from dogs_core.domain.registry import WorkerInfo, liveness, shown_state, uptime
from dogs_core.errors import DogsError, MissingRoleError
from dogs_dashboard.actions import _form
from dogs_dashboard.auth import SESSION_COOKIE, CredentialsAuth
from dogs_dashboard.context import Dashboard, root_of
from dogs_dashboard.csrf import COOKIE_NAME, FIELD_NAME
from dogs_dashboard.pages import parse_moment

__all__ = [
    "DESTRUCTIVE",
    "FILTER_FIELDS",
    "audit_page",
    "bulk_page",
    "bulk_progress_page",
    "favicon",
    "login",
    "logout",
    "selection_of",
    "worker_page",
    "workers_page",
]

#: The query fields of a bulk selection (the jobs list's "select all matching" sets them), and
#: the boxes that widen it: every job (no filter), runtime schedules, workflow steps.
FILTER_FIELDS = (
    "name",
    "state",
    "tag",
    "error_type",
    "since",
    "until",
    "time_field",
    "all",
    "include_schedules",
    "include_steps",
)
_AUDIT_PAGE = 50
#: The bulk actions that remove records: the operator types the count (or the job name).
DESTRUCTIVE = frozenset({BulkAction.DELETE.value, BulkAction.CANCEL.value})


def _age(delta: timedelta) -> str:
    seconds = max(0, int(delta.total_seconds()))
    days, seconds = divmod(seconds, 86400)
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m {seconds}s" if minutes else f"{seconds}s"


# -- workers ----------------------------------------------------------------------------------


def _worker_row(info: WorkerInfo, now: datetime) -> dict[str, Any]:
    state = liveness(info, now)
    return {
        "info": info,
        "state": state.value,
        "shown": shown_state(info, now),
        "live": state.value not in ("stopped", "lost"),
        "up": _age(uptime(info, now)),
        "beat_ago": _age(now - info.last_beat),
        "running": [
            {"execution": one, "for": _age(now - one.started_at)} for one in info.executions
        ],
    }


async def workers_page(dash: Dashboard, request: Request) -> Response:
    """Every worker in the registry: state, host and pid, slots, jobs, uptime, last beat."""
    now = dash.client.clock.now()
    missing = None
    rows: list[dict[str, Any]] = []
    try:
        rows = [_worker_row(info, now) for info in await dash.client.workers()]
    except MissingRoleError as error:
        missing = str(error)
    return dash.render(request, "workers.html", "_workers_data.html", rows=rows, missing=missing)


async def worker_page(dash: Dashboard, request: Request) -> Response:
    """One worker and what it runs (as of its last beat)."""
    instance_id = str(request.path_params["instance_id"])
    try:
        info = await dash.client.worker(instance_id)
    except (MissingRoleError, DogsError) as error:
        return dash.error(request, 400, str(error))
    if info is None:
        return dash.error(request, 404, f"no worker {instance_id!r} in the registry")
    row = _worker_row(info, dash.client.clock.now())
    return dash.render(request, "worker.html", "_worker_data.html", row=row)


# -- the audit trail --------------------------------------------------------------------------


async def audit_page(dash: Dashboard, request: Request) -> Response:
    """The audit trail, newest first, by action, actor or job; 50 a page."""
    params = request.query_params
    action = params.get("action") or None
    actor = (params.get("actor") or "").strip() or None
    job_id = (params.get("job_id") or "").strip() or None
    before = params.get("before") or None
    entries: list[AuditEntry] = []
    missing = None
    try:
        entries = await dash.client.audit_log(
            limit=_AUDIT_PAGE, before=before, action=action, actor=actor, job_id=job_id
        )
    except MissingRoleError as error:
        missing = str(error)
    except DogsError as error:
        return dash.error(request, 400, str(error))
    older = entries[-1].id if len(entries) == _AUDIT_PAGE else None
    return dash.render(
        request,
        "audit.html",
        "_audit_data.html",
        entries=[{"entry": entry, "words": outcome_words(entry)} for entry in entries],
        missing=missing,
        actions=[one.value for one in AuditAction],
        action=action,
        actor=actor,
        job_id=job_id,
        before=before,
        older=older,
    )


# -- bulk actions -----------------------------------------------------------------------------


def selection_of(values: Mapping[str, str], now: datetime) -> BulkSelection:
    """The selection of a form or a query (``FILTER_FIELDS``); ``InvalidOptionError`` names a
    bad field."""
    return bulk_selection(
        job_name=values.get("name") or None,
        state=values.get("state") or None,
        error_type=(values.get("error_type") or "").strip() or None,
        tags=(values.get("tag") or "").strip() or None,
        time_field=values.get("time_field") or TimeField.CREATED.value,
        since=parse_moment(values.get("since"), "since", now),
        until=parse_moment(values.get("until"), "until", now),
        include_schedules=values.get("include_schedules") == "yes",
        include_steps=values.get("include_steps") == "yes",
        all=values.get("all") == "yes",
    )


async def bulk_page(dash: Dashboard, request: Request) -> Response:
    """A bulk action's form: the filters, the action, and how many jobs match (a dry run)."""
    params = request.query_params
    action = params.get("action") or BulkAction.RETRY.value
    if action not in {one.value for one in BulkAction}:
        return dash.error(
            request, 400, f"action {action!r}: expected retry, cancel, reschedule or delete"
        )
    filters = {field: params.get(field, "") for field in FILTER_FIELDS}
    count: int | None = None
    problem = None
    selection = None
    counted = ""
    left_out = ""
    try:
        selection = selection_of(filters, dash.client.clock.now())
        if selection.unfiltered and not selection.all:
            problem = (
                "No filter: choose a job, a state, a tag, an error or a time range, or tick "
                "'every job' to act on all of them."
            )
        else:
            taken, others = await dash.client.bulk_counts(selection)
            count = sum(taken.values())
            counted = counts_in_words(taken)
            left_out = counts_in_words(others) if others else ""
    except (DogsError, ValueError) as error:
        problem = str(error)
    names = sorted(row.job_name for row in await dash.client.status())
    return dash.render(
        request,
        "bulk.html",
        "bulk.html",
        action=action,
        actions=[one.value for one in BulkAction],
        filters=filters,
        described=None if selection is None else selection.describe(),
        count=count,
        counted=counted,
        left_out=left_out,
        destructive=action in DESTRUCTIVE,
        problem=problem,
        names=names,
        states=[state.value for state in JobState],
        time_fields=[one.value for one in TimeField],
        run_in=params.get("run_in", ""),
        priority=params.get("priority", ""),
    )


async def bulk_progress_page(dash: Dashboard, request: Request) -> Response:
    """A bulk action's progress (live), what it did, and Resume when it stopped early."""
    audit_id = str(request.path_params["audit_id"])
    try:
        entry = await dash.client.audit_entry(audit_id)
    except DogsError as error:
        return dash.error(request, 400, str(error))
    if entry is None or entry.bulk is None:
        return dash.error(request, 404, f"no bulk action {audit_id!r} in the audit trail")
    bulk = entry.bulk
    done = bulk.changed + sum(bulk.skipped.values())
    fraction = bulk.done_fraction
    now = dash.client.clock.now()
    resumable = entry.resumable and (entry.outcome.value != "running" or entry.stalled(now))
    return dash.render(
        request,
        "bulk_progress.html",
        "_bulk_progress_data.html",
        entry=entry,
        bulk=bulk,
        done=done,
        percent=None if fraction is None else math.floor(fraction * 100),
        words=outcome_words(entry),
        resumable=resumable,
    )


# -- signing in -------------------------------------------------------------------------------


async def login(dash: Dashboard, request: Request) -> Response:
    """The token login: GET shows the form, POST checks the token (and the CSRF token) and
    sets the signed session cookie."""
    auth = dash.auth
    if not isinstance(auth, CredentialsAuth) or not auth.token_login:
        return dash.error(request, 404, "this dashboard has no token login")
    if request.method == "GET":
        back = request.query_params.get("next") or (root_of(request) + "/")
        return dash.render(
            request, "login.html", "login.html", token_login=True, failed=False, next=back
        )
    form = await _form(request) or {}
    back = _inside(request, str(form.get("next") or ""))
    if not dash.csrf.is_valid(request.cookies.get(COOKIE_NAME), str(form.get(FIELD_NAME) or "")):
        return dash.error(request, 403, "missing or invalid CSRF token: reload the page")
    token = str(form.get("token") or "").strip()
    user = auth.sign_in(request, "token on /login", lambda: auth.check_token(token))
    if isinstance(user, Response):  # 429: this client waits out its failed sign-ins
        page = dash.render(
            request, "login.html", "login.html", 429, token_login=True, failed=False, next=back,
            throttled=user.headers["retry-after"],
        )  # fmt: skip
        page.headers["Retry-After"] = user.headers["retry-after"]
        return page
    if user is None:
        return dash.render(
            request, "login.html", "login.html", 401, token_login=True, failed=True, next=back
        )
    response = RedirectResponse(back, status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        auth.session_cookie(user),
        httponly=True,
        samesite="strict",
        path=(root_of(request) or "") + "/",
        secure=request.url.scheme == "https",
    )
    return response


async def logout(dash: Dashboard, request: Request) -> Response:
    form = await _form(request) or {}
    if not dash.csrf.is_valid(request.cookies.get(COOKIE_NAME), str(form.get(FIELD_NAME) or "")):
        return dash.error(request, 403, "missing or invalid CSRF token: reload the page")
    response = RedirectResponse(dash.link(request, "/login"), status_code=303)
    response.delete_cookie(SESSION_COOKIE, path=(root_of(request) or "") + "/")
    return response


def _inside(request: Request, target: str) -> str:
    home = root_of(request) + "/"
    if not target.startswith(home) or target.startswith("//") or "\\" in target:
        return home
    return target


_FAVICON = resources.files("dogs_dashboard").joinpath("static/favicon.ico").read_bytes()


async def favicon(dash: Dashboard, request: Request) -> Response:
    """``/favicon.ico``, where browsers look for it without a ``<link>``."""
    return Response(
        _FAVICON, media_type="image/x-icon", headers={"Cache-Control": "public, max-age=86400"}
    )
