"""Identifiers: UUIDv7 strings for records, Meteor-style ids for executions (as Dogs does)."""

from __future__ import annotations

import secrets

import uuid6

__all__ = ["new_execution_id", "new_record_id"]

_ID_ALPHABET = "23456789ABCDEFGHJKLMNPQRSTWXYZabcdefghijkmnopqrstuvwxyz"


def new_execution_id() -> str:
    """A 17-character random id, the shape of Dogs' ``lockId``/``executionId``.

    It is both the execution id and the fencing token of a claim, so it must be unguessable
    and unique: 17 characters over 55 symbols is about 98 bits of randomness.
    """
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(17))


def new_record_id() -> str:
    """A UUIDv7 string, time-ordered, as Dogs uses for ``_id`` of records and history."""
    return str(uuid6.uuid7())
