#!/usr/bin/env bash
# Run benchmarks/gpu_optimize.py on the device machine, one row at a time, each under its own
# time limit, and leave each row's table row flat under $OUT (the device tool brings back at
# most 8 files, two folders deep): ROW.json, all.log, and every row's tuning log
# (ROW.meas.jsonl) in one meas.tar.gz (four rows' logs as files had made nine: s51 c2, c3).
# Usage (device, repository root): bash benchmarks/device_rows.sh ROW:BUDGET_S ...
#   e.g. bash benchmarks/device_rows.sh gqa:1:140 gated_mlp:1:250
# The z3/galois pack (.sitepack, see DEVICE_RUNS.md) must be carried.
set -u
mkdir -p /tmp/site && tar -xJf .sitepack/site.tar.xz -C /tmp/site || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for spec in "$@"; do
    row=${spec%:*}; budget=${spec##*:}; tag=${row//:/_}
    timeout $((${budget%.*} + 90)) python3 benchmarks/gpu_optimize.py --rows "$row" --workers 15 \
        --budget "$budget" --gpu-top 8 --out "/tmp/go/$tag" >> "$OUT/all.log" 2>&1
    cp "/tmp/go/$tag/gpu_optimize.json" "$OUT/$tag.json" 2>/dev/null
    cp "/tmp/go/$tag/measurements.jsonl" "/tmp/go/$tag.meas.jsonl" 2>/dev/null
    # (the workload is the row less its batch: outside rows have a colon in their name)
    grep -hF "| ${row%:*} |" "/tmp/go/$tag/gpu_optimize.md" 2>/dev/null | tail -1
done
(cd /tmp/go && ls *.meas.jsonl > /dev/null 2>&1 && tar -czf "$OUT/meas.tar.gz" *.meas.jsonl)
