"""Seed candidates: μGraphs built directly from the program, checked before the enumeration.

The enumerator reaches a deep single-kernel fusion only after exploring many shallower states;
on row-local programs (normalisations, elementwise chains, residual blocks) that fusion is
often the best μGraph and takes minutes to reach. A *lift* builds it at once: one
graph-defined kernel whose block graph is the whole program, each input accumulated right
after its iterator (for-loop range 1, so every op runs once, after the loop), the grid split
along dimensions that no op reduces or contracts and that every output carries.

Which dimensions may be split is a small unification over *dimension variables*: every input
dimension gets a variable; an op unifies the variables its shape rule ties together
(elementwise operands aligned from the right, a matmul's batch dimensions, a norm's gain with
the normalised dimension) and marks the ones it reduces (a reduction's axis, a matmul's
contracted k, a norm's last dimension). A variable class of size > 1, never reduced, that
every output carries exactly once and no input carries twice can be cut across blocks: each
block then computes the program on its slice, independently of the others.

Seeds are ordinary candidates: the search expands their grid sizes (``Enumerator.variants``),
drops those over the shared-memory limit and hands the cheapest to the checker, so a seed is
accepted only when it is verified like every other μGraph. Ops whose shape rule the analysis
does not know make the program unliftable (no seed, no error).

Imports ``ir`` and ``search.labels`` only.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Sequence

from mirage_formal.errors import GraphError
from mirage_formal.ir.graph import (
    INPUT,
    BlockGraph,
    BlockOutput,
    KernelGraph,
    make_iter,
    make_kernel,
    make_op,
)
from mirage_formal.ir.node import Node
from mirage_formal.ir.ops import BLOCK, REGISTRY
from mirage_formal.search.labels import UnionFind

MAX_SEEDS = 4
"""Lifted candidates at most (one per choice of split dimensions, the most blocks first)."""


class Unliftable(Exception):
    """The program (or the chosen dimensions) cannot be lifted: no seed, no error."""


class DimVars:
    """Dimension variables of every tensor of a program (union-find with sizes and reductions)."""

    def __init__(self, program: KernelGraph) -> None:
        self.uf = UnionFind()
        self.size: list[int] = []
        self.reduced: list[int] = []
        #: reduced by a matmul's contraction or a sum or mean (a for-loop may walk them:
        #: ``search.loop_seeds``)
        self.loop_reducible: list[int] = []
        self.of: dict[Node, list[int]] = {}
        for n in program.nodes:
            if n.op == INPUT:
                self.of[n] = [self._fresh(s) for s in n.shape]
            else:
                self.of[n] = self._op(n)

    def _fresh(self, size: int) -> int:
        self.size.append(size)
        return len(self.size) - 1

    def find(self, v: int) -> int:
        return int(self.uf.find(v))

    def _union(self, a: int, b: int) -> None:
        self.uf.union(a, b)

    def roots(self, n: Node) -> list[int]:
        """The class of each dimension of ``n``."""
        return [self.find(v) for v in self.of[n]]

    def axis_map(self, n: Node, grid_vars: Sequence[int]) -> tuple[int, int, int]:
        """``n``'s dimension that grid axis ``a`` splits (class ``grid_vars[a]``), or -1."""
        roots = self.roots(n)
        m = [roots.index(r) if r in roots else -1 for r in grid_vars]
        return (*m, *(-1,) * (3 - len(m)))  # type: ignore[return-value]

    def smallest_grid(self, classes: Sequence[int], grid_sizes: Sequence[int]) -> list[int] | None:
        """Per class, the smallest of ``grid_sizes`` (> 1) that divides it; None when one has
        none (the search's variant expansion tries the other sizes)."""
        grid = []
        for r in classes:
            sizes = [s for s in sorted(grid_sizes) if s > 1 and self.size[r] % s == 0]
            if not sizes:
                return None
            grid.append(sizes[0])
        return grid

    def is_reduced(self, v: int) -> bool:
        r = self.find(v)
        return any(self.find(x) == r for x in self.reduced)

    # ------------------------------------------------------------ shape rules

    def _aligned(self, out_shape: Sequence[int],
                 operands: Sequence[tuple[Sequence[int], Sequence[int]]]) -> list[int]:
        """Broadcasting over operands given as (shape, variables): an operand dimension of the
        output's size (> 1) is the output's."""
        out: list[int] = []
        rank = len(out_shape)
        for pos in range(rank):
            v: int | None = None
            for shape, dims in operands:
                j = pos - (rank - len(shape))
                if j < 0 or shape[j] != out_shape[pos] or out_shape[pos] == 1:
                    continue
                w = dims[j]
                if v is None:
                    v = w
                else:
                    self._union(v, w)
            out.append(v if v is not None else self._fresh(out_shape[pos]))
        return out

    def _op(self, n: Node) -> list[int]:
        d = REGISTRY.get(n.op)
        if d is None or BLOCK not in d.levels:
            raise Unliftable(n.op)
        if d.label in ("same", "broadcast") and d.elementwise:
            return self._aligned(n.shape, [(s.shape, self.of[s]) for s in n.src])
        if d.label == "matmul":
            a, b = n.src
            if len(a.shape) < 2 or len(b.shape) < 2:
                raise Unliftable(n.op)
            va, vb = self.of[a], self.of[b]
            self._union(va[-1], vb[-2])
            self.reduced.append(va[-1])
            self.loop_reducible.append(va[-1])
            batch = self._aligned(n.shape[:-2], [(a.shape[:-2], va[:-2]), (b.shape[:-2], vb[:-2])])
            return [*batch, va[-2], vb[-1]]
        if d.label == "reduce":
            (x,) = n.src
            vx = self.of[x]
            axis = int(n.attr("axis")) % len(x.shape)
            self.reduced.append(vx[axis])
            if n.op in ("sum", "mean"):
                self.loop_reducible.append(vx[axis])
            rest = [v for i, v in enumerate(vx) if i != axis]
            if n.attr("keepdims"):
                rest.insert(axis, self._fresh(1))
            return rest
        if d.label == "norm":
            x = n.src[0]
            vx = list(self.of[x])
            self.reduced.append(vx[-1])
            for g in n.src[1:]:
                for j in range(1, len(g.shape) + 1):
                    if g.shape[-j] == x.shape[-j] and g.shape[-j] > 1:
                        self._union(self.of[g][-j], vx[-j])
            return vx
        raise Unliftable(n.op)


