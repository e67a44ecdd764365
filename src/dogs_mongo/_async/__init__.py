"""The async MongoDB adapter (the source of truth; ``_sync`` is generated from it)."""

from dogs_mongo._async.store import AsyncMongoJobStore

__all__ = ["AsyncMongoJobStore"]
