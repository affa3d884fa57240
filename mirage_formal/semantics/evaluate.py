"""Evaluation of kernel graphs and block graphs under a pluggable op table.

:class:`Semantics` says how to apply one registry op to arrays (which may carry leading
grid/loop axes) and how to fold a tile over loop iterations. :func:`evaluate` walks a kernel
graph; graph-defined kernels are evaluated for all blocks and iterations at once through
:mod:`layout`. A ``memo`` dict (node -> value) may be passed in and is filled, so callers that
evaluate many graphs on the same inputs (the verifier, the search) reuse shared sub-graphs:
nodes are hash-consed, so equal sub-graphs are the same key.

Imports ``ir`` and ``semantics.layout``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from mirage_formal.errors import GraphError
from mirage_formal.ir.graph import GET, INPUT, ITER, KERNEL_OP, BlockGraph, KernelGraph
from mirage_formal.ir.node import Node
from mirage_formal.semantics.layout import LEAD, LOOP_AXIS, align, iterate, save


class Semantics(Protocol):
    """An op table: the meaning of each registry op on arrays of some number system."""

    def op(self, name: str, args: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray: ...

    def accum(self, x: np.ndarray, attrs: Mapping[str, Any], loop_axis: int) -> np.ndarray:
        """Fold ``x`` over ``loop_axis``, whose size is always the full for-loop range."""
        ...


def evaluate_block(bg: BlockGraph, inputs: Sequence[np.ndarray], sem: Semantics,
                   tiles: list[tuple[Node, float]] | None = None) -> list[np.ndarray]:
    """Run one graph-defined kernel on its kernel-level inputs; returns its kernel outputs.
    ``tiles``: if given, every block op (not iterators or accumulators) is appended to it
    with the largest magnitude of its values over all blocks and iterations (NaN if any is
    NaN)."""
    vals: dict[Node, np.ndarray] = {}
    for n in bg.nodes:
        if n.op == ITER:
            vals[n] = iterate(inputs[n.attr("input")], n.attr("imap"), n.attr("fmap"),
                              bg.grid, bg.forloop)
        elif n.op == "accum":
            # A tile that does not vary with the loop is still added once per iteration.
            x = vals[n.src[0]]
            if x.shape[LOOP_AXIS] != bg.forloop:
                full = list(x.shape)
                full[LOOP_AXIS] = bg.forloop
                x = np.broadcast_to(x, full)
            vals[n] = sem.accum(x, n.attr_dict, LOOP_AXIS)
        else:
            args = align([vals[s] for s in n.src], LEAD)
            vals[n] = sem.op(n.op, args, n.attr_dict)
            if tiles is not None:
                v = vals[n]
                tiles.append((n, float(np.max(np.abs(v))) if np.size(v) else 0.0))
    return [save(vals[o.node], o.omap, bg.grid, o.node.shape) for o in bg.outputs]


def _bind_inputs(graph: KernelGraph, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray]
                 ) -> dict[Node, np.ndarray]:
    if isinstance(inputs, Mapping):
        missing = [n.attr("name") for n in graph.inputs if n.attr("name") not in inputs]
        if missing:
            raise GraphError(f"missing input arrays for {missing}")
        arrs = [inputs[n.attr("name")] for n in graph.inputs]
    else:
        arrs = list(inputs)
        if len(arrs) != len(graph.inputs):
            raise GraphError(f"expected {len(graph.inputs)} input arrays, got {len(arrs)}")
    out: dict[Node, np.ndarray] = {}
    for n, a in zip(graph.inputs, arrs, strict=True):
        a = np.asarray(a)
        if tuple(a.shape) != n.shape:
            raise GraphError(f"input {n.attr('name')!r}: expected shape {list(n.shape)}, got {list(a.shape)}")
        out[n] = a
    return out


def evaluate(graph: KernelGraph, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray],
             sem: Semantics, memo: dict[Node, Any] | None = None,
             tiles: list[tuple[Node, float]] | None = None) -> list[np.ndarray]:
    """Evaluate every output of ``graph``. ``memo`` must only hold values for these inputs.
    ``tiles``: collects the graph-defined kernels' block op values (:func:`evaluate_block`)."""
    vals: dict[Node, Any] = memo if memo is not None else {}
    vals.update(_bind_inputs(graph, inputs))
    for n in graph.nodes:
        if n in vals:
            continue
        if n.op == INPUT:
            raise GraphError(f"input {n.attr('name')!r} has no value")
        if n.op == KERNEL_OP:
            vals[n] = evaluate_block(n.attr("graph"), [vals[s] for s in n.src], sem, tiles)
        elif n.op == GET:
            vals[n] = vals[n.src[0]][n.attr("index")]
        else:
            vals[n] = sem.op(n.op, [vals[s] for s in n.src], n.attr_dict)
    return [vals[o] for o in graph.outputs]
