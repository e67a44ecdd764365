"""ASGI entry point: Django, with the Dogs dashboard at /admin/dogs/ for active staff."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mysite.settings")
django_application = get_asgi_application()

from dogs_integrations.django.dashboard import with_dashboard  # noqa: E402 (after setup)

application = with_dashboard(django_application)
