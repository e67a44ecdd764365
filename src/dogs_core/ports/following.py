"""The following role, optional: a running job's progress and the log lines its executions keep
(``ctx.progress``, ``store_logs``; read with ``client.get_logs``, ``client.watch_progress``,
``dogs jobs logs --follow``). A store that has it lists
:attr:`~dogs_core.ports.common.Role.FOLLOWING` in its ``roles``; without it a handler's
``ctx.progress`` and a job with ``store_logs`` raise
:class:`~dogs_core.errors.MissingRoleError`, and nothing else changes.

Progress
    ``write_progress`` is a fenced write (``_id`` and ``lock_id`` match, ``False`` when nothing
    matched) that sets the record's ``progress`` (a :class:`~dogs_core.domain.progress.Progress`,
    whose ``execution_id`` is the lock id) and, when ``locked_until`` is given, its
    ``locked_until`` too: a lock renewal that carries the progress. Reads of records
    (``get_record``, ``find_records``) return a record's ``progress`` only while its
    ``execution_id`` is the record's ``lock_id`` (a progress left by an earlier execution is not
    shown; nothing clears it). History rows keep the ``progress`` they were written with.
Log lines
    Kept in a collection of their own, by :attr:`~dogs_core.domain.log_lines.LogLine.id`.
    ``write_log_lines`` is idempotent (a line whose id is stored is not written again), so a
    retried batch writes each line once. A line is dropped once its ``expires_at`` has passed.
    ``read_log_lines(owner_id)`` returns the lines of the job ``owner_id`` or of the execution
    ``owner_id``, in id order, after the id ``after`` (exclusive), at most ``limit``.
Feeds
    As every feed of the port (:mod:`dogs_core.ports.feeds`): ``[]`` once open, batches,
    ``[]`` heartbeats, notifications only (read the state after a batch).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from dogs_core.domain.log_lines import LogLine
from dogs_core.domain.progress import Progress

__all__ = ["AsyncFollowingStore"]


@runtime_checkable
class AsyncFollowingStore(Protocol):
    """Progress on records, log lines of executions (optional)."""

    async def setup_following(self) -> None:
        """Create the log lines' collection indexes (their TTL included). Idempotent."""
        ...

    async def write_progress(
        self, job_id: str, lock_id: str, progress: Progress, *, locked_until: datetime | None
    ) -> bool:
        """Fenced: set the record's ``progress`` (and ``locked_until`` when given)."""
        ...

    async def write_log_lines(self, lines: Sequence[LogLine]) -> None:
        """Keep ``lines`` (each once, by id). Lines of many executions may come in one call."""
        ...

    async def read_log_lines(
        self, owner_id: str, *, after: str | None = None, limit: int = 1_000
    ) -> list[LogLine]:
        """The lines of job ``owner_id`` or of execution ``owner_id``, in id order, after the
        line id ``after``, at most ``limit`` (1 to
        :data:`~dogs_core.domain.log_lines.MAX_LOG_PAGE`)."""
        ...

    async def execution_job_id(self, execution_id: str) -> str | None:
        """The job id of ``execution_id`` when a record holds it (its ``lock_id``) or a history
        row was written for it; ``None`` when neither says so."""
        ...

    def watch_log_lines(self, owner_id: str) -> AsyncGenerator[list[str], None]:
        """A feed of the ids of lines kept for job or execution ``owner_id``."""
        ...

    def watch_progress(self, job_id: str) -> AsyncGenerator[list[str], None]:
        """A feed of changes of job ``job_id``'s record (progress written, lock taken or given
        back, rescheduled, deleted): its id, once per change."""
        ...
