"""Process replay for emitter refactors: hash every kernel the emitter prints for a corpus.

The corpus: every workload program at b=1 and b=8, the hand-written μGraphs, Mirage's
published μGraphs (when ../shared/mirage_checkpoints or ./shared/mirage_checkpoints is there),
each under the default schedule, SIMPLE, the fp32-tile path and every candidate schedule of
each kernel (splits forced by a large SM count). Run with --write before a refactor and with
--check after it: a refactor that is meant to change nothing must print identical kernels.

Usage: PYTHONPATH=. python benchmarks/process_replay.py --write /tmp/before.json
       PYTHONPATH=. python benchmarks/process_replay.py --check /tmp/before.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from gpu_bench import CKPT_FILES, find_checkpoints  # noqa: E402

from mirage_formal import workloads  # noqa: E402
from mirage_formal.codegen import SIMPLE, Schedule, candidate_schedules, emit_graph, launches  # noqa: E402
from mirage_formal.ir.graph import KernelGraph  # noqa: E402
from mirage_formal.ir.mirage import load_mirage  # noqa: E402


def corpus() -> list[tuple[str, KernelGraph]]:
    graphs = []
    for n in sorted(workloads.PROGRAMS):
        for b in (1, 8):
            graphs.append((f"{n}:b{b}", workloads.program(n, b)))
            if n in workloads.HANDWRITTEN:
                graphs.append((f"{n}:b{b}:handwritten", workloads.handwritten(n, b)))
    ck = find_checkpoints()
    if ck is not None:
        for (name, _), (f, names) in CKPT_FILES.items():
            for i, g in enumerate(load_mirage(ck / f, names)):
                graphs.append((f"{name}:mirage#{i}", g))
    return graphs


def hashes() -> dict[str, str]:
    out = {}

    def h(g: KernelGraph, **kw: object) -> str:
        return hashlib.sha256(emit_graph(g, **kw)[0].encode()).hexdigest()  # type: ignore[arg-type]

    for label, g in corpus():
        out[f"{label}:default"] = h(g)
        out[f"{label}:simple"] = h(g, opts=SIMPLE)
        out[f"{label}:fp32"] = h(g, opts=Schedule(async_copy=False, ldmatrix=False))
        for la in launches(g, 128):
            for j, s in enumerate(candidate_schedules(la.graph, sm_count=4096)):
                out[f"{label}:{la.graph.key[:8]}:{s.short()}:{j}"] = h(g, schedules={la.graph.key: s})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write")
    g.add_argument("--check")
    args = ap.parse_args()
    now = hashes()
    if args.write:
        Path(args.write).write_text(json.dumps(now, indent=0, sort_keys=True) + "\n")
        print(f"{len(now)} kernels hashed into {args.write}")
        return 0
    before = json.loads(Path(args.check).read_text())
    diff = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
    for k in diff[:40]:
        print("changed:", k)
    print(f"{len(now)} kernels, {len(diff)} changed")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
