#!/usr/bin/env bash
# Every table of docs/benchmarks.md in one sitting, on this machine, into benchmarks/results/.
#   bash benchmarks/regenerate.sh            everything (about an hour on 2 cores)
#   bash benchmarks/regenerate.sh claims     only the steps whose name contains "claims"
#   FROM=claims bash benchmarks/regenerate.sh   resume a sitting at the step named "claims"
# Each step's output goes to benchmarks/results/<step>.txt (and its --out files); the start,
# the duration and the exit status of each step go to benchmarks/results/REGENERATED.md.
# Run it on a quiet machine: nothing else should share the cores meanwhile. The sizes keep
# the sitting near an hour; add --repeat to a step for the spread of several runs.
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
OUT=benchmarks/results
ONLY="${1:-}"
FROM="${FROM:-}"
mkdir -p "$OUT"
LOG="$OUT/REGENERATED.md"
if [ -n "$FROM" ]; then
    echo "| (resumed at $FROM, commit $(git rev-parse --short HEAD)) | $(date -u '+%H:%M:%S') | | |" >>"$LOG"
elif [ -z "$ONLY" ]; then
    {
        echo "# The sitting that produced these results"
        echo
        echo "Started $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB,"
        echo "$(uname -sr), $("$PY" --version), commit $(git rev-parse --short HEAD)."
        echo
        echo "| Step | Started (UTC) | Seconds | Exit |"
        echo "| --- | --- | ---: | ---: |"
    } >"$LOG"
fi
FAILED=0
step() {
    local name=$1
    shift
    if [ -n "$ONLY" ] && [[ "$name" != *"$ONLY"* ]]; then
        return
    fi
    if [ -n "$FROM" ]; then
        [ "$name" = "$FROM" ] || return
        FROM=""
    fi
    local started=$SECONDS began
    began=$(date -u '+%H:%M:%S')
    printf '\n==> %s: %s\n' "$name" "$*"
    "$PY" -m "$@" 2>&1 | tee "$OUT/$name.txt"
    local status=${PIPESTATUS[0]}
    [ "$status" -eq 0 ] || FAILED=1
    echo "| $name | $began | $((SECONDS - started)) | $status |" >>"$LOG"
}

step floor benchmarks.floor
step throughput benchmarks.throughput --repeat 2 --watch-changes both --out "$OUT"
step batch1 benchmarks.throughput --store mongo --store memory --handler async \
    --claim-batch-size 1 --repeat 2 --out "$OUT/batch1"
step wide benchmarks.throughput --store mongo --handler async --workers-count 128 \
    --claim-batch-size 32 --repeat 2 --out "$OUT/wide"
for partitions in 8 1; do
    step "instances-4-p$partitions" benchmarks.throughput --store mongo --handler async \
        --instances 4 --n-partitions "$partitions" --lag-samples 0 \
        --out "$OUT/instances/i4-p$partitions"
done
step adaptive benchmarks.adaptive --store mongo --store memory --memory-jobs 10000
step adaptive-instances benchmarks.adaptive --store mongo --instances 4 --config fixed \
    --config defaults --config tuned
step claims benchmarks.claims --out "$OUT"
step pickup-streams benchmarks.pickup --mode streams --samples 1000 --out "$OUT/pickup/streams"
step pickup-poll-1s benchmarks.pickup --mode poll-1s --samples 100 --out "$OUT/pickup/poll-1s"
step pickup-poll-3s benchmarks.pickup --mode poll-3s --samples 50 --out "$OUT/pickup/poll-3s"
step scheduling benchmarks.scheduling
step many_names benchmarks.many_names
step backlog benchmarks.backlog --fresh
step telemetry_overhead benchmarks.telemetry_overhead --repeat 3 --calls --out "$OUT"
step global_limit benchmarks.global_limit --repeat 2 --out "$OUT"
step explain_stats benchmarks.explain_stats
step dashboard_pages benchmarks.dashboard_pages --out "$OUT"
step time_to_error benchmarks.time_to_error --out "$OUT"
step bulk_retry benchmarks.bulk_retry
step charts benchmarks.charts "$OUT" docs/assets/benchmarks

[ -n "$ONLY" ] || echo >>"$LOG" && echo "Ended $(date -u '+%Y-%m-%d %H:%M UTC')." >>"$LOG"
exit "$FAILED"
