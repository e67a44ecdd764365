"""The scheduling clients: :class:`DogsClient` (async) and :class:`SyncDogsClient` (sync).

``DogsClient`` is written once, in ``_async/client.py``; ``SyncDogsClient`` is generated from it
with unasync (``_sync/client.py``, by ``scripts/generate_sync.py``), the way the sync Mongo store
is. The sync client calls a sync :class:`~dogs_core.ports.JobStore` in the caller's thread.
"""

from dogs_core.runtime._async.client import DogsClient
from dogs_core.runtime._sync.client import SyncDogsClient
from dogs_core.runtime.scheduling import ScheduleItem

__all__ = ["DogsClient", "ScheduleItem", "SyncDogsClient"]
