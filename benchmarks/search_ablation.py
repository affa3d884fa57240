"""Pruning ablation in the style of Mirage's Table 5, for rmsnorm: for max block-graph ops
5..11, states visited and time with and without abstract-expression pruning.

Each run searches the space derived from the program (the default) with only
``max_block_ops`` changed (``--preset norm`` for the shipped preset as overrides, as before). Unpruned runs
(KeepAll) are capped at ``--cap`` seconds and reported as cut off with the states visited so far;
pruned runs have a budget of ``--budget`` seconds.

    python benchmarks/search_ablation.py --pruner oracle --checker field
    python benchmarks/search_ablation.py --pruner expr --checker f64

Writes benchmarks/results/search_ablation.{json,md} (or --out PREFIX).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_common import machine, make_checker, make_pruner

from mirage_formal import workloads
from mirage_formal.search import derive_config, run_search


def run(args: argparse.Namespace, ops: int, pruner_kind: str, cap: float) -> dict[str, Any]:
    prog = workloads.program("rmsnorm", args.batch)
    cfg = derive_config(prog, args.preset, overrides={"max_block_ops": ops})
    r = run_search(prog, cfg, make_pruner(pruner_kind, prog), make_checker(args.checker, prog),
                   workers=args.workers, progress=False, budget_s=cap)
    row = {"max_block_ops": ops, "pruner": pruner_kind, "time_s": round(r.elapsed_s, 2),
           "cut_off": r.stopped is not None, "units": f"{r.units_done}/{r.units_total}",
           "visited": r.stats.visited, "pruned_oracle": r.stats.pruned_oracle,
           "pruned_shape": r.stats.pruned_shape, "pruned_bound": r.stats.pruned_bound,
           "verified": r.stats.verified, "accepted": len(r.accepted),
           "best_cost_us": round(r.accepted[0].cost.seconds * 1e6, 3) if r.accepted else None}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pruner", default="oracle", help="the pruned arm: oracle | expr")
    ap.add_argument("--checker", default="field", help="field | f64")
    ap.add_argument("--ops", type=int, nargs="*", default=list(range(5, 12)))
    ap.add_argument("--cap", type=float, default=120.0, help="seconds per unpruned run")
    ap.add_argument("--budget", type=float, default=600.0, help="seconds per pruned run")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--preset", default=None, help="overrides on the derived space (e.g. norm)")
    ap.add_argument("--arms", default="both", help="both | pruned | unpruned")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "search_ablation"))
    args = ap.parse_args()
    rows = []
    for ops in args.ops:
        if args.arms in ("both", "pruned"):
            rows.append(run(args, ops, args.pruner, args.budget))
        if args.arms in ("both", "unpruned"):
            rows.append(run(args, ops, "none", args.cap))
    if args.arms != "both":
        out = Path(args.out)
        Path(f"{out}.json").write_text(json.dumps({"meta": {"pruner": args.pruner, "checker": args.checker,
                                                            "cap_s": args.cap, "budget_s": args.budget,
                                                            "workers": args.workers, "machine": machine()},
                                                   "rows": rows}, indent=1) + "\n")
        return
    meta = {"pruner": args.pruner, "checker": args.checker, "cap_s": args.cap,
            "budget_s": args.budget, "workers": args.workers, "machine": machine()}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{out}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    md = [f"# search_ablation (rmsnorm, {'derived space' if args.preset is None else 'derived + preset ' + args.preset})", "",
          f"pruned arm: `{args.pruner}`; unpruned arm: KeepAll capped at {args.cap} s (cut-off runs "
          f"marked); checker `{args.checker}`; workers {args.workers}. Machine: {meta['machine']}", "",
          "| max block ops | pruned: visited | pruned: time s | unpruned: visited | unpruned: time s "
          "| unpruned cut off | accepted (pruned / unpruned) |", "|---|---|---|---|---|---|---|"]
    for a, b in zip(rows[::2], rows[1::2], strict=True):
        md.append(f"| {a['max_block_ops']} | {a['visited']} | {a['time_s']}{' (cut)' if a['cut_off'] else ''} "
                  f"| {b['visited']} | {b['time_s']} | {'yes, at ' + b['units'] + ' units' if b['cut_off'] else 'no'} "
                  f"| {a['accepted']} / {b['accepted']} |")
    Path(f"{out}.md").write_text("\n".join(md) + "\n")


if __name__ == "__main__":
    main()
