"""Soundness of the prime-field verifier, measured: mutants rejected, false-accept rates.

Run:  PYTHONPATH=. python benchmarks/verify_soundness.py [--seeds 200] [--out benchmarks/results/verify_soundness.md]

1. Every single-change mutant (verify/mutate.py) of hand-written and Mirage-published μGraphs
   is checked to 2^-64; mutants whose float64 outputs equal the original's (error < 1e-9) are
   equivalent and must be accepted; all others must be rejected.
2. In tiny fields wrong mutants pass single trials; per field, the measured single-trial pass
   rate over many seeds is compared with the per-trial bound computed for the same pairs.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import time
from pathlib import Path

import numpy as np

from mirage_formal import workloads as W
from mirage_formal.ir.graph import KernelGraph
from mirage_formal.ir.mirage import load_mirage
from mirage_formal.verify import Verifier
from mirage_formal.verify.examples import qknorm_fused
from mirage_formal.verify.mutate import mutants

ROOT = Path(__file__).resolve().parents[1]
CKPT = Path("/work/shared/mirage_checkpoints")


def corpus() -> list[tuple[str, KernelGraph, KernelGraph]]:
    out = [
        ("rmsnorm (small, hand-written)", W.program("rmsnorm", 1, h=256, n=128),
         W.handwritten("rmsnorm", 1, h=256, n=128)),
        ("gqa (small, hand-written)", W.program("gqa", 1, kv=512, q=32),
         W.handwritten("gqa", 1, kv=512, q=32, splits=2, row_blocks=2, kv_tile=64, combine_rows=16)),
        ("qknorm_gqa (small, fused)", W.program("qknorm_gqa", 1, q=16, d=4, kv=32), qknorm_fused()),
    ]
    for f, prog in [("gqa_bs1", "gqa"), ("rmsnorm_bs1", "rmsnorm")]:
        if (CKPT / f"{f}.json").exists():
            ref = W.program(prog, 1)
            g = load_mirage(CKPT / f"{f}.json", [n.attr("name") for n in ref.inputs])[0]
            out.append((f"{prog} b=1 (Mirage {f}.json[0], full size)", ref, g))
    return out


def mutant_table() -> list[str]:
    rows = ["| μGraph | mutants | equivalent (accepted) | wrong | rejected | wrongly accepted | by kind (wrong: rejected/total) |",
            "|---|---|---|---|---|---|---|"]
    for name, ref, g in corpus():
        v = Verifier(ref, seed=1)
        eq = eq_ok = wrong = rej = bad = 0
        kinds: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
        ms = mutants(g)
        for m in ms:
            d = v.check(m.graph)
            e = d.float64_max_rel_error
            if e is not None and e < 1e-9:
                eq += 1
                eq_ok += d.accepted
                continue
            wrong += 1
            kinds[m.kind][1] += 1
            if d.status == "rejected":
                rej += 1
                kinds[m.kind][0] += 1
            elif d.accepted:
                bad += 1
        by = ", ".join(f"{k} {a}/{b}" for k, (a, b) in sorted(kinds.items()))
        rows.append(f"| {name} | {len(ms)} | {eq} ({eq_ok}) | {wrong} | {rej} | {bad} | {by} |")
        print(rows[-1], flush=True)
    return rows


def tiny_field(p: int, q: int, seeds: int) -> list[str]:
    cases = [
        ("rmsnorm 1x4 @ 4x2", W.program("rmsnorm", 1, rows=1, h=4, n=2),
         W.handwritten("rmsnorm", 1, rows=1, h=4, n=2, col_tile=1, k_tile=2)),
        ("gqa 1 head, 2x2 @ 2x4", W.program("gqa", 1, heads=1, q=2, d=2, kv=4),
         W.handwritten("gqa", 1, heads=1, q=2, d=2, kv=4, splits=2, row_blocks=1, kv_tile=1,
                       combine_rows=1)),
    ]
    rows = []
    for name, ref, hw in cases:
        wrong = [m.graph for m in mutants(hw)]
        tried = passed = 0
        bounds: list[float] = []
        worst = -1.0
        per: dict[int, list[int]] = collections.defaultdict(lambda: [0, 0])
        per_b: dict[int, float] = {}
        for seed in range(seeds):
            v = Verifier(ref, seed=seed, p=p, q=q, bound=0.999, max_trials=1)
            for i, m in enumerate(wrong):
                d = v.check(m)
                if d.float64_max_rel_error is not None and d.float64_max_rel_error < 1e-9:
                    continue
                if d.trials == 0 or d.per_trial_bound is None:
                    continue
                tried += 1
                ok = d.status != "rejected"
                passed += ok
                per[i][0] += ok
                per[i][1] += 1
                per_b[i] = d.per_trial_bound
                bounds.append(d.per_trial_bound)
        for i, (a, n) in per.items():
            worst = max(worst, a / n - per_b[i])
        rows.append(f"| p={p}, q={q} | {name} | {len(per)} | {tried} | {passed} | {passed / tried:.4f} | "
                    f"{np.mean(bounds):.4f} | {min(bounds):.4f} | {worst:+.4f} |")
        print(rows[-1], flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "verify_soundness.md"))
    args = ap.parse_args()
    t0 = time.time()
    table = mutant_table()
    fields = ["| field | program | wrong mutants | single trials | passed | measured rate | mean bound | min bound | max(rate − own bound) over mutants |",
              "|---|---|---|---|---|---|---|---|---|"]
    for p, q in [(47, 23), (167, 83), (1019, 509)]:
        fields += tiny_field(p, q, args.seeds)
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    text = "\n".join([
        "# Verifier soundness (benchmarks/verify_soundness.py)", "",
        f"- date: {date}; {time.time() - t0:.0f} s",
        f"- command: `PYTHONPATH=. python benchmarks/verify_soundness.py --seeds {args.seeds}`", "",
        "## Single-change mutants, checked to 2^-64 (seed 1)", "",
        "Equivalent = float64 outputs within 1e-9 of the original's (excluded from the counts).", "",
        *table, "",
        "## False accepts at one trial in tiny fields", "",
        "Each wrong mutant checked with one trial per seed. The measured pass rate must stay",
        "below the computed per-trial bound (last column: the largest excess of a mutant's own",
        "rate over its own bound; negative means every mutant stayed below).",
        "", *fields, "",
    ])
    print(text)
    tmp = Path(args.out).with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(args.out)


if __name__ == "__main__":
    main()
