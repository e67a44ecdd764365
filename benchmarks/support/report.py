"""How the benchmarks report: the console, tables in the terminal and in Markdown, the result
files, the cells every table repeats and the exit status.

Nothing here measures anything. A command prints its tables with :func:`print_table`, writes
``NAME.md`` and ``NAME.json`` with :func:`write_results` (the Markdown opening with
:func:`report_header`), fills each row's last cell with :func:`outcome`, keeps the best of
several runs with :func:`best_runs` (and their :func:`spread`), and ends with
:func:`exit_status`.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import sys
from collections.abc import Callable, Hashable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

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

from benchmarks.support.server import MongoServer

__all__ = [
    "announce",
    "atomic_write",
    "best_runs",
    "command_line",
    "dump_json",
    "exit_status",
    "fmt",
    "machine_summary",
    "markdown_table",
    "new_console",
    "new_progress",
    "outcome",
    "plain_context",
    "print_table",
    "problems_status",
    "ratio",
    "report_header",
    "spread",
    "targets_section",
    "write_results",
]

Run = TypeVar("Run")


# -- the console ---------------------------------------------------------------------------------


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


def command_line(module: str, argv: Sequence[str] | None) -> str:
    """The command that is running, for the reports."""
    args = list(sys.argv[1:] if argv is None else argv)
    return " ".join(["python -m", module, *args])


def announce(console: Console, command: str | None = None) -> None:
    """The first lines of a run: the command (``$ python -m ...``), when given, and the machine."""
    if command is not None:
        console.print(f"$ {command}")
    console.print(f"[bold]Machine:[/] {machine_summary()}")


def plain_context(command: str, server: MongoServer) -> str:
    """The command, the server and the machine as plain lines, for a report printed as text."""
    return f"$ {command}\nServer: {server.describe()}\nMachine: {machine_summary()}"


def problems_status(problems: Sequence[str]) -> int:
    """Each problem a run found as a ``FAILED:`` line on stderr; 1 when there is any, else 0."""
    for problem in problems:
        print(f"FAILED: {problem}", file=sys.stderr)
    return 1 if problems else 0


def exit_status(console: Console, failed: int, what: str) -> int:
    """1, said in red, when ``failed`` ``what``s (scenarios, runs, modes...) failed; else 0."""
    if failed:
        console.print(f"[bold red]{failed} {what}(s) FAILED[/]")
        return 1
    return 0


# -- cells ---------------------------------------------------------------------------------------


def fmt(value: float | None, pattern: str) -> str:
    """A table cell: ``value`` formatted with ``pattern``, or a dash when there is none."""
    return "–" if value is None else format(value, pattern)


def outcome(failures: Sequence[str], status: str = "ok") -> str:
    """The last cell of a row: ``status``, or ``FAILED:`` and every check that failed."""
    return status if not failures else f"FAILED: {'; '.join(failures)}"


def ratio(ours: float | None, floor: float | None) -> float | None:
    """``ours / floor`` (a rate: above 1 is faster than the floor), or ``None`` without both."""
    if ours is None or floor is None or floor <= 0:
        return None
    return ours / floor


def spread(rates: Sequence[float], *, fewest: int = 2, count: bool = True) -> str:
    """The lowest and highest rate of several runs (and how many runs, with ``count``); a dash
    for fewer than ``fewest`` runs."""
    if not rates or len(rates) < fewest:
        return "–"
    text = f"{min(rates):,.0f}–{max(rates):,.0f}"
    return f"{text} ({len(rates)} runs)" if count else text


def best_runs(
    runs: Iterable[Run],
    *,
    key: Callable[[Run], Hashable],
    rate: Callable[[Run], float | None],
    failed: Callable[[Run], bool],
    ok: Callable[[Run], bool] | None = None,
) -> list[tuple[Run, list[float]]]:
    """One row per ``key``, in the order first seen: a failed run if there is one (a failure
    must show), else the ``ok`` run (by default: every run not failed) with the highest
    ``rate``; beside it, the rates of its ``ok`` runs, for the spread."""
    groups: dict[Hashable, list[Run]] = {}
    for run in runs:
        groups.setdefault(key(run), []).append(run)
    rows = []
    for group in groups.values():
        failures = [run for run in group if failed(run)]
        fine = [run for run in group if (ok(run) if ok is not None else not failed(run))]
        best = failures[0] if failures else max(fine or group, key=lambda run: rate(run) or 0.0)
        rates = [value for value in map(rate, fine) if value]
        rows.append((best, rates))
    return rows


# -- tables --------------------------------------------------------------------------------------


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


# -- result files --------------------------------------------------------------------------------


def report_header(title: str, command: str, server: MongoServer | None) -> list[str]:
    """The opening lines of a Markdown report: its title, the command, the server, the machine."""
    where = server.describe() if server is not None else "none (in-memory only)"
    return [
        f"# {title}",
        "",
        f"Command: `{command}`",
        "",
        f"Server: {where}. Machine: {machine_summary()}.",
        "",
    ]


def targets_section(lines: Sequence[str]) -> list[str]:
    """The targets of a report as a Markdown list under ``Targets:`` (nothing without any)."""
    return ["Targets:", "", *(f"- {line}" for line in lines), ""] if lines else []


def atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def dump_json(path: Path, payload: Any) -> None:
    atomic_write(path, json.dumps(payload, indent=2, default=str) + "\n")


def write_results(out: Path, name: str, markdown: str, payload: Any) -> None:
    """``out/NAME.md`` (the report) and ``out/NAME.json`` (every run, for charts and reruns)."""
    atomic_write(out / f"{name}.md", markdown)
    dump_json(out / f"{name}.json", payload)


def publish(
    console: Console,
    name: str,
    *,
    title: str,
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    targets: Sequence[str],
    server: MongoServer,
    command: str,
    out: Path | None,
    markdown: Callable[[], str],
    results: Sequence[Any],
) -> None:
    """The end of a sitting: its table and target lines on the console, and with ``out`` its
    ``NAME.md`` report and ``NAME.json`` (the server, the machine, the command, ``results``)."""
    print_table(console, title, headers, rows)
    for line in targets:
        console.print(line)
    if out is None:
        return
    payload = {
        "server": server.facts(),
        "machine": machine_summary(),
        "command": command,
        "results": list(results),
    }
    write_results(out, name, markdown(), payload)
    console.print(f"wrote {out / f'{name}.md'} and {name}.json")
