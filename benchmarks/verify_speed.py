"""Speed of the prime-field verifier on this CPU: a gqa b=1 μGraph checked to 2^-64.

Run:  PYTHONPATH=. python benchmarks/verify_speed.py [--repeats 5] [--out benchmarks/results/verify_speed.md]

Measures (median of repeats, fresh seeds):
- one-shot ``verify(gqa b=1, hand-written μGraph, 2^-64)``: analysis, reference and candidate
  in the field for every trial, and the float64 cross-check of both;
- the same without the float64 check;
- per candidate with a warm ``Verifier`` (reference values cached, as the search uses it),
  over Mirage's 28 published gqa μGraphs;
- the cost of one trial (reference + candidate in both fields, fresh caches);
and, for context, one-shot times of the other hand-written / example μGraphs.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import statistics
import subprocess
import time
from pathlib import Path

import numpy as np

from mirage_formal import workloads as W
from mirage_formal.ir.mirage import load_mirage
from mirage_formal.semantics.field import FieldEvaluator, FieldTrial
from mirage_formal.verify import Verifier, verify
from mirage_formal.verify.examples import qknorm_fused

ROOT = Path(__file__).resolve().parents[1]
CKPT = Path("/work/shared/mirage_checkpoints/gqa_bs1.json")


def _median(f: object, repeats: int) -> tuple[float, object]:
    times, last = [], None
    for i in range(repeats):
        t = time.perf_counter()
        last = f(i)  # type: ignore[operator]
        times.append(time.perf_counter() - t)
    return statistics.median(times), last


def machine() -> str:
    try:
        model = next(line.split(":", 1)[1].strip() for line in
                     subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
                     if line.startswith("Model name"))
    except (StopIteration, OSError):
        model = platform.processor()
    import galois

    return (f"{model}, {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} "
            f"cores; Python {platform.python_version()}, numpy {np.__version__}, galois {galois.__version__}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "verify_speed.md"))
    args = ap.parse_args()
    r = args.repeats
    ref = W.program("gqa", 1)
    hw = W.handwritten("gqa", 1)
    rows: list[tuple[str, str]] = []

    t_full, v = _median(lambda i: verify(ref, hw, seed=1000 + i), r)
    assert v.accepted  # type: ignore[attr-defined]
    rows.append(("one-shot verify(), with float64 check", f"{t_full:.3f} s"))
    t_nofloat, v = _median(lambda i: verify(ref, hw, seed=2000 + i, float_check=False), r)
    rows.append(("one-shot verify(), field test only", f"{t_nofloat:.3f} s"))
    rows.append(("trials to 2^-64 / per-trial bound",
                 f"{v.trials} / 2^{np.log2(v.per_trial_bound):.1f}"))  # type: ignore[attr-defined]

    def one_trial(i: int) -> None:
        ev = FieldEvaluator(FieldTrial(3000 + i, 0))
        ev.outputs(ref)
        ev.outputs(hw)

    t_trial, _ = _median(one_trial, r)
    rows.append(("cost per trial (reference + candidate, cold)", f"{t_trial:.3f} s"))

    if CKPT.exists():
        cands = load_mirage(CKPT, [n.attr("name") for n in ref.inputs])
        ver = Verifier(ref, seed=7)
        ver.check(cands[0])  # warms the reference's values
        times = []
        for c in cands[1:]:
            t = time.perf_counter()
            assert ver.check(c).accepted
            times.append(time.perf_counter() - t)
        rows.append((f"warm Verifier.check, Mirage's gqa μGraphs ({len(times)}), median",
                     f"{statistics.median(times):.3f} s"))
        ver = Verifier(ref, seed=7, float_check=False)
        ver.check(cands[0])
        times = []
        for c in cands[1:]:
            t = time.perf_counter()
            ver.check(c)
            times.append(time.perf_counter() - t)
        rows.append(("  same, field test only", f"{statistics.median(times):.3f} s"))

    others = [("rmsnorm b=1 (hand-written)", W.program("rmsnorm", 1), W.handwritten("rmsnorm", 1)),
              ("qknorm_gqa b=1 (fused example)", W.program("qknorm_gqa", 1),
               qknorm_fused(q=256, d=64, kv=4096)),
              ("qknorm_gqa b=1, Mirage's wrong scores", W.program("qknorm_gqa", 1),
               qknorm_fused(q=256, d=64, kv=4096, wrong=True))]
    ctx = []
    for name, p, c in others:
        t = time.perf_counter()
        v = verify(p, c, seed=11)
        ctx.append((name, f"{v.status}, {v.trials} trials at 2^{np.log2(v.per_trial_bound):.1f}, "
                          f"{time.perf_counter() - t:.2f} s"))  # type: ignore[attr-defined]

    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Verifier speed (benchmarks/verify_speed.py)",
        "",
        f"- date: {date}",
        f"- machine: {machine()}",
        f"- command: `PYTHONPATH=. python benchmarks/verify_speed.py --repeats {r}`",
        f"- field: p = {v.p}, q = {v.q}; bound asked 2^-64; medians of {r} repeats",  # type: ignore[attr-defined]
        "",
        "## gqa b=1 (Q 2x256x64, K 2x64x4096, V 2x4096x64), hand-written FlashDecoding μGraph",
        "",
        "| measure | value |",
        "|---|---|",
        *[f"| {a} | {b} |" for a, b in rows],
        "",
        "## Other programs (one-shot, seed 11)",
        "",
        "| candidate | verdict |",
        "|---|---|",
        *[f"| {a} | {b} |" for a, b in ctx],
        "",
    ]
    text = "\n".join(lines)
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(args.out).with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(args.out)


if __name__ == "__main__":
    main()
