"""The ``dogs`` command line, one module per command group.

:mod:`~dogs_mongo.cli.app` wires the root app; each command group is a module of its own
(``worker``, ``schedule``, ``status``, ``jobs`` with ``history``, ``controls`` with ``pause``
and ``resume``, ``stats``, ``archive``, ``dashboard``, ``unlock``, ``mongod``) over what they
share (:mod:`~dogs_mongo.cli.common`) and what they print (:mod:`~dogs_mongo.cli.output`,
:mod:`~dogs_mongo.cli.tables`). :func:`main` is the ``dogs`` console script.
"""

from __future__ import annotations

from dogs_mongo.cli.app import app, main

__all__ = ["app", "main"]
