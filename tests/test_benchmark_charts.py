"""The charts script and the one-sitting script: the chart is drawn from a throughput run's
JSON, and the sitting's shell script is valid bash that names every step's output."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from benchmarks import charts

ROOT = Path(__file__).resolve().parents[1]


def _row(store: str, handler: str, jobs_per_second: float) -> dict[str, object]:
    return {"store": store, "handler": handler, "status": "ok", "jobs_per_second": jobs_per_second}


def test_the_throughput_chart_is_drawn_from_the_results(tmp_path: Path) -> None:
    results = tmp_path / "results"
    (results / "wide").mkdir(parents=True)
    rows = [
        _row("memory", "async", 12_000.0),
        _row("mongo", "async", 1_400.0) | {"floor_claims_per_second": 900.0},
        _row("mongo", "async", 1_200.0),  # a worse run of the same row: not drawn
        {"store": "mongo", "handler": "sync", "status": "FAILED", "jobs_per_second": None},
    ]
    (results / "throughput.json").write_text(json.dumps({"results": rows}))
    (results / "wide" / "throughput.json").write_text(
        json.dumps({"results": [_row("mongo", "async", 1_500.0)]})
    )
    assets = tmp_path / "assets"
    assert charts.main([str(results), str(assets)]) == 0
    assert (assets / "throughput.png").stat().st_size > 10_000
    assert not (assets / "claims.png").exists()  # no claims run: skipped, said so


def test_nothing_to_draw_fails(tmp_path: Path) -> None:
    assert charts.main([str(tmp_path), str(tmp_path / "assets")]) == 1
    assert charts.main(["only-one-argument"]) == 2


def test_the_sitting_script_is_valid_bash() -> None:
    script = ROOT / "benchmarks" / "regenerate.sh"
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    for step in ("throughput", "claims", "pickup-streams", "backlog", "charts"):
        assert f"step {step}" in text
