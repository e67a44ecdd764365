"""The fleet's Prometheus gauges from the workers' registry (dogs_integrations.prometheus):
workers by state, each live worker's slots and slots in use, label sets removed when a worker
goes; nothing read where the store keeps no registry."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from dogs_core.domain.registry import WorkerInfo, WorkerState
from dogs_core.ports import REQUIRED_ROLES
from dogs_integrations.prometheus import PrometheusMetrics
from dogs_testing.memory import InMemoryJobStore

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def worker(instance: str, **changes: object) -> WorkerInfo:
    values: dict[str, object] = {
        "instance_id": instance,
        "host": "host-a",
        "pid": 1,
        "version": "0.1.0",
        "job_names": ("a",),
        "workers_count": 8,
        "slots_in_use": 3,
        "executions": (),
        "executions_total": 3,
        "started_at": NOW - timedelta(minutes=1),
        "last_beat": NOW,
        "state": WorkerState.RUNNING,
        "expires_at": NOW + timedelta(minutes=1),
        **changes,
    }
    return WorkerInfo(**values)  # type: ignore[arg-type]


def samples(metrics: PrometheusMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(metrics.registry).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@pytest.mark.anyio
async def test_fleet_gauges() -> None:
    metrics = PrometheusMetrics(registry=CollectorRegistry())
    store = InMemoryJobStore()
    await store.beat_worker(worker("w1"))
    await store.beat_worker(worker("w2", host="host-b", state=WorkerState.QUIET, slots_in_use=1))
    await store.beat_worker(worker("dead", last_beat=NOW - timedelta(minutes=5)))
    assert await metrics.refresh(store, now=NOW)
    found = samples(metrics)
    assert found[("dogs_workers", (("state", "running"),))] == 1
    assert found[("dogs_workers", (("state", "quiet"),))] == 1
    assert found[("dogs_workers", (("state", "lost"),))] == 1
    assert found[("dogs_worker_slots", (("host", "host-a"), ("instance", "w1")))] == 8
    assert found[("dogs_worker_slots_in_use", (("host", "host-b"), ("instance", "w2")))] == 1
    assert not [key for key in found if ("instance", "dead") in key[1]]
    await store.beat_worker(worker("w1", state=WorkerState.STOPPED))
    assert await metrics.refresh(store, now=NOW)
    found = samples(metrics)
    assert not [key for key in found if ("instance", "w1") in key[1]]
    assert found[("dogs_workers", (("state", "stopped"),))] == 1


class NoRegistry(InMemoryJobStore):
    roles = REQUIRED_ROLES


@pytest.mark.anyio
async def test_no_registry_no_fleet_gauges() -> None:
    metrics = PrometheusMetrics(registry=CollectorRegistry())
    assert await metrics.refresh(NoRegistry(), now=NOW)
    assert not [key for key in samples(metrics) if key[0].startswith("dogs_worker")]
