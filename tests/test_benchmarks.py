"""The benchmark scripts still run: each at its ``--quick`` size against the test mongod.

No timing is asserted (the numbers depend on the machine); only that each script exits 0,
passes its own correctness checks and prints its table.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Final

import pytest
from benchmarks import (
    backlog,
    claims,
    crash_fleet,
    crash_workflows,
    dashboard_pages,
    durable,
    explain_stats,
    floor,
    following,
    global_limit,
    many_names,
    pickup,
    scheduling,
    soak,
    telemetry_overhead,
    throughput,
    time_to_error,
)
from benchmarks.support.report import ratio

pytestmark = [pytest.mark.mongo, pytest.mark.slow]


def test_claims_quick(mongodb_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = claims.main(["--quick", "--uri", mongodb_uri, "--out", str(tmp_path)])
    output = capsys.readouterr().out
    assert status == 0, output
    assert "findOneAndUpdate, 1 partition" in output
    assert "findOneAndUpdate, 8 partitions" in output
    assert "claim_many ×16, 8 partitions" in output
    assert "FAILED" not in output
    report = (tmp_path / "claims.md").read_text()
    assert "| Scenario | Adapter |" in report
    assert "| Claims/s | Floor claims/s | Ratio to floor |" in report
    assert (tmp_path / "claims.png").stat().st_size > 0
    assert (tmp_path / "claims.json").exists()


def test_throughput_quick(
    mongodb_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = throughput.main(["--quick", "--uri", mongodb_uri, "--out", str(tmp_path)])
    output = capsys.readouterr().out
    assert status == 0, output
    for store in throughput.STORES:
        assert store in output
    assert "FAILED" not in output
    report = (tmp_path / "throughput.md").read_text()
    assert "| Store | Handler |" in report
    assert "| Jobs/s | Floor claims/s | Ratio to floor |" in report
    assert report.count("| ok |") == len(throughput.STORES) * len(throughput.HANDLERS)


def test_throughput_quick_with_several_instances(
    mongodb_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = throughput.main(
        [
            "--quick",
            "--uri",
            mongodb_uri,
            "--store",
            "mongo",
            "--store",
            "memory",
            "--handler",
            "async",
            "--instances",
            "3",
            "--out",
            str(tmp_path),
        ]
    )
    output = capsys.readouterr().out
    assert status == 0, output
    report = (tmp_path / "throughput.md").read_text()
    assert "3 `Workers` instances sharing the store" in report
    assert report.count("| ok |") == 2
    assert report.count(" of 3 |") == 2, "each row shows how the jobs split between instances"


def test_throughput_quick_compares_watching_with_polling(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = throughput.main(
        [
            "--quick",
            "--store",
            "memory",
            "--handler",
            "async",
            "--watch-changes",
            "both",
            "--out",
            str(tmp_path),
        ]
    )
    output = capsys.readouterr().out
    assert status == 0, output
    report = (tmp_path / "throughput.md").read_text()
    assert "| Store | Handler | Watch changes |" in report
    assert "| memory | async | on |" in report
    assert "| memory | async | off |" in report
    assert report.count("| ok |") == 2
    assert "polling only (target: not below polling)" in output


def test_pickup_quick(mongodb_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = pickup.main(["--quick", "--uri", mongodb_uri, "--out", str(tmp_path)])
    output = capsys.readouterr().out
    assert status == 0, output
    for mode in pickup.MODES.values():
        assert mode.label in output
    assert "FAILED" not in output
    assert "target p50 <= 20 ms and p99 <= 100 ms" in output
    report = (tmp_path / "pickup.md").read_text()
    assert "| Mode | watch_changes |" in report
    assert report.count("| ok |") == len(pickup.MODES)
    results = json.loads((tmp_path / "pickup.json").read_text())["results"]
    assert {r["mode"]: len(r["latencies_ms"]) for r in results} == pickup.QUICK_SAMPLES


def test_global_limit_quick(
    mongodb_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = global_limit.main(["--quick", "--uri", mongodb_uri, "--out", str(tmp_path)])
    output = capsys.readouterr().out
    assert status == 0, output
    for scenario in global_limit.SCENARIOS:
        assert scenario.label in output
    assert "FAILED" not in output
    report = (tmp_path / "global_limit.md").read_text()
    assert "| Scenario | Jobs |" in report
    assert report.count("| ok |") == len(global_limit.SCENARIOS)
    results = json.loads((tmp_path / "global_limit.json").read_text())["results"]
    by_scenario = {r["scenario"]: r for r in results}
    assert by_scenario["no limit"]["controls_writes"] == 0, "no limit, no controls writes"
    assert by_scenario["no limit"]["refused"] == 0


def test_explain_stats_quick(mongodb_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    status = explain_stats.main(["--quick", "--uri", mongodb_uri])
    captured = capsys.readouterr()
    assert status == 0, captured.out + captured.err
    assert "FAILED" not in captured.err
    assert "2,000 history rows over 7 days" in captured.out
    assert captured.out.count("IXSCAN[jobName_1_startedAt_1]") == 12
    assert "PROJECTION_COVERED > IXSCAN" in captured.out
    assert "COLLSCAN" not in captured.out


def test_dashboard_pages_quick(
    mongodb_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = dashboard_pages.main(["--quick", "--uri", mongodb_uri, "--out", str(tmp_path)])
    captured = capsys.readouterr()
    assert status == 0, captured.out + captured.err
    assert "FAILED" not in captured.out
    assert "Dashboard pages, 5,000 records and 5,000 history rows" in captured.out
    for page in ("overview (snapshot)", "search: a finished id", "errors, last 24 h"):
        assert page in captured.out
    report = (tmp_path / "dashboard_pages.md").read_text()
    assert "| Page | Requests | p50 ms | p95 ms | Max ms | Outcome |" in report
    assert "each page's p95 <= 300 ms" in report


def test_explain_stats_rejects_a_bad_size() -> None:
    with pytest.raises(SystemExit):
        explain_stats.main(["--rows", "10"])


def test_global_limit_rejects_a_bad_size() -> None:
    with pytest.raises(SystemExit):
        global_limit.main(["--jobs", "0"])


def test_pickup_rejects_a_bad_size() -> None:
    with pytest.raises(SystemExit):
        pickup.main(["--samples", "0"])


def test_throughput_rejects_zero_instances() -> None:
    with pytest.raises(SystemExit):
        throughput.main(["--instances", "0"])


def test_claims_rejects_a_bad_size() -> None:
    with pytest.raises(SystemExit):
        claims.main(["--jobs", "0"])


def test_telemetry_overhead_quick(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = telemetry_overhead.main(["--quick", "--out", str(tmp_path)])
    output = capsys.readouterr().out
    assert status == 0, output
    assert "FAILED" not in output
    report = (tmp_path / "telemetry_overhead.md").read_text()
    assert "| Subscriber | Jobs |" in report
    for mode in telemetry_overhead.MODES:
        assert f"| {mode} | 1,000 |" in report
    assert report.count("| ok |") == len(telemetry_overhead.MODES)


def test_telemetry_overhead_rejects_a_bad_size() -> None:
    with pytest.raises(SystemExit):
        telemetry_overhead.main(["--jobs", "0"])


def test_time_to_error_quick(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The closed port only (no server needed): each schedule() fails within its bound."""
    status = time_to_error.main(["--quick", "--out", str(tmp_path)])
    output = capsys.readouterr().out
    assert status == 0, output
    assert "FAILED" not in output
    report = (tmp_path / "time_to_error_quick.md").read_text()
    assert report.count(" | ok |") == len(time_to_error.QUICK)
    assert "StoreUnavailableError" in report
    assert "mongodb://dogs:***@127.0.0.1:" in report


