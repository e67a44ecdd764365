"""The Jobs registry, its decorators, stand-alone constructors and class-based registration."""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import Any

import pydantic
import pytest

from dogs_core.domain.definitions import EventJobDefinition, RecurrentJobDefinition, Retry
from dogs_core.domain.records import JobType
from dogs_core.domain.schedules import CronSchedule, RunEvery
from dogs_core.errors import (
    DuplicateJobNameError,
    InvalidOptionError,
    InvalidScheduleError,
    UnknownJobError,
)
from dogs_core.jobs import (
    Jobs,
    event_job,
    event_job_method,
    get_service_jobs,
    recurrent_job,
    recurrent_job_method,
)


class Welcome(pydantic.BaseModel):
    user_id: int


def test_bare_event_decorator() -> None:
    jobs = Jobs()

    @jobs.event
    async def send_welcome(params: Welcome, ctx: Any) -> None: ...

    assert isinstance(send_welcome, EventJobDefinition)
    assert send_welcome.name == "send_welcome"
    assert send_welcome.is_async
    assert send_welcome.params_model is Welcome
    assert jobs.get("send_welcome") is send_welcome
    assert send_welcome in jobs
    assert "send_welcome" in jobs


def test_event_decorator_with_options() -> None:
    jobs = Jobs()

    @jobs.event(max_tries=5, lock_time=timedelta(minutes=2), name="welcome", priority=0)
    def send_welcome(params: dict[str, Any], ctx: Any) -> None: ...

    assert send_welcome.name == "welcome"
    assert send_welcome.max_tries == 5
    assert send_welcome.lock_time == timedelta(minutes=2)
    assert send_welcome.priority == 0
    assert not send_welcome.is_async
    assert jobs.names == ("welcome",)


def test_recurrent_decorator() -> None:
    jobs = Jobs()

    @jobs.recurrent(cron="0 3 * * *", timezone="Europe/Paris")
    def nightly_report(ctx: Any) -> None: ...

    @jobs.recurrent(run_every="5m", name="poll", lock_time="20m")
    async def poll_feeds(ctx: Any) -> None: ...

    assert isinstance(nightly_report, RecurrentJobDefinition)
    assert nightly_report.type is JobType.RECURRENT
    assert nightly_report.schedule == CronSchedule("0 3 * * *", "Europe/Paris")
    assert poll_feeds.name == "poll"
    assert poll_feeds.schedule == RunEvery(timedelta(minutes=5))
    assert jobs.names == ("nightly_report", "poll")


def test_bare_recurrent_decorator_needs_a_schedule() -> None:
    jobs = Jobs()

    def tick(ctx: Any) -> None: ...

    with pytest.raises(InvalidScheduleError, match="needs one of"):
        jobs.recurrent(tick)
    assert len(jobs) == 0


def test_decorator_option_errors_register_nothing() -> None:
    jobs = Jobs()
    with pytest.raises(InvalidOptionError) as error:

        @jobs.event(max_tries=0)
        def job(params: Any, ctx: Any) -> None: ...

    assert error.value.field == "max_tries"
    assert len(jobs) == 0


def test_stand_alone_constructors() -> None:
    def handler(params: Any, ctx: Any) -> None: ...

    def tick(ctx: Any) -> None: ...

    event = event_job(handler, max_parallel_executions_per_server=2)
    assert event.name == "handler"
    assert event.max_parallel_executions_per_server == 2
    recurrent = recurrent_job(tick, name="ticker", run_every=30)
    assert recurrent.name == "ticker"
    assert recurrent.schedule == RunEvery(timedelta(seconds=30))
    jobs = Jobs([event, recurrent])
    assert list(jobs) == [event, recurrent]


def test_name_must_be_derivable() -> None:
    def handler(a: Any, params: Any, ctx: Any) -> None: ...

    partial = functools.partial(handler, 1)
    with pytest.raises(InvalidOptionError, match="pass name=") as error:
        event_job(partial)
    assert error.value.field == "name"
    assert event_job(partial, name="partial_job").name == "partial_job"


def test_duplicate_names() -> None:
    jobs = Jobs()

    @jobs.event
    def job(params: Any, ctx: Any) -> None: ...

    jobs.add(job)  # the same definition again: a no-op
    assert len(jobs) == 1
    other = event_job(lambda params, ctx: None, name="job")
    with pytest.raises(DuplicateJobNameError, match="'job'"):
        jobs.add(other)
    with pytest.raises(DuplicateJobNameError):

        @jobs.recurrent(run_every=5, name="job")
        def tick(ctx: Any) -> None: ...

    assert jobs.get("job") is job


def test_add_is_all_or_nothing() -> None:
    jobs = Jobs()
    first = event_job(lambda params, ctx: None, name="first")
    clash_a = event_job(lambda params, ctx: None, name="clash")
    clash_b = event_job(lambda params, ctx: None, name="clash")
    with pytest.raises(DuplicateJobNameError):
        jobs.add(first, clash_a, clash_b)
    with pytest.raises(InvalidOptionError) as error:
        jobs.add(first, "not a definition")  # type: ignore[arg-type]
    assert error.value.field == "definition"
    assert len(jobs) == 0


