"""``python -m dogs_cli``: the ``dogs`` command, for when the console script is not on PATH
(the tests and the benchmarks start workers this way)."""

from __future__ import annotations

from dogs_cli.app import main

main()
