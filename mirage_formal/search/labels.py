"""Index labels: which index variable of the program each tensor dimension carries.

The reference program is read once: dimensions that an op identifies (the two operands of an
elementwise op, the contraction dimensions of a matmul, a batch dimension) are unified, so every
dimension of every program tensor gets a label (an index variable: rows, heads, the key
dimension, ...). Size-1 dimensions and reduced dimensions get ``UNIT``.

The search gives every tensor it builds, at the kernel and the block level, a label per
dimension by the same rules, but *checks* instead of unifying: an elementwise op whose operands
carry different labels in one aligned dimension, or a matmul whose contraction dimensions differ,
mixes index spaces and is not built. Grid axes and the for-loop are bound to labels: a grid
axis on label ℓ splits, in every kernel input, the dimension that carries ℓ (and no other
dimension); the for-loop on label ℓ does the same for ``fmap``. An output saver maps the axis
on ℓ to the tile dimension that carries ℓ, or, when the block has reduced ℓ away (a partial
result, FlashDecoding's split of the key dimension), to a free dimension, which then carries the
*concatenation* label ``("cat", ℓ, inner, size)``; a later ``accum`` with ``fold=size`` sums the
parts and restores ``inner``.

This restricts the space to index-consistent μGraphs; see docs/search.md, "Limitations".
Imports ``ir`` only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mirage_formal.ir.graph import GET, INPUT, KERNEL_OP, KernelGraph
from mirage_formal.ir.node import Node
from mirage_formal.ir.ops import REGISTRY

Label = tuple[Any, ...]
Labels = tuple[Label, ...]

UNIT: Label = ("1",)


def _rule(op: str) -> str:
    """The op's label rule, from its registry declaration (``ir.opdef.LABEL_RULES``)."""
    d = REGISTRY.get(op)
    return d.label if d is not None else ""


def part(axis: Label) -> Label:
    return ("part", axis)


def cat(axis: Label, inner: Label, size: int) -> Label:
    return part(axis) if inner == UNIT else ("cat", axis, inner, size)


class UnionFind:
    """Union-find over hashable keys (the smaller root wins, so results are deterministic)."""

    def __init__(self) -> None:
        self.parent: dict[Any, Any] = {}

    def find(self, x: Any) -> Any:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: Any, b: Any) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def program_labels(program: KernelGraph) -> dict[Node, Labels]:
    """A label per dimension of every kernel-level node of ``program`` (by unification)."""
    uf = UnionFind()
    order = program.nodes
    idx = {n: i for i, n in enumerate(order)}

    def key(n: Node, d: int) -> tuple[int, int]:
        return (idx[n], d)

    def bcast(operands: Sequence[Node], out: Node) -> None:
        r = len(out.shape)
        for s in operands:
            off = r - len(s.shape)
            for d, size in enumerate(s.shape):
                if size > 1:
                    uf.union(key(s, d), key(out, d + off))

    for n in order:
        if n.op in (INPUT, KERNEL_OP, GET):
            continue
        rule = _rule(n.op)
        if rule == "same":
            for d in range(len(n.shape)):
                uf.union(key(n.src[0], d), key(n, d))
        elif rule == "broadcast":
            bcast(n.src, n)
        elif rule == "matmul":
            a, b = n.src
            uf.union(key(a, len(a.shape) - 1), key(b, len(b.shape) - 2))
            r = len(n.shape)
            for s in (a, b):
                off = r - len(s.shape)
                for d in range(len(s.shape) - 2):
                    if s.shape[d] > 1:
                        uf.union(key(s, d), key(n, d + off))
            uf.union(key(a, len(a.shape) - 2), key(n, r - 2))
            uf.union(key(b, len(b.shape) - 1), key(n, r - 1))
        elif rule == "norm":
            for d in range(len(n.shape)):
                uf.union(key(n.src[0], d), key(n, d))
            if len(n.src) == 2:
                uf.union(key(n.src[1], 0), key(n, len(n.shape) - 1))
        elif rule == "reduce":
            ax = n.attr("axis") % len(n.src[0].shape)
            src = n.src[0]
            j = 0
            for d in range(len(src.shape)):
                if d == ax:
                    if n.attr("keepdims"):
                        j += 1
                    continue
                uf.union(key(src, d), key(n, j))
                j += 1
    roots: dict[Any, int] = {}
    out: dict[Node, Labels] = {}
    for n in order:
        if n.op in (KERNEL_OP, GET):
            continue
        labs: list[Label] = []
        for d, size in enumerate(n.shape):
            if size == 1 or _reduced(n, d):
                labs.append(UNIT)
                continue
            r = uf.find(key(n, d))
            roots.setdefault(r, len(roots))
            labs.append(("L", roots[r]))
        out[n] = tuple(labs)
    return out


