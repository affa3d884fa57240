"""Block refinement: one logical block runs as several CTAs, each over a band of its rows.

The inverse of :mod:`coarsen`, and like it a schedule choice (:attr:`Schedule.refine_rows`):
the μGraph fixes what each logical block computes, the schedule which CTAs compute it. A
block whose tiles carry a dimension that no block op combines across (attention's query
rows, a product's rows) can run as ``c`` CTAs, each computing ``rows`` of that dimension.
The μGraph semantics split a dimension only into equal parts, so ViT's 197 tokens (a prime)
were one tile a block; a refinement needs no divisor: band ``j`` starts at
``min(j * rows, n - rows)``, so the last band ends at the dimension's end and overlaps its
neighbour. Rows computed twice are computed the same way from the same data and stored twice
with the same values; every address stays inside the tensors, and no band is partial.

How it is emitted: :func:`refined` builds a *virtual* block graph, the μGraph's block graph
over virtual input and output shapes whose refined dimension has ``rows`` elements (its
tiles then hold one band; grid and maps unchanged), and picks a grid axis to carry the band
index: the first of extent 1 that no map names, else x, launched ``c`` times wider (CTA index
``i`` is block ``i / c``, band ``i % c``: the bands of one block are neighbours, sharing its
other tiles in L2). Codegen prints the virtual graph (every layout and schedule rule applies to
its tiles) but addresses the real tensors: strides from the real shapes, and each band's
start added to the refined dimension's index (``printer.TilePrinter.iter_starts``,
``out_ref``). Which iterators carry the dimension is found, not guessed: an assignment is
accepted when the split it seeds, propagated through the block's ops by
:func:`coarsen.propagate_split` (the rules block coarsening checks), reaches every output at the
refined dimension and no op reduces it, so only row-independent blocks are refined. Every
refined kernel is validated against the float64 program like every schedule.

Not with a split loop, stream-K, a cluster combine, TMA multicast or coarsening (their
partials, tickets and pairs are per logical block), and only for a dimension that is not the
last of any tile it splits, whose rows are a whole number of 16-byte vectors (so a clamped
start keeps every vector aligned) and that no grid axis or loop already splits.

Imports ``ir`` and :mod:`coarsen` only.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from mirage_formal.codegen.coarsen import propagate_split
from mirage_formal.errors import GraphError
from mirage_formal.ir.graph import ITER, BlockGraph, BlockOutput, make_iter, make_op
from mirage_formal.ir.node import Node
from mirage_formal.ir.ops import BLOCK

Shape = tuple[int, ...]

#: at most this many iterator assignments are tried (a block graph has a handful of iterators)
MAX_ASSIGNMENTS = 4096
#: the most CTAs a grid axis other than x may launch
MAX_YZ = 65535


@dataclass(frozen=True)
class Refinement:
    """A block graph refined along one dimension (see the module docstring)."""

    #: the virtual block graph codegen prints (the refined dimension ``rows`` long)
    graph: BlockGraph
    #: the grid axis that carries the band index, launched ``parts`` times wider
    axis: int
    rows: int
    parts: int
    #: the real shape of each kernel input and output (addresses use these)
    real_inputs: tuple[Shape, ...]
    real_outputs: tuple[Shape, ...]

    @property
    def launch_grid(self) -> tuple[int, int, int]:
        g = [x * (self.parts if a == self.axis else 1) for a, x in enumerate(self.graph.grid)]
        return g[0], g[1], g[2]


def band_axis(bg: BlockGraph) -> int:
    """The grid axis that carries a refinement's band index: the first of extent 1 that no
    iterator or saver maps (ViT's V tile names grid x at extent 1), else x."""
    used = {a for n in bg.nodes if n.op == ITER for a, d in enumerate(n.attr("imap")) if d != -1}
    used |= {a for o in bg.outputs for a, d in enumerate(o.omap) if d != -1}
    return next((a for a, g in enumerate(bg.grid) if g == 1 and a not in used), 0)


def _iter_options(bg: BlockGraph, n: Node, size: int) -> list[int | None]:
    """The dimensions of iterator ``n``'s input a refinement may split (its tile holds all
    ``size`` of them, no grid axis or loop splits them, not the last), then None."""
    shape, dt = bg.inputs[n.attr("input")]
    imap, fmap = n.attr("imap"), n.attr("fmap")
    out: list[int | None] = []
    for d in range(len(shape) - 1):
        if (n.shape[d] == size == shape[d] and d not in imap and d != fmap
                and math.prod(shape[d + 1:]) * dt.itemsize % 16 == 0):
            out.append(d)
    return [*out, None]


def _rows_independent(bg: BlockGraph, assign: dict[Node, int | None], dim: int) -> bool:
    """The split seeded at the iterators' assigned dimensions passes every op (none combines
    elements across it) and reaches each output at dimension ``dim``."""
    split = propagate_split(bg, assign)
    return split is not None and all(split[o.node] == dim for o in bg.outputs)


def _virtual(bg: BlockGraph, rows: int, assign: dict[Node, int | None]) -> BlockGraph | None:
    """The virtual block graph for one assignment of iterators to refined dimensions (None
    when an input would be refined by one iterator and read whole by another, or an op
    refuses the band's tiles)."""
    refined_inputs: dict[int, int | None] = {}
    for n, d in assign.items():
        if refined_inputs.setdefault(n.attr("input"), d) != d:
            return None
    inputs = []
    for k, (shape, dt) in enumerate(bg.inputs):
        d = refined_inputs.get(k)
        inputs.append((tuple(rows if i == d else x for i, x in enumerate(shape)), dt))
    new: dict[Node, Node] = {}
    try:
        for b in bg.nodes:
            if b.op == ITER:
                new[b] = make_iter(inputs, b.attr("input"), b.attr("imap"), b.attr("fmap"),
                                   bg.grid, bg.forloop)
            else:
                new[b] = make_op(b.op, [new[s] for s in b.src], b.attr_dict, BLOCK)
        outs = tuple(BlockOutput(new[o.node], o.omap) for o in bg.outputs)
        return BlockGraph(bg.grid, bg.threads, bg.forloop, tuple(inputs), outs)
    except GraphError:
        return None


def _refusal(bg: BlockGraph, dim: int, rows: int) -> str | None:
    """Why the outputs' dimension ``dim`` of ``bg`` cannot be split into bands of ``rows``
    before any iterator is looked at, or None."""
    sizes = {o.node.shape[dim] if dim < len(o.node.shape) else None for o in bg.outputs}
    if len(sizes) != 1 or None in sizes:
        return f"not every output tile has a dimension {dim} of the same size"
    n = bg.outputs[0].node.shape[dim]
    if not 1 <= rows < n:
        return f"{rows} rows are not fewer than the dimension's {n}"
    if any(dim == len(o.node.shape) - 1 or dim in o.omap
           or math.prod(bg.output_shape(o)[dim + 1:]) * o.node.dtype.itemsize % 16
           for o in bg.outputs):
        return (f"dimension {dim} is the last of an output, a grid axis saves along it, or its "
                "rows are not whole 16-byte vectors")
    axis = band_axis(bg)
    if axis > 0 and bg.grid[axis] * -(-n // rows) > MAX_YZ:
        return "the grid axis for the bands would launch too many CTAs"
    return None


def refined(bg: BlockGraph, dim: int, rows: int) -> Refinement:
    """``bg`` with its outputs' dimension ``dim`` computed ``rows`` at a time by separate CTAs.
    Raises :class:`GraphError` (saying why) when the block cannot be refined so."""
    why = _refusal(bg, dim, rows)
    if why is None:
        n = bg.outputs[0].node.shape[dim]
        parts = -(-n // rows)
        axis = band_axis(bg)
        iters = [x for x in bg.nodes if x.op == ITER]
        options = [_iter_options(bg, x, n) for x in iters]
        for k, choice in enumerate(itertools.product(*options)):
            if k >= MAX_ASSIGNMENTS:
                break
            assign = dict(zip(iters, choice, strict=True))
            if all(c is None for c in choice) or not _rows_independent(bg, assign, dim):
                continue
            v = _virtual(bg, rows, assign)
            if v is not None:
                real_out = tuple(bg.output_shape(o) for o in bg.outputs)
                return Refinement(v, axis, rows, parts, tuple(s for s, _ in bg.inputs), real_out)
        why = "an op combines elements across that dimension (or no input carries it alone)"
    raise GraphError(f"block graph {bg.key[:8]}: cannot compute output dimension {dim} "
                     f"{rows} rows a block: {why}")


def refinement(bg: BlockGraph, dim: int, rows: int) -> Refinement | None:
    """:func:`refined`, or None where it refuses."""
    try:
        return refined(bg, dim, rows)
    except GraphError:
        return None


def refinable(bg: BlockGraph, dim: int, rows: int) -> bool:
    return refinement(bg, dim, rows) is not None


def refinable_dims(bg: BlockGraph) -> list[tuple[int, int]]:
    """(output dimension, its size) of each dimension a refinement could split into bands of
    16 rows (the tensor cores' row tile), the highest dimension first."""
    if not bg.outputs:
        return []
    rank = len(bg.outputs[0].node.shape)
    out = []
    for d in range(rank - 2, -1, -1):
        size = bg.outputs[0].node.shape[d]
        if size > 16 and refinable(bg, d, 16):
            out.append((d, size))
    return out
