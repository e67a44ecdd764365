"""The finding pages (GET only): recent executions across every job with their filters, the
errors of a window grouped by type and message, and the archive browser. Each reads through
the client's inspection half (``find_executions``, ``errors``, ``archived_jobs``,
``archived_executions``); a store without the inspection role gets a page saying so.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import Response

from dogs_core.domain.filters import EXECUTION_FILTERS, filters_from_text, parse_window
from dogs_core.domain.records import HistoryStatus
from dogs_core.errors import DogsError, MissingRoleError
from dogs_dashboard.context import Dashboard

__all__ = ["ERROR_WINDOWS", "archive", "errors", "executions"]

#: The windows the Errors page offers (the first is the default).
ERROR_WINDOWS: Final = {"1h": timedelta(hours=1), "15m": timedelta(minutes=15),
                        "6h": timedelta(hours=6), "24h": timedelta(hours=24),
                        "7d": timedelta(days=7)}  # fmt: skip
_PAGE: Final = 50
_EXECUTION_FIELDS: Final = tuple(one.key for one in EXECUTION_FILTERS)


def _text(params: Mapping[str, str], key: str) -> str | None:
    return (params.get(key) or "").strip() or None


async def executions(dash: Dashboard, request: Request) -> Response:
    """Finished executions of every job, newest first, by any filter, a page at a time: the
    filters of ``dogs history``, read by the same table (:data:`EXECUTION_FILTERS`)."""
    params = request.query_params
    now = dash.client.clock.now()
    try:
        texts = {key: params.get(key) for key in _EXECUTION_FIELDS}
        keywords = filters_from_text(EXECUTION_FILTERS, texts, now)
        page = await dash.client.find_executions(
            **keywords,  # type: ignore[arg-type]
            limit=_PAGE,
            before=_text(params, "before"),
        )
        names = await _names(dash)
    except MissingRoleError as missing:
        return dash.error(request, 501, str(missing))
    except DogsError as error:
        return dash.error(request, 400, str(error))
    values = {key: params.get(key) or "" for key in _EXECUTION_FIELDS}
    return dash.render(
        request,
        "executions.html",
        "_executions_data.html",
        found=page,
        values=values,
        statuses=[s.value for s in HistoryStatus],
        names=names,
        filtered=any(values.values()),
        before=_text(params, "before"),
    )


async def errors(dash: Dashboard, request: Request) -> Response:
    """The errors of a window grouped by type and message fingerprint, most frequent first."""
    params = request.query_params
    window = (params.get("window") or "").strip() or next(iter(ERROR_WINDOWS))
    try:
        length = parse_window("window", window)
    except DogsError as error:
        return dash.error(request, 400, str(error))
    name = _text(params, "name")
    try:
        report = await dash.client.errors(name, window=length)
        names = await _names(dash)
    except MissingRoleError as missing:
        return dash.error(request, 501, str(missing))
    except DogsError as error:
        return dash.error(request, 400, str(error))
    return dash.render(
        request,
        "errors.html",
        "_errors_data.html",
        report=report,
        window=window,
        windows=list(ERROR_WINDOWS),
        name=name,
        names=names,
    )


async def archive(dash: Dashboard, request: Request) -> Response:
    """The archive (``dogs archive``): failed records or history rows, newest first (rows) or in
    creation order (records), by name, unique key or params."""
    params = request.query_params
    kind = params.get("kind") or "records"
    if kind not in ("records", "history"):
        return dash.error(request, 400, f"kind {kind!r}: expected records or history")
    name, key, param = _text(params, "name"), _text(params, "unique_key"), _text(params, "param")
    values: dict[str, Any] = {"name": name or "", "unique_key": key or "", "param": param or ""}
    try:
        if kind == "records":
            found, following = await dash.client.archived_jobs(
                name, unique_key=key, params=param, limit=_PAGE, after=_text(params, "after")
            )
            page: Any = None
        else:
            page = await dash.client.archived_executions(
                name, unique_key=key, params=param, limit=_PAGE, before=_text(params, "before")
            )
            found, following = (), page.next_before
    except MissingRoleError as missing:
        return dash.error(request, 501, str(missing))
    except DogsError as error:
        return dash.error(request, 400, str(error))
    return dash.render(
        request,
        "archive.html",
        "_archive_data.html",
        kind=kind,
        records=found,
        found=page,
        following=following,
        values=values,
    )


async def _names(dash: Dashboard) -> list[str]:
    """The job names the filters offer (the overview's counts, a snapshot)."""
    return sorted(row.job_name for row in (await dash.counts.get()).value or [])
