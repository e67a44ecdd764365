"""Identifiers: UUIDv7 strings for records, Meteor-style ids for executions (as Dogs does)."""

from __future__ import annotations

import os

import uuid6

__all__ = ["new_execution_id", "new_execution_ids", "new_record_id"]

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
