"""Float64 checks beside the field test: a cheap screen for the search, an independent re-check.

:class:`FloatScreen` is a search ``Checker`` meant to run *before* the field verifier in a
``search.Chain``: it evaluates a candidate in float64 on one seeded draw of inputs and rejects
it when some candidate output matches no reference output of its shape within ``rtol``
(normwise). It never accepts on its own authority: a Chain only reaches the field verifier
after it. Wrong candidates almost always fail here in a fraction of a field trial's time.

:func:`recheck_float64` is the independent float64 re-check of an accepted μGraph: fresh
inputs from a seed unrelated to the verifier's, two input distributions (uniform in (-1, 1)
and in (0.5, 1.5), the latter keeping sums of squares and divisors away from zero), outputs
matched through the verdict's output map. It returns the worst normwise relative error.

Imports ``ir``, ``semantics`` and the rest of ``verify``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mirage_formal.ir.graph import KernelGraph
from mirage_formal.semantics.reference import domain_inputs, random_inputs
from mirage_formal.verify.verifier import compare_float64, run_float64

SCREEN_RTOL = 1e-9
"""Normwise relative error below which two float64 evaluations count as equal. Rounding in
float64 over the workloads' reductions (at most ~10^5 terms) stays near 1e-12."""


@dataclass(frozen=True)
class ScreenVerdict:
    """A FloatScreen answer: ``accepted`` False means some output matched nothing."""

    accepted: bool
    max_rel_error: float
    reason: str


class FloatScreen:
    """Cheap float64 rejection of wrong candidates before the field check (see module doc)."""

    def __init__(self, reference: KernelGraph, seed: int = 0, rtol: float = SCREEN_RTOL) -> None:
        self.reference = reference
        self.rtol = rtol
        self.inputs = domain_inputs(reference, np.random.default_rng([seed, 6464]))
        self.expected = run_float64(reference, self.inputs)

    def check(self, candidate: KernelGraph) -> ScreenVerdict:
        names = {n.attr("name") for n in candidate.inputs}
        # (a wrong candidate may take the root of a negative or divide by zero: its NaN or inf
        # fails the comparison; numpy's warnings about it would only reach the user's console)
        with np.errstate(all="ignore"):
            got = run_float64(candidate, {k: v for k, v in self.inputs.items() if k in names})
        worst = 0.0
        for j, c in enumerate(got):
            errs = [compare_float64([r], [c], [0]) for r in self.expected if r.shape == c.shape]
            best = min(errs, default=math.inf)
            if not best <= self.rtol:
                return ScreenVerdict(False, best, f"output {j} matches no reference output "
                                                  f"in float64 (normwise error {best:.2e})")
            worst = max(worst, best)
        if len(got) != len(self.expected):
            return ScreenVerdict(False, worst, f"{len(got)} outputs for {len(self.expected)}")
        return ScreenVerdict(True, worst, "float64 screen passed")


class FloatRecheck:
    """The independent float64 re-check against one reference (see module doc); the
    reference's outputs on the two fresh draws are computed once and reused."""

    def __init__(self, reference: KernelGraph, seed: int = 20261122) -> None:
        rng = np.random.default_rng(seed)
        self.reference = reference
        self.draws = [random_inputs(reference, rng, lo, hi) for lo, hi in ((-1.0, 1.0), (0.5, 1.5))]
        self.expected = [run_float64(reference, x) for x in self.draws]

    def error(self, candidate: KernelGraph, output_map: Sequence[int] | None = None) -> float:
        """Worst normwise relative error; ``output_map[i]`` is the candidate output matched to
        reference output ``i`` (identity when None); inf when outputs are not finite."""
        mapping = list(output_map) if output_map is not None else list(range(len(self.reference.outputs)))
        names = {n.attr("name") for n in candidate.inputs}
        worst = 0.0
        for x, want in zip(self.draws, self.expected, strict=True):
            with np.errstate(all="ignore"):  # (as in FloatScreen.check)
                got = run_float64(candidate, {k: v for k, v in x.items() if k in names})
            worst = max(worst, compare_float64(want, got, mapping))
        return worst


def recheck_float64(reference: KernelGraph, candidate: KernelGraph,
                    output_map: Sequence[int] | None = None, seed: int = 20261122) -> float:
    """One-off :meth:`FloatRecheck.error`."""
    return FloatRecheck(reference, seed).error(candidate, output_map)