def test_unknown_names() -> None:
    jobs = Jobs(
        [
            event_job(lambda params, ctx: None, name="b"),
            recurrent_job(lambda ctx: None, name="a", run_every=1),
        ]
    )
    with pytest.raises(UnknownJobError, match="'nope'; known jobs: a, b") as error:
        jobs.get("nope")
    assert error.value.name == "nope"
    with pytest.raises(UnknownJobError):
        jobs[5]  # type: ignore[index]
    assert jobs["a"].name == "a"
    assert "nope" not in jobs
    assert 5 not in jobs
    with pytest.raises(UnknownJobError, match=r"unknown job name 'x'$"):
        Jobs().get("x")


def test_contains_checks_definition_identity() -> None:
    registered = event_job(lambda params, ctx: None, name="job")
    look_alike = event_job(lambda params, ctx: None, name="job")
    jobs = Jobs([registered])
    assert registered in jobs
    assert look_alike not in jobs


def test_iteration_len_names_and_repr() -> None:
    definitions = [event_job(lambda params, ctx: None, name=name) for name in ("c", "a", "b")]
    jobs = Jobs(definitions)
    assert list(jobs) == definitions
    assert len(jobs) == 3
    assert jobs.names == ("c", "a", "b")
    assert repr(jobs) == "Jobs(c, a, b)"
    assert repr(Jobs()) == "Jobs()"


def test_merge() -> None:
    shared = event_job(lambda params, ctx: None, name="shared")
    left = Jobs([shared, event_job(lambda params, ctx: None, name="left")])
    right = Jobs([shared, recurrent_job(lambda ctx: None, name="right", run_every=60)])
    merged = Jobs.merge(left, right)
    assert merged.names == ("shared", "left", "right")
    assert merged.get("shared") is shared
    assert len(left) == 2
    assert len(right) == 2
    clash = Jobs([event_job(lambda params, ctx: None, name="left")])
    with pytest.raises(DuplicateJobNameError):
        Jobs.merge(left, clash)


# --------------------------------------------------------------------------------------------
# Class-based registration


class EmailJobs:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    @event_job_method
    async def send_welcome(self, params: Welcome, ctx: Any) -> None:
        self.sent.append(params)

    @event_job_method(max_tries=3, priority=0)
    def send_digest(self, params: dict[str, Any], ctx: Any) -> str:
        self.sent.append(params)
        return "ok"

    @recurrent_job_method(run_every="1h")
    def cleanup(self, ctx: Any) -> None: ...

    def helper(self) -> None:  # not a job
        raise AssertionError("never called")

    @property
    def explode(self) -> int:  # properties are not evaluated
        raise AssertionError("never evaluated")


def test_add_service_registers_marked_methods() -> None:
    jobs = Jobs()
    service = EmailJobs()
    added = jobs.add_service(service)
    assert {definition.name for definition in added} == {"send_welcome", "send_digest", "cleanup"}
    assert set(jobs.names) == {"send_welcome", "send_digest", "cleanup"}
    welcome = jobs.get("send_welcome")
    assert isinstance(welcome, EventJobDefinition)
    assert welcome.is_async
    assert welcome.params_model is Welcome
    digest = jobs.get("send_digest")
    assert isinstance(digest, EventJobDefinition)
    assert digest.max_tries == 3
    assert digest.priority == 0
    assert digest.handler({"a": 1}, None) == "ok"
    assert service.sent == [{"a": 1}]
    cleanup = jobs.get("cleanup")
    assert isinstance(cleanup, RecurrentJobDefinition)
    assert cleanup.schedule == RunEvery(timedelta(hours=1))


def test_marked_methods_stay_plain_methods() -> None:
    service = EmailJobs()
    assert service.send_digest({"b": 2}, None) == "ok"


def test_get_service_jobs() -> None:
    found = get_service_jobs(EmailJobs())
    assert sorted(found) == ["cleanup", "send_digest", "send_welcome"]
    assert all(name == definition.name for name, definition in found.items())


def test_add_service_rejects_classes_and_unmarked_instances() -> None:
    jobs = Jobs()
    with pytest.raises(InvalidOptionError, match="not the class itself") as error:
        jobs.add_service(EmailJobs)
    assert error.value.field == "service"
    with pytest.raises(InvalidOptionError, match="has no methods marked"):
        jobs.add_service(object())
    assert len(jobs) == 0


def test_add_service_validates_options_and_names() -> None:
    class Broken:
        @recurrent_job_method
        def tick(self, ctx: Any) -> None: ...

    with pytest.raises(InvalidScheduleError, match="needs one of"):
        Jobs().add_service(Broken())

    class WrongArity:
        @event_job_method
        def job(self, ctx: Any) -> None: ...

    with pytest.raises(InvalidOptionError) as error:
        Jobs().add_service(WrongArity())
    assert error.value.field == "handler"

    jobs = Jobs([event_job(lambda params, ctx: None, name="cleanup")])
    with pytest.raises(DuplicateJobNameError):
        jobs.add_service(EmailJobs())
    assert jobs.names == ("cleanup",)  # nothing from the service was added


def test_on_error_result_types_are_reexported_for_handlers() -> None:
    def on_error(error: BaseException, params: Any, ctx: Any) -> Retry:
        return Retry(run_in=timedelta(seconds=5))

    definition = event_job(lambda params, ctx: None, name="j", on_error=on_error)
    assert definition.on_error is on_error
