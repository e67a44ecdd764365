"""Identifiers: UUIDv7 strings for records, Meteor-style ids for executions (as Dogs does)."""

from __future__ import annotations

import os

import uuid6

__all__ = ["new_execution_id", "new_record_id"]

_ID_ALPHABET = "23456789ABCDEFGHJKLMNPQRSTWXYZabcdefghijkmnopqrstuvwxyz"


def new_execution_id() -> str:
    """A 17-character random id, the shape of Dogs' ``lockId``/``executionId``.

    It is both the execution id and the fencing token of a claim, so it must be unguessable
    and unique: 17 characters over 55 symbols is about 98 bits of randomness.
    """
    # One urandom call instead of 17 secrets.choice calls (a syscall each; this runs per claim).
    # Bytes >= 220 are rejected so that ``byte % 55`` stays uniform (220 = 4 * 55).
    chars: list[str] = []
    while len(chars) < 17:
        chars.extend(_ID_ALPHABET[b % 55] for b in os.urandom(24) if b < 220)
    return "".join(chars[:17])


def new_record_id() -> str:
    """A UUIDv7 string, time-ordered, as Dogs uses for ``_id`` of records and history."""
    return str(uuid6.uuid7())
