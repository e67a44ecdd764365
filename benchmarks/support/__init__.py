"""What several benchmark commands share; nothing here is a command, and nothing here imports one.

- :mod:`~benchmarks.support.report`: the console, tables (terminal and Markdown), the result
  files, the cells every table repeats (a result, a spread, a ratio to a floor), exit statuses;
- :mod:`~benchmarks.support.cli`: the arguments every command takes (``--uri``, ``--quick``,
  ``--repeat``, ``--out``, ``--write-concern``) and the sizes ``--quick`` picks;
- :mod:`~benchmarks.support.server`: the MongoDB server of a run (``--uri`` or a throw-away
  local mongod), what it reads of it, throw-away database names;
- :mod:`~benchmarks.support.timing`: percentiles, CPU seconds, RSS;
- :mod:`~benchmarks.support.claiming`: due records seeded for claims, claim requests,
  concurrent claimers draining a store, the explain of the claim query;
- :mod:`~benchmarks.support.plans`: query plans read back as text;
- :mod:`~benchmarks.support.stores`: store wrappers that time and count;
- :mod:`~benchmarks.support.floors`: the raw pymongo floors beside the tables;
- :mod:`~benchmarks.support.end_to_end`: one end-to-end ``Workers`` run over a backlog of no-op
  jobs (``throughput`` and ``adaptive``).
"""
