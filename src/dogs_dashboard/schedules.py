"""The dashboard's schedules (issue 27): the list of recurring schedules, runtime ones and
code-defined recurrent jobs (``client.schedules.list``), with pause and resume for the runtime
ones, through the same POST actions, CSRF tokens and confirm step as every action
(:mod:`dogs_dashboard.actions`)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from dogs_core.errors import DogsError
from dogs_dashboard.context import Dashboard

__all__ = ["SCHEDULE_ACTIONS", "run_schedule_action", "schedule_list"]

#: Action -> (its target field, the question of the confirm step).
SCHEDULE_ACTIONS: dict[str, tuple[str, str]] = {
    "pause-schedule": ("schedule_id", "Pause schedule {target}? No run starts until resumed."),
    "resume-schedule": ("schedule_id", "Resume schedule {target}?"),
}


async def schedule_list(dash: Dashboard, request: Request) -> Response:
    """Every schedule by id (the first 1,000)."""
    try:
        schedules = await dash.client.schedules.list(limit=1000)
    except DogsError as error:
        return dash.error(request, 400, str(error))
    return dash.render(request, "schedules.html", "_schedules_data.html", schedules=schedules)


async def run_schedule_action(dash: Dashboard, action: str, schedule_id: str) -> tuple[str, str]:
    """Pause or resume one runtime schedule: the flash line and its level."""
    if action == "pause-schedule":
        await dash.client.schedules.pause(schedule_id)
        return f"Paused schedule {schedule_id}", "ok"
    found = await dash.client.schedules.resume(schedule_id)
    when = (
        "" if found.next_run_at is None else f", next run {found.next_run_at:%Y-%m-%d %H:%M:%S} UTC"
    )
    return f"Resumed schedule {schedule_id}{when}", "ok"
