"""Do recorded Mirage μGraph measurements still describe the kernels the code emits? (CPU only)

``tune_bench.py --only-mirage`` logs one JSON line per Mirage checkpoint μGraph it tuned: the
μGraph (program, batch, ``mirage#i``) and the schedule its tuner chose. A measurement stays
valid for later code exactly when that code prints the same CUDA for that μGraph and
schedule. This script hashes the emitted source of every recorded (μGraph, schedule) pair
under the code on ``PYTHONPATH`` (``hash``), and compares two such hash files (``compare``).
Run ``hash`` once in a worktree of the commit that measured and once in the current tree.

Usage:
  PYTHONPATH=TREE:TREE/benchmarks python3 benchmarks/same_kernels.py hash LOGDIR OUT.json
  python3 benchmarks/same_kernels.py compare OLD.json NEW.json
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any


def recorded(logdir: Path) -> list[dict[str, Any]]:
    """Every ``mirage#i`` line of the tune_bench logs and row files under ``logdir``."""
    out = []
    for f in sorted([*logdir.rglob("*.log"), *logdir.rglob("*.jsonl")]):
        for line in f.read_text().splitlines():
            if line.startswith('{"workload"') and '"candidate": "mirage#' in line:
                out.append(json.loads(line))
    return out


def hash_sources(logdir: Path, out: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gpu_bench import CKPT_FILES, find_checkpoints
    from profile_saved import parse_schedules

    from mirage_formal.codegen import compile_graph, launches
    from mirage_formal.ir.mirage import load_mirage

    ck = find_checkpoints()
    if ck is None:
        raise SystemExit("same_kernels: ../shared/mirage_checkpoints not found beside the tree")
    graphs: dict[tuple[str, int], list[Any]] = {}
    hashes: dict[str, str] = {}
    for r in recorded(logdir):
        if not r.get("schedule"):
            continue
        name, b, idx = r["workload"], r["b"], int(r["candidate"].split("#")[1])
        key = f"{name}|{b}|{idx}|{r['schedule']}"
        if key in hashes:
            continue
        if (name, b) not in graphs:
            fname, names = CKPT_FILES[name, b]
            graphs[name, b] = load_mirage(ck / fname, names)
        g = graphs[name, b][idx]
        sched = parse_schedules(r["schedule"], [la.graph.key for la in launches(g, 128)])
        src = compile_graph(g, schedules=sched, load=False, arch="sm_90").source
        hashes[key] = hashlib.sha256(src.encode()).hexdigest()
    out.write_text(json.dumps(hashes, indent=0))
    print(f"{len(hashes)} (μGraph, schedule) pairs hashed")


def compare(old: Path, new: Path) -> int:
    a, b = json.loads(old.read_text()), json.loads(new.read_text())
    diff = sorted(k for k in a if a[k] != b.get(k))
    graphs = {tuple(k.split("|")[:3]) for k in a}
    print(f"{len(a)} pairs ({len(graphs)} μGraphs): {len(a) - len(diff)} emit the same CUDA, "
          f"{len(diff)} differ")
    for k in diff:
        print("  differs:", k)
    return 1 if diff else 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "hash":
        hash_sources(Path(sys.argv[2]), Path(sys.argv[3]))
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        raise SystemExit(compare(Path(sys.argv[2]), Path(sys.argv[3])))
    else:
        raise SystemExit(__doc__)