def test_floor_quick(mongodb_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The raw claim loop claims every job once; the inserts store every document."""
    status = floor.main(["--quick", "--uri", mongodb_uri])
    output = capsys.readouterr().out
    assert status == 0, output
    assert "FAILED" not in output
    assert output.count("findOneAndUpdate, ") == 4, "1 and 8 partitions, async and sync"
    assert "insert_many, unordered" in output
    assert "insert_one, one at a time" in output


def test_floor_ratio_needs_both_figures() -> None:
    assert ratio(50.0, 100.0) == 0.5
    assert ratio(None, 100.0) is None
    assert ratio(50.0, 0.0) is None


def test_scheduling_quick(mongodb_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    status = scheduling.main(["--quick", "--uri", mongodb_uri])
    output = capsys.readouterr().out
    assert status == 0, output
    assert "FAILED" not in output
    assert "schedule_many of 5,000 (jobs/s)" in output
    assert "schedule() p99 (ms)" in output
    for row in ("Unique(period=10m), new key", "debounce, taken key", "throttle, new key"):
        assert row in output  # issue 27: the options beside the plain call
    assert "490 Debounced" not in output  # the quick storm: 300 calls on 10 keys
    assert "290 Debounced, 10 Scheduled" in output
    assert "tagged records (3 tags), tags index" in output


def test_many_names_quick(mongodb_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    status = many_names.main(["--quick", "--uri", mongodb_uri])
    output = capsys.readouterr().out
    assert status == 0, output
    assert "FAILED" not in output
    assert output.count("byJobName") >= 2
    assert output.count("globalPriority") >= 2
    assert "Keys examined per claim" in output


@pytest.mark.parametrize(
    ("module", "argv"),
    [
        (floor, ["--jobs", "0"]),
        (scheduling, ["--singles", "0"]),
        (many_names, ["--jobs", "10"]),
    ],
)
def test_the_floor_benchmarks_reject_a_bad_size(module: ModuleType, argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        module.main(argv)


#: Half the --quick soak at its pace (its jobs, minutes and sampling period halved): 12 s of
#: production instead of 24 s, the same 8 samples, the same checks. The script's run is the
#: same at any length; --quick's own size is what `python -m benchmarks.soak --quick` runs.
SOAK_ARGS: Final = [
    "--quick",
    "--jobs",
    str(soak.QUICK_JOBS // 2),
    "--minutes",
    str(soak.QUICK_MINUTES / 2),
    "--sample-every",
    str(soak.QUICK_SAMPLE_EVERY / 2),
]


def test_soak_quick(mongodb_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two worker processes under injected faults: nothing lost, nothing run twice, no growth."""
    report, chart = tmp_path / "soak.json", tmp_path / "soak-rss.svg"
    status = soak.main(
        [*SOAK_ARGS, "--uri", mongodb_uri, "--json", str(report), "--chart", str(chart)]
    )
    output = capsys.readouterr().out
    assert status == 0, output
    assert "FAILED" not in output
    assert "passed: no growth after warm-up, 0 lost, 0 run twice" in output
    result = json.loads(report.read_text())
    jobs = soak.QUICK_JOBS // 2
    assert result["scheduled"] == result["markers"] == result["success_rows"] == jobs
    assert result["lost"] == result["doubles"] == result["jobs_with_two_successes"] == 0
    assert all(final["by_kind"] for final in result["worker_finals"]), "faults were injected"
    assert len(result["growth"]) == 2 * 3, "RSS, descriptors and tasks of each worker"
    assert chart.read_text().count("<polyline") == 2
    redrawn = tmp_path / "redrawn.svg"
    assert soak.main(["--replot", str(report), "--chart", str(redrawn)]) == 0
    assert redrawn.read_text() == chart.read_text(), "the report holds everything the chart needs"


def test_soak_growth_check_flags_a_leak_and_not_a_plateau() -> None:
    plateau = [(float(t), 50.0 + min(t, 20) / 10) for t in range(0, 90, 3)]
    leak = [(float(t), 50.0 + t / 3) for t in range(0, 90, 3)]
    assert soak.growth_check(0, "rss_mib", plateau, margin=1.0).ok
    leaking = soak.growth_check(0, "rss_mib", leak, margin=1.0)
    assert not leaking.ok
    assert leaking.slope_per_min == pytest.approx(20.0)
    assert not soak.growth_check(0, "tasks", leak[:2], margin=1.0).ok, "too few samples"


def test_soak_rejects_a_bad_size() -> None:
    with pytest.raises(SystemExit):
        soak.main(["--jobs", "0"])
    with pytest.raises(SystemExit):
        soak.main(["--error-rate", "0.9"])


def test_backlog_quick(mongodb_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    status = backlog.main(["--quick", "--fresh", "--uri", mongodb_uri])
    output = capsys.readouterr().out
    assert status == 0, output
    assert "FAILED" not in output
    assert output.count("byJobName") >= 4  # explain at both sizes, two claim loops
    assert output.count("globalPriority") >= 4
    assert "Keys examined per claim" in output
    assert "Big / small" in output
    assert "claims start when it is ready" in output  # the fresh worker's setup said so


@pytest.mark.parametrize(
    "argv",
    [["--drain", "0"], ["--records", "100", "--small", "200"], ["--drain", "1500"]],
)
def test_backlog_rejects_a_bad_size(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        backlog.main(["--quick", *argv])


def test_crash_fleet_quick(capsys: pytest.CaptureFixture[str]) -> None:
    # Its own mongod (no --uri): the quick size SIGKILLs mongod once, for 3 s, and restarts it.
    assert crash_fleet.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "ran to the end, record gone, no history row" in out
    assert "Faults: 3 worker kills, 1 mongod outages" in out
    assert "jobs with two counted successes" in out
    assert "Result: ok" in out


def test_crash_workflows_quick(mongodb_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert crash_workflows.main(["--quick", "--uri", mongodb_uri]) == 0
    out = capsys.readouterr().out
    assert "SIGKILLs inside releases" in out
    assert "Longest hold after the last kill" in out
    assert "Result: ok" in out


def test_crash_workflows_rejects_a_bad_size() -> None:
    with pytest.raises(SystemExit):
        crash_workflows.main(["--workflows", "0"])


def test_crash_fleet_rejects_a_bad_size() -> None:
    with pytest.raises(SystemExit):
        crash_fleet.main(["--jobs", "0"])
    with pytest.raises(SystemExit):  # an outage no longer than the lock proves nothing
        crash_fleet.main(["--outage-seconds", "2"])
    with pytest.raises(SystemExit):  # a server given by --uri is not ours to kill
        crash_fleet.main(["--uri", "mongodb://localhost", "--outages", "1"])


def test_following_quick(
    mongodb_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = following.main(["--quick", "--uri", mongodb_uri, "--out", str(tmp_path)])
    output = capsys.readouterr().out
    assert status == 0, output
    assert "FAILED" not in output
    report = (tmp_path / "following.md").read_text()
    assert "| Store | Handler | Interval (s) |" in report
    assert report.count("| ok |") == 6 + 4
    assert "store_logs with 10 lines per job costs" in report


def test_workflows_quick(
    mongodb_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks import workflows

    status = workflows.main(["--quick", "--uri", mongodb_uri, "--out", str(tmp_path)])
    output = capsys.readouterr().out
    assert status == 0, output
    assert "FAILED" not in output
    for scenario in ("plain jobs", "fan-out/fan-in", "batch", "chain (idle)"):
        assert scenario in output
    assert "idle release latency: p50" in output
    report = (tmp_path / "workflows.md").read_text()
    assert report.count("| ok |") == 4
    results = json.loads((tmp_path / "workflows.json").read_text())["results"]
    assert [r["scenario"] for r in results] == [
        "plain jobs",
        "fan-out/fan-in",
        "batch",
        "chain (idle)",
    ]


def test_durable_quick(
    mongodb_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = durable.main(["--quick", "--uri", mongodb_uri, "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "record writes per recorded step: 1.00" in out
    assert "at most 0 commands sent while a handler replayed them, 0 step writes" in out
    assert (tmp_path / "durable.md").exists()
    assert (tmp_path / "durable.json").exists()


def test_durable_rejects_a_bad_size() -> None:
    with pytest.raises(SystemExit):
        durable.main(["--jobs", "0"])
