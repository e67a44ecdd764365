"""GENERATED package: the sync twins of the store port's roles (scripts/generate_sync.py)."""
