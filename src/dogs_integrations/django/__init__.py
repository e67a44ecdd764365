"""Django: the ``DOGS`` setting, jobs discovered in the installed apps, a blocking client per
process, scheduling that commits with the caller's write, ``manage.py dogs_worker`` and
``dogs_schedule``, and the dashboard under the admin for staff.

Add ``"dogs_integrations.django"`` to ``INSTALLED_APPS``, a ``DOGS`` setting
(:mod:`dogs_integrations.django.conf`) and a ``jobs.py`` with ``jobs = Jobs()`` to your apps;
then, in a view::

    from django_mongodb_backend import transaction
    from dogs_integrations.django import schedule_on_commit

    with transaction.atomic():
        order = Order.objects.create(...)
        schedule_on_commit(send_receipt, {"order_id": str(order.pk)})  # in the same transaction

See docs/django.md.
"""

from __future__ import annotations

from dogs_integrations.django.client import (
    CommitSchedule,
    get_client,
    get_container,
    get_jobs,
    schedule_on_commit,
)
from dogs_integrations.django.conf import DogsSettingsError
from dogs_integrations.django.discovery import JobsDiscoveryError

__all__ = [
    "CommitSchedule",
    "DogsSettingsError",
    "JobsDiscoveryError",
    "get_client",
    "get_container",
    "get_jobs",
    "schedule_on_commit",
]
