"""The sync scheduling client and retry helper, generated from ``_async`` by
``scripts/generate_sync.py``: never edit the modules of this package by hand."""
