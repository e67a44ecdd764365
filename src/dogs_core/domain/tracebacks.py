"""A stored traceback read for a person: the user's frames first, the scheduler's and the
libraries' folded (pure: the text a history row keeps, ``error_traceback``).

A Python traceback lists its frames outermost first, so the handler's own frame comes after
the frames of the worker that called it: for a ``def`` handler, six frames of Dogs and anyio
(and the thread pool) before the first line of the user's code. :func:`fold_traceback` cuts the
text into runs of frames, each marked as the user's or not (:func:`is_library_frame`: Dogs'
packages, anyio, asyncio, the thread machinery, anything under ``site-packages`` or the
standard library), so that a view shows the user's runs and folds the others into one line
("6 frames of dogs_core, anyio"). The text itself is never changed: unfolding shows it whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

__all__ = ["Fold", "FoldedTraceback", "fold_traceback", "is_library_frame"]

_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line \d+')
#: Paths of frames that are not the user's: Dogs' own packages, the async and thread
#: machinery, installed packages and the standard library.
_LIBRARY: Final = re.compile(
    r"(/|\\)(dogs_core|dogs_mongo|dogs_testing|dogs_dashboard|dogs_integrations|anyio|asyncio|"
    r"concurrent|sniffio|pymongo|starlette|uvicorn)(/|\\)"
    r"|(/|\\)(site-packages|dist-packages)(/|\\)"
    r"|(/|\\)lib(64)?(/|\\)python3\.\d+(/|\\)"
    r"|^<frozen "
    r"|(/|\\)threading\.py$"
)
#: Where a library frame's package name is, most telling first.
_PACKAGES: Final = (
    re.compile(r"(?:site-packages|dist-packages)/([A-Za-z_][A-Za-z0-9_]*)"),
    re.compile(r"/(dogs_[a-z]+)/"),
    re.compile(r"python3\.\d+/([A-Za-z_][A-Za-z0-9_]*)"),
)


def is_library_frame(path: str) -> bool:
    """Whether the frame of source file ``path`` belongs to Dogs, the async or thread
    machinery, an installed package or the standard library (not the user's code)."""
    return bool(_LIBRARY.search(path))


@dataclass(frozen=True, slots=True)
class Fold:
    """A run of the traceback: its ``text`` (whole lines), whether it is frames of libraries
    (``library``: a view folds it), how many frames it holds, and the packages they are in."""

    text: str
    library: bool
    frames: int = 0
    packages: tuple[str, ...] = ()

    @property
    def summary(self) -> str:
        """``6 frames of dogs_core, anyio`` (what a folded run shows)."""
        where = f" of {', '.join(self.packages)}" if self.packages else ""
        return f"{self.frames} frame{'s' if self.frames != 1 else ''}{where}"


@dataclass(frozen=True, slots=True)
class FoldedTraceback:
    """A traceback as runs (:class:`Fold`), in their order; ``folded_frames`` of them are
    libraries'. ``user_frames`` counts the others."""

    parts: tuple[Fold, ...]

    @property
    def folded_frames(self) -> int:
        return sum(part.frames for part in self.parts if part.library)

    @property
    def user_frames(self) -> int:
        return sum(part.frames for part in self.parts if not part.library)

    @property
    def text(self) -> str:
        return "".join(part.text for part in self.parts)

    def short(self) -> str:
        """The traceback with each run of library frames as one line (``  ... 6 frames of
        dogs_core, anyio (folded)``); the whole text when no frame is the user's, so a crash
        inside a library still shows where."""
        if self.user_frames == 0:
            return self.text
        lines = []
        for part in self.parts:
            lines.append(f"  ... {part.summary} (folded)\n" if part.library else part.text)
        return "".join(lines)


def fold_traceback(text: str | None) -> FoldedTraceback:
    """``text`` cut into runs of the user's lines and of library frames (a frame is its
    ``File "..."`` line and the source lines under it)."""
    if not text:
        return FoldedTraceback(())
    parts: list[Fold] = []
    lines = text.splitlines(keepends=True)
    index = 0
    while index < len(lines):
        frame = _FRAME.match(lines[index])
        if frame is None:
            _append(parts, Fold(lines[index], library=False))
            index += 1
            continue
        end = index + 1
        while end < len(lines) and lines[end].startswith("    ") and not _FRAME.match(lines[end]):
            end += 1
        path = frame.group("path")
        library = is_library_frame(path)
        package = _package(path) if library else None
        block = Fold(
            "".join(lines[index:end]),
            library=library,
            frames=1,
            packages=(package,) if package else (),
        )
        _append(parts, block)
        index = end
    return FoldedTraceback(tuple(parts))


def _append(parts: list[Fold], part: Fold) -> None:
    """Add ``part``, merged into the run before it when of the same kind."""
    if parts and parts[-1].library == part.library:
        last = parts[-1]
        packages = last.packages + tuple(p for p in part.packages if p not in last.packages)
        parts[-1] = Fold(last.text + part.text, last.library, last.frames + part.frames, packages)
        return
    parts.append(part)


def _package(path: str) -> str | None:
    posix = path.replace("\\", "/")
    for pattern in _PACKAGES:
        found = pattern.search(posix)
        if found:
            return found.group(1)
    return posix.rsplit("/", 1)[-1].removesuffix(".py") or None
