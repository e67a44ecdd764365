"""``python manage.py dogs_schedule JOB [options of dogs schedule]``."""

from __future__ import annotations

from dogs_integrations.django.management.commands._passthrough import DogsCommand


class Command(DogsCommand):
    help = (
        "Schedule one run of an event job of the installed apps (the options of "
        "`dogs schedule`: --help lists them)."
    )
    dogs_command = "schedule"
