"""``manage.py shop_demo``: migrate, then place orders through the view with Django's test
client; ``manage.py shop_demo --receipts``: print the receipts the worker wrote."""

from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser
from django.test import Client

from shop.models import Order


class Command(BaseCommand):
    help = "Place demo orders through the view, or print their receipts."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--receipts", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["receipts"]:
            for order in Order.objects.order_by("email"):
                self.stdout.write(f"{order.email}: {order.receipt or 'no receipt yet'}")
            return
        call_command("migrate", run_syncdb=True, verbosity=0)  # Dogs sets up its collections too
        client = Client(raise_request_exception=False)
        for email, cents in [("ada@example.com", 4200), ("grace@example.com", 1999)]:
            answer = client.post("/orders/", {"email": email, "total_cents": cents}).json()
            self.stdout.write(f"POST /orders/ {email}: job written: {answer['written']}")
        failed = client.post("/orders/", {"email": "linus@example.com", "total_cents": -1})
        self.stdout.write(f"POST /orders/ linus@example.com (a bad total): {failed.status_code}")
        self.stdout.write(f"orders stored: {Order.objects.count()}")
