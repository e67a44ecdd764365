"""Health endpoints of a worker process: ``/healthz`` (liveness) and ``/readyz`` (readiness),
served over plain HTTP/1.1 on the workers' own event loop (what ``dogs worker --health-port``
runs beside the workers).

``/healthz`` answers 200 while the workers' scheduler loops run (claim lanes, lock watchdogs,
batch writers and feeds, all in the task group of
:class:`~dogs_core.runtime.worker.workers.Workers`),
draining included; an answer at all says the event loop is not blocked. 503 once they have
stopped. A database outage is *not* a liveness failure: restarting the process would not bring
the database back, and the workers wait for it by themselves.

``/readyz`` answers 200 when the workers claim jobs: started (the store set up), not draining,
the store answered a short read (``server_time``, MongoDB's ``hello`` on the primary) within
``store_timeout``, and the change feed open, or polling by choice (``watch_changes=False``).
Otherwise 503 with the reason.

Each answer is a small JSON object: ``status`` (``"ok"`` or ``"fail"``), ``reason`` and what was
checked. ``GET`` and ``HEAD`` only; any other path is 404.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import anyio.abc

from dogs_core.domain import validation
from dogs_core.errors import InvalidOptionError, WorkersStateError
from dogs_core.runtime.worker.workers import Workers

__all__ = ["HealthReport", "WorkerHealth", "serve_health"]

logger = logging.getLogger("dogs.health")

#: How long one request may take to arrive (a probe sends it at once).
_REQUEST_TIMEOUT: Final = 5.0
_MAX_REQUEST_BYTES: Final = 8192
#: How often :meth:`WorkerHealth.follow` looks whether the workers have started.
_START_POLL: Final = 0.05
_REASONS: Final = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}
_REASONS[503] = "Service Unavailable"


@dataclass(frozen=True, slots=True)
class HealthReport:
    """One answer: ``ok`` (HTTP 200, else 503), why, and what was looked at."""

    ok: bool
    reason: str
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def status_code(self) -> int:
        return 200 if self.ok else 503

    def body(self) -> bytes:
        payload = {"status": "ok" if self.ok else "fail", "reason": self.reason, **self.details}
        return json.dumps(payload, default=str).encode() + b"\n"


class WorkerHealth:
    """The checks of one :class:`Workers` instance (see the module documentation).

    Whether the scheduler's loops still run is what :meth:`follow` (run beside the workers by
    :func:`serve_health`) learns from ``Workers.serve``, which returns once they have stopped.
    """

    def __init__(self, workers: Workers, *, store_timeout: float = 2.0) -> None:
        if not isinstance(workers, Workers):
            raise InvalidOptionError("workers", workers, "must be a dogs Workers instance")
        self.workers = workers
        self.store_timeout = validation.positive_duration(
            "store_timeout", store_timeout
        ).total_seconds()
        self.stopped = False
        """Set once the workers' loops have stopped (by :meth:`follow`)."""
        self._seen_running = False

    async def follow(self) -> None:
        """Wait for the workers to start, then until they have stopped; then :attr:`stopped`."""
        while True:
            try:
                await self.workers.serve()
            except WorkersStateError:  # not started yet
                await anyio.sleep(_START_POLL)
                continue
            self.stopped = True
            return

    def _phase(self) -> str:
        workers = self.workers
        if self.stopped:
            return "stopped"
        if workers.running:
            self._seen_running = True
        elif self._seen_running:
            return "draining"
        return "starting" if not workers.running or workers.capabilities is None else "running"

    async def liveness(self) -> HealthReport:
        phase = self._phase()
        details = {"phase": phase, "running_executions": self.workers.running_executions}
        if phase == "stopped":
            return HealthReport(False, "the scheduler loops have stopped", details)
        return HealthReport(True, f"event loop answering, scheduler loops {phase}", details)

    async def readiness(self) -> HealthReport:
        workers = self.workers
        phase = self._phase()
        feed = "open" if workers.watching else "not open"
        if not workers.settings.watch_changes:
            feed = "polling by choice (watch_changes off)"
        details: dict[str, Any] = {"phase": phase, "change_feed": feed}
        if phase == "stopped":
            return HealthReport(False, "the scheduler loops have stopped", details)
        if phase == "draining":
            return HealthReport(False, "draining: a stop was requested", details)
        store_error = await self._store_answers()
        details["store"] = "answering" if store_error is None else "unreachable"
        if store_error is not None:
            return HealthReport(False, store_error, details)
        if phase == "starting":
            return HealthReport(False, "starting: setting up the store", details)
        if feed == "not open":
            reason = "change feed not open: waking by polling until it reopens"
            return HealthReport(False, reason, details)
        return HealthReport(True, "claiming", details)

    async def _store_answers(self) -> str | None:
        """``None`` when the store answered a short read in time, else why not."""
        try:
            with anyio.fail_after(self.store_timeout):
                await self.workers.store.server_time()
        except TimeoutError:
            return f"the database did not answer within {self.store_timeout:g}s"
        except Exception as error:
            text = str(error).splitlines()[0] if str(error) else ""
            return f"the database is unreachable: {type(error).__name__}: {text}"[:300]
        return None

    async def answer(self, method: str, path: str) -> tuple[int, bytes]:
        """The status and body of one request."""
        if path not in ("/healthz", "/readyz"):
            return 404, b'{"status": "fail", "reason": "try /healthz or /readyz"}\n'
        if method not in ("GET", "HEAD"):
            return 405, b'{"status": "fail", "reason": "GET or HEAD only"}\n'
        report = await (self.liveness() if path == "/healthz" else self.readiness())
        return report.status_code, report.body()


