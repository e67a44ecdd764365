"""The one check of the client a store is given: a Motor client is refused, clearly.

Motor was accepted by duck typing and never tested. It is deprecated upstream (bug fixes ended
in May 2026) and PyMongo's own ``AsyncMongoClient`` (pymongo >= 4.13) replaces it with the same
API, so Dogs for Python supports PyMongo's clients only and says so at construction instead of
failing later in a way nobody tested.
"""

from __future__ import annotations

from typing import Final

from dogs_core.errors import InvalidOptionError

__all__ = ["MOTOR_MIGRATION", "refuse_motor"]

#: Where a Motor user learns the move (the PyMongo async migration guide).
MOTOR_MIGRATION: Final = (
    "https://www.mongodb.com/docs/languages/python/pymongo-driver/current/reference/migration/"
)


def refuse_motor(client: object) -> None:
    """Raise :class:`InvalidOptionError` naming ``client`` when it is a Motor client."""
    kind = type(client)
    if kind.__module__.split(".")[0] == "motor":
        raise InvalidOptionError(
            "client",
            f"{kind.__module__}.{kind.__qualname__}",
            "Motor clients are not supported (Motor is deprecated upstream); pass "
            "pymongo.AsyncMongoClient(uri, tz_aware=True) instead, which has the same API: "
            + MOTOR_MIGRATION,
        )
