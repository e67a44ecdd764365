"""The sync MongoDB adapter, generated from ``_async`` by ``scripts/generate_sync.py``."""

from dogs_mongo._sync.store import MongoJobStore

__all__ = ["MongoJobStore"]
