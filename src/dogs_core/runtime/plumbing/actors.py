"""Who is acting: the :class:`~dogs_core.domain.audit.Actor` an operator action is recorded
under (the audit trail).

The ``dogs`` command acts as the OS user (source ``cli``), the dashboard as the user its auth
hook returned (source ``dashboard``), application code as the OS user of its process (source
``api``) unless it says otherwise::

    with acting_as("alice", source="api"):
        await client.cancel(job_id)          # recorded as alice

The actor is a context variable: it follows the task (and the thread) that set it.
"""

from __future__ import annotations

import contextlib
import functools
import getpass
import socket
from collections.abc import Iterator
from contextvars import ContextVar

from dogs_core.domain.audit import Actor, check_actor

__all__ = ["acting_as", "current_actor", "process_actor"]

_ACTOR: ContextVar[Actor | None] = ContextVar("dogs_actor", default=None)


@functools.cache
def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name in this environment (a container without one)
        return "unknown"


def process_actor(source: str = "api") -> Actor:
    """The OS user of this process on this host, from ``source``."""
    return check_actor(Actor(_user(), source, socket.gethostname()))


def current_actor() -> Actor:
    """The actor set by :func:`acting_as`, else this process's user (source ``api``)."""
    actor = _ACTOR.get()
    return actor if actor is not None else process_actor()


@contextlib.contextmanager
def acting_as(name: str | Actor, *, source: str = "api") -> Iterator[Actor]:
    """Record the operator actions made inside as ``name`` (from ``source``: ``api``,
    ``cli`` or ``dashboard``)."""
    actor = name if isinstance(name, Actor) else Actor(name, source, socket.gethostname())
    token = _ACTOR.set(check_actor(actor))
    try:
        yield actor
    finally:
        _ACTOR.reset(token)
