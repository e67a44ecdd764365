"""Time to error: how long ``schedule()`` takes to fail against a MongoDB that is not there,
with the defaults and with each setting that bounds it.

For each target (a closed local port: the connection is refused at once; a non-routable
address, ``10.255.255.1``: the connection attempt hangs until a timeout) and each
configuration, a fresh :class:`~dogs_mongo.DogsContainer` schedules one job and the wall time
until :class:`~dogs_core.errors.StoreUnavailableError` is measured, with the retry warnings
logged meanwhile. The check: the error is ``StoreUnavailableError`` naming the redacted URI,
every log line is one line without a traceback, and the time is within the configuration's
bound (``operation_timeout``; none when it is ``None``). Exit 1 when a check fails.

Run it as a module from the project root::

    python -m benchmarks.time_to_error                 # both targets, every configuration
    python -m benchmarks.time_to_error --quick         # CI: the closed port, small bounds
    python -m benchmarks.time_to_error --legacy        # also PyMongo's 30 s, six attempts (3 min)
"""

from __future__ import annotations

import logging
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

import anyio

from benchmarks.support.cli import add_quick, new_parser
from benchmarks.support.report import (
    command_line,
    machine_summary,
    markdown_table,
    new_console,
    print_table,
    write_results,
)
from dogs_core import JobContext, Jobs, StoreUnavailableError
from dogs_mongo import DogsContainer

NON_ROUTABLE: Final = "10.255.255.1:27017"
PASSWORD: Final = "s3cret"


@dataclass(frozen=True, slots=True)
class Config:
    """One configuration: its label, the container options and the bound it promises."""

    label: str
    options: Mapping[str, Any]
    bound: float | None
    driver: str = "async"


CONFIGS: Final = (
    Config("defaults (operation_timeout 15 s, selection 5 s)", {}, 15.0),
    Config("defaults, blocking client (sync driver)", {}, 15.0, driver="sync"),
    Config("operation_timeout=5", {"operation_timeout": 5}, 5.0),
    Config("operation_timeout=30", {"operation_timeout": 30}, 30.0),
    Config("server_selection_timeout=2", {"server_selection_timeout": 2}, 15.0),
    Config(
        "operation_timeout=None, server_selection_timeout=2",
        {"operation_timeout": None, "server_selection_timeout": 2},
        None,
    ),
)
LEGACY: Final = Config(
    "operation_timeout=None (PyMongo's 30 s, six attempts)", {"operation_timeout": None}, None
)
#: Small bounds, yet not below about 3 s: PyMongo ends a server selection on a heartbeat
#: wakeup, up to 0.5 s after its timeout, which a smaller deadline cannot absorb.
QUICK: Final = (
    Config("operation_timeout=4", {"operation_timeout": 4}, 4.0),
    Config("operation_timeout=4, blocking client", {"operation_timeout": 4}, 4.0, driver="sync"),
)


@dataclass(frozen=True, slots=True)
class Result:
    target: str
    config: str
    bound: float | None
    seconds: float
    retries: int
    error: str
    message: str
    ok: bool
    problem: str


class _Lines(logging.Handler):
    """Collects the records of the ``dogs`` loggers during one run."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return f"127.0.0.1:{port}"


def _jobs() -> Jobs:
    jobs = Jobs()

    @jobs.event(name="time_to_error.job")
    async def job(params: None, ctx: JobContext) -> None:
        pass

    return jobs


async def _schedule(container: Any, driver: str) -> None:
    if driver == "sync":
        with container.blocking_client(_jobs()) as client:
            await anyio.to_thread.run_sync(client.schedule, "time_to_error.job")
    else:
        await container.client(_jobs()).schedule("time_to_error.job")


async def measure(target: str, host: str, config: Config) -> Result:
    """Schedule one job against ``host`` with ``config``; time it and check what failed how."""
    uri = f"mongodb://dogs:{PASSWORD}@{host}/app"
    driver = "sync" if config.driver == "sync" else "async"
    container = DogsContainer(uri=uri, driver=driver, **config.options)
    lines = _Lines()
    dogs = logging.getLogger("dogs")
    dogs.addHandler(lines)
    started = time.monotonic()
    error: BaseException | None = None
    try:
        await _schedule(container, config.driver)
    except Exception as raised:
        error = raised
    finally:
        seconds = time.monotonic() - started
        dogs.removeHandler(lines)
        await container.aclose()
    message = str(error) if error is not None else ""
    problem = _problem(error, message, host, lines.records, seconds, config.bound)
    return Result(
        target=target,
        config=config.label,
        bound=config.bound,
        seconds=seconds,
        retries=sum(1 for r in lines.records if r.levelno == logging.WARNING),
        error=type(error).__name__ if error is not None else "none",
        message=message,
        ok=not problem,
        problem=problem,
    )


def _problem(
    error: BaseException | None,
    message: str,
    host: str,
    records: Sequence[logging.LogRecord],
    seconds: float,
    bound: float | None,
) -> str:
    if not isinstance(error, StoreUnavailableError):
        return f"expected StoreUnavailableError, got {error!r}"
    if f"mongodb://dogs:***@{host}/app" not in message or PASSWORD in message:
        return "the message does not name the redacted URI"
    for record in records:
        text = record.getMessage()
        if record.exc_info is not None or "\n" in text or "Topology Description" in text:
            return f"a log line is not one short line: {text[:120]!r}"
    if bound is not None and seconds > bound:
        return f"took {seconds:.1f}s, over the {bound:g}s bound"
    return ""


def _targets(quick: bool) -> list[tuple[str, str]]:
    targets = [("closed port", closed_port())]
    if not quick:
        targets.append(("non-routable 10.255.255.1", NON_ROUTABLE))
    return targets


async def run(quick: bool, legacy: bool) -> list[Result]:
    configs = list(QUICK if quick else CONFIGS)
    if legacy and not quick:
        configs.append(LEGACY)
    return [
        await measure(target, host, config)
        for target, host in _targets(quick)
        for config in configs
    ]


HEADERS: Final = ("Target / configuration", "Bound (s)", "Time to error (s)", "Warnings", "Check")


def _rows(results: Sequence[Result]) -> list[list[str]]:
    return [
        [
            f"{r.target}: {r.config}",
            "none" if r.bound is None else f"{r.bound:g}",
            f"{r.seconds:.1f}",
            str(r.retries),
            "ok" if r.ok else f"FAILED: {r.problem}",
        ]
        for r in results
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = new_parser("time_to_error", __doc__.splitlines()[0] if __doc__ else None)
    add_quick(parser, "the closed port, small bounds")
    parser.add_argument("--legacy", action="store_true", help="also operation_timeout=None")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args(argv)
    results = anyio.run(run, args.quick, args.legacy)
    console = new_console()
    rows = _rows(results)
    print_table(console, "schedule() against an unreachable MongoDB", HEADERS, rows)
    for result in results[:1]:
        console.print(f"error message: {result.error}: {result.message}", soft_wrap=True)
    report = "\n\n".join(
        [
            f"`{command_line('benchmarks.time_to_error', argv)}` on {machine_summary()}",
            markdown_table(HEADERS, rows),
            f"Error message (first row): `{results[0].error}: {results[0].message}`",
        ]
    )
    name = "time_to_error_quick" if args.quick else "time_to_error"
    write_results(args.out, name, report + "\n", [asdict(r) for r in results])
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
