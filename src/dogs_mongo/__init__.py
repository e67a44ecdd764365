"""MongoDB adapters of Dogs for Python, storage-compatible with @orion-js/dogs 4.6.x.

:class:`AsyncMongoJobStore` (PyMongo ``AsyncMongoClient``) and :class:`MongoJobStore` (PyMongo
``MongoClient``, generated from the async one) implement the job-store ports of
:mod:`dogs_core.ports` on the collections ``orionjs.jobs_dogs_records`` and
``orionjs.jobs_dogs_history`` with Dogs' field names and indexes. :class:`DogsContainer` (the
composition root, also importable from :mod:`dogs_mongo.container`) wires them with the clients
and the workers; :func:`run_example` (:mod:`dogs_mongo.runner`) runs a script on one, in memory
by default or on MongoDB with ``--uri``.
"""

from dogs_mongo._async.store import AsyncMongoJobStore
from dogs_mongo._sync.store import MongoJobStore
from dogs_mongo.container import DogsContainer
from dogs_mongo.runner import Example, example_parser, run_blocking_example, run_example

__all__ = [
    "AsyncMongoJobStore",
    "DogsContainer",
    "Example",
    "MongoJobStore",
    "example_parser",
    "run_blocking_example",
    "run_example",
]
