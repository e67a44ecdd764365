"""Finding jobs as the clients offer it: executions across every job (``find_executions``),
records by any filter (``search_jobs``), one job wherever it is now (``lookup``: live, finished
or archived), the errors of a window grouped (``errors``), the newest error of some jobs
(``latest_errors``), the archive browsed (``archived_jobs``, ``archived_executions``), all
through the store's optional inspection role (:class:`~dogs_core.ports.AsyncInspectionStore`).

This module is the source of truth; ``_sync/inspection.py`` is generated from it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import TypeVar

from dogs_core.domain import validation
from dogs_core.domain.definitions import JobDefinition
from dogs_core.domain.feeds import check_history_status
from dogs_core.domain.filters import parse_window
from dogs_core.domain.finding import (
    DEFAULT_ERROR_ROWS,
    DEFAULT_ERROR_WINDOW,
    MAX_ERROR_ROWS,
    Archived,
    ErrorReport,
    ExecutionCursor,
    ExecutionPage,
    ExecutionQuery,
    FoundJob,
    JobLookup,
    OwnerLike,
    ParamsLike,
    RecordQuery,
    as_params_match,
    check_error_window,
    found_jobs,
    merge_error_groups,
    owner_match,
    page_size,
    with_slots,
)
from dogs_core.domain.records import HistoryRecord, JobRecord, JobState, NameStatus
from dogs_core.domain.steering import MAX_PAGE_SIZE, JobPage, check_state
from dogs_core.domain.tags import validate_tag_filter
from dogs_core.errors import InvalidOptionError
from dogs_core.ids import as_id
from dogs_core.ports import AsyncInspectionStore, AsyncJobStore, Role, has_role
from dogs_core.ports.store import require_role
from dogs_core.runtime.client.scheduling import (
    ClientBase,
    job_name,
    unique_identifier_for,
    validate_job_id,
)
from dogs_core.runtime.plumbing._async.retry import retry_transient

__all__ = ["InspectionClient"]


T = TypeVar("T")


class InspectionClient(ClientBase):
    """``find_executions``, ``search_jobs``, ``lookup``, ``errors``, ``latest_errors``,
    ``archived_jobs``, ``archived_executions``."""

    store: AsyncJobStore
    operation_timeout: float | None

    async def _ensure_clock(self) -> bool:
        raise NotImplementedError  # DogsClient's

    async def status(self) -> list[NameStatus]:
        raise NotImplementedError  # DogsClient's

    async def find_executions(
        self,
        job: JobDefinition | str | None = None,
        *,
        status: str | None = None,
        error_type: str | None = None,
        owner: OwnerLike | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        unique_key: str | None = None,
        params: ParamsLike | None = None,
        job_id: str | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> ExecutionPage:
        """Finished executions of every job (or of ``job``), newest first, by ``status``,
        ``error_type``, ``owner`` (a host, ``host:pid`` or an instance id), start time
        (``since`` inclusive, ``until`` exclusive), ``unique_key``, ``params`` (``"user.id=42"``)
        and ``job_id``; a page of ``limit`` (1 to 1000), the next one with its
        ``next_before``. Raises :class:`~dogs_core.errors.QueryTooBroadError` when a filter no
        index serves (owner, params) finds too few rows in time."""
        query = self._execution_query(
            job, status, error_type, owner, since, until, unique_key, params, job_id
        )
        return await self._executions(query, limit, before, archived=False)

    async def archived_executions(
        self,
        job: JobDefinition | str | None = None,
        *,
        status: str | None = None,
        error_type: str | None = None,
        owner: OwnerLike | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        unique_key: str | None = None,
        params: ParamsLike | None = None,
        job_id: str | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> ExecutionPage:
        """:meth:`find_executions` over the history's archive (``dogs archive``); each row's
        archive time is in the page's ``archived_at``."""
        query = self._execution_query(
            job, status, error_type, owner, since, until, unique_key, params, job_id
        )
        return await self._executions(query, limit, before, archived=True)

    async def search_jobs(
        self,
        job: JobDefinition | str | None = None,
        *,
        state: JobState | str | None = None,
        owner: OwnerLike | None = None,
        params: ParamsLike | None = None,
        created_since: datetime | None = None,
        created_until: datetime | None = None,
        unique_key: str | None = None,
        tags: str | Sequence[str] | None = None,
        limit: int = 50,
        after: str | None = None,
    ) -> JobPage:
        """Records in creation order by any filter: ``state``, ``owner`` (who runs it now),
        ``params`` (``"user.id=42"``), creation time, ``unique_key``, ``tags`` (one, or
        several: records carrying all); a page of ``limit`` (1 to 1000), the next one after
        its ``next_after``."""
        query = self._record_query(
            job, check_state(state), owner, params, created_since, created_until, unique_key
        )
        query = dataclasses.replace(query, tags=validate_tag_filter(tags))
        size = page_size(limit)
        if after is not None:
            after = validate_job_id(after, field="after")
        store = require_role(self.store, Role.INSPECTION, "search_jobs")
        if query.state is not None:
            await self._ensure_clock()
        records = await self._retried(
            "search jobs",
            lambda: store.find_matching_records(
                query, now=self.clock.now(), limit=size + 1, after=after
            ),
        )
        page = tuple(records[:size])
        return JobPage(page, page[-1].id if len(records) > size else None)

    async def archived_jobs(
        self,
        job: JobDefinition | str | None = None,
        *,
        params: ParamsLike | None = None,
        created_since: datetime | None = None,
        created_until: datetime | None = None,
        unique_key: str | None = None,
        job_ids: Sequence[str] | None = None,
        limit: int = 50,
        after: str | None = None,
    ) -> tuple[tuple[Archived[JobRecord], ...], str | None]:
        """Failed records in the archive (``dogs archive``) by name, params, creation time,
        unique key or id, in creation order; the page and the ``after`` of the next one."""
        query = self._record_query(
            job, None, None, params, created_since, created_until, unique_key, job_ids
        )
        size = page_size(limit)
        store = require_role(self.store, Role.INSPECTION, "archived_jobs")
        found = await self._retried(
            "search the archive",
            lambda: store.find_archived_records(query, limit=size + 1, after=after),
        )
        page = tuple(found[:size])
        return page, (page[-1].item.id if len(found) > size else None)

    async def lookup(
        self, query: str, *, job: JobDefinition | str | None = None, limit: int = 20
    ) -> JobLookup:
        """A job by id or by unique key, wherever it is: its live record, its finished
        executions (its record gone), or the archive. An id is tried first, then the text as
        a unique key (scoped by ``job`` when given, as ``unique_scope="job"`` stores it)."""
        text = validation.optional_text("query", query)
        if text is None:
            raise InvalidOptionError("query", query, "must be a job id or a unique key")
        store = require_role(self.store, Role.INSPECTION, "lookup")
        as_stored = as_id(text) or text  # an id in any case finds its job
        by_id = await self._found_by(store, ExecutionQuery(job_id=as_stored), job_ids=(as_stored,))
        if by_id:
            return JobLookup(text, "id", by_id)
        keys = [text]
        if job is not None:
            keys.append(unique_identifier_for(self.jobs, job, text))
        for key in dict.fromkeys(keys):
            found = await self._found_by(
                store, ExecutionQuery(unique_identifier=key), unique_key=key, limit=limit
            )
            if found:
                return JobLookup(text, "unique key", found)
        return JobLookup(text, None, ())

    async def errors(
        self,
        job: JobDefinition | str | None = None,
        *,
        window: timedelta | int | float | str | None = DEFAULT_ERROR_WINDOW,
        since: datetime | None = None,
        until: datetime | None = None,
        max_rows: int = DEFAULT_ERROR_ROWS,
    ) -> ErrorReport:
        """The error rows of the last ``window`` (1 h; or ``since`` to ``until``), of ``job``
        when given, grouped by error type and message fingerprint (numbers and ids alike), most
        frequent first, each with its count, first and last time, job names and newest row.
        Only the newest ``max_rows`` (1 to 500,000) are grouped: the report says when there
        were more."""
        end = until if until is not None else self.clock.now()
        start = since
        if start is None:
            length = parse_window("window", DEFAULT_ERROR_WINDOW if window is None else window)
            start = end - length
        start, end = check_error_window(start, end)
        rows = validation.integer("max_rows", max_rows, minimum=1)
        if rows > MAX_ERROR_ROWS:
            raise InvalidOptionError("max_rows", max_rows, f"must be at most {MAX_ERROR_ROWS}")
        name = None if job is None else job_name(job)
        store = require_role(self.store, Role.INSPECTION, "errors")
        scan = await self._retried(
            "group errors",
            lambda: store.error_groups(since=start, until=end, job_name=name, max_rows=rows),
        )
        groups = merge_error_groups(scan.groups)
        return ErrorReport(
            groups=groups,
            since=start,
            until=end,
            examined=scan.examined,
            truncated=scan.truncated,
            job_name=name,
            distinct=len(scan.groups),
        )

    async def latest_errors(self, job_ids: Sequence[str]) -> dict[str, HistoryRecord]:
        """The newest error row of each of ``job_ids`` (at most 1000) that has one."""
        if isinstance(job_ids, str) or not isinstance(job_ids, Sequence):
            raise InvalidOptionError("job_ids", job_ids, "must be a sequence of job ids")
        job_ids = [validate_job_id(one, field="job_ids") for one in job_ids]
        if len(job_ids) > MAX_PAGE_SIZE:
            raise InvalidOptionError("job_ids", len(job_ids), f"at most {MAX_PAGE_SIZE} ids")
        store = require_role(self.store, Role.INSPECTION, "latest_errors")
        return await self._retried("read latest errors", lambda: store.latest_errors(job_ids))

    async def fleet_status(self) -> list[NameStatus]:
        """:meth:`status` with the running jobs of each fleet-limited name checked against
        the slots they hold (:func:`~dogs_core.domain.finding.with_slots`: a job claimed but
        not admitted yet counts as held, not running). Without the inspection role, the plain
        :meth:`status`."""
        statuses = await self.status()
        if not has_role(self.store, Role.INSPECTION):
            return statuses
        limited = await self.slot_holders()  # which names have fleet slots at all
        running: dict[str, list[JobRecord]] = {}
        for status in statuses:
            if status.running and status.job_name in limited:
                page = await self.search_jobs(
                    status.job_name, state=JobState.RUNNING, limit=MAX_PAGE_SIZE
                )
                running[status.job_name] = list(page)
        # Read after the records: a job admitted in between counts as running.
        holders = await self.slot_holders() if running else limited
        return with_slots(statuses, running, holders)

    async def slot_holders(self) -> dict[str, frozenset[str]]:
        """Per job name, the lock ids of the executions holding its fleet concurrency slots."""
        store = require_role(self.store, Role.INSPECTION, "slot_holders")
        await self._ensure_clock()
        return await self._retried(
            "read slot holders", lambda: store.held_slot_holders(now=self.clock.now())
        )

    # -- helpers ----------------------------------------------------------------------------

    async def _executions(
        self, query: ExecutionQuery, limit: int, before: str | None, *, archived: bool
    ) -> ExecutionPage:
        size = page_size(limit)
        cursor = None if before is None else ExecutionCursor.decode(before)
        store = require_role(self.store, Role.INSPECTION, "find_executions")
        if archived:
            found = await self._retried(
                "search the archive",
                lambda: store.find_archived_executions(query, limit=size + 1, before=cursor),
            )
            rows = tuple(item.item for item in found)
            archived_at = tuple(item.archived_at for item in found[:size])
        else:
            rows = tuple(
                await self._retried(
                    "find executions",
                    lambda: store.find_executions(query, limit=size + 1, before=cursor),
                )
            )
            archived_at = ()
        page = rows[:size]
        following = None
        if len(rows) > size:
            following = ExecutionCursor.after_page(page, cursor).encode()
        return ExecutionPage(page, following, archived_at)

    async def _found_by(
        self,
        store: AsyncInspectionStore,
        rows_query: ExecutionQuery,
        *,
        job_ids: tuple[str, ...] | None = None,
        unique_key: str | None = None,
        limit: int = 20,
    ) -> tuple[FoundJob, ...]:
        """Every job the query names: live records, then finished ones, then archived."""
        now = self.clock.now()
        records_query = RecordQuery(job_ids=job_ids, unique_identifier=unique_key)
        live = await self._retried(
            "look up records",
            lambda: store.find_matching_records(records_query, now=now, limit=limit),
        )
        rows = await self._retried(
            "look up history", lambda: store.find_executions(rows_query, limit=limit)
        )
        archived = await self._retried(
            "look up the archive",
            lambda: store.find_archived_records(records_query, limit=limit),
        )
        archived_rows = await self._retried(
            "look up the archive",
            lambda: store.find_archived_executions(rows_query, limit=limit),
        )
        return found_jobs(live, rows, archived, archived_rows)

    def _execution_query(
        self,
        job: JobDefinition | str | None,
        status: str | None,
        error_type: str | None,
        owner: OwnerLike | None,
        since: datetime | None,
        until: datetime | None,
        unique_key: str | None,
        params: ParamsLike | None,
        job_id: str | None,
    ) -> ExecutionQuery:
        if job_id is not None:
            job_id = validate_job_id(job_id)
        identifier = None
        if unique_key is not None:
            identifier = unique_identifier_for(self.jobs, job, unique_key)
        return ExecutionQuery(
            job_name=None if job is None else job_name(job),
            job_id=job_id,
            status=check_history_status(status),
            error_type=validation.optional_text("error_type", error_type),
            owner=owner_match(owner),
            since=since,
            until=until,
            unique_identifier=identifier,
            params=as_params_match(params),
        )

    def _record_query(
        self,
        job: JobDefinition | str | None,
        state: JobState | None,
        owner: OwnerLike | None,
        params: ParamsLike | None,
        created_since: datetime | None,
        created_until: datetime | None,
        unique_key: str | None,
        job_ids: Sequence[str] | None = None,
    ) -> RecordQuery:
        identifier = None
        if unique_key is not None:
            identifier = unique_identifier_for(self.jobs, job, unique_key)
        return RecordQuery(
            job_name=None if job is None else job_name(job),
            state=state,
            unique_identifier=identifier,
            owner=owner_match(owner),
            created_since=created_since,
            created_until=created_until,
            params=as_params_match(params),
            job_ids=None if job_ids is None else tuple(job_ids),
        )

    async def _retried(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        return await retry_transient(call, what=what, deadline=self.operation_timeout)
