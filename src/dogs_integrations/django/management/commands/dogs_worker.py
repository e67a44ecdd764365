"""``python manage.py dogs_worker [options of dogs worker]``."""

from __future__ import annotations

from dogs_integrations.django.management.commands._passthrough import DogsCommand


class Command(DogsCommand):
    help = (
        "Run Dogs workers for the jobs of the installed apps until SIGTERM or SIGINT (the "
        "options of `dogs worker`: --help lists them)."
    )
    dogs_command = "worker"
