"""Does the shared-memory carveout cost a kernel time under the table's timing? (device only; a
probe, not a product measurement)

Each timed run of the table's method writes a 256 MB flush first (the driver's memset, or a
fill kernel like PyTorch's ``zero_``), a kernel that uses no shared memory, so the SMs may be
left in an L1-heavy configuration; a kernel that asks for ~85 KB of dynamic shared memory (the
fused rmsnorm kernel's ring) then needs the SMs reconfigured before its blocks start. This
times, as the table times a kernel (CUDA graph of the launch, flush before each of 100 runs,
events, median):

- an almost empty kernel (96 blocks of 160 threads, one store) asking for 0, 40, 85, 150 and
  200 KB of dynamic shared memory, after each flush; and after a fill flush that itself asks
  for the kernel's shared memory (the SMs then stay in the large-shared configuration);
- each ``--rows`` table winner after the same three flushes, on the same arrays.

If the empty kernel's time grows with its shared memory after the plain flushes but not after
the large-shared one, reconfiguration costs that much per run.

Usage (device): PYTHONPATH=. python3 benchmarks/carveout_probe.py [--rows rmsnorm:8,rmsnorm:1]
    [--rounds 2] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from mirage_formal.codegen.nvrtc import compile_cubin  # noqa: E402
from mirage_formal.codegen.runtime import DeviceArray, runtime  # noqa: E402
from mirage_formal.codegen.timing import FLUSH_BYTES, time_launch, write_flush  # noqa: E402
from mirage_formal.ir.dtypes import DType  # noqa: E402

#: (the dynamic shared memory is only asked for at the launch, never touched)
PROBE_SOURCE = r"""
extern "C" __global__ void __launch_bounds__(160) mf_probe_empty(float* out) {
  if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = 1.f;
}
extern "C" __global__ void __launch_bounds__(128) mf_probe_fill_smem(uint4* p) {
  p[(size_t)blockIdx.x * 128 + threadIdx.x] = make_uint4(0u, 0u, 0u, 0u);
}
"""
#: dynamic shared memory the empty kernel asks for, KB
SMEM_KB = (0, 40, 85, 150, 200)
#: what the large-shared fill asks for (the fused rmsnorm kernel's ring and alignment)
FILL_SMEM = 85 * 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="rmsnorm:8,rmsnorm:1")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    rt = runtime()
    stream = rt.stream()
    mod = rt.load(compile_cubin(PROBE_SOURCE, rt.arch, name="carveout_probe.cu"))
    fill_big = rt.function(mod, "mf_probe_fill_smem", FILL_SMEM)
    flush_buf = DeviceArray((FLUSH_BYTES // 4,), DType.F32, rt)
    out = DeviceArray((1,), DType.F32, rt)
    flushes: dict[str, Callable[[], None]] = {
        "memset": lambda: write_flush(rt, stream, "memset"),
        "fill": lambda: write_flush(rt, stream, "fill"),
        "fill asking 85 KB shared": lambda: rt.launch(
            fill_big, (FLUSH_BYTES // (16 * 128), 1, 1), 128, FILL_SMEM, stream, [flush_buf.ptr]),
    }
    targets: list[tuple[str, Callable[[], None]]] = []

    def empty(kb: int) -> Callable[[], None]:
        f = rt.function(mod, "mf_probe_empty", kb * 1024)
        return lambda: rt.launch(f, (96, 1, 1), 160, kb * 1024, stream, [out.ptr])

    targets += [(f"empty kernel, {kb} KB shared", empty(kb)) for kb in SMEM_KB]
    if a.rows:
        from retime_winners import winner

        from mirage_formal.codegen import compile_graph
        from mirage_formal.codegen.timing import device_inputs
        table = {f"{r['workload']}:{r['b']}": r
                 for r in json.loads((ROOT / "benchmarks/results/gpu_optimize_latest.json").read_text())}
        def graph_launch(name: str) -> Callable[[], None]:
            g, sched = winner(table[name])
            cg = compile_graph(g, schedules=sched)
            xs = device_inputs(cg, seed=3)
            outs = [DeviceArray(n.shape, n.dtype, rt) for n in cg.graph.outputs]
            ins, ous = [x.ptr for x in xs], [o.ptr for o in outs]

            def run() -> None:
                _ = (xs, outs)  # (the arrays live as long as the launch)
                cg.launch(ins, ous, stream)
            return run

        targets += [(f"{name} winner", graph_launch(name)) for name in a.rows.split(",")]
    results: dict[str, dict[str, list[float]]] = {t: {f: [] for f in flushes} for t, _ in targets}
    for _ in range(a.rounds):
        for tname, launch in targets:
            for fname, flush in flushes.items():
                results[tname][fname].append(round(time_launch(rt, stream, launch, flush), 2))
    rows: list[dict[str, Any]] = [{"target": t, **{f: statistics.median(v) for f, v in fs.items()},
                                   "rounds": fs} for t, fs in results.items()]
    if a.out:
        Path(a.out).write_text(json.dumps(rows, indent=1))
    print("| target | " + " | ".join(flushes) + " |")
    print("|---|" + "---|" * len(flushes))
    for r in rows:
        print(f"| {r['target']} | " + " | ".join(f"{r[f]:.2f}" for f in flushes) + " |")


if __name__ == "__main__":
    main()
