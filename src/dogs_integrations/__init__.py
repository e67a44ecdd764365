"""Integrations of Dogs with observability tools, each a telemetry subscriber in a module of its
own so that importing one needs only its own extra:

- :mod:`dogs_integrations.otel` (``dogs-py[otel]``): OpenTelemetry spans per schedule and per
  execution, linked across processes through the records' ``traceContext``.
- :mod:`dogs_integrations.prometheus` (``dogs-py[prometheus]``): counters, histograms and gauges
  for a Prometheus scrape, served by ``dogs worker --metrics-port``.

And integrations with web frameworks, each importing its own framework only, never imported
by Dogs itself:

- :mod:`dogs_integrations.django` (``dogs-py[django]``): the ``DOGS`` setting, jobs from each
  app's ``jobs.py``, ``schedule_on_commit``, ``manage.py dogs_worker``, the staff dashboard.
- :mod:`dogs_integrations.fastapi` (``dogs-py[fastapi]``): a lifespan and a client dependency.
- :mod:`dogs_integrations.flask` (``dogs-py[flask]``): an extension and ``flask dogs worker``.
- :mod:`dogs_integrations.frameworks`: what they share (no framework imported).

This package imports nothing of its own here: ``import dogs_integrations`` needs no extra.
"""

from __future__ import annotations
