"""``dogs dashboard``: serve the web dashboard (``dogs_dashboard``) of a Dogs database.

::

    dogs dashboard --uri mongodb://localhost/app [--host 127.0.0.1] [--port 8000]
                   [--read-only] [--secret-env DOGS_DASHBOARD_SECRET]
                   [--token-env DOGS_DASHBOARD_TOKENS] [--basic-auth-env DOGS_DASHBOARD_USERS]
                   [--sign-in-failures 5] [--sign-in-max-delay 300]

The app is :func:`dogs_dashboard.create_app` over the container's client, served by uvicorn
until SIGTERM or Ctrl-C. The header shows the URI with its password masked (``redact_uri``):
the app never receives the password. It needs the extra ``dogs-py[dashboard]``; without it
the command says so in one line (exit 2). ``--token-env`` and ``--basic-auth-env`` name the
environment variables holding its credentials (``NAME:SECRET[:viewer]``, comma-separated:
:func:`dogs_dashboard.auth.parse_credentials`); without either it has no login, and it says
so when it listens on another interface than loopback (docs/dashboard.md).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
from types import ModuleType
from typing import Annotated, Any

import anyio
import typer

from dogs_cli.common import (
    Connection,
    LogLevel,
    connected_client,
    fail,
    run,
    user_errors,
    with_connection,
)
from dogs_mongo.container import redact_uri

__all__ = ["EXTRA_HINT", "dashboard"]

#: What to install when the dashboard's libraries are missing.
EXTRA_HINT = "pip install 'dogs-py[dashboard]'"
_MIN_SECRET = 16


def _dashboard_modules() -> tuple[ModuleType, ModuleType]:
    """``dogs_dashboard`` and ``uvicorn``, imported only by this command."""
    try:
        return importlib.import_module("dogs_dashboard"), importlib.import_module("uvicorn")
    except ImportError as error:
        missing = getattr(error, "name", None) or str(error)
        fail(f"dogs dashboard needs the dashboard extra ({missing} is missing): {EXTRA_HINT}")


def _secret(variable: str | None) -> str | None:
    if variable is None:
        return None
    value = os.environ.get(variable)
    if not value:
        fail(f"--secret-env {variable}: the environment variable is not set or empty")
    if len(value) < _MIN_SECRET:
        fail(f"--secret-env {variable}: the secret must be at least {_MIN_SECRET} characters")
    return value


@with_connection(log_level=LogLevel.INFO, controls=True)
def dashboard(
    host: Annotated[str, typer.Option("--host", help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8000,
    read_only: Annotated[
        bool, typer.Option("--read-only", help="Hide every action; refuse every POST.")
    ] = False,
    secret_env: Annotated[
        str | None,
        typer.Option(
            "--secret-env",
            metavar="VAR",
            help="Environment variable holding the CSRF secret (default: random per process).",
        ),
    ] = None,
    title: Annotated[str, typer.Option("--title", help="The title in the header.")] = "Dogs",
    refresh: Annotated[
        float, typer.Option("--refresh", help="Seconds between live refreshes (0: off).")
    ] = 5.0,
    token_env: Annotated[
        str | None,
        typer.Option(
            "--token-env",
            metavar="VAR",
            help="Environment variable holding access tokens: NAME:TOKEN[:viewer], "
            "comma-separated.",
        ),
    ] = None,
    basic_auth_env: Annotated[
        str | None,
        typer.Option(
            "--basic-auth-env",
            metavar="VAR",
            help="Environment variable holding basic-auth users: USER:PASSWORD[:viewer], "
            "comma-separated.",
        ),
    ] = None,
    sign_in_failures: Annotated[
        int,
        typer.Option(
            "--sign-in-failures",
            metavar="N",
            help="Failed sign-ins a client may make before it must wait (doubling each time).",
        ),
    ] = 5,
    sign_in_max_delay: Annotated[
        float,
        typer.Option(
            "--sign-in-max-delay",
            metavar="SECONDS",
            help="The longest wait after failed sign-ins (answered 429 with Retry-After).",
        ),
    ] = 300.0,
    *,
    connection: Connection,
) -> None:
    """Serve the web dashboard: job counts per name, job lists and pages, actions."""
    if not 0 < port < 65536:
        fail(f"--port={port}: expected a port number between 1 and 65535")
    if not host.strip():
        fail("--host: must not be empty")
    if refresh < 0:
        fail(f"--refresh={refresh:g}: must be 0 (off) or more seconds")
    secret = _secret(secret_env)
    dashboard_module, uvicorn = _dashboard_modules()
    if sign_in_failures < 0:
        fail(f"--sign-in-failures={sign_in_failures}: must be 0 or more")
    if not 1 <= sign_in_max_delay <= 86400:
        fail(f"--sign-in-max-delay={sign_in_max_delay:g}: must be 1 to 86400 seconds")
    auth = _auth(token_env, basic_auth_env, secret, (sign_in_failures, sign_in_max_delay))
    if auth is None and host not in _LOOPBACK:
        typer.secho(
            f"Warning: --host {host} without --token-env or --basic-auth-env: anyone who reaches "
            "it can see and act (put it behind an authenticating proxy, or give credentials)",
            err=True,
            fg=typer.colors.YELLOW,
        )
    container = connection.logged_container()
    source = redact_uri(container.settings().required_uri())

    async def serve() -> None:
        async with connected_client(container) as client:
            with user_errors():
                app = dashboard_module.create_app(
                    client,
                    read_only=read_only,
                    secret=secret,
                    title=title,
                    source=source,
                    refresh_seconds=refresh,
                    auth=auth,
                )
            mode = " (read-only)" if read_only else ""
            mode += "" if auth is None else ", sign-in required"
            typer.echo(f"dogs dashboard of {source}{mode}: http://{host}:{port}/")
            config = uvicorn.Config(
                app,
                host=host,
                port=port,
                log_level=connection.log_level.value.lower(),
                lifespan="off",
            )
            await _serve_until_signal(uvicorn.Server(config))

    run(serve)
    typer.echo("dogs dashboard: stopped")


_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def _credentials(flag: str, variable: str | None, *, tokens: bool) -> list[Any]:
    if variable is None:
        return []
    value = os.environ.get(variable)
    if not value:
        fail(f"{flag} {variable}: the environment variable is not set or empty")
    from dogs_dashboard.auth import parse_credentials

    with user_errors():
        return parse_credentials(value, field=f"{flag} {variable}", tokens=tokens)


def _auth(
    token_env: str | None, basic_env: str | None, secret: str | None, limits: tuple[int, float]
) -> Any:
    """The dashboard's :class:`~dogs_dashboard.auth.CredentialsAuth`, or ``None`` without
    credentials; ``limits``: the free failed sign-ins and the longest wait after them."""
    tokens = _credentials("--token-env", token_env, tokens=True)
    users = _credentials("--basic-auth-env", basic_env, tokens=False)
    if not tokens and not users:
        return None
    from dogs_dashboard.auth import CredentialsAuth, SignInThrottle

    free, max_delay = limits
    throttle = SignInThrottle(free_failures=free, max_delay=max_delay)
    return CredentialsAuth(tokens=tokens, users=users, secret=secret, throttle=throttle)


async def _serve_until_signal(server: Any) -> None:
    """Serve until SIGTERM or SIGINT, then let uvicorn finish its requests and return (so the
    container is closed and the command exits 0). uvicorn's own signal capture re-raises the
    signal after its shutdown, which would skip that: it is replaced by this watcher."""
    server.capture_signals = contextlib.nullcontext
    async with anyio.create_task_group() as group:

        async def watch() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    server.should_exit = True
                    return

        group.start_soon(watch)
        await server.serve()
        group.cancel_scope.cancel()
