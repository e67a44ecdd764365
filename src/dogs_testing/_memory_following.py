"""The following role of the in-memory store (optional in the port; this store has it): the
fenced progress write, the executions' log lines by id (each kept once, dropped at its
``expires_at`` when the store has a clock, as MongoDB's TTL monitor would, sooner), and the two
feeds. See :mod:`dogs_core.ports.following` and :mod:`dogs_testing.memory`.
"""

from __future__ import annotations

import dataclasses
import heapq
from bisect import bisect_right, insort
from collections.abc import Generator, Sequence
from datetime import datetime

from dogs_core.domain.log_lines import LogLine, check_log_page, check_owner_id
from dogs_core.domain.progress import Progress
from dogs_core.domain.records import to_millis
from dogs_core.errors import InvalidOptionError
from dogs_core.ports import Clock
from dogs_testing._memory_state import MemoryState, _copy_progress

__all__ = ["MemoryFollowing"]


class MemoryFollowing(MemoryState):
    """Progress on records, log lines of executions."""

    def __init__(self, *, clock: Clock | None = None) -> None:
        super().__init__(clock=clock)
        self._lines: dict[str, LogLine] = {}
        self._lines_by_owner: dict[str, list[str]] = {}  # job or execution id -> sorted ids
        self._lines_expiry: list[tuple[datetime, str]] = []  # heap

    def setup_following(self) -> None:
        """Nothing to create."""

    def write_progress(
        self, job_id: str, lock_id: str, progress: Progress, *, locked_until: datetime | None
    ) -> bool:
        if not isinstance(progress, Progress):
            raise InvalidOptionError("progress", progress, "must be a Progress")
        if progress.execution_id != lock_id:
            raise InvalidOptionError(
                "progress", progress.execution_id, f"is not the progress of lock {lock_id!r}"
            )
        stored = _copy_progress(progress)
        with self._state():
            old = self._fenced(job_id, lock_id)
            if old is None:
                return False
            until = old.locked_until if locked_until is None else to_millis(locked_until)
            self._put(old, dataclasses.replace(old, progress=stored, locked_until=until))
            return True

    def write_log_lines(self, lines: Sequence[LogLine]) -> None:
        kept = [_stored_line(line) for line in lines]
        with self._state():
            self._purge_lines()
            new = [line for line in kept if line.id not in self._lines]
            for line in new:
                self._lines[line.id] = line
                for owner in (line.job_id, line.execution_id):
                    insort(self._lines_by_owner.setdefault(owner, []), line.id)
                heapq.heappush(self._lines_expiry, (line.expires_at, line.id))
            if new:
                self._feeds.offer_log_lines(new)

    def read_log_lines(
        self, owner_id: str, *, after: str | None = None, limit: int = 1_000
    ) -> list[LogLine]:
        owner = check_owner_id(owner_id)
        size, after = check_log_page(limit, after)
        with self._state():
            self._purge_lines()
            ids = self._lines_by_owner.get(owner, [])
            start = 0 if after is None else bisect_right(ids, after)
            return [self._lines[line_id] for line_id in ids[start : start + size]]

    def execution_job_id(self, execution_id: str) -> str | None:
        wanted = check_owner_id(execution_id, field="execution_id")
        with self._state():
            row = self._history.get(wanted)
            if row is not None:
                return row.job_id
            for record in self._records.values():
                if record.lock_id == wanted:
                    return record.id
            return None

    def watch_log_lines(self, owner_id: str) -> Generator[list[str], None, None]:
        return self._feeds.log_lines(owner_id)

    def watch_progress(self, job_id: str) -> Generator[list[str], None, None]:
        return self._feeds.jobs(job_id)

    def _purge_lines(self) -> None:
        if self._clock is None:
            return
        now = to_millis(self._clock.now())
        while self._lines_expiry and self._lines_expiry[0][0] <= now:
            _, line_id = heapq.heappop(self._lines_expiry)
            line = self._lines.pop(line_id, None)
            if line is None:
                continue
            for owner in (line.job_id, line.execution_id):
                ids = self._lines_by_owner[owner]
                ids.remove(line_id)
                if not ids:
                    del self._lines_by_owner[owner]


def _stored_line(line: LogLine) -> LogLine:
    if not isinstance(line, LogLine):
        raise InvalidOptionError("lines", line, "must be LogLine values")
    return dataclasses.replace(
        line, time=to_millis(line.time), expires_at=to_millis(line.expires_at)
    )
