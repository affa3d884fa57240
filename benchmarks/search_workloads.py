"""Must-show search runs: the eight benchmark programs from scratch with default options (the
search space derived from each program), each within a wall-clock budget on this CPU.

For each workload: time to first and to best accepted μGraph, when the *expert* structure was
first accepted (rmsnorm: one kernel accumulating the RMS in the matmul's loop; gated_mlp: both
matmuls reading one X tile in one kernel; lora: one kernel; gqa: FlashDecoding — a first kernel
splitting the key dimension over blocks and saving partial exp-sums and outputs, a second
combining them; ntrans: one kernel), states visited, pruned per tier, verified, accepted, and an
independent float64 re-check of every accepted μGraph.

    python benchmarks/search_workloads.py                                  # the product: mf.superoptimize
    python benchmarks/search_workloads.py --pruner expr --checker f64       # stand-ins

The default (``--checker product``) runs ``mirage_formal.superoptimize`` exactly as
``mirage-formal optimize`` does (Z3 oracle, float64 screen + prime-field verifier to 2^-64,
independent float64 re-check of every accepted μGraph, compile-only NVRTC check of the best).

Writes benchmarks/results/search_workloads.{json,md} (or --out PREFIX), and each workload's
accepted μGraphs (our JSON, best first) under PREFIX_ugraphs/<name>/.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_common import machine, make_checker, make_pruner, recheck_f64

from mirage_formal import workloads
from mirage_formal.ir.graph import ITER, KERNEL_OP, KernelGraph
from mirage_formal.optimize import superoptimize
from mirage_formal.search import WORKLOAD_PRESETS, derive_config, run_search

WORKLOADS = ["rmsnorm", "gated_mlp", "lora", "gqa", "mha", "mqa", "qknorm_gqa", "ntrans"]


def _gks(g: KernelGraph) -> list[Any]:
    return [n for n in g.kernels if n.op == KERNEL_OP]


def expert_rmsnorm(g: KernelGraph) -> bool:
    ks = g.kernels
    if len(ks) != 1 or ks[0].op != KERNEL_OP:
        return False
    bg = ks[0].attr("graph")
    kinds = {(n.attr("kind"), n.attr("fold")) for n in bg.nodes if n.op == "accum"}
    return bg.forloop > 1 and ("rms", 1) in kinds and any(n.op == "matmul" for n in bg.nodes)


def expert_gated_mlp(g: KernelGraph) -> bool:
    for k in _gks(g):
        bg = k.attr("graph")
        mms = [n for n in bg.nodes if n.op == "matmul"]
        if len(mms) >= 2 and any(a.src[0] is b.src[0] and a.src[0].op == ITER
                                 for a in mms for b in mms if a is not b):
            return True
    return False


def expert_single_kernel(g: KernelGraph) -> bool:
    ks = g.kernels
    return len(ks) == 1 and ks[0].op == KERNEL_OP


def expert_gqa(g: KernelGraph) -> bool:
    ks = _gks(g)
    if len(ks) != 2 or len(g.kernels) != 2:
        return False
    first, second = ks
    bg = first.attr("graph")
    kin = list(first.src)
    names = [n.attr("name") for n in kin]
    if "K" not in names or len(bg.outputs) != 2:
        return False
    k_iter = next(n for n in bg.nodes if n.op == ITER and n.attr("input") == names.index("K"))
    splits_keys = any(d == 2 and bg.grid[ax] > 1 for ax, d in enumerate(k_iter.attr("imap")))
    return splits_keys and all(s.op == "get" and s.src[0] is first for s in second.src)


EXPERT = {"rmsnorm": expert_rmsnorm, "gated_mlp": expert_gated_mlp, "lora": expert_single_kernel,
          "gqa": expert_gqa, "mha": expert_gqa, "mqa": expert_gqa, "qknorm_gqa": expert_gqa,
          "ntrans": expert_single_kernel}


def run_one(name: str, args: argparse.Namespace, outdir: Path) -> dict[str, Any]:
    prog = workloads.program(name, args.batch)
    # default options: the space derived from the program; --preset-hints uses the named presets
    preset = WORKLOAD_PRESETS[name] if args.preset_hints else None
    t = time.monotonic()
    extra: dict[str, Any] = {}
    if args.checker == "product":
        # a fresh oracle disk cache, as `mirage-formal optimize` uses one (in its --out folder):
        # workers share decisions through it; fresh, so every run starts from scratch
        with tempfile.TemporaryDirectory() as tmp:
            res = superoptimize(prog, preset, budget_s=args.budget, workers=args.workers,
                                progress=not args.quiet, gpu=False,
                                oracle_cache=Path(tmp) / "oracle_cache.sqlite")
        wall = time.monotonic() - t
        res.save(outdir / name)
        r = res.search
        rechecks = [a.float64_error for a in res.accepted + res.flagged]
        extra = {"flagged_float64": len(res.flagged), "seconds": res.seconds,
                 "codegen": res.codegen_notes}
    else:
        cfg = derive_config(prog, preset)
        r = run_search(prog, cfg, make_pruner(args.pruner, prog), make_checker(args.checker, prog),
                       workers=args.workers, progress=not args.quiet, budget_s=args.budget)
        wall = time.monotonic() - t
        r.save(outdir / name)
        rechecks = [recheck_f64(prog, a.graph) for a in r.accepted]
    expert = [(i, a) for i, a in enumerate(r.accepted) if EXPERT.get(name, lambda g: False)(a.graph)]
    s = r.summary()
    # how the work spread over the units: the longest ones bound a many-core run
    by_unit = r.extra.get("unit_seconds") or {}
    unit_s = sorted(by_unit.values(), reverse=True)
    # the heaviest units by index, for benchmarks/search_unit_sample.py --units
    heaviest = sorted(by_unit, key=lambda i: -by_unit[i])[:20]
    row = {
        "workload": name, "preset": r.config.name, "wall_s": round(wall, 2), **s,
        "expert_found": bool(expert),
        "expert_first_found_s": round(min(a.found_at_s for _, a in expert), 2) if expert else None,
        "expert_best_rank": expert[0][0] if expert else None,
        "expert_best_cost_us": round(expert[0][1].cost.seconds * 1e6, 3) if expert else None,
        "recheck_max_rel_err": max(rechecks) if rechecks else None,
        "recheck_all_pass": all(e < 1e-6 for e in rechecks),
        **extra,
        "unit_seconds_sum": round(sum(unit_s), 1), "longest_units_s": [round(x, 1) for x in unit_s[:5]],
        "heaviest_units": {int(i): round(by_unit[i], 2) for i in heaviest},
        "best": str(r.accepted[0].graph) if r.accepted else None,
        "best_expert": str(expert[0][1].graph) if expert else None,
    }
    print(json.dumps({k: v for k, v in row.items() if k not in ("best", "best_expert")}), flush=True)
    return row


def _tiers(r: dict[str, Any]) -> str:
    t = r.get("pruner_tiers") or {}
    if not t:
        return "-"
    return (f"queries {t.get('queries', 0)}: cache {t.get('memory_hits', 0) + t.get('disk_hits', 0)}, "
            f"filter prune {t.get('filter_prunes', 0)}, Z3 keep {t.get('z3_keeps', 0)}, "
            f"Z3 prune {t.get('z3_prunes', 0)}, unknown {t.get('z3_unknown', 0)}")


def _done(r: dict[str, Any]) -> str:
    """Seconds to finish the whole space, or '-' when the budget stopped it first."""
    return str(r["elapsed_s"]) if r["stopped"] is None else "-"


def to_markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    out = ["# search_workloads", "", "Command: `python benchmarks/search_workloads.py` (defaults shown below). "
           "'pruned ... oracle' counts search states the pruner cut; 'oracle tiers' counts the "
           "oracle's queries by the tier that answered (summed over work units).", "",
           f"pruner `{meta['pruner']}`, checker `{meta['checker']}`, budget {meta['budget']} s, "
           f"workers {meta['workers']}, batch {meta['batch']}. Machine: {meta['machine']}", "",
           "| workload | preset | done units | stopped | complete s | first s | best s | expert found s | expert rank "
           "| best est µs | visited | pruned shape/dedup/bound/oracle | oracle tiers | verified | accepted | f64 re-check |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(
            f"| {r['workload']} | {r['preset']} | {r['units']} | {r['stopped'] or '-'} | {_done(r)} | "
            f"{r['time_to_first_s']} | {r['time_to_best_s']} | {r['expert_first_found_s']} | "
            f"{r['expert_best_rank']} | {r['best_cost_us']} | {r['visited']} | "
            f"{r['pruned_shape']}/{r['pruned_dedup']}/{r['pruned_bound']}/{r['pruned_oracle']} | "
            f"{_tiers(r)} | {r['verified']} | {r['accepted']} | "
            f"{'all pass' if r['recheck_all_pass'] else 'FAIL'} (max rel {r['recheck_max_rel_err']:.1e}) |"
            if r["recheck_max_rel_err"] is not None else
            f"| {r['workload']} | {r['preset']} | {r['units']} | {r['stopped'] or '-'} | {_done(r)} | - | - | - | - | - | "
            f"{r['visited']} | {r['pruned_shape']}/{r['pruned_dedup']}/{r['pruned_bound']}/"
            f"{r['pruned_oracle']} | {_tiers(r)} | {r['verified']} | 0 | - |")
    out += ["", "Best expert-shaped μGraph per workload:", ""]
    for r in rows:
        out += [f"## {r['workload']}", "", "```", r["best_expert"] or "(none)", "```", ""]
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", nargs="*", default=WORKLOADS)
    ap.add_argument("--pruner", default="oracle", help="oracle | expr | none")
    ap.add_argument("--checker", default="product",
                    help="product (superoptimize: oracle + screen + field + re-check) | field | f64 | f64+field")
    ap.add_argument("--budget", type=float, default=600.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "search_workloads"))
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--preset-hints", action="store_true",
                    help="use the shipped preset of each workload as overrides (default: derived spaces)")
    args = ap.parse_args()
    out = Path(args.out)
    rows = [run_one(w, args, Path(f"{out}_ugraphs")) for w in args.workloads]
    meta = {"pruner": args.pruner, "checker": args.checker, "budget": args.budget,
            "workers": args.workers, "batch": args.batch, "machine": machine()}
    out.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{out}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    Path(f"{out}.md").write_text(to_markdown(rows, meta))


if __name__ == "__main__":
    main()
