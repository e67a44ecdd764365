"""Not a registry: discovery names this module."""

jobs = 42