def _reduced(n: Node, d: int) -> bool:
    return _rule(n.op) == "reduce" and bool(n.attr("keepdims")) and d == n.attr("axis") % len(n.shape)


# ---------------------------------------------------------------- checked inference

def _bcast_labels(shapes: Sequence[tuple[int, ...]], labs: Sequence[Labels],
                  out_rank: int) -> list[Label] | None:
    out: list[Label] = []
    for d in range(out_rank):
        cur: Label | None = None
        cur_size = 1
        for s, lab in zip(shapes, labs, strict=True):
            off = out_rank - len(s)
            if d < off:
                continue
            lb, size = lab[d - off], s[d - off]
            if lb == UNIT:
                continue
            if cur is None:
                cur, cur_size = lb, size
            elif cur != lb:
                return None
            else:
                cur_size = max(cur_size, size)
        out.append(cur if cur is not None else UNIT)
    return out


def infer(n: Node, src_labels: Sequence[Labels], loop_label: Label | None = None) -> Labels | None:
    """Labels of registry-op node ``n`` from its sources' labels; None when inconsistent.

    ``loop_label`` (block level): the label the for-loop splits; an ``accum`` may only sum over
    it by reducing the last dimension (fold=1) that carries it.
    """
    rule = _rule(n.op)
    if rule == "same":
        return src_labels[0]
    if rule == "broadcast":
        r = _bcast_labels([s.shape for s in n.src], src_labels, len(n.shape))
        return None if r is None else tuple(r)
    if rule == "matmul":
        la, lb = src_labels
        if la[-1] != lb[-2] or (la[-1] == UNIT and n.src[0].shape[-1] > 1):
            return None
        rank = len(n.shape)
        batch = _bcast_labels([s.shape[:-2] for s in n.src], [la[:-2], lb[:-2]], rank - 2)
        if batch is None:
            return None
        return (*batch, la[-2], lb[-1])
    if rule == "norm":
        if len(src_labels) == 2 and src_labels[1][0] != src_labels[0][-1]:
            return None
        return src_labels[0]
    if rule == "reduce":
        lab = list(src_labels[0])
        ax = n.attr("axis") % len(lab)
        if n.attr("keepdims"):
            lab[ax] = UNIT
        else:
            del lab[ax]
        return tuple(lab)
    if rule == "accum":
        lab = list(src_labels[0])
        fold = n.attr("fold")
        if loop_label is not None and loop_label in lab[:-1 if fold is not None else None]:
            return None  # summing different loop chunks elementwise
        if fold is None:
            return tuple(lab)
        if fold == 1:
            lab[-1] = UNIT
            return tuple(lab)
        last = lab[-1]
        if last[0] == "cat" and last[3] == fold:
            lab[-1] = last[2]
            return tuple(lab)
        return None
    return None


def precheck(op: str, shapes: Sequence[tuple[int, ...]], labs: Sequence[Labels]) -> bool:
    """A cheap test, before any node is built, that a binary op's shapes and labels fit."""
    rule = _rule(op)
    if rule == "broadcast" and len(shapes) == 2:
        a, b = shapes
        for x, y in zip(reversed(a), reversed(b), strict=False):
            if x != y and x != 1 and y != 1:
                return False
        return _bcast_labels(shapes, labs, max(len(a), len(b))) is not None
    if rule == "matmul":
        a, b = shapes
        return (len(a) >= 2 and len(b) >= 2 and a[-1] == b[-2] and labs[0][-1] == labs[1][-2])
    return True


def fold_choices(labels: Labels) -> list[int]:
    """fold values other than None/1 that are index-consistent for a tile with these labels."""
    last = labels[-1] if labels else UNIT
    return [int(last[3])] if last[0] == "cat" else []


def output_labels(tile_labels: Labels, tile_shape: tuple[int, ...], omap: tuple[int, int, int],
                  axis_labels: Mapping[int, Label]) -> Labels:
    """Labels of a kernel output saved with ``omap`` (grid axis index -> its label)."""
    out = list(tile_labels)
    for ax, d in enumerate(omap):
        if d == -1:
            continue
        lab = axis_labels[ax]
        if tile_labels[d] != lab:
            out[d] = cat(lab, tile_labels[d], tile_shape[d])
    return tuple(out)
