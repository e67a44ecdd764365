"""The benchmarks: every ``python -m benchmarks.NAME`` command is a module of this package.

- ``NAME.py``: one command each (``claims``, ``throughput``, ``pickup``, ``floor``, ...); it
  measures, checks its own results and prints its tables. No command imports another
  (an import-linter contract in ``pyproject.toml`` holds it).
- ``NAME_PART.py``: a part of one command only: ``claims_report`` (the claim benchmark's rows,
  report, targets and chart), ``crash_fleet_jobs`` (the registry its ``dogs worker`` processes
  serve), ``soak_worker`` (the worker process the soak starts).
- ``support/``: what several commands share (reporting, arguments, the server, timing, the claim
  side, query plans, store wrappers, the floors, the end-to-end run); it imports no command.

``bash benchmarks/regenerate.sh`` runs them all at full size into ``benchmarks/results/``;
``tests/test_benchmarks.py`` runs each at its ``--quick`` size.
"""
