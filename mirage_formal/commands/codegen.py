"""``mirage-formal codegen PROGRAM``: emit CUDA for a program or μGraph, compile it with NVRTC,
and on a GPU validate (and, with --time, time) it.

Writes ``<out>/<name>.cu`` (the whole translation unit) and ``<out>/<name>.cubin`` when
``--out`` is given. Exit codes: 0 compiled (and validated, on a GPU), 1 a kernel failed
validation (its source is printed), 2 bad input or a compile error (with the NVRTC log).
Without a GPU it compiles only and says so.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mirage_formal.codegen import SIMPLE, EmitOptions, compile_graph, gpu_available
from mirage_formal.commands._common import add_program, plain, program_from
from mirage_formal.errors import MirageError
from mirage_formal.ir.serialize import atomic_write_bytes


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("codegen", help="emit, compile (NVRTC) and validate CUDA for a μGraph",
                       description=plain(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_program(p)
    p.add_argument("--out", default=None, help="folder for the .cu and .cubin files")
    p.add_argument("--arch", default=None,
                   help="target, e.g. sm_90 (default: the GPU's, else sm_90); another GPU's "
                        "target compiles without validating")
    p.add_argument("--simple", action="store_true", help="no tensor cores, no prefetching")
    p.add_argument("--time", action="store_true", help="also time it on the GPU (CUDA events)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of the validation inputs (default: a fresh one, printed)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    prog = program_from(args)
    gpu = gpu_available()
    if args.time and not gpu:
        raise MirageError("--time needs a CUDA GPU and driver; none is usable here")
    if args.time and args.arch is not None:
        raise MirageError("--time runs the kernel on this GPU; leave --arch out")
    opts = SIMPLE if args.simple else EmitOptions()
    cg = compile_graph(prog.graph, arch=args.arch, load=gpu and args.arch is None, opts=opts)
    print(f"{prog.name}: {len(cg.kernels)} kernel launch(es), {cg.arch}, cubin {len(cg.cubin)} bytes")
    print(cg.summary())
    if args.out:
        out = Path(args.out)
        atomic_write_bytes(out / f"{prog.name}.cu", cg.source.encode())
        atomic_write_bytes(out / f"{prog.name}.cubin", cg.cubin)
        print(f"wrote {out / (prog.name + '.cu')} and {out / (prog.name + '.cubin')}")
    if not cg.loaded:
        print("no GPU here (or another --arch): compiled only, not validated")
        return 0
    from mirage_formal.codegen.timing import time_graph
    from mirage_formal.codegen.validate import validate

    rep = validate(cg, prog.reference, trials=2, seed=args.seed)
    print(f"validation against the float64 program: {rep}")
    if not rep.ok:
        print(cg.source, file=sys.stderr)
        return 1
    if args.time:
        print(f"time: {time_graph(cg):.1f} µs per call (median, launches); "
              f"{time_graph(cg, graph=True):.1f} µs (CUDA-graph replay)")
    return 0