def splittable(program: KernelGraph, dv: DimVars) -> list[int]:
    """Variable classes the grid may split (see the module doc), largest first."""
    roots: dict[int, int] = {}
    for o in program.outputs:
        for v in dv.of[o]:
            r = dv.find(v)
            roots[r] = dv.size[v]
    out = []
    for r, size in roots.items():
        if size <= 1 or dv.is_reduced(r):
            continue
        if any(dv.roots(o).count(r) != 1 for o in program.outputs):
            continue
        if any(dv.roots(i).count(r) > 1 for i in program.inputs):
            continue
        out.append(r)
    return sorted(out, key=lambda r: (-dv.size[r], r))


def lift(program: KernelGraph, grid_vars: Sequence[int], grid: Sequence[int], dv: DimVars,
         threads: int) -> KernelGraph:
    """The whole program as one graph-defined kernel, grid axis ``a`` splitting class
    ``grid_vars[a]`` into ``grid[a]`` slices."""
    g3 = (*grid, *(1,) * (3 - len(grid)))
    inputs = list(program.inputs)
    sig = tuple((i.shape, i.dtype) for i in inputs)

    block: dict[Node, Node] = {}
    for k, i in enumerate(inputs):
        it = make_iter(sig, k, dv.axis_map(i, grid_vars), -1, g3, 1)  # type: ignore[arg-type]
        block[i] = make_op("accum", [it], {"kind": "sum", "fold": None}, BLOCK)
    for n in program.nodes:
        if n.op != INPUT:
            block[n] = make_op(n.op, [block[s] for s in n.src], n.attr_dict, BLOCK)
    outs = tuple(BlockOutput(block[o], dv.axis_map(o, grid_vars)) for o in program.outputs)
    bg = BlockGraph(g3, threads, 1, sig, outs)  # type: ignore[arg-type]
    return KernelGraph(program.inputs, tuple(make_kernel(bg, inputs)))


def lifted_candidates(program: KernelGraph, grid_sizes: Sequence[int], max_grid_axes: int = 3,
                      threads: int = 128) -> list[KernelGraph]:
    """Up to :data:`MAX_SEEDS` lifts of ``program`` (one per choice of split classes; each at
    the smallest grid size of ``grid_sizes`` that divides its classes: the search's variant
    expansion tries the others), the one-block lift where no choice gives one, or none when
    the program cannot be lifted."""
    try:
        dv = DimVars(program)
    except Unliftable:
        return []
    classes = splittable(program, dv)
    out: list[KernelGraph] = []
    for k in range(min(3, max_grid_axes, len(classes)), 0, -1):
        for combo in itertools.combinations(classes, k):
            grid = dv.smallest_grid(combo, grid_sizes)
            if grid is None:
                continue
            try:
                out.append(lift(program, combo, grid, dv, threads))
            except GraphError:  # an op whose shape rule refuses the slice: skip this choice
                continue
            if len(out) >= MAX_SEEDS:
                return out
    if not out:
        # nothing splits across blocks (a one-row layer norm: its only axis is reduced; a
        # decode step's (1, 1, d) activations): the whole program on one block. Without it
        # such a program had no seed at all, and the search returned its unfused program
        with contextlib.suppress(GraphError):
            out.append(lift(program, (), (), dv, threads))
    return out