async def _read_request_line(stream: anyio.abc.ByteStream) -> bytes:
    received = b""
    while b"\r\n\r\n" not in received and b"\n\n" not in received:
        if len(received) > _MAX_REQUEST_BYTES:
            break
        try:
            received += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            break
    return received.split(b"\n", 1)[0].strip()


async def _serve_one(health: WorkerHealth, stream: anyio.abc.ByteStream) -> None:
    async with stream:
        try:
            with anyio.fail_after(_REQUEST_TIMEOUT):
                line = await _read_request_line(stream)
        except TimeoutError:
            return
        parts = line.decode("latin-1").split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            status, body, method = 400, b'{"status": "fail", "reason": "bad request"}\n', "GET"
        else:
            method, target = parts[0], parts[1]
            status, body = await health.answer(method, target.split("?", 1)[0])
        head = (
            f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"
        ).encode()
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await stream.send(head if method == "HEAD" else head + body)


@contextlib.asynccontextmanager
async def serve_health(
    workers: Workers, *, port: int, host: str = "0.0.0.0", store_timeout: float = 2.0
) -> AsyncIterator[tuple[str, int]]:
    """While inside: ``/healthz`` and ``/readyz`` of ``workers`` served on ``host:port`` (``0``:
    a free port); yields the address bound. A port that cannot be bound (in use, not allowed)
    raises :class:`~dogs_core.errors.InvalidOptionError` naming ``health_port``."""
    validation.integer("health_port", port, minimum=0)
    if port > 65535:
        raise InvalidOptionError("health_port", port, "must be a port number from 0 to 65535")
    health = WorkerHealth(workers, store_timeout=store_timeout)
    try:
        listener = await anyio.create_tcp_listener(local_host=host, local_port=port)
    except OSError as error:
        why = "the address is already in use" if error.errno == errno.EADDRINUSE else str(error)
        reason = f"cannot listen on {host}:{port}: {why}"
        raise InvalidOptionError("health_port", port, reason) from None
    bound = listener.extra(anyio.abc.SocketAttribute.local_address)
    address = (str(bound[0]), int(bound[1]))
    logger.info("serving /healthz and /readyz on http://%s:%d", *address)
    async with listener, anyio.create_task_group() as group:

        async def handle(stream: anyio.abc.SocketStream) -> None:
            try:
                await _serve_one(health, stream)
            except Exception:  # a probe must never take the workers down
                logger.exception("health request failed")

        group.start_soon(listener.serve, handle)
        group.start_soon(health.follow)
        try:
            yield address
        finally:
            group.cancel_scope.cancel()
