"""``mirage-formal codegen PROGRAM``: emit CUDA for a program or μGraph, compile it with NVRTC,
and on a GPU validate (and optionally time) it.

Writes ``<out>/<name>.cu`` (the whole translation unit) and ``<out>/<name>.cubin`` when
``--out`` is given. Exit codes: 0 compiled (and validated, on a GPU), 1 a kernel failed
validation (its source is printed), 2 bad input or a compile error (with the NVRTC log).
Without a GPU it compiles only and says so.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from mirage_formal import workloads
from mirage_formal.codegen import SIMPLE, EmitOptions, compile_graph, gpu_available
from mirage_formal.ir.graph import KernelGraph


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("codegen", help="emit, compile (NVRTC) and validate CUDA for a μGraph")
    p.add_argument("program", help=f"a workload ({', '.join(sorted(workloads.PROGRAMS))}) or a μGraph file")
    p.add_argument("--batch", type=int, default=1, help="batch size b (default 1)")
    p.add_argument("--handwritten", action="store_true", help="use the workload's hand-written μGraph")
    p.add_argument("--index", type=int, default=0, help="which μGraph of a multi-graph file")
    p.add_argument("--out", default=None, help="directory for the .cu and .cubin files")
    p.add_argument("--arch", default=None, help="target, e.g. sm_90 (default: the GPU's, else sm_90)")
    p.add_argument("--simple", action="store_true", help="no tensor cores, no prefetching")
    p.add_argument("--time", action="store_true", help="on a GPU, also time it (CUDA events)")
    p.add_argument("--seed", type=int, default=None)
    p.set_defaults(func=run)


def _load(args: argparse.Namespace) -> tuple[str, KernelGraph, KernelGraph]:
    """(name, graph to compile, reference program)."""
    if args.program in workloads.PROGRAMS:
        prog = workloads.program(args.program, args.batch)
        g = workloads.handwritten(args.program, args.batch) if args.handwritten else prog
        return f"{args.program}_b{args.batch}{'_hw' if args.handwritten else ''}", g, prog
    from mirage_formal.ir.serialize import load_any

    graphs = load_any(args.program)
    g = graphs[args.index]
    return Path(args.program).stem + (f"_{args.index}" if len(graphs) > 1 else ""), g, g


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def run(args: argparse.Namespace) -> int:
    name, g, ref = _load(args)
    gpu = gpu_available()
    opts = SIMPLE if args.simple else EmitOptions()
    cg = compile_graph(g, arch=args.arch, load=gpu and args.arch is None, opts=opts)
    print(f"{name}: {len(cg.kernels)} kernel launch(es), {cg.arch}, cubin {len(cg.cubin)} bytes")
    print(cg.summary())
    if args.out:
        out = Path(args.out)
        _write(out / f"{name}.cu", cg.source.encode())
        _write(out / f"{name}.cubin", cg.cubin)
        print(f"wrote {out / (name + '.cu')} and {out / (name + '.cubin')}")
    if not cg.loaded:
        print("no GPU here (or another --arch): compiled only, not validated")
        return 0
    from mirage_formal.codegen.timing import time_graph
    from mirage_formal.codegen.validate import validate

    rep = validate(cg, ref, trials=2, seed=args.seed)
    print(f"validation against the float64 program: {rep}")
    if not rep.ok:
        print(cg.source, file=sys.stderr)
        return 1
    if args.time:
        print(f"time: {time_graph(cg):.1f} µs per call (median, launches); "
              f"{time_graph(cg, graph=True):.1f} µs (CUDA-graph replay)")
    return 0
