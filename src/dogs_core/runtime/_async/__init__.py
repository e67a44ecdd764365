"""The async scheduling client and retry helper: the source of truth of ``_sync``, which
``scripts/generate_sync.py`` generates from them with unasync."""
