"""Failed sign-ins, per client: the dashboard's own logins (:class:`~dogs_dashboard.auth.
CredentialsAuth`: a token on ``/login``, a bearer token, basic credentials) slow down a client
that keeps guessing.

The first ``free_failures`` failures of a client cost nothing (a typo is not an attack); each
further one makes it wait before its next try is even looked at: ``delay`` seconds, twice as
long after each further failure, at most ``max_delay``. A try during the wait is answered 429
with ``Retry-After``. A success, or ``forget_after`` seconds without a failure, forgets the
client. At most ``max_clients`` clients are remembered (the one whose last failure is oldest is
forgotten first), so memory stays bounded whatever the number of addresses.

A client is its address as the ASGI server reports it: behind a proxy, have the server take the
address from the proxy's header (uvicorn's ``--forwarded-allow-ips``), or every client shares
the proxy's.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from dogs_core.domain import validation
from dogs_core.domain.validation import DurationLike
from dogs_core.errors import InvalidOptionError

__all__ = ["SignInThrottle"]


@dataclass(slots=True)
class _Failures:
    count: int
    last: float
    until: float


class SignInThrottle:
    """The failed sign-ins of each client, and how long it must wait (see the module
    documentation). ``clock`` is a monotonic clock in seconds (tests give a fake one)."""

    def __init__(
        self,
        *,
        free_failures: int = 5,
        delay: DurationLike = 1.0,
        max_delay: DurationLike = 300.0,
        forget_after: DurationLike = 3600.0,
        max_clients: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.free_failures = validation.integer("free_failures", free_failures, minimum=0)
        self.delay = _seconds("delay", delay)
        self.max_delay = _seconds("max_delay", max_delay)
        if self.max_delay < self.delay:
            raise InvalidOptionError("max_delay", max_delay, "must be at least delay")
        self.forget_after = _seconds("forget_after", forget_after)
        self.max_clients = validation.integer("max_clients", max_clients, minimum=1)
        if not callable(clock):
            raise InvalidOptionError("clock", clock, "must be a callable returning seconds")
        self._clock = clock
        self._clients: OrderedDict[str, _Failures] = OrderedDict()

    def __len__(self) -> int:
        return len(self._clients)

    def wait(self, client: str) -> float:
        """Seconds ``client`` must wait before its next try is looked at (0: now)."""
        failures = self._clients.get(client)
        if failures is None:
            return 0.0
        now = self._clock()
        if now - failures.last >= self.forget_after:
            del self._clients[client]
            return 0.0
        return max(0.0, failures.until - now)

    def failed(self, client: str) -> float:
        """Count a failed sign-in of ``client``; the seconds it must now wait (0: none)."""
        now = self._clock()
        failures = self._clients.pop(client, None)
        if failures is None or now - failures.last >= self.forget_after:
            failures = _Failures(0, now, now)
        failures.count += 1
        failures.last = now
        beyond = failures.count - self.free_failures
        wait = 0.0 if beyond <= 0 else min(self.max_delay, self.delay * 2.0 ** min(beyond - 1, 64))
        failures.until = now + wait
        self._clients[client] = failures  # the newest failure last: the oldest goes first
        while len(self._clients) > self.max_clients:
            self._clients.popitem(last=False)
        return wait

    def succeeded(self, client: str) -> None:
        """Forget ``client``'s failures."""
        self._clients.pop(client, None)


def _seconds(field: str, value: object) -> float:
    return validation.positive_duration(field, value).total_seconds()
