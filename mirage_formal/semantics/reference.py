"""The float64 reference interpreter: the registry's float rules under ``evaluate``.

Imports ``ir`` and the rest of ``semantics``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mirage_formal.ir.graph import GET, INPUT, ITER, KERNEL_OP, KernelGraph
from mirage_formal.ir.node import Node
from mirage_formal.ir.ops import REGISTRY, accum_f64
from mirage_formal.semantics.evaluate import evaluate


class F64:
    """Float64 semantics straight from the op registry."""

    def op(self, name: str, args: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
        return np.asarray(REGISTRY[name].f64([np.asarray(a, dtype=np.float64) for a in args], attrs))

    def accum(self, x: np.ndarray, attrs: Mapping[str, Any], loop_axis: int) -> np.ndarray:
        return accum_f64(np.asarray(x, dtype=np.float64), attrs, loop_axis)


def run_reference(graph: KernelGraph, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray],
                  memo: dict[Node, Any] | None = None,
                  tiles: list[tuple[Node, float]] | None = None) -> list[np.ndarray]:
    """Evaluate ``graph`` in float64 and return its outputs (``tiles``: see
    ``semantics.evaluate.evaluate``)."""
    arrs: Mapping[str, np.ndarray] | Sequence[np.ndarray]
    if isinstance(inputs, Mapping):
        arrs = {k: np.asarray(v, dtype=np.float64) for k, v in inputs.items()}
    else:
        arrs = [np.asarray(v, dtype=np.float64) for v in inputs]
    return evaluate(graph, arrs, F64(), memo, tiles)


def random_inputs(graph: KernelGraph, rng: np.random.Generator | int | None = None,
                  low: float = -1.0, high: float = 1.0) -> dict[str, np.ndarray]:
    """Fresh uniform random float64 inputs for every graph input, by name."""
    g = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    return {n.attr("name"): g.uniform(low, high, size=n.shape) for n in graph.inputs}


def positive_inputs(graph: KernelGraph) -> set[str]:
    """Names of the inputs that reach an operand of an op whose declared float64 domain is
    positive (sqrt, rsqrt, div, ...), through any ops and kernels."""
    feeds: dict[Node, set[str]] = {}

    def inputs_of(n: Node, kernel: Node | None) -> set[str]:
        if n in feeds:
            return feeds[n]
        if n.op == INPUT:
            out = {n.attr("name")}
        elif n.op == ITER:
            assert kernel is not None
            out = inputs_of(kernel.src[n.attr("input")], None)
        elif n.op == GET:
            kn = n.src[0]
            out = inputs_of(kn.attr("graph").outputs[n.attr("index")].node, kn)
        elif n.op == KERNEL_OP:
            out = set().union(*(inputs_of(s, None) for s in n.src))
        else:
            out = set().union(*(inputs_of(s, kernel) for s in n.src))
        feeds[n] = out
        return out

    positive: set[str] = set()

    def visit(nodes: Sequence[Node], kernel: Node | None) -> None:
        for n in nodes:
            if n.op == KERNEL_OP:
                visit(n.attr("graph").nodes, n)
            elif n.op in REGISTRY and REGISTRY[n.op].domain == "positive":
                for s in n.src:
                    positive.update(inputs_of(s, kernel))

    visit(graph.nodes, None)
    return positive


def domain_inputs(graph: KernelGraph, rng: np.random.Generator | int | None = None,
                  also: KernelGraph | None = None) -> dict[str, np.ndarray]:
    """Random float64 inputs inside every op's domain: uniform in (0.5, 2) for inputs that
    reach an operand of a positive-domain op in ``graph`` (or ``also``), else in (-1, 1)."""
    g = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    pos = positive_inputs(graph) | (positive_inputs(also) if also is not None else set())
    return {n.attr("name"): (g.uniform(0.5, 2.0, size=n.shape) if n.attr("name") in pos
                             else g.uniform(-1.0, 1.0, size=n.shape)) for n in graph.inputs}
