"""The dashboard's pages (GET only; nothing here changes the store): the overview per job
name, the job list by state with paging, filters and search, and the page of one job.

Each page has a live part (``_*_data.html``) that the page's script fetches again every
``refresh_seconds`` with ``?fragment=1``. A slow overview read (the counts of a big collection)
is served as a snapshot and read again after the response (:mod:`dogs_dashboard.snapshots`).
"""

from __future__ import annotations

from datetime import datetime

from starlette.background import BackgroundTasks
from starlette.requests import Request
from starlette.responses import Response

from dogs_core.domain import filters
from dogs_core.domain.records import HistoryRecord, JobRecord, JobState
from dogs_core.errors import DogsError, InvalidIdError
from dogs_core.ids import parse_id
from dogs_dashboard.context import Dashboard
from dogs_dashboard.data import ListFilters, read_job, read_lines, read_overview, search_jobs

__all__ = ["MAX_LIST_SIZE", "STATES", "job_list", "job_page", "overview", "parse_moment"]

#: The states a list can be filtered by (in the order of the tabs).
STATES = tuple(state.value for state in JobState)
#: The largest page of the job list.
MAX_LIST_SIZE = 200
_DEFAULT_LIST_SIZE = 50


async def overview(dash: Dashboard, request: Request) -> Response:
    """Per job name: due, scheduled, running, held, stale, failed, paused, and its stats."""
    data = await read_overview(dash.client, dash.counts, dash.stats, dash.stats_window)
    response = dash.render(request, "overview.html", "_overview_data.html", overview=data)
    return refreshing(dash, response)


def refreshing(dash: Dashboard, response: Response) -> Response:
    """``response``, with the slow snapshots that are due read again once it is sent."""
    tasks = BackgroundTasks()
    for snapshot in (dash.counts, dash.stats):
        if snapshot.due():
            tasks.add_task(snapshot.refresh)
    if tasks.tasks:
        response.background = tasks
    return response


def parse_moment(text: str | None, field: str, now: datetime) -> datetime | None:
    """A time typed in a filter, read as every edge reads it
    (:func:`dogs_core.domain.filters.parse_moment`); blank: not given."""
    if not text or not text.strip():
        return None
    return filters.parse_moment(field, text, now)


async def job_list(dash: Dashboard, request: Request) -> Response:
    """One page of records of a state (and name, and filters), or the jobs a search finds."""
    params = request.query_params
    state = params.get("state") or None
    if state is not None and state not in STATES:
        return dash.error(request, 400, f"state {state!r}: expected one of {', '.join(STATES)}")
    limit_text = params.get("limit") or str(_DEFAULT_LIST_SIZE)
    if not limit_text.isdigit() or not 1 <= int(limit_text) <= MAX_LIST_SIZE:
        return dash.error(request, 400, f"limit {limit_text!r}: expected 1 to {MAX_LIST_SIZE}")
    name = params.get("name") or None
    query = (params.get("q") or "").strip() or None
    tag = (params.get("tag") or "").strip() or None
    now = dash.client.clock.now()
    try:
        filters = ListFilters(
            params=(params.get("param") or "").strip() or None,
            owner=(params.get("owner") or "").strip() or None,
            created_since=parse_moment(params.get("created_since"), "created_since", now),
            created_until=parse_moment(params.get("created_until"), "created_until", now),
        )
        result = await search_jobs(
            dash.client,
            name=name,
            state=state,
            query=query,
            limit=int(limit_text),
            after=params.get("after") or None,
            filters=filters,
            tag=tag,
        )
        names = sorted(row.job_name for row in (await dash.counts.get()).value or [])
    except DogsError as error:
        return dash.error(request, 400, str(error))
    return dash.render(
        request,
        "jobs.html",
        "_jobs_data.html",
        result=result,
        state=state,
        name=name,
        query=query,
        tag=tag,
        limit=int(limit_text),
        after=params.get("after") or None,
        states=STATES,
        names=names,
        filters=filters,
        filter_values={k: params.get(k) or "" for k in _FILTER_FIELDS},
    )


_FILTER_FIELDS = ("param", "owner", "created_since", "created_until")


async def job_page(dash: Dashboard, request: Request) -> Response:
    """A job's record (while it exists, or its archived copy) with its progress, the log lines
    of its running (else newest) execution, and its executions, with errors and tracebacks (the
    user's frames first); its params cut unless ``?params=all``; how it left when it is gone."""
    now = dash.client.clock.now()
    try:
        job_id = parse_id(str(request.path_params["job_id"]))  # the client's own check
    except InvalidIdError as error:
        return dash.error(request, 400, str(error))
    try:
        view = await read_job(dash.client, job_id)
        record, executions = view.record, view.executions
        log = await read_lines(dash.client, record, executions, now)
    except DogsError as error:
        return dash.error(request, 400, str(error))
    fate = None
    if record is None or view.archived_at is not None:  # a bulk delete archives what it removes
        try:
            fate = await dash.client.job_fate(job_id)
        except DogsError:
            fate = None
    if record is None and not executions and fate is None:
        return dash.error(
            request, 404, f"no job {job_id!r}: no record, no history, nothing archived"
        )
    state = None if record is None else record.state(now).value
    return dash.render(
        request,
        "job.html",
        "_job_data.html",
        job_id=job_id,
        record=record,
        state=state,
        executions=executions,
        job_name=_name_of(record, executions, fate),
        log=log,
        fate=fate,
        archived_at=view.archived_at,
        all_params=request.query_params.get("params") == "all",
    )


def _name_of(record: JobRecord | None, executions: list[HistoryRecord], fate: object) -> str:
    """The job's name for the title (a removed job without history has only its id)."""
    if record is not None:
        return record.job_name
    return executions[0].job_name if executions else "Job"
