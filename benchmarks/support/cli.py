"""The arguments the benchmark commands share, and the sizes ``--quick`` picks.

Every command is ``python -m benchmarks.NAME`` with :func:`new_parser`; ``--quick`` is the size
``tests/test_benchmarks.py`` runs (it proves the command still works, not how fast it is), and
:func:`fill_sizes` gives each size left out its quick or full default.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pymongo.write_concern import WriteConcern

__all__ = [
    "add_no_floor",
    "add_out",
    "add_quick",
    "add_repeat",
    "add_uri",
    "add_write_concern",
    "fill_sizes",
    "new_parser",
    "write_concern",
]


def new_parser(command: str, description: str | None) -> argparse.ArgumentParser:
    return argparse.ArgumentParser(prog=f"python -m benchmarks.{command}", description=description)


def add_uri(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--uri", default=None, help="MongoDB URI (default: start a local mongod, then stop it)"
    )


def add_quick(parser: argparse.ArgumentParser, size: str = "") -> None:
    parser.add_argument("--quick", action="store_true", help=f"CI size{': ' if size else ''}{size}")


def add_repeat(parser: argparse.ArgumentParser, default: int = 1) -> None:
    parser.add_argument(
        "--repeat",
        type=int,
        default=default,
        help=f"run everything N times; report best and spread ({default})",
    )


def add_out(parser: argparse.ArgumentParser, files: str) -> None:
    parser.add_argument("--out", type=Path, default=None, help=f"write {files} here")


def add_no_floor(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-floor",
        action="store_true",
        help="skip the raw pymongo claim loop (benchmarks/support/floors.py)",
    )


def add_write_concern(parser: argparse.ArgumentParser, of: str) -> None:
    parser.add_argument(
        "--write-concern",
        choices=("default", "majority", "1"),
        default="default",
        help=f"write concern of {of} (default: the client's, majority on a replica set)",
    )


def write_concern(choice: str) -> WriteConcern | None:
    """The :class:`WriteConcern` of a ``--write-concern`` choice; ``None`` for the client's."""
    if choice == "default":
        return None
    return WriteConcern(w="majority" if choice == "majority" else 1)


def fill_sizes(args: argparse.Namespace, **sizes: tuple[float, float]) -> None:
    """Each size not given (``None``) takes its ``(quick, full)`` default, by ``--quick``."""
    for name, (quick, full) in sizes.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
