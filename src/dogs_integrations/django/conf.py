"""The ``DOGS`` setting of a Django project, turned into the container's options.

::

    DOGS = {
        "USING": "default",          # a django_mongodb_backend database: its client and name
        # or "URI": "mongodb://...", "DATABASE": "app",
        "N_PARTITIONS": 4,           # any container option, in capitals
        "WORKERS_COUNT": 8,
        "JOBS_MODULE": "jobs",       # the module of each app whose `jobs` registry is collected
    }

Every key but ``USING`` and ``JOBS_MODULE`` is an option of :class:`~dogs_mongo.DogsContainer`
written in capitals (``URI``, ``DATABASE``, ``N_PARTITIONS``, ``OPERATION_TIMEOUT``, the worker
options...). Without ``URI``, Dogs uses the MongoDB database ``USING`` names (``"default"``
when that one is a ``django_mongodb_backend`` database): the same ``MongoClient`` (so a job can
be written in the transaction of ``django_mongodb_backend.transaction.atomic()``) and, unless
``DATABASE`` says otherwise, the same database name. A wrong, unknown or missing setting raises
:class:`DogsSettingsError` naming it, when Django starts.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connections

from dogs_integrations.frameworks import SettingsError, container_options

__all__ = ["DjangoDogsSettings", "DogsSettingsError", "dogs_settings", "setting_name"]

MONGODB_ENGINE: Final = "django_mongodb_backend"
_OWN_KEYS: Final = ("USING", "JOBS_MODULE")


class DogsSettingsError(SettingsError, ImproperlyConfigured):
    """The ``DOGS`` setting is missing something or holds a wrong value (``field`` names it:
    ``DOGS['WORKERS_COUNT']``)."""


def setting_name(option: str) -> str:
    """``DOGS['URI']`` for the container option ``uri``."""
    return f"DOGS[{option.upper()!r}]"


@dataclass(frozen=True, slots=True)
class DjangoDogsSettings:
    """``DOGS``, checked: the container's options, the Django database whose MongoDB client
    the container shares (``None`` with a ``URI`` of its own) and the jobs module's name."""

    options: Mapping[str, Any]
    using: str | None
    jobs_module: str


def _is_mongodb(alias: str) -> bool:
    engine = settings.DATABASES.get(alias, {}).get("ENGINE", "")
    return isinstance(engine, str) and engine.startswith(MONGODB_ENGINE)


def _from_database(alias: str, options: dict[str, Any]) -> dict[str, Any]:
    """The connection options of the Django database ``alias`` (a django_mongodb_backend one):
    its host or connection string, its client options and name."""
    params = dict(connections[alias].get_connection_params())
    host = params.pop("host", None) or "localhost"
    uri = host if str(host).startswith(("mongodb://", "mongodb+srv://")) else f"mongodb://{host}"
    found = {"uri": uri, "database": connections[alias].settings_dict.get("NAME") or None}
    if params:
        found["client_options"] = {**params, **options.get("client_options", {})}
    return {**found, **options}


@functools.cache
def dogs_settings() -> DjangoDogsSettings:
    """The checked ``DOGS`` setting (read once; :func:`reset` after changing it in tests)."""
    raw = getattr(settings, "DOGS", {})
    if not isinstance(raw, Mapping):
        raise DogsSettingsError(
            "DOGS", raw, "must be a dict of settings, e.g. {'USING': 'default'}"
        )
    bad = [key for key in raw if not isinstance(key, str) or key != key.upper()]
    if bad:
        raise DogsSettingsError(
            setting_name(str(bad[0])), raw[bad[0]], "the keys of DOGS are in capitals"
        )
    using = raw.get("USING")
    jobs_module = raw.get("JOBS_MODULE", "jobs")
    if not isinstance(jobs_module, str) or not jobs_module.isidentifier():
        raise DogsSettingsError(setting_name("jobs_module"), jobs_module, "must be a module name")
    options = {key.lower(): value for key, value in raw.items() if key not in _OWN_KEYS}
    options = container_options(options, setting_name, DogsSettingsError)
    if using is not None and (not isinstance(using, str) or using not in settings.DATABASES):
        known = ", ".join(sorted(settings.DATABASES))
        raise DogsSettingsError(
            setting_name("using"), using, f"not a database of DATABASES ({known})"
        )
    if using is not None and not _is_mongodb(using):
        reason = f"DATABASES[{using!r}] is not a {MONGODB_ENGINE} database: give DOGS['URI']"
        raise DogsSettingsError(setting_name("using"), using, reason)
    if "uri" in options:
        return DjangoDogsSettings(options, None, jobs_module)
    if using is None and _is_mongodb("default"):
        using = "default"
    if using is None:
        raise DogsSettingsError(
            setting_name("uri"),
            None,
            "missing: a MongoDB connection string, or DOGS['USING'] naming a "
            f"{MONGODB_ENGINE} database of DATABASES",
        )
    options = container_options(_from_database(using, options), setting_name, DogsSettingsError)
    return DjangoDogsSettings(options, using, jobs_module)


def reset() -> None:
    """Forget the settings read (tests that change ``DOGS``)."""
    dogs_settings.cache_clear()
