"""Block coarsening: one thread block runs ``c`` adjacent blocks of a grid axis as one.

A μGraph fixes what each logical block computes; which CTA runs it is a schedule choice
(:attr:`Schedule.coarsen`), like the split of a loop over more blocks, in the other
direction. Coarsening grid axis ``ax`` by ``c`` runs the block graph on grid ``gx / c`` with
every tile dimension that axis splits ``c`` times wider: a kernel reading 8 columns (16 bytes)
of each weight row per block reads 64 (128 bytes) per CTA, in full DRAM sectors, instead of
half-sectors that a neighbouring block fetches again.

It computes the same function, element for element with the same arithmetic, exactly when no
block op combines elements across the axis's dimension. :func:`coarsenable` checks that on the
block graph, rule by rule (the registry's label rules): each node's dimension that the axis
splits is tracked from the iterators through the ops, and the kernel is refused when one op
reduces it (a matmul's contraction, a row reduction, a norm's row, a fold accumulator's
columns), two operands align it with an unsplit dimension, the loop also splits it, a node
carries it twice, or an output saver does not concatenate blocks along it. The coarsened
kernel is validated against the float64 program like every schedule.

Imports ``ir`` only.
"""

from __future__ import annotations

from collections.abc import Sequence

from mirage_formal.errors import GraphError
from mirage_formal.ir.graph import ITER, BlockGraph, resized_block
from mirage_formal.ir.node import Node
from mirage_formal.ir.ops import REGISTRY

#: the dimension of a node's tile that the coarsened axis splits (None: none)
Split = int | None


def _aligned(shape: Sequence[int], out_rank: int, d: int) -> int | None:
    """The dimension of an operand of shape ``shape`` aligned (numpy broadcasting) with
    output dimension ``d``, or None when the operand has fewer dimensions."""
    off = out_rank - len(shape)
    return d - off if d >= off else None


def split_of(n: Node, srcs: Sequence[Split]) -> tuple[bool, Split]:
    """(ok, split dimension of ``n``) from its sources' split dimensions, by the op's label
    rule; ok False when ``n`` combines elements across the split dimension."""
    d = REGISTRY.get(n.op)
    rule = d.label if d is not None else ""
    if all(s is None for s in srcs):
        return True, None
    if rule == "same":
        return True, srcs[0]
    if rule == "broadcast":
        rank = len(n.shape)
        found: Split = None
        for od in range(rank):
            split_here = unsplit_wide = False
            for s, sd in zip(n.src, srcs, strict=True):
                ad = _aligned(s.shape, rank, od)
                if ad is None:
                    continue
                if sd == ad:
                    split_here = True
                elif s.shape[ad] > 1:
                    unsplit_wide = True
            if split_here:
                if unsplit_wide or found is not None:
                    return False, None
                found = od
        return True, found
    if rule == "matmul":
        (a, b), (sa, sb) = n.src, srcs
        if sa == len(a.shape) - 1 or sb == len(b.shape) - 2:
            return False, None  # the contraction
        rank = len(n.shape)
        # A's rows, B's columns and the batch dimensions keep their place counted from the
        # right: output dimension rank - len(operand) + d
        outs = {rank - len(x.shape) + sd for x, sd in ((a, sa), (b, sb)) if sd is not None}
        if len(outs) > 1:
            return False, None
        (out,) = outs
        if out < rank - 2:  # a batch dimension: the other operand may align it only broadcast
            for x, sd in ((a, sa), (b, sb)):
                ad = _aligned(x.shape[:-2], rank - 2, out)
                if ad is not None and sd != ad and x.shape[ad] > 1:
                    return False, None
        return True, out
    if rule == "reduce":
        sd0 = srcs[0]
        ax = n.attr("axis") % len(n.src[0].shape)
        if sd0 == ax:
            return False, None
        if sd0 is None or n.attr("keepdims"):
            return True, sd0
        return True, sd0 - 1 if sd0 > ax else sd0
    if rule == "norm":
        if srcs[0] == len(n.src[0].shape) - 1 or any(s is not None for s in srcs[1:]):
            return False, None
        return True, srcs[0]
    if rule == "accum":
        if n.attr("fold") is not None and srcs[0] == len(n.src[0].shape) - 1:
            return False, None
        return True, srcs[0]
    return False, None


def propagate_split(bg: BlockGraph, seeds: dict[Node, Split]) -> dict[Node, Split] | None:
    """Each node's split dimension, from the iterators' ``seeds`` through every op by
    :func:`split_of`; None when an op combines elements across it (the rule check shared by
    coarsening and refinement, :mod:`refine`)."""
    split: dict[Node, Split] = {}
    for n in bg.nodes:
        if n.op == ITER:
            split[n] = seeds[n]
            continue
        ok, sd = split_of(n, [split[s] for s in n.src])
        if not ok:
            return None
        split[n] = sd
    return split


def coarsenable(bg: BlockGraph, ax: int, c: int) -> bool:
    """Whether ``c`` adjacent blocks of grid axis ``ax`` can run as one block computing the
    same elements with the same arithmetic (see the module docstring)."""
    if c == 1:
        return True
    if c < 1 or bg.grid[ax] % c:
        return False
    seeds: dict[Node, Split] = {}
    for n in bg.nodes:
        if n.op == ITER:
            d = n.attr("imap")[ax]
            if d != -1 and d == n.attr("fmap"):
                return False  # the loop walks the same dimension: chunks would interleave
            seeds[n] = None if d == -1 else d
    split = propagate_split(bg, seeds)
    if split is None:
        return False
    for o in bg.outputs:
        d = o.omap[ax]
        if d == -1 or split[o.node] != d:
            return False
    return any(split[n] is not None for n in bg.nodes if n.op == ITER)


def coarsened(bg: BlockGraph, ax: int, c: int) -> BlockGraph:
    """``bg`` with grid axis ``ax`` divided by ``c`` and every tile it splits ``c`` times
    wider. Raises :class:`GraphError` when :func:`coarsenable` refuses it."""
    if c == 1:
        return bg
    if not coarsenable(bg, ax, c):
        raise GraphError(f"block graph {bg.key[:8]}: grid axis {'xyz'[ax]} cannot be coarsened "
                         f"by {c} (an op combines elements across the blocks it would merge, or "
                         f"{c} does not divide the axis's {bg.grid[ax]} blocks)")
    gx, gy, gz = (g // c if a == ax else g for a, g in enumerate(bg.grid))
    return resized_block(bg, (gx, gy, gz), bg.forloop)


def narrow_axes(bg: BlockGraph, max_bytes: int = 64) -> list[tuple[int, int]]:
    """(grid axis, row bytes) of each axis that splits the contiguous (last) dimension of an
    iterator's input into tiles of fewer than ``max_bytes`` bytes per row: where coarsening
    makes the block's global reads whole DRAM sectors."""
    out: list[tuple[int, int]] = []
    for ax, g in enumerate(bg.grid):
        if g == 1:
            continue
        widths = [n.shape[-1] * n.dtype.itemsize for n in bg.nodes if n.op == ITER
                  and n.attr("imap")[ax] == len(bg.inputs[n.attr("input")][0]) - 1]
        if widths and min(widths) < max_bytes:
            out.append((ax, min(widths)))
    return out
