"""Time only the PyTorch baselines of benchmark rows, as benchmarks/gpu_optimize.py times them.

For each row (``WORKLOAD:B`` or ``outside:NAME:B``): the program's ops one by one, eager and
torch.compile, and (where it has one) the idiomatic form (``gpu_bench.torch_idiomatic``:
F.layer_norm, F.rms_norm, softmax, scaled_dot_product_attention), eager and compiled; each replayed as a CUDA
graph under triton ``do_bench`` (L2 flushed), the median of 5 interleaved rounds, on inputs
drawn as gpu_optimize.py draws them; ``$OUT/baselines_only.json``. No superoptimize: a quick
check of whether a recorded row's best baseline still stands. A ratio against our kernels still needs them timed in the same run
(gpu_optimize.py).

Usage (device, repository root, z3/galois pack on PYTHONPATH):
    python3 benchmarks/baselines_only.py gqa:1 mha:8 outside:vit_attention:1
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

ROUNDS = 5


def main() -> int:
    import numpy as np
    import torch
    from gpu_bench import bench, graphed, torch_dtype, torch_idiomatic, torch_program
    from gpu_optimize import load_program, parse_row

    from mirage_formal.codegen.validate import _overflows, random_device_inputs

    out = []
    for spec in sys.argv[1:]:
        name, b = parse_row(spec)
        prog = load_program(name, b)
        r = 0.5  # (as gpu_optimize.py: halved while an fp16 tensor of the program overflows)
        for _ in range(10):
            if not _overflows(prog, random_device_inputs(prog, np.random.default_rng(7), -r, r)):
                break
            r /= 2
        gen = torch.Generator(device="cuda").manual_seed(7)
        xs = [((torch.rand(n.shape, device="cuda", generator=gen) - 0.5) * (2 * r))
              .to(torch_dtype(n.dtype)) for n in prog.inputs]
        fn = torch_program(prog)
        replays = {"eager": graphed(fn, xs), "compile": graphed(torch.compile(fn), xs)}
        idiom = torch_idiomatic(prog)
        if idiom is not None:
            replays |= {"idiom": graphed(idiom[0], xs),
                        "idiom_compile": graphed(torch.compile(idiom[0]), xs)}
        rounds: dict[str, list[float]] = {k: [] for k in replays}
        for _ in range(ROUNDS):
            for k, f in replays.items():
                rounds[k].append(bench(f))
        med = {k: statistics.median(v) for k, v in rounds.items()}
        row = {"row": spec, "calls": idiom[1] if idiom else [],
               **{f"{k}_graph_us": v for k, v in med.items()}, "best_baseline_us": min(med.values())}
        out.append(row)
        cells = " | ".join(f"{k} {v:.1f}" for k, v in med.items())
        print(f"| {spec} | {cells} | best {row['best_baseline_us']:.1f} |", flush=True)
        # (after every row: a run cut short by its time limit keeps the rows it finished)
        (Path(os.environ.get("OUT", ".")) / "baselines_only.json").write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
