"""A base for store adapters that wrap another store: every port call goes through one hook.

Subclass :class:`JobStoreWrapper` and override :meth:`JobStoreWrapper.around` to time calls,
inject faults, count or log them; every method of :class:`~dogs_core.ports.AsyncJobStore` is
forwarded to ``inner`` through it (by
:class:`~dogs_core.runtime.plumbing.forwarding.ForwardingJobStore`),
so a wrapper cannot forget one when the port grows. The change feeds (``watch_records``,
``watch_history``, ``watch_pauses``) go through :meth:`JobStoreWrapper.around_feed` instead.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, TypeVar

from dogs_core.ports import AsyncJobStore
from dogs_core.runtime.plumbing.forwarding import ForwardingJobStore

__all__ = ["JobStoreWrapper"]

T = TypeVar("T")


class JobStoreWrapper(ForwardingJobStore):
    """An :class:`~dogs_core.ports.AsyncJobStore` that forwards every call to ``inner`` through
    :meth:`around`. ``close`` closes ``inner`` and is not routed through the hook."""

    def __init__(self, inner: AsyncJobStore) -> None:
        self.inner = inner

    @property
    def _wrapped(self) -> object:
        return self.inner

    async def around(self, method: str, call: Callable[[], Awaitable[T]]) -> T:
        """Run one port call; ``method`` is its name. Override to add behaviour."""
        return await call()

    async def _forward(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        return await self.around(method, lambda: getattr(self.inner, method)(*args, **kwargs))

    def around_feed(
        self, method: str, feed: Callable[[], AsyncGenerator[T, None]]
    ) -> AsyncGenerator[T, None]:
        """Open one change feed; ``method`` is its name and ``feed()`` opens ``inner``'s.
        Override (with an async generator over ``feed()``) to add behaviour; close the inner
        feed when yours closes."""
        return feed()

    def _forward_feed(self, method: str, /, *args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
        return self.around_feed(method, lambda: getattr(self.inner, method)(*args, **kwargs))

    async def close(self) -> None:
        await self.inner.close()
