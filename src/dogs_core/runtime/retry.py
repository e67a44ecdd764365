"""Retrying transient store errors: logged, bounded, with exponential backoff.

:func:`retry_transient` (async) is written once, in ``_async/retry.py``;
:func:`retry_transient_sync` is generated from it (``_sync/retry.py``, by
``scripts/generate_sync.py``) and sleeps in the caller's thread.
"""

from dogs_core.runtime._async.retry import retry_transient
from dogs_core.runtime._sync.retry import retry_transient as retry_transient_sync

__all__ = ["retry_transient", "retry_transient_sync"]
