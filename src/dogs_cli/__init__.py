"""The ``dogs`` command line, one module per command group.

:mod:`~dogs_cli.app` wires the root app; each command group is a module of its own
(``worker``, ``schedule``, ``status``, ``jobs`` with ``history``, ``controls`` with ``pause``
and ``resume``, ``stats``, ``archive``, ``dashboard``, ``unlock``, ``mongod``) over what they
share (:mod:`~dogs_cli.common`) and what they print (:mod:`~dogs_cli.output`,
:mod:`~dogs_cli.tables`). :func:`main` is the ``dogs`` console script.
"""

from __future__ import annotations

from dogs_cli.app import app, main

__all__ = ["app", "main"]
