"""A management command that runs a ``dogs`` command with the project's settings and jobs."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from dogs_cli.frameworks import run_dogs_command
from dogs_integrations.django.conf import dogs_settings
from dogs_integrations.django.discovery import discover_jobs


class DogsCommand(BaseCommand):
    """Everything after the command's name goes to ``dogs <dogs_command>`` (``--help`` too);
    Django's own options (``--settings``, ``--pythonpath``, ``--traceback``...) are Django's."""

    dogs_command = ""

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, add_help=False, **kwargs)
        parse_known_args = parser.parse_known_args

        def parse_args(args: Any = None, namespace: Any = None) -> Any:
            parsed, rest = parse_known_args(args, namespace)
            parsed.dogs_args = rest
            return parsed

        parser.parse_args = parse_args  # type: ignore[method-assign]
        return parser

    def handle(self, *args: Any, **options: Any) -> None:
        checked = dogs_settings()
        run_dogs_command(
            self.dogs_command,
            discover_jobs(),
            checked.options,
            [*args, *options.get("dogs_args", [])],
            prog_name=f"manage.py dogs_{self.dogs_command}",
        )
