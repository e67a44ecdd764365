"""The audit trail as the clients keep it: every operator method is :func:`audited` (it records
what it came to, under :func:`~dogs_core.runtime.plumbing.actors.current_actor`, once it returned),
and
:class:`AuditClient` reads the trail (``audit_log``, ``audit_entry``).

Recording never fails the action it records: the action is done when the entry is written. An
entry the store would not take (transient errors past ``operation_timeout``) is logged as a
warning under ``dogs.audit``, with the action, so the log keeps what the trail missed. A store
without the audit role (:attr:`~dogs_core.ports.Role.AUDIT`) records nothing; reading the trail
from it raises :class:`~dogs_core.errors.MissingRoleError`.

This module is the source of truth; ``_sync/audit.py`` is generated from it.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Concatenate, ParamSpec, Protocol, TypeVar, cast

from dogs_core.domain.audit import (
    AuditAction,
    AuditEntry,
    JobFate,
    check_audit_query,
    job_fate,
)
from dogs_core.ids import parse_id
from dogs_core.ports import (
    AsyncArchiveStore,
    AsyncAuditStore,
    AsyncJobStore,
    Clock,
    Role,
    has_role,
)
from dogs_core.ports.store import require_role
from dogs_core.runtime.client.calls import audit_entry_of
from dogs_core.runtime.client.scheduling import ClientBase
from dogs_core.runtime.plumbing._async.retry import retry_transient

__all__ = ["AuditClient", "audited", "record_entry"]

log = logging.getLogger("dogs.audit")

P = ParamSpec("P")
T = TypeVar("T")


class Recording(Protocol):
    """What recording an action needs of a client."""

    @property
    def store(self) -> AsyncJobStore: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def operation_timeout(self) -> float | None: ...


S = TypeVar("S", bound=Recording)


async def _ready(client: Recording) -> AsyncAuditStore:
    """The client's store as an audit store, its indexes set up once per client."""
    audit = cast(AsyncAuditStore, client.store)
    if not getattr(client, "_audit_ready", False):
        await retry_transient(
            audit.setup_audit, what="audit setup", deadline=client.operation_timeout
        )
        setattr(client, "_audit_ready", True)  # noqa: B010 - a flag of any client
    return audit


async def record_entry(client: Recording, entry: AuditEntry) -> bool:
    """Write ``entry`` (once, however often retried); ``False``, logged, when it could not be
    written or the store keeps no audit trail."""
    if not has_role(client.store, Role.AUDIT):
        return False
    try:
        audit = await _ready(client)
        await retry_transient(
            lambda: audit.record_audit(entry),
            what="audit",
            deadline=client.operation_timeout,
        )
    except Exception as error:
        log.warning(
            "dogs: the audit entry of %s %s by %s was not written: %r",
            entry.action,
            entry.target,
            entry.actor,
            error,
        )
        return False
    return True


def audited(
    action: AuditAction,
) -> Callable[
    [Callable[Concatenate[S, P], Awaitable[T]]], Callable[Concatenate[S, P], Awaitable[T]]
]:
    """Record each call of an operator method, with what it returned, as ``action`` (a call
    with ``dry_run=True`` changes nothing and is not recorded)."""

    def decorate(
        method: Callable[Concatenate[S, P], Awaitable[T]],
    ) -> Callable[Concatenate[S, P], Awaitable[T]]:
        signature = inspect.signature(method)

        @functools.wraps(method)
        async def recorded(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
            result = await method(self, *args, **kwargs)
            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()
            arguments = dict(list(bound.arguments.items())[1:])
            if arguments.get("dry_run") is not True:
                await record_entry(
                    self, audit_entry_of(self.clock.now(), action, arguments, result)
                )
            return result

        return recorded

    return decorate


class AuditClient(ClientBase):
    """Read the audit trail: who did what to which jobs, when, and how many."""

    store: AsyncJobStore
    operation_timeout: float | None

    async def audit_log(
        self,
        *,
        limit: int = 50,
        before: str | None = None,
        action: AuditAction | str | None = None,
        actor: str | None = None,
        job_id: str | None = None,
        top_level: bool = True,
    ) -> list[AuditEntry]:
        """The newest entries (at most ``limit``, 1 to 500), before the entry ``before`` (the
        last id of the previous page), of one ``action``, ``actor`` name or job (``job_id``:
        the entries that name it, bulk chunks included). ``top_level=False`` lists the chunks of
        bulk actions too."""
        if job_id is not None:
            job_id = parse_id(job_id)
        query = check_audit_query(
            limit=limit,
            before=None if before is None else parse_id(before, field="before"),
            action=None if action is None else str(action),
            actor=actor,
            job_id=job_id,
            top_level=top_level if job_id is None else False,
        )
        audit = require_role(self.store, Role.AUDIT, "the audit trail")
        return await retry_transient(
            lambda: audit.read_audit(query), what="read audit", deadline=self.operation_timeout
        )

    async def audit_entry(self, entry_id: str) -> AuditEntry | None:
        """One entry by id (a bulk action's entry holds its progress)."""
        entry_id = parse_id(entry_id, field="entry_id")
        audit = require_role(self.store, Role.AUDIT, "the audit trail")
        return await retry_transient(
            lambda: audit.get_audit(entry_id), what="read audit", deadline=self.operation_timeout
        )

    async def job_audit(self, job_id: str, *, limit: int = 20) -> Sequence[AuditEntry]:
        """The entries that name job ``job_id``, newest first (empty when the store keeps no
        audit trail): who cancelled, retried or deleted it, and when."""
        job_id = parse_id(job_id)
        if not has_role(self.store, Role.AUDIT):
            return []
        return await self.audit_log(job_id=job_id, limit=limit)

    async def job_fate(self, job_id: str) -> JobFate | None:
        """How a job whose record is gone left: deleted or cancelled (by whom, when: the audit
        trail), or archived (when: the archive); ``None`` when neither says."""
        job_id = parse_id(job_id)
        entries = await self.job_audit(job_id)
        archived = None
        if has_role(self.store, Role.ARCHIVE):
            archive = cast(AsyncArchiveStore, self.store)
            archived = await retry_transient(
                lambda: archive.archived_at(job_id),
                what="read archive",
                deadline=self.operation_timeout,
            )
        return job_fate(entries, archived)
