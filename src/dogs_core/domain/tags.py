"""Tags: a small list of strings per job, for finding and filtering (pure).

``schedule(..., tags=["tenant:acme", "report"])`` stores them in the record's additive ``tags``
field (an array of strings, written only when there are some); ``find_jobs(tags=...)``, ``dogs
jobs list --tag`` and the dashboard's job list select the records carrying every tag asked for.

A tag is a string of 1 to :data:`MAX_TAG_LENGTH` characters, without NUL and not starting with
``$``; a job has at most :data:`MAX_TAGS` of them. Repeated tags are kept once, in their first
order. Anything else raises :class:`InvalidTagsError` naming the tag, and nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from dogs_core.errors import InvalidTagsError

__all__ = [
    "MAX_TAGS",
    "MAX_TAG_LENGTH",
    "InvalidTagsError",
    "tag_filter_arguments",
    "validate_tag_filter",
    "validate_tags",
]

#: The most tags one job carries.
MAX_TAGS: Final = 20
#: The longest tag, in characters.
MAX_TAG_LENGTH: Final = 100


def validate_tags(tags: object, *, field: str = "tags") -> tuple[str, ...]:
    """The tags as stored: a tuple of checked strings, repeats dropped (``None`` or empty: no
    tags). A bare string is refused (it would be a list of its characters)."""
    if tags is None:
        return ()
    if isinstance(tags, str | bytes) or not isinstance(tags, Iterable):
        raise InvalidTagsError(field, tags, "must be a list of strings, such as ['report']")
    checked: dict[str, None] = {}
    for index, tag in enumerate(tags):
        checked[_tag(f"{field}[{index}]", tag)] = None
        if len(checked) > MAX_TAGS:
            raise InvalidTagsError(field, tags, f"at most {MAX_TAGS} tags per job")
    return tuple(checked)


def validate_tag_filter(tags: object) -> tuple[str, ...] | None:
    """``find_jobs(tags=...)``: one tag or several (records carrying all of them), or None."""
    if tags is None:
        return None
    if isinstance(tags, str):
        return (_tag("tags", tags),)
    wanted = validate_tags(tags)
    if not wanted:
        raise InvalidTagsError("tags", tags, "give at least one tag, or None for no filter")
    return wanted


def tag_filter_arguments(tags: object) -> dict[str, tuple[str, ...]]:
    """The keyword arguments of ``find_records`` for ``find_jobs(tags=...)``: ``tags`` only
    when given, so that a store written before tags existed answers the other filters."""
    wanted = validate_tag_filter(tags)
    return {} if wanted is None else {"tags": wanted}


def _tag(field: str, tag: object) -> str:
    if not isinstance(tag, str):
        raise InvalidTagsError(field, tag, "a tag must be a string")
    if not tag:
        raise InvalidTagsError(field, tag, "a tag cannot be empty")
    if len(tag) > MAX_TAG_LENGTH:
        raise InvalidTagsError(field, tag, f"a tag must be at most {MAX_TAG_LENGTH} characters")
    if "\x00" in tag or tag.startswith("$"):
        raise InvalidTagsError(field, tag, "a tag cannot contain NUL nor start with '$'")
    return tag
