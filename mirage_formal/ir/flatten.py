"""Row flattening: a block graph on (batch, ..., rows, columns) activations as the same kernel
on 2-D views of them, so that batch elements become product rows.

PyTorch writes a linear layer's activations as ``(batch, seq, hidden)`` (at decode shapes
``(batch, 1, hidden)``) against a 2-D weight. A block graph of such a program multiplies tiles
``[b, 1, k]`` by ``[k, n]``: b products of one row each, which the tensor-core printer pads to
16 rows apiece and for which it loads B's fragments b times. The same kernel on the views
``[b, k]`` of those tensors (a contiguous tensor's leading dimensions merged: the same bytes)
is one product of b rows, on the paths 2-D programs take (one row tile, the gemv and ring
schedules).

:func:`flat_rows` returns that view of a block graph, or None where it would not compute the
same thing or there is no product to gain from it (a kernel without one keeps its shapes, and
its code). Let R be the largest rank in the graph (at least 3). It applies when

- every tensor of rank R (kernel input, tile, output) is merged over its leading R-1
  dimensions, which the grid and the loop split only along the first (the others whole);
- a product's B has rank at most 2 (a weight: no batch to merge) and its A rank R;
- every other op with an operand of rank R is elementwise, its operands of rank R with the
  op's own leading dimensions or leading ones, its lower-rank operands row vectors (all but
  the last dimension 1); or a reduction over the last dimension (sum, mean with keepdims,
  rms_norm, the loop accumulators, whose fold is along the last dimension);
- ops of lower-rank operands only (a weight's tiles) are left as they are.

Every op then computes, row for row, what it computed before: a product's row (i, m) of A
times B, an elementwise op on the same elements, a reduction along the same last axis.
``tests/codegen/test_flatten.py`` checks this in float64 on random and searched graphs.

Imports the rest of ``ir`` only (codegen applies it to every launch, the cost model to every
kernel it estimates).
"""

from __future__ import annotations

import math

from mirage_formal.errors import GraphError
from mirage_formal.ir.dtypes import DType
from mirage_formal.ir.graph import ITER, BlockGraph, BlockOutput, MapT, make_iter, make_op
from mirage_formal.ir.node import Node
from mirage_formal.ir.ops import BLOCK, REGISTRY

#: ops along the last dimension whose other attributes carry over to the 2-D view
_LAST_AXIS_OPS = ("rms_norm", "accum")
_AXIS_OPS = ("sum", "mean")


def _merged(shape: tuple[int, ...]) -> tuple[int, int]:
    return math.prod(shape[:-1]), shape[-1]


def _flat_map(m: MapT, rank: int, sizes: tuple[int, ...]) -> MapT | None:
    """A grid map (``imap`` or ``omap``) of a rank-``rank`` tensor on its 2-D view: dimension
    0 stays 0, the last becomes 1; a split of an inner leading dimension (grid size > 1) has
    no view (None); one over a grid axis of size 1 splits nothing and is dropped."""
    out: list[int] = []
    for ax, d in enumerate(m):
        if d == -1 or d == 0:
            out.append(d)
        elif d == rank - 1:
            out.append(1)
        elif sizes[ax] == 1:
            out.append(-1)
        else:
            return None
    return (out[0], out[1], out[2])


def _row_vector(n: Node) -> bool:
    return math.prod(n.shape[:-1]) == 1


def _op_keeps_rows(n: Node, rank: int) -> bool:
    """Op ``n`` (an operand of rank ``rank``) computes the same on the 2-D views (module doc)."""
    d = REGISTRY[n.op]
    if len(n.shape) != rank:
        return False
    if n.op == "matmul":
        a, b = n.src
        return len(a.shape) == rank and len(b.shape) <= 2
    if d.elementwise:
        lead = n.shape[:-1]
        return all(s.shape[:-1] in (lead, (1,) * (rank - 1)) if len(s.shape) == rank
                   else _row_vector(s) for s in n.src)
    if n.op in _AXIS_OPS:
        return bool(n.attr("keepdims")) and n.attr("axis") % rank == rank - 1
    if n.op in _LAST_AXIS_OPS:
        return len(n.src[0].shape) == rank and all(_row_vector(g) or g.shape[:-1] == n.shape[:-1]
                                                   for g in n.src[1:])
    return False


def flat_rows(bg: BlockGraph) -> BlockGraph | None:
    """``bg`` on 2-D views of its rank-R tensors (module doc), or None where that view would
    compute something else or there is nothing to merge."""
    nodes = bg.nodes
    rank = max([len(n.shape) for n in nodes] + [len(s) for s, _ in bg.inputs])
    if rank < 3 or not any(n.op == "matmul" and len(n.shape) == rank for n in nodes):
        return None  # (without a product of rank-R tiles the views gain nothing: left as is)
    # every op first (no node is built for a graph that will not flatten: the cost model asks
    # about every size variant the search ranks)
    for n in nodes:
        if n.op == ITER:
            continue
        lower = all(len(s.shape) < rank for s in n.src)
        if (len(n.shape) == rank) if lower else not _op_keeps_rows(n, rank):
            return None
    if any(len(o.node.shape) != rank for o in bg.outputs):
        return None
    grid_sizes = bg.grid
    # a rank-R tensor read or written: only its first leading dimension split
    sig: list[tuple[tuple[int, ...], DType]] = []
    for shape, dt in bg.inputs:
        sig.append((_merged(shape), dt) if len(shape) == rank else (shape, dt))
    new: dict[Node, Node] = {}
    try:
        for n in nodes:
            if n.op == ITER:
                shape = bg.inputs[n.attr("input")][0]
                if len(shape) != rank:
                    new[n] = n
                    continue
                imap = _flat_map(n.attr("imap"), rank, grid_sizes)
                fmap = n.attr("fmap")
                if imap is None or (fmap not in (-1, 0, rank - 1) and bg.forloop > 1):
                    return None
                fmap = {rank - 1: 1}.get(fmap, fmap if fmap in (-1, 0) else -1)
                new[n] = make_iter(sig, n.attr("input"), imap, fmap, bg.grid, bg.forloop)
                continue
            if all(len(s.shape) < rank for s in n.src):
                new[n] = n  # (a weight's tiles only: unchanged)
                continue
            attrs = dict(n.attr_dict)
            if n.op in _AXIS_OPS:
                attrs["axis"] = -1
            new[n] = make_op(n.op, [new[s] for s in n.src], attrs, BLOCK)
        outs = []
        for o in bg.outputs:
            omap = _flat_map(o.omap, rank, grid_sizes)
            if omap is None:
                return None
            outs.append(BlockOutput(new[o.node], omap))
        flat = BlockGraph(bg.grid, bg.threads, bg.forloop, tuple(sig), tuple(outs))
    except GraphError:
        return None
    want = [(_merged(s), d) for s, d in bg.output_types()]
    return flat if flat.output_types() == want else None
