"""The shared input checks of the batch port methods."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dogs_core.domain.batches import CLAIM_BATCH_FIELDS, check_claim_requests, check_completions
from dogs_core.domain.records import ClaimRequest
from dogs_core.errors import InvalidOptionError

NOW = datetime(2030, 1, 1, tzinfo=UTC)


def _request(lock_id: str) -> ClaimRequest:
    return ClaimRequest(
        job_names=("a", "b"),
        partition=0,
        hint="globalPriority",
        now=NOW,
        locked_until=NOW + timedelta(seconds=30),
        lock_id=lock_id,
    )


def test_requests_that_differ_only_in_lock_id_pass() -> None:
    requests = [_request(f"lock{i}") for i in range(3)]
    assert check_claim_requests(requests) == requests
    assert check_claim_requests(tuple(requests)) == requests
    assert check_claim_requests([]) == []


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("job_names", ("a",)),
        ("partition", 1),
        ("hint", "byJobName"),
        ("now", NOW + timedelta(seconds=1)),
        ("locked_until", NOW),
    ],
)
def test_a_request_that_differs_elsewhere_is_refused(field: str, value: Any) -> None:
    assert field in CLAIM_BATCH_FIELDS
    odd = dataclasses.replace(_request("lock1"), **{field: value})
    with pytest.raises(InvalidOptionError) as refused:
        check_claim_requests([_request("lock0"), odd])
    assert str(refused.value) == (
        f"requests: request 1 has {field}={value!r} but request 0 has "
        f"{getattr(_request('lock0'), field)!r}; the requests of one claim_many must differ "
        "only in lock_id"
    )
    assert (refused.value.field, refused.value.value) == (f"requests[1].{field}", value)


def test_a_repeated_lock_id_is_refused() -> None:
    with pytest.raises(InvalidOptionError) as refused:
        check_claim_requests([_request("x"), _request("y"), _request("x")])
    assert (
        str(refused.value)
        == "requests: lock_id 'x' is repeated; each request needs its own lock id"
    )
    assert (refused.value.field, refused.value.value) == ("requests[2].lock_id", "x")


@given(st.lists(st.tuples(st.text(max_size=3), st.text(max_size=3)), max_size=20))
def test_completions_pass_exactly_when_job_ids_are_distinct(
    claims: list[tuple[str, str]],
) -> None:
    distinct = len({job_id for job_id, _ in claims}) == len(claims)
    if distinct:
        assert check_completions(claims) == claims
    else:
        with pytest.raises(InvalidOptionError, match=r"^claims: job id .* is repeated; give each"):
            check_completions(claims)
