"""The jobs of a Django project: the ``jobs`` registry of each installed app's ``jobs.py``
(``DOGS['JOBS_MODULE']``), merged, as Celery's ``autodiscover_tasks`` finds ``tasks.py``.

An app without that module is skipped; one whose module fails to import raises its own error
(never hidden); one whose module has no :class:`~dogs_core.Jobs` named ``jobs`` raises
:class:`JobsDiscoveryError` naming it. Two apps registering different jobs under one name raise
:class:`~dogs_core.errors.DuplicateJobNameError`.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging

from django.apps import apps
from django.core.exceptions import ImproperlyConfigured

from dogs_core.errors import DogsError
from dogs_core.jobs import Jobs
from dogs_integrations.django.conf import dogs_settings

__all__ = ["JobsDiscoveryError", "discover_jobs", "jobs_modules"]

logger = logging.getLogger("dogs.django")


class JobsDiscoveryError(DogsError, ImproperlyConfigured):
    """An app's jobs module has no ``jobs`` registry, or no installed app has jobs."""


def jobs_modules() -> list[str]:
    """The jobs modules of the installed apps, in ``INSTALLED_APPS`` order."""
    name = dogs_settings().jobs_module
    found = []
    for app in apps.get_app_configs():
        module = f"{app.name}.{name}"
        if importlib.util.find_spec(module) is not None:
            found.append(module)
    return found


@functools.cache
def discover_jobs() -> Jobs:
    """Every installed app's ``jobs`` registry, merged (cached; :func:`reset` forgets it)."""
    registries = []
    modules = jobs_modules()
    for module_name in modules:
        module = importlib.import_module(module_name)
        registry = getattr(module, "jobs", None)
        if not isinstance(registry, Jobs):
            what = "nothing" if registry is None else f"a {type(registry).__name__}"
            raise JobsDiscoveryError(
                f"{module_name} defines no Jobs registry named 'jobs' (found {what}): "
                "add `jobs = Jobs()` and register its jobs with @jobs.event / @jobs.recurrent"
            )
        registries.append(registry)
    merged = Jobs.merge(*registries)
    if len(merged) == 0:
        looked = dogs_settings().jobs_module
        where = ", ".join(modules) if modules else f"no app has a {looked}.py"
        raise JobsDiscoveryError(
            f"no jobs found in the installed apps ({where}): add {looked}.py to an app with "
            "`jobs = Jobs()` and its jobs"
        )
    logger.debug("jobs of %s: %s", ", ".join(modules), ", ".join(merged.names))
    return merged


def reset() -> None:
    """Forget the jobs found (tests that change the installed apps)."""
    discover_jobs.cache_clear()
