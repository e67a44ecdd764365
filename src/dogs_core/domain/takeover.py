"""What a claim that took over an expired lock does when the killed attempt had already finished
(pure).

An execution writes its history row *before* its fenced completion (delete of an event record,
reschedule of a recurrent one), so that a row never depends on the worker surviving the moment
after the completion. The price is a window the other way round: a worker killed after the row
and before the completion leaves the record locked, its lock expires and another worker claims
it as stale, with the killed attempt as ``previous_attempt``.

That attempt's row says what its handler did. A ``success`` row means the work is done: running
the handler again would be a needless second run, so the claimer performs the completion the
killed worker did not (the same write a success leads to, :func:`~dogs_core.domain.outcome.decide`
with :class:`~dogs_core.domain.outcome.Succeeded`) and writes no row of its own. Any other row
(an error, a snooze) or no row at all means the normal path: the handler runs again as a retry,
and the killed attempt's own row, when it has one, keeps winning over the claimer's ``stale``
row for it (the first row written for an execution wins).

The claimer that performs such a completion can itself be killed before it lands (a workflow
step's completion is a release of several writes). It ran no handler and wrote no row, so the
next claim finds no row for the attempt it took over; the success is then the job's newest row,
written by an earlier try (:func:`unsettled_success`): a landed success deletes an event record
and resets a recurrent record's ``tries`` to 0 (Dogs does the same), so a record still claimed
with more tries than its newest success row has never settled that success, and the chain of
dead claimers completes it once, with no run and no ``stale`` row for claimers that ran nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from dogs_core.domain.definitions import JobDefinition
from dogs_core.domain.outcome import Command, OutcomePolicy, Succeeded, decide
from dogs_core.domain.records import ClaimedJob, HistoryRecord, HistoryStatus, PreviousAttempt

__all__ = [
    "PREVIOUS_ROW_LOOKBACK",
    "completion_of_finished_attempt",
    "previous_attempt_row",
    "unsettled_success",
]

#: How many of a job's newest history rows are searched for the killed attempt's row. That
#: attempt is the job's latest, so its row is the newest but for clock differences between
#: hosts; a few rows of margin cover those.
PREVIOUS_ROW_LOOKBACK = 8


def previous_attempt_row(job: ClaimedJob, rows: Sequence[HistoryRecord]) -> HistoryRecord | None:
    """The row among ``rows`` (the job's newest history) written for the attempt whose lock
    ``job``'s claim took over; ``None`` when it wrote none or the claim took over no lock."""
    attempt = job.previous_attempt
    if attempt is None:
        return None
    own = next((row for row in rows if row.execution_id == attempt.execution_id), None)
    return own if own is not None else unsettled_success(attempt, rows)


def unsettled_success(
    attempt: PreviousAttempt, rows: Sequence[HistoryRecord]
) -> HistoryRecord | None:
    """The ``success`` row among ``rows`` whose completion never landed, when the attempt
    ``attempt`` (which wrote no row) was a claimer killed while completing it: the newest row
    is a success of an earlier try (fewer ``tries``, started no later). ``None`` otherwise."""
    newest = max(rows, key=lambda row: row.started_at, default=None)
    if newest is None or not _settles_before(newest, attempt):
        return None
    return newest


def _settles_before(row: HistoryRecord, attempt: PreviousAttempt) -> bool:
    """Whether ``row`` is a success an earlier try of the record wrote and never settled."""
    if row.status is not HistoryStatus.SUCCESS or row.tries >= attempt.tries:
        return False
    return attempt.started_at is None or row.started_at <= attempt.started_at


def completion_of_finished_attempt(
    definition: JobDefinition,
    job: ClaimedJob,
    previous_row: HistoryRecord | None,
    policy: OutcomePolicy,
    now: datetime,
    rand: float,
) -> Command | None:
    """The completion to perform instead of running ``job``, when the attempt its claim took
    over had already succeeded (its ``success`` row is ``previous_row``); ``None``: run it.

    A record whose type differs from the definition is left to
    :func:`~dogs_core.domain.outcome.decide_before_run` (another deployment owns the name)."""
    if previous_row is None or previous_row.status is not HistoryStatus.SUCCESS:
        return None
    attempt = job.previous_attempt
    if job.type is not definition.type or attempt is None:
        return None
    if previous_row.execution_id != attempt.execution_id and not _settles_before(
        previous_row, attempt
    ):
        return None
    return decide(definition, job, Succeeded(), policy, now, rand)
