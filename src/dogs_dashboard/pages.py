"""The dashboard's pages (GET only; nothing here changes the store): the overview per job
name, the job list by state with paging and search, and the page of one job.

Each page has a live part (``_*_data.html``) that the page's script fetches again every
``refresh_seconds`` with ``?fragment=1``.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from dogs_core.domain.records import HistoryRecord, JobRecord, JobState
from dogs_core.errors import DogsError
from dogs_dashboard.context import Dashboard
from dogs_dashboard.data import read_job, read_lines, read_overview, search_jobs

__all__ = ["MAX_LIST_SIZE", "STATES", "job_list", "job_page", "overview"]

#: The states a list can be filtered by (in the order of the tabs).
STATES = tuple(state.value for state in JobState)
#: The largest page of the job list.
MAX_LIST_SIZE = 200
_DEFAULT_LIST_SIZE = 50


async def overview(dash: Dashboard, request: Request) -> Response:
    """Per job name: due, scheduled, running, stale, failed, paused, and its throughput."""
    data = await read_overview(dash.client, dash.stats)
    return dash.render(request, "overview.html", "_overview_data.html", overview=data)


async def job_list(dash: Dashboard, request: Request) -> Response:
    """One page of records of a state (and name), or the records a search finds."""
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
    try:
        result = await search_jobs(
            dash.client,
            name=name,
            state=state,
            query=query,
            limit=int(limit_text),
            after=params.get("after") or None,
            tag=tag,
        )
        names = sorted(row.job_name for row in await dash.client.status())
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
    )


async def job_page(dash: Dashboard, request: Request) -> Response:
    """A job's record (while it exists) with its progress, the log lines of its running (else
    newest) execution, and its executions, with errors and tracebacks."""
    job_id = str(request.path_params["job_id"])
    now = dash.client.clock.now()
    try:
        record, executions = await read_job(dash.client, job_id)
        log = await read_lines(dash.client, record, executions, now)
    except DogsError as error:
        return dash.error(request, 400, str(error))
    fate = None
    if record is None:
        try:
            fate = await dash.client.job_fate(job_id)
        except DogsError:
            fate = None
    if record is None and not executions and fate is None:
        return dash.error(request, 404, f"no job {job_id!r}: no record and no history")
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
    )


def _name_of(record: JobRecord | None, executions: list[HistoryRecord], fate: object) -> str:
    """The job's name for the title (a removed job without history has only its id)."""
    if record is not None:
        return record.job_name
    return executions[0].job_name if executions else "Job"
