"""The Django application of Dogs: ``"dogs_integrations.django"`` in ``INSTALLED_APPS``."""

from __future__ import annotations

import logging
from typing import Any

from django.apps import AppConfig
from django.db import DEFAULT_DB_ALIAS
from django.db.models.signals import post_migrate

logger = logging.getLogger("dogs.django")


def set_up_collections(using: str = DEFAULT_DB_ALIAS, **_: Any) -> None:
    """After ``migrate`` on the database Dogs uses: create Dogs' collections and indexes, so
    that a job written in a MongoDB transaction never creates its collection inside it (a
    collection created after a transaction's snapshot makes that transaction fail)."""
    from dogs_integrations.django.client import get_container
    from dogs_integrations.django.conf import dogs_settings

    if using != (dogs_settings().using or DEFAULT_DB_ALIAS):
        return
    get_container().sync_store().setup()
    logger.info("dogs: collections and indexes ready")


class DogsConfig(AppConfig):
    """Checks the ``DOGS`` setting when Django starts (a wrong one stops ``manage.py`` with a
    message naming it), sets up Dogs' collections after ``migrate``, and provides the
    ``dogs_worker`` and ``dogs_schedule`` commands."""

    name = "dogs_integrations.django"
    label = "dogs"
    verbose_name = "Dogs jobs"

    def ready(self) -> None:
        from dogs_integrations.django.conf import dogs_settings

        dogs_settings()
        post_migrate.connect(set_up_collections, sender=self, dispatch_uid="dogs-setup")
