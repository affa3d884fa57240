"""Fit the cost model's parameters on measured kernel times and report how well it ranks.

Reads ``benchmarks/data/kernel_times.jsonl`` (``kernel_times.py``), keeps the records of one
timing method (``--method``, a substring; default the method with the most records, so timings
taken in different ways are never mixed; ``--since`` drops records measured before a time,
``--latest`` keeps each μGraph's most recent run only, as an emitter change makes older timings
of the same μGraph stale), takes per (workload, batch, μGraph) the median of its records, and fits the
parameters of ``mirage_formal.search.cost.Target`` listed in ``cost.FITTED`` by minimising the
mean squared log ratio estimated/measured, each (program, batch) group weighted equally
(Nelder-Mead over log parameters, from the built-in values, each kept within a factor ``BOX``
of its built-in physical estimate). Writes

- ``search/cost_model.json``: the fitted parameters per target, with the data they were fitted
  on (file, method, record count, date) — the package loads it at import;
- ``benchmarks/results/cost_model.md`` (and ``.json``): Spearman ρ between estimated and measured
  time over all candidates and per program, the median relative error, and top-k coverage (per
  program: among the model's top 50, is the measured best inside the model's top k, k = 1, 3,
  5, 8), for the built-in parameters, the fitted ones, and leave-one-program-out fits (each
  program scored by parameters fitted without it: the honest number for a new program).

    PYTHONPATH=. python3 benchmarks/fit_cost_model.py

Imports the package and numpy only.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernel_times import DATA, Record, load

from mirage_formal.ir.graph import KernelGraph
from mirage_formal.search.cost import BUILTIN, COST_MODEL_FILE, FITTED, Target, estimate

ROOT = Path(__file__).resolve().parents[1]
KS = (1, 3, 5, 8)


class Sample:
    def __init__(self, workload: str, batch: int, graph: KernelGraph, us: float) -> None:
        self.group = f"{workload} b{batch}"
        self.program = workload
        self.graph = graph
        self.us = us


def samples(records: Sequence[Record], latest: bool = False) -> list[Sample]:
    """One sample per (workload, batch, μGraph): the median of its records, or with ``latest``
    of its most recent run's records (same date to the hour: an emitter change since makes
    older timings of the same μGraph stale)."""
    by: dict[tuple[str, int, str], list[Record]] = defaultdict(list)
    for r in records:
        by[r.workload, r.batch, r.graph.key].append(r)
    if latest:
        for k, rs in by.items():
            newest = max(r.date.replace(" ", "T")[:13] for r in rs)
            by[k] = [r for r in rs if r.date.replace(" ", "T")[:13] == newest]
    return [Sample(w, b, rs[0].graph, float(np.median([r.measured_us for r in rs])))
            for (w, b, _), rs in sorted(by.items())]


def with_params(base: Target, x: np.ndarray) -> Target:
    return base.with_params(**{k: float(math.exp(v)) for k, v in zip(FITTED, x, strict=True)})


def predict(t: Target, ss: Sequence[Sample]) -> np.ndarray:
    return np.array([estimate(s.graph, t).seconds * 1e6 for s in ss])


WEIGHT = {"groups": False}


def loss(t: Target, ss: Sequence[Sample]) -> float:
    """Mean squared log ratio; with ``WEIGHT["groups"]`` every (program, batch) group weighs the
    same (the hand-written attention sweeps do not outvote programs with two candidates)."""
    est = predict(t, ss)
    meas = np.array([s.us for s in ss])
    sizes: dict[str, int] = defaultdict(int)
    for s in ss:
        sizes[s.group] += 1
    w = np.array([1.0 / sizes[s.group] if WEIGHT["groups"] else 1.0 for s in ss])
    return float(np.sum(w * np.log(est / meas) ** 2) / np.sum(w))


def nelder_mead(f: Callable[[np.ndarray], float], x0: np.ndarray, step: float = 0.5,
                iters: int = 600, tol: float = 1e-6) -> np.ndarray:
    """Minimise ``f`` from ``x0`` (plain Nelder-Mead; no dependency beyond numpy)."""
    n = len(x0)
    pts = [x0] + [x0 + step * np.eye(n)[i] for i in range(n)]
    vals = [f(p) for p in pts]
    for _ in range(iters):
        order = np.argsort(vals)
        pts = [pts[i] for i in order]
        vals = [vals[i] for i in order]
        if abs(vals[-1] - vals[0]) < tol:
            break
        c = np.mean(pts[:-1], axis=0)
        xr = c + (c - pts[-1])
        fr = f(xr)
        if fr < vals[0]:
            xe = c + 2 * (c - pts[-1])
            fe = f(xe)
            pts[-1], vals[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = xr, fr
        else:
            xc = c + 0.5 * (pts[-1] - c)
            fc = f(xc)
            if fc < vals[-1]:
                pts[-1], vals[-1] = xc, fc
            else:
                pts = [pts[0]] + [pts[0] + 0.5 * (p - pts[0]) for p in pts[1:]]
                vals = [vals[0]] + [f(p) for p in pts[1:]]
    return pts[int(np.argmin(vals))]


#: a fitted parameter stays within this factor of its built-in (physical) estimate
BOX = 10.0
BOX_NOW = [BOX]


#: the hardware's peak rates (data sheets): a fitted rate above its peak would fit noise or
#: stand in for a term the model lacks, and then mis-rank programs the fit has not seen
PEAKS = {
    "h100": {"dram_bw": 3.35e12, "l2_bw": 1.2e13, "tc_flops": 9.9e14, "simt_flops": 6.7e13},
    "h200": {"dram_bw": 4.8e12, "l2_bw": 1.2e13, "tc_flops": 9.9e14, "simt_flops": 6.7e13},
}
#: rates measured on the hardware that a fit may not go below (L2: ~5.5 TB/s in published
#: H100 microbenchmarks; below it the fit charges re-reads as if they came from DRAM)
FLOORS = {"h100": {"l2_bw": 5.0e12}, "h200": {"l2_bw": 5.0e12}}


def fit(base: Target, ss: Sequence[Sample], iters: int, start: Target | None = None) -> Target:
    """Parameters minimising :func:`loss`, each kept within ``BOX`` of the built-in estimate (a
    rate of 100x the hardware's would fit noise, not the GPU) and rates between the measured
    floors (``FLOORS``) and the hardware's peak (``PEAKS``); the search starts from ``start``'s
    parameters (default the built-in ones) and never ends worse than it began."""
    x0 = np.array([math.log(getattr(base, k)) for k in FITTED])
    lim = math.log(BOX_NOW[0])
    peaks = PEAKS.get(base.name, {})
    hi = np.array([min(x0[i] + lim, math.log(peaks[k])) if k in peaks else x0[i] + lim
                   for i, k in enumerate(FITTED)])
    floors = FLOORS.get(base.name, {})
    lo = np.minimum(np.array([max(x0[i] - lim, math.log(floors[k])) if k in floors else x0[i] - lim
                              for i, k in enumerate(FITTED)]), hi)

    def f(x: np.ndarray) -> float:
        return loss(with_params(base, np.clip(x, lo, hi)), ss)

    # the box is around the built-in estimates (x0); the search may start elsewhere in it
    xs = x0 if start is None else np.array([math.log(getattr(start, k)) for k in FITTED])
    x = nelder_mead(f, np.clip(xs, lo, hi), iters=iters)
    return with_params(base, np.clip(x, lo, hi))


def _rank(a: np.ndarray) -> np.ndarray:
    order = np.argsort(a, kind="stable")
    r = np.empty(len(a))
    r[order] = np.arange(len(a))
    # average ranks of ties
    for v in np.unique(a):
        idx = np.where(a == v)[0]
        if len(idx) > 1:
            r[idx] = r[idx].mean()
    return r


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < 3:
        return float("nan")
    rx, ry = _rank(x), _rank(y)
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def scores(est: np.ndarray, ss: Sequence[Sample]) -> dict[str, Any]:
    meas = np.array([s.us for s in ss])
    rel = np.abs(est - meas) / meas
    groups: dict[str, list[int]] = defaultdict(list)
    for i, s in enumerate(ss):
        groups[s.group].append(i)
    per: dict[str, Any] = {}
    cover = {k: 0 for k in KS}
    n_groups = 0
    for g, idx in sorted(groups.items()):
        e, m = est[idx], meas[idx]
        top = np.argsort(e, kind="stable")[:50]
        best = top[int(np.argmin(m[top]))]
        pos = int(np.where(top == best)[0][0])
        per[g] = {"n": len(idx), "spearman": spearman(e, m), "median_rel_err": float(np.median(rel[idx])),
                  "model_rank_of_measured_best": pos}
        if len(idx) >= 2:
            n_groups += 1
            for k in KS:
                cover[k] += int(pos < k)
    return {"n": len(ss), "programs": len({s.program for s in ss}), "spearman": spearman(est, meas),
            "median_rel_err": float(np.median(rel)),
            "topk_coverage": {str(k): (cover[k] / n_groups if n_groups else float("nan")) for k in KS},
            "groups_for_topk": n_groups, "per_group": per}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--method", default="auto",
                    help="keep records whose method contains this; auto (default): the method with "
                         "the most records (never a mix of timing methods)")
    ap.add_argument("--since", default=None,
                    help="keep records measured at or after this ISO time (e.g. the first run of "
                         "the current emitter: older timings of the same μGraphs are stale)")
    ap.add_argument("--latest", action="store_true",
                    help="each μGraph's time from its most recent run only (not the median of all)")
    ap.add_argument("--target", default="h100")
    ap.add_argument("--iters", type=int, default=500)
    ap.add_argument("--weight", choices=("groups", "samples"), default="samples",
                    help="weigh each sample equally (default) or each (program, batch) group")
    ap.add_argument("--box", type=float, default=BOX, help="max factor off the built-in estimates")
    ap.add_argument("--cv-iters", type=int, default=None, help="iterations of each held-out fit (default --iters)")
    ap.add_argument("--no-cv", action="store_true", help="skip the leave-one-program-out fits")
    ap.add_argument("--warm", default=None, metavar="COST_MODEL_JSON",
                    help="start the in-sample fit from these parameters (e.g. the committed "
                         "search/cost_model.json); the held-out fits still start from the built-in "
                         "values, so the held-out scores stay honest")
    ap.add_argument("--params-out", default=str(ROOT / "search" / COST_MODEL_FILE))
    ap.add_argument("--report", default=str(ROOT / "benchmarks" / "results" / "cost_model"))
    args = ap.parse_args()
    if args.method == "auto":
        counts = Counter(r.method for r in load(args.data))
        args.method = counts.most_common(1)[0][0]
        print(f"fitting on method: {args.method} ({counts[args.method]} of {sum(counts.values())} records)")
    recs = load(args.data, args.method)
    if args.since:
        recs = [r for r in recs if r.date.replace(" ", "T") >= args.since]
    WEIGHT["groups"] = args.weight == "groups"
    BOX_NOW[0] = args.box
    ss = samples(recs, args.latest)
    if len(ss) < 10:
        print(f"only {len(ss)} samples match --method {args.method!r}; nothing to fit", file=sys.stderr)
        return 2
    base = BUILTIN[args.target]
    start = (base.with_params(**json.loads(Path(args.warm).read_text())["targets"][args.target])
             if args.warm else None)
    fitted = fit(base, ss, args.iters, start)
    res: dict[str, Any] = {"builtin": scores(predict(base, ss), ss), "fitted": scores(predict(fitted, ss), ss)}
    if not args.no_cv:
        est = np.zeros(len(ss))
        for prog in sorted({s.program for s in ss}):
            train = [s for s in ss if s.program != prog]
            t = fit(base, train, args.cv_iters or args.iters)
            idx = [i for i, s in enumerate(ss) if s.program == prog]
            est[idx] = predict(t, [ss[i] for i in idx])
        res["leave_one_program_out"] = scores(est, ss)
    gpus = sorted({r.gpu for r in recs})
    params = {k: getattr(fitted, k) for k in FITTED}
    doc = {"format": "mirage-formal.cost-model", "version": 1,
           "fitted_on": {"data": str(Path(args.data).relative_to(ROOT)) if Path(args.data).is_relative_to(ROOT)
                         else args.data, "method": args.method, "records": len(recs), "samples": len(ss),
                         "programs": sorted({s.program for s in ss}), "gpus": gpus,
                         "date": datetime.date.today().isoformat(), "since": args.since,
                         "latest": args.latest, "warm": args.warm,
                         "weight": args.weight, "box": args.box,
                         "loss_mean_sq_log_ratio": loss(fitted, ss)},
           "targets": {args.target: params}}
    Path(args.params_out).write_text(json.dumps(doc, indent=1) + "\n")
    Path(f"{args.report}.json").write_text(json.dumps({"fitted_on": doc["fitted_on"], "params": params,
                                                       "scores": res}, indent=1) + "\n")
    Path(f"{args.report}.md").write_text(markdown(doc, params, res, base))
    print(Path(f"{args.report}.md").read_text())
    return 0


def markdown(doc: dict[str, Any], params: dict[str, float], res: dict[str, Any], base: Target) -> str:
    fo = doc["fitted_on"]
    out = ["# cost model: fit and ranking quality", "",
           f"Data: `{fo['data']}`, method contains `{fo['method']}`"
           + (f", measured since {fo['since']}" if fo.get("since") else "")
           + f": {fo['records']} records, "
           f"{fo['samples']} distinct (program, batch, μGraph) samples over {len(fo['programs'])} programs "
           f"({', '.join(fo['programs'])}); GPU {', '.join(fo['gpus'])}. Fitted {fo['date']} by "
           "`PYTHONPATH=. python3 benchmarks/fit_cost_model.py"
           + (f" --since {fo['since']}" if fo.get("since") else "")
           + (" --latest" if fo.get("latest") else "")
           + (f" --warm {fo['warm']}" if fo.get("warm") else "")
           + "` (Nelder-Mead on the mean squared log "
           f"ratio estimated/measured, weight `{fo.get('weight')}`, parameters within {fo.get('box')}x "
           "of the built-in estimates). Parameters written to `search/cost_model.json`.", "",
           "| parameters | Spearman ρ | median rel. error | top-1 | top-3 | top-5 | top-8 |",
           "|---|---|---|---|---|---|---|"]
    names = {"builtin": "built-in estimates", "fitted": "fitted (in-sample)",
             "leave_one_program_out": "fitted without the program scored (leave-one-program-out)"}
    for k, r in res.items():
        tk = r["topk_coverage"]
        out.append(f"| {names[k]} | {r['spearman']:.3f} | {100 * r['median_rel_err']:.1f}% | "
                   + " | ".join(f"{tk[str(x)]:.2f}" for x in KS) + " |")
    out += ["", "top-k: over the (program, batch) groups with ≥ 2 candidates "
            f"({res['fitted']['groups_for_topk']}), the fraction where the measured best of the model's "
            "top 50 lies in the model's top k.", "",
            "## Per program (fitted parameters)", "", "| group | n | Spearman ρ | median rel. error | model rank of measured best |",
            "|---|---|---|---|---|"]
    for g, r in res["fitted"]["per_group"].items():
        rho = "-" if math.isnan(r["spearman"]) else f"{r['spearman']:.3f}"
        out.append(f"| {g} | {r['n']} | {rho} | {100 * r['median_rel_err']:.1f}% | {r['model_rank_of_measured_best']} |")
    out += ["", "## Parameters", "", "| parameter | built-in | fitted |", "|---|---|---|"]
    for k, v in params.items():
        out.append(f"| {k} | {getattr(base, k):.4g} | {v:.4g} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
