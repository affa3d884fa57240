#!/usr/bin/env bash
# Per-kernel Nsight Compute sections of saved superoptimize results (device only).
# Usage: bash benchmarks/ncu_saved.sh OUTDIR LABEL=SAVE_DIR/ugraphs.json:INDEX[:FIELD=VALUE,...] ...
# Each LABEL gets LABEL.time.txt (benchmarks/profile_saved.py: kernels, schedules, graph µs with
# the L2 flushed; the optional FIELD=VALUE list overrides every kernel's tuned schedule) and
# LABEL.ncu.txt (SpeedOfLight, LaunchStats, Occupancy, WarpStateStats and MemoryWorkloadAnalysis
# of the first launch of each kernel; ncu flushes the caches before each profiled kernel and,
# with --clock-control none, leaves the clocks alone as the device's METHOD.md asks).
# NCU=0 skips the profiler (times only).
set -u
out=$1; shift
mkdir -p "$out"
for spec in "$@"; do
  label=${spec%%=*}
  IFS=: read -r file idx over <<< "${spec#*=}"
  python3 benchmarks/profile_saved.py "$file" "$idx" $over > "$out/$label.time.txt" 2>&1
  n=$(grep -c "^mf_" "$out/$label.time.txt")
  if [ "${NCU:-1}" != 0 ]; then
    ncu --clock-control none --section SpeedOfLight --section LaunchStats --section Occupancy \
        --section WarpStateStats --section MemoryWorkloadAnalysis -c "$n" \
        python3 benchmarks/profile_saved.py "$file" "$idx" $over > "$out/$label.ncu.txt" 2>&1
  fi
  echo "$label: $(tail -1 "$out/$label.time.txt")"
done
