"""Block refinement: one logical block runs as several CTAs, each over a band of its rows.

The inverse of :mod:`coarsen`, and like it a schedule choice (:attr:`Schedule.refine_rows`):
the μGraph fixes what each logical block computes, the schedule which CTAs compute it. A
block whose tiles carry a dimension that no block op combines across (attention's query
rows, a product's rows) can run as ``c`` CTAs along a grid axis the μGraph leaves at 1, each
computing ``rows`` of that dimension. The μGraph semantics split a dimension only into equal
parts, so ViT's 197 tokens (a prime) were one tile a block; a refinement needs no divisor:
CTA ``y`` computes the band starting at ``min(y * rows, n - rows)``, so the last band ends at
the dimension's end and overlaps its neighbour. Rows computed twice are computed the same way
from the same data and stored twice with the same values; every address stays inside the
tensors, and no tile has a partial band to mask.

How it is emitted: :func:`refined` builds a *virtual* block graph, the μGraph's block graph
with grid axis ``axis`` of extent ``c`` splitting the refined dimension of the chosen iterators
and of the outputs into ``rows``-sized tiles, over virtual input and output shapes whose
refined dimension is ``c * rows``. Codegen prints that graph (every layout and schedule rule
applies to its tiles), but addresses the real tensors: strides from the real shapes and the
band's start clamped (``printer.TilePrinter.iter_starts``, ``out_ref``). Which iterators carry
the dimension is found, not guessed: an assignment is accepted when
:func:`coarsen.coarsenable` accepts the virtual graph along ``axis`` (coarsening it back gives
the μGraph's block graph: no op reduces the dimension, every operand aligns it, every output
saves it), so only row-independent blocks are refined. Every refined kernel is validated
against the float64 program like every schedule.

Not with a split loop, stream-K or a cluster combine (their partials are per CTA; kept
apart for simplicity), and only for a dimension that is not the last of any tile it splits,
whose rows are a whole number of 16-byte vectors (so a clamped start keeps every vector
aligned) and that no grid axis or loop already splits.

Imports ``ir`` and :mod:`coarsen` only.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from mirage_formal.codegen.coarsen import coarsenable
from mirage_formal.errors import GraphError
from mirage_formal.ir.graph import ITER, BlockGraph, BlockOutput, make_iter, make_op
from mirage_formal.ir.node import Node
from mirage_formal.ir.ops import BLOCK

Shape = tuple[int, ...]

#: at most this many iterator assignments are tried (a block graph has a handful of iterators)
MAX_ASSIGNMENTS = 4096


@dataclass(frozen=True)
class Refinement:
    """A block graph refined along one dimension (see the module docstring)."""

    #: the virtual block graph codegen prints (grid axis ``axis`` of extent ``parts``)
    graph: BlockGraph
    axis: int
    rows: int
    parts: int
    #: the real shape of each kernel input and output (addresses use these)
    real_inputs: tuple[Shape, ...]
    real_outputs: tuple[Shape, ...]


def _free_axis(bg: BlockGraph) -> int | None:
    """The first grid axis of extent 1 that no iterator or saver maps (an axis of one block
    may still name a dimension: ViT's V tile a whole head's columns on grid x = 1)."""
    used = {a for n in bg.nodes if n.op == ITER for a, d in enumerate(n.attr("imap")) if d != -1}
    used |= {a for o in bg.outputs for a, d in enumerate(o.omap) if d != -1}
    return next((a for a, g in enumerate(bg.grid) if g == 1 and a not in used), None)


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


def _virtual(bg: BlockGraph, axis: int, parts: int, rows: int,
             assign: dict[Node, int | None], dim: int) -> BlockGraph | None:
    """The virtual block graph for one assignment of iterators to split dimensions (None when
    an input would be split by one iterator and read whole by another, or an op refuses)."""
    split_inputs: dict[int, int | None] = {}
    for n, d in assign.items():
        k = n.attr("input")
        if split_inputs.setdefault(k, d) != d:
            return None
    inputs = []
    for k, (shape, dt) in enumerate(bg.inputs):
        d = split_inputs.get(k)
        inputs.append((tuple(parts * rows if i == d else s for i, s in enumerate(shape)), dt)
                      if d is not None else (shape, dt))
    grid = tuple(parts if a == axis else g for a, g in enumerate(bg.grid))
    new: dict[Node, Node] = {}
    try:
        for b in bg.nodes:
            if b.op == ITER:
                d = assign[b]
                im = [d if (a == axis and d is not None) else m for a, m in enumerate(b.attr("imap"))]
                new[b] = make_iter(inputs, b.attr("input"), (im[0], im[1], im[2]), b.attr("fmap"),
                                   (grid[0], grid[1], grid[2]), bg.forloop)
            else:
                new[b] = make_op(b.op, [new[s] for s in b.src], b.attr_dict, BLOCK)
        outs = []
        for o in bg.outputs:
            om = [dim if a == axis else m for a, m in enumerate(o.omap)]
            outs.append(BlockOutput(new[o.node], (om[0], om[1], om[2])))
        return BlockGraph((grid[0], grid[1], grid[2]), bg.threads, bg.forloop, tuple(inputs),
                          tuple(outs))
    except GraphError:
        return None


def _refusal(bg: BlockGraph, dim: int, rows: int) -> str | None:
    """Why the outputs' dimension ``dim`` of ``bg`` cannot be split into bands of ``rows``
    before any iterator is looked at, or None."""
    if _free_axis(bg) is None:
        return "every grid axis is in use"
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
    return None


def refined(bg: BlockGraph, dim: int, rows: int) -> Refinement:
    """``bg`` with its outputs' dimension ``dim`` computed ``rows`` at a time by separate CTAs.
    Raises :class:`GraphError` (saying why) when the block cannot be refined so."""
    why = _refusal(bg, dim, rows)
    axis = _free_axis(bg)
    if why is None and axis is not None:
        n = bg.outputs[0].node.shape[dim]
        parts = -(-n // rows)
        iters = [x for x in bg.nodes if x.op == ITER]
        options = [_iter_options(bg, x, n) for x in iters]
        for k, choice in enumerate(itertools.product(*options)):
            if k >= MAX_ASSIGNMENTS:
                break
            if all(c is None for c in choice):
                continue
            v = _virtual(bg, axis, parts, rows, dict(zip(iters, choice, strict=True)), dim)
            if v is not None and coarsenable(v, axis, parts):
                real_out = tuple(bg.output_shape(o) for o in bg.outputs)
                return Refinement(v, axis, rows, parts, tuple(s for s, _ in bg.inputs), real_out)
        why = "an op combines elements across that dimension (or no input carries it alone)"
    raise GraphError(f"block graph {bg.key[:8]}: cannot compute output dimension {dim} "
                     f"{rows} rows a block: {why}")


def refinable(bg: BlockGraph, dim: int, rows: int) -> bool:
    try:
        refined(bg, dim, rows)
    except GraphError:
        return False
    return True


def refinable_dims(bg: BlockGraph) -> list[tuple[int, int]]:
    """(output dimension, its size) of each dimension a refinement could split into bands of
    16 rows (the tensor cores' row tile), the highest dimension first."""
    if _free_axis(bg) is None or not bg.outputs:
        return []
    rank = len(bg.outputs[0].node.shape)
    out = []
    for d in range(rank - 2, -1, -1):
        size = bg.outputs[0].node.shape[d]
        if size > 16 and refinable(bg, d, 16):
            out.append((d, size))
    return out
