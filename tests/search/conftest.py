"""Stand-ins for the search's Protocols, used by the search tests: a float64 random-testing
checker (the development stand-in for ``verify.Verifier``) and tiny programs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from mirage_formal.ir.graph import KernelGraph
from mirage_formal.semantics import random_inputs, run_reference


@dataclass
class F64Verdict:
    accepted: bool
    max_rel_err: float


class F64Checker:
    """Accepts a candidate whose float64 outputs match the reference on fresh uniform inputs
    (two independent draws, relative tolerance 1e-9)."""

    def __init__(self, reference: KernelGraph, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.inputs = [random_inputs(reference, rng) for _ in range(2)]
        self.expected = [run_reference(reference, x) for x in self.inputs]
        self.calls = 0

    def check(self, candidate: KernelGraph) -> F64Verdict:
        self.calls += 1
        worst = 0.0
        for x, ys in zip(self.inputs, self.expected, strict=True):
            for got, want in zip(run_reference(candidate, x), ys, strict=True):
                err = float(np.max(np.abs(got - want) / (np.abs(want) + 1e-12)))
                worst = max(worst, err)
        return F64Verdict(worst < 1e-9, worst)


@pytest.fixture
def f64_checker() -> type[F64Checker]:
    return F64Checker
