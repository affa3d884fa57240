"""The float64 reference interpreter: the registry's float rules under ``evaluate``.

Imports ``ir`` and the rest of ``semantics``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mirage_formal.ir.graph import KernelGraph
from mirage_formal.ir.node import Node
from mirage_formal.ir.ops import REGISTRY, accum_f64
from mirage_formal.semantics.evaluate import evaluate


class F64:
    """Float64 semantics straight from the op registry."""

    def op(self, name: str, args: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
        return REGISTRY[name].f64([np.asarray(a, dtype=np.float64) for a in args], attrs)

    def accum(self, x: np.ndarray, attrs: Mapping[str, Any], loop_axis: int) -> np.ndarray:
        return accum_f64(np.asarray(x, dtype=np.float64), attrs, loop_axis)


def run_reference(graph: KernelGraph, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray],
                  memo: dict[Node, Any] | None = None) -> list[np.ndarray]:
    """Evaluate ``graph`` in float64 and return its outputs."""
    arrs: Mapping[str, np.ndarray] | Sequence[np.ndarray]
    if isinstance(inputs, Mapping):
        arrs = {k: np.asarray(v, dtype=np.float64) for k, v in inputs.items()}
    else:
        arrs = [np.asarray(v, dtype=np.float64) for v in inputs]
    return evaluate(graph, arrs, F64(), memo)


def random_inputs(graph: KernelGraph, rng: np.random.Generator | int | None = None,
                  low: float = -1.0, high: float = 1.0) -> dict[str, np.ndarray]:
    """Fresh uniform random float64 inputs for every graph input, by name."""
    g = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    return {n.attr("name"): g.uniform(low, high, size=n.shape) for n in graph.inputs}
