"""A Griffe extension that renders the project's reST-flavoured docstrings as Markdown.

The docstrings in ``src`` are written for readers of the code (and ``help()``): Sphinx roles
(``:class:`~dogs_core.jobs.Jobs```), reST definition lists (a term, then an indented body),
literal blocks introduced by ``::``, doctest paragraphs and underlined section titles.
mkdocstrings renders docstrings as Markdown, where all of these collapse into run-on
paragraphs or turn into block quotes. This extension rewrites each docstring once, when Griffe
has loaded a package, before mkdocstrings renders it:

* a role becomes an *optional* autorefs cross-reference: a link when the target is rendered
  somewhere in the site, plain code otherwise (so ``strict`` never fails on a role);
* a definition-list item becomes a Markdown ``def_list`` item;
* a ``::`` literal block and a ``>>>`` paragraph become fenced code blocks;
* an underlined title becomes a bold line (a real heading would enter the page's table of
  contents in the middle of an API entry).

It changes only what is displayed: the source docstrings stay as they are.
"""

from __future__ import annotations

import html
import re
import textwrap
from typing import Any

import griffe

_ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj):`(?P<body>[^`]+)`")
_EXPLICIT_TITLE = re.compile(r"^(?P<title>.+?)\s*<(?P<target>[^<>]+)>$")
_UNDERLINE = re.compile(r"^\s*([-=~^])\1{2,}\s*$")
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s")
_SHELL_START = re.compile(r"^(?:\$ |dogs |python |pip |\./|export |pytest )")
# Targets starting with one of these are already full paths (a project package, or a module
# whose name a docstring's scope may shadow, such as ``datetime``).
_TOP_LEVEL = frozenset(
    {
        "dogs_core",
        "dogs_mongo",
        "dogs_testing",
        "anyio",
        "asyncio",
        "bson",
        "contextvars",
        "dataclasses",
        "datetime",
        "inspect",
        "logging",
        "pymongo",
        "random",
        "statistics",
        "threading",
        "trio",
        "typing",
        "uuid",
        "zoneinfo",
    }
)


class RstDocstrings(griffe.Extension):
    """Rewrite the docstrings of every object of a loaded package (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self._done: set[int] = set()

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        self._walk(pkg)

    def _walk(self, obj: griffe.Object) -> None:
        if id(obj) in self._done:
            return
        self._done.add(id(obj))
        if obj.docstring is not None:
            obj.docstring.value = convert(obj.docstring.value, scope=obj)
        for member in list(obj.members.values()):
            # An alias (a re-export) is rewritten where its target is defined.
            if isinstance(member, griffe.Object):
                self._walk(member)


# --------------------------------------------------------------------------------------------
# Roles


def _identifier(target: str, scope: griffe.Object | None) -> str:
    """The dotted path autorefs knows the target by, as far as it can be worked out."""
    first, _, rest = target.partition(".")
    if scope is None or (rest and first in _TOP_LEVEL):
        return target
    try:
        resolved = scope.resolve(first)
    except Exception:  # an unknown name: leave it, the reference is optional
        return target
    return f"{resolved}.{rest}" if rest else resolved


def _role(match: re.Match[str], scope: griffe.Object | None) -> str:
    body = match["body"].strip()
    explicit = _EXPLICIT_TITLE.match(body)
    if explicit:
        title, target = explicit["title"], explicit["target"].lstrip("~")
    elif body.startswith("~"):
        target = body[1:]
        title = target.rsplit(".", 1)[-1]
    else:
        target = title = body
    identifier = html.escape(_identifier(target, scope), quote=True)
    return (
        f'<autoref identifier="{identifier}" optional><code>{html.escape(title)}</code></autoref>'
    )


def convert_roles(text: str, scope: griffe.Object | None = None) -> str:
    return _ROLE.sub(lambda match: _role(match, scope), text)


# --------------------------------------------------------------------------------------------
# Blocks


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _fence(lines: list[str], language: str) -> list[str]:
    body = textwrap.dedent("\n".join(lines)).strip("\n").splitlines()
    return [f"```{language}", *body, "```"]


def _take_indented(lines: list[str], start: int, base: int) -> tuple[list[str], int]:
    """Lines from ``start`` that are blank or indented deeper than ``base`` (trailing blank
    lines are left for the caller)."""
    end = start
    last_text = start
    while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > base):
        if lines[end].strip():
            last_text = end + 1
        end += 1
    return lines[start:last_text], last_text


def convert_blocks(lines: list[str]) -> list[str]:
    """Convert one dedented block of docstring lines (recursively for definition bodies)."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        nxt = lines[i + 1] if i + 1 < len(lines) else ""

        # A title underlined with ---- or ====: a bold line.
        if stripped and _UNDERLINE.match(nxt) and not _UNDERLINE.match(line):
            out += [f"**{stripped}**", ""]
            i += 2
            continue

        # A doctest paragraph: fenced as a Python console session.
        if stripped.startswith(">>> "):
            block = []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i])
                i += 1
            out += _fence(block, "pycon")
            continue

        # A paragraph ending in "::" introduces an indented literal block.
        if stripped.endswith("::") and _indent(line) == 0:
            intro = line.rstrip()[:-2].rstrip()
            if intro:
                out.append(intro + ("" if intro.endswith((":", ".")) else ":"))
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            block, end = _take_indented(lines, j, 0)
            if block:
                first_line = next((b.strip() for b in block if b.strip()), "")
                language = "bash" if _SHELL_START.match(first_line) else "python"
                out += ["", *_fence(block, language), ""]
                i = end
                continue
            i += 1
            continue

        # A definition-list item: a term at this level with an indented body below it.
        if (
            stripped
            and _indent(line) == 0
            and nxt.strip()
            and _indent(nxt) > 0
            and not _BULLET.match(line)
        ):
            body, end = _take_indented(lines, i + 1, 0)
            converted = convert_blocks(textwrap.dedent("\n".join(body)).splitlines())
            if out and out[-1].strip():
                out.append("")
            out.append(stripped)
            marker_pending = True
            for body_line in converted:
                if marker_pending and body_line.strip():
                    out.append(":   " + body_line)
                    marker_pending = False
                else:
                    out.append(("    " + body_line) if body_line.strip() else "")
            out.append("")
            i = end
            continue

        out.append(line)
        i += 1
    return out


def convert(text: str, scope: griffe.Object | None = None) -> str:
    """The Markdown rendering of one docstring."""
    lines = textwrap.dedent(text).splitlines()
    return convert_roles("\n".join(convert_blocks(lines)), scope)
