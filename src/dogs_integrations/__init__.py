"""Integrations of Dogs with observability tools, each a telemetry subscriber in a module of its
own so that importing one needs only its own extra:

- :mod:`dogs_integrations.otel` (``dogs-py[otel]``): OpenTelemetry spans per schedule and per
  execution, linked across processes through the records' ``traceContext``.
- :mod:`dogs_integrations.prometheus` (``dogs-py[prometheus]``): counters, histograms and gauges
  for a Prometheus scrape, served by ``dogs worker --metrics-port``.

This package imports nothing of its own here: ``import dogs_integrations`` needs no extra.
"""

from __future__ import annotations
