"""An app whose jobs module defines no Jobs registry."""
