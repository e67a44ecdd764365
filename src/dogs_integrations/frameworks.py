"""What the framework integrations share: a framework's settings turned into the container's
options (validated, an error naming the setting as the application writes it). The ``dogs``
commands run from a framework's own command line are the CLI's (``dogs_cli.frameworks``).

No web framework is imported here (an import-linter contract holds it): Django's and Flask's
modules build on this one.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from dogs_core.errors import InvalidOptionError
from dogs_core.jobs import Jobs
from dogs_mongo.settings import CONFIG_KEYS, DogsSettings

__all__ = [
    "CONFIG_KEYS",
    "SettingsError",
    "container_options",
    "import_registry",
]


class SettingsError(InvalidOptionError):
    """A setting of Dogs in a framework's configuration is missing or wrong. ``field`` is the
    setting as the application writes it: ``DOGS['WORKERS_COUNT']`` (Django),
    ``DOGS_WORKERS_COUNT`` (Flask)."""


def container_options(
    values: Mapping[str, object],
    setting: Callable[[str], str],
    error_type: type[SettingsError] | None = None,
) -> dict[str, Any]:
    """``values`` (container option name -> value) checked as
    :class:`~dogs_mongo.DogsContainer` checks them; a bad or unknown one raises
    :class:`SettingsError` (or ``error_type``) naming ``setting(option)``."""
    error_type = SettingsError if error_type is None else error_type
    try:
        DogsSettings.from_config(values)
    except InvalidOptionError as error:
        known = ", ".join(setting(name) for name in sorted(CONFIG_KEYS))
        reason = error.reason
        if error.field not in CONFIG_KEYS:
            reason = f"not a setting of Dogs; the settings are {known}"
        raise error_type(setting(error.field), error.value, reason) from None
    return dict(values)


def import_registry(spec: object, setting: str) -> Jobs:
    """A :class:`~dogs_core.Jobs` registry, or the ``"module:attribute"`` path of one
    (``"module"`` alone: its ``jobs``); anything else raises :class:`SettingsError` naming
    ``setting``."""
    if isinstance(spec, Jobs):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise SettingsError(setting, spec, "expected a Jobs registry or its 'module:attribute'")
    module_name, _, attribute = spec.strip().partition(":")
    try:
        target: object = importlib.import_module(module_name)
    except ImportError as error:
        raise SettingsError(setting, spec, f"cannot import {module_name!r}: {error}") from None
    for part in (attribute or "jobs").split("."):
        if not hasattr(target, part):
            reason = f"module {module_name!r} has no attribute {attribute or 'jobs'!r}"
            raise SettingsError(setting, spec, reason)
        target = getattr(target, part)
    if not isinstance(target, Jobs):
        reason = f"not a dogs_core.Jobs registry (it is of type {type(target).__name__})"
        raise SettingsError(setting, spec, reason)
    return target
