"""Client: scheduling and steering, for applications and operators.

``DogsClient`` (``_async/client.py``, the source of truth) and its generated sync twin
``SyncDogsClient`` (``_sync/client.py``), composed of one part per concern (steering, workflows,
schedules, bulk, inspection, audit, ...); what both faces share without I/O is in the
hand-written modules beside them (``scheduling.py``, ``shaping.py``, ...). ``BlockingDogsClient``
(``blocking.py``) drives an async store from sync code. It imports plumbing and the domain only.
"""
