"""Identifiers: UUIDv7 strings for records, Meteor-style ids for executions (as Dogs does),
and the one check of an id given by a caller (:func:`parse_id`)."""

from __future__ import annotations

import os
import uuid

import uuid6

from dogs_core.errors import InvalidIdError

__all__ = [
    "ID_EXAMPLE",
    "as_id",
    "new_execution_id",
    "new_execution_ids",
    "new_record_id",
    "parse_id",
    "parse_job_or_execution_id",
]

#: An id as records carry them, for messages.
ID_EXAMPLE = "0190c2c4-5d1e-7b3a-9f00-1c2d3e4f5a6b"

_ID_ALPHABET = "23456789ABCDEFGHJKLMNPQRSTWXYZabcdefghijkmnopqrstuvwxyz"
# Byte b < 220 maps to _ID_ALPHABET[b % 55] (uniform: 220 = 4 * 55); bytes >= 220 are dropped.
_BYTE_TO_SYMBOL = bytes(ord(_ID_ALPHABET[b % 55]) if b < 220 else 0 for b in range(256))
_REJECTED = bytes(range(220, 256))


def new_execution_id() -> str:
    """A 17-character random id, the shape of Dogs' ``lockId``/``executionId``.

    It is both the execution id and the fencing token of a claim, so it must be unguessable
    and unique: 17 characters over 55 symbols is about 98 bits of randomness.
    """
    return new_execution_ids(1)[0]


def new_execution_ids(count: int) -> list[str]:
    """``count`` ids as :func:`new_execution_id` describes them, from one ``urandom`` call (a
    batch claim names one per job; the system call costs more than the rest)."""
    # Mapped by bytes.translate: 24 bytes per id keep at least 17 after rejection with
    # probability ~0.9997 for one id (more for several); otherwise draw more.
    need = 17 * count
    symbols = os.urandom(24 * count).translate(_BYTE_TO_SYMBOL, _REJECTED)
    while len(symbols) < need:
        symbols += os.urandom(24).translate(_BYTE_TO_SYMBOL, _REJECTED)
    text = symbols.decode("ascii")
    return [text[start : start + 17] for start in range(0, need, 17)]


def new_record_id() -> str:
    """A UUIDv7 string, time-ordered, as Dogs uses for ``_id`` of records and history."""
    return str(uuid6.uuid7())


def as_id(value: object) -> str | None:
    """``value`` as a record id in its stored form (see :func:`parse_id`), or ``None`` when it
    is not one (a lookup that also accepts a unique key)."""
    if not isinstance(value, str):
        return None
    try:
        return str(uuid.UUID(value.strip()))
    except ValueError:
        return None


def parse_id(value: object, *, field: str = "job_id") -> str:
    """``value`` as a record id (a job's, a workflow's or its step's, an audit entry's), in
    the form stored (lower-case ``8-4-4-4-12`` hex): a UUID in any case, surrounding blanks
    ignored. Anything else raises :class:`~dogs_core.errors.InvalidIdError` naming ``field``
    and the value, before any read (such an id could only find nothing). Every client method
    that takes an id calls it, so the CLI and the dashboard get the same check and message."""
    if not isinstance(value, str):
        raise InvalidIdError(field, value, f"must be an id string, such as {ID_EXAMPLE}")
    parsed = as_id(value)
    if parsed is None:
        raise InvalidIdError(field, value, f"not an id (ids are UUIDs, such as {ID_EXAMPLE})")
    return parsed


def parse_job_or_execution_id(value: object, *, field: str = "id") -> str:
    """A job id (:func:`parse_id`) or an execution id (17 characters of Dogs' alphabet, as
    :func:`new_execution_id` makes them, kept as given); anything else raises
    :class:`~dogs_core.errors.InvalidIdError`."""
    if isinstance(value, str):
        text = value.strip()
        if len(text) == 17 and all(symbol in _ID_ALPHABET for symbol in text):
            return text
        parsed = as_id(text)
        if parsed is not None:
            return parsed
    raise InvalidIdError(
        field,
        value,
        f"not a job id (a UUID, such as {ID_EXAMPLE}) nor an execution id (17 characters)",
    )
