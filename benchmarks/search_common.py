"""Shared pieces of the search benchmarks: pruner/checker choice (the real oracle and verifier
are imported lazily, so these scripts run before and after they exist), the float64 stand-in
checker, an independent float64 re-check, and machine/version notes for result files."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from mirage_formal.ir.graph import KernelGraph
from mirage_formal.search import KeepAll
from mirage_formal.search.reference_pruner import ExprPruner
from mirage_formal.semantics import random_inputs, run_reference


@dataclass
class F64Verdict:
    accepted: bool
    max_rel_err: float


class F64Checker:
    """Development stand-in for verify.Verifier: float64 on two fresh uniform(-1, 1) draws,
    relative error below 1e-9 on every output element."""

    def __init__(self, reference: KernelGraph, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.inputs = [random_inputs(reference, rng) for _ in range(2)]
        self.expected = [run_reference(reference, x) for x in self.inputs]

    def check(self, candidate: KernelGraph) -> F64Verdict:
        worst = 0.0
        for x, ys in zip(self.inputs, self.expected, strict=True):
            for got, want in zip(run_reference(candidate, x), ys, strict=True):
                worst = max(worst, float(np.max(np.abs(got - want) / (np.abs(want) + 1e-12))))
        return F64Verdict(worst < 1e-9, worst)


def recheck_f64(reference: KernelGraph, candidate: KernelGraph, seed: int = 12345) -> float:
    """Independent float64 re-check (another seed, inputs uniform in (0.5, 1.5) and in (-1, 1)):
    the worst relative error over all outputs."""
    rng = np.random.default_rng(seed)
    worst = 0.0
    for lo, hi in ((0.5, 1.5), (-1.0, 1.0)):
        x = random_inputs(reference, rng, lo, hi)
        for got, want in zip(run_reference(candidate, x), run_reference(reference, x), strict=True):
            worst = max(worst, float(np.max(np.abs(got - want) / (np.abs(want) + 1e-12))))
    return worst


def make_pruner(kind: str, program: KernelGraph) -> Any:
    if kind == "none":
        return KeepAll()
    if kind == "expr":
        return ExprPruner(program)
    if kind == "oracle":
        from mirage_formal import formal  # lazily: built by another helper

        return formal.Oracle(program)  # type: ignore[attr-defined]
    raise SystemExit(f"unknown pruner {kind!r}: use oracle, expr or none")


def make_checker(kind: str, program: KernelGraph, seed: int = 0) -> Any:
    if kind == "f64":
        return F64Checker(program, seed)
    if kind == "f64+field":
        from mirage_formal.search import Chain

        return Chain(F64Checker(program, seed), make_checker("field", program, seed))
    if kind == "field":
        from mirage_formal.verify import Verifier  # lazily: z3-free scripts need not load it

        return Verifier(program, bound=2.0**-64, seed=seed)
    raise SystemExit(f"unknown checker {kind!r}: use field, f64 or f64+field")


def machine() -> dict[str, Any]:
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        cpu = platform.processor()
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=False).stdout.strip()
    except OSError:
        commit = "?"
    return {"date": datetime.now(UTC).isoformat(timespec="seconds"), "cpu": cpu,
            "cores": os.cpu_count(), "python": sys.version.split()[0], "numpy": np.__version__,
            "platform": platform.platform(), "commit": commit,
            "load_avg_1m": round(os.getloadavg()[0], 2)}


def search_and_report(program: KernelGraph, budget_s: float, top: int, workers: int = 2) -> Any:
    """``superoptimize`` ``program`` (no GPU) and print coverage and the ``top`` best: their
    estimates, kernel counts, found-at times, verification bounds and float64 re-check errors.
    Returns the result (the outside-program check scripts)."""
    import time

    from mirage_formal import superoptimize

    t = time.monotonic()
    res = superoptimize(program, budget_s=budget_s, workers=workers)
    s = res.search.summary()
    print(f"{time.monotonic() - t:.1f} s, units {s.get('units')}, accepted {len(res.accepted)}, "
          f"complete {res.search.complete}")
    for a in res.accepted[:top]:
        print(f"  {a.cost.seconds * 1e6:8.2f} us est, {len(a.graph.kernels)} kernels, found at "
              f"{a.found_at_s:.1f} s, bound {a.verdict.bound:.1e}, float64 err {a.float64_error:.1e}")
    return res
