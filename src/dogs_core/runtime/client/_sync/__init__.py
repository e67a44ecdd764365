"""GENERATED sync twins of ../_async/ (scripts/generate_sync.py): never edited by hand."""
