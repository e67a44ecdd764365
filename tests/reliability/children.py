"""A worker script run as a child process by the reliability tests (crash, crash history,
fleet limits): started with its stderr kept in a temporary file, ready once it prints
``ready``, then killed (SIGKILL) or stopped (SIGTERM, killed if it hangs) and reaped; and
:func:`wait_until`, the tests' poll of the database while such children work."""

from __future__ import annotations

import signal
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import IO

import anyio

__all__ = ["ChildProcess", "wait_until"]


class ChildProcess:
    """``command`` running in ``cwd``; always reaped by :meth:`stop` or :meth:`terminate`."""

    def __init__(self, command: Sequence[str], *, cwd: Path | None = None) -> None:
        self._stderr: IO[str] = tempfile.TemporaryFile("w+")  # noqa: SIM115 - closed in _close()
        self.process = subprocess.Popen(
            list(command),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Until the child prints ``ready`` (an ``AssertionError`` with its stderr if it exits
        or stays silent for ``timeout`` seconds)."""
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if line.strip() == "ready":
                return
            if not line and self.process.poll() is not None:
                break
        raise AssertionError(f"the worker did not start:\n{self.stderr()}")

    def stderr(self) -> str:
        """The last 4,000 characters the child wrote to stderr."""
        self._stderr.seek(0)
        return self._stderr.read()[-4000:]

    def kill(self) -> None:
        """SIGKILL (unless it has exited) and reap."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        """Kill, reap and close the pipes."""
        try:
            self.kill()
        finally:
            self._close()

    def terminate(self, timeout: float = 15.0) -> None:
        """SIGTERM (a drain), SIGKILL after ``timeout`` seconds; reap and close the pipes."""
        try:
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        finally:
            self._close()

    def _close(self) -> None:
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._stderr.close()


async def wait_until(
    condition: Callable[[], Awaitable[bool]],
    seconds: float,
    what: str,
    worker: ChildProcess | None = None,
) -> None:
    """Poll ``condition`` (a database query) every 50 ms for at most ``seconds``; then fail
    naming ``what``, with ``worker``'s stderr."""
    with anyio.move_on_after(seconds):
        while True:
            if await condition():
                return
            await anyio.sleep(0.05)
    details = "" if worker is None else f"\nworker stderr:\n{worker.stderr()}"
    raise AssertionError(f"timed out waiting until {what}{details}")
