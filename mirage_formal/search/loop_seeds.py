"""Loop seeds: the whole program as one graph-defined kernel whose for-loop walks a reduced dimension.

A lift (``search.seeds``) runs every op once per block, so a program that contracts or sums
a long dimension (attention's keys, a matmul's k) gets whole rows of its weights in every
block and rarely fits in shared memory. A *loop lift* cuts one such dimension class R into
for-loop chunks instead:

- *in-loop* ops are those whose result carries R, and those that carry no R and depend on
  no reduction over R (loop-invariant, read through ``fmap = -1`` iterators);
- a reduction over R (a matmul contracting R, a sum or mean over R's axis) becomes the same
  op on the chunk followed by a sum (mean for a mean) accumulator;
- *after-loop* ops consume accumulated values; a loop-invariant value they read is rebuilt
  after the loop from plain mean accumulators of its input tiles (``ir.graph.invariant_mean``:
  every iteration adds the same tile, so the mean is that tile).

An in-loop op may also read an after-loop value when it only scales: ``mul(p, s)`` and
``div(p, s)`` with ``s`` reduced over R (a softmax's row sums, a norm's root mean square). The
factor is deferred: it rides along with ``p`` through further scalings (``mul``, ``div``,
``neg``, ``mul_scalar``) and is applied after the reduction over R that consumes the scaled
value, since a sum over R of ``s · p`` is ``s`` times the sum of ``p`` when ``s`` is the same
for every element of R. That is attention's ``softmax(S) · V = (exp(S) · V) / rowsum(exp(S))``
written by no one. A factor whose shape would not line up with the reduced result, and any
other use of an after-loop value inside the loop, make R unusable (no seed, no error).

The grid splits the classes ``seeds.splittable`` allows, as a lift's does. Loop seeds are
ordinary candidates (size variants, shared-memory limit, verification), like lifts.

Imports ``ir`` and ``search.seeds`` only.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

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
from mirage_formal.search.seeds import DimVars, Unliftable, splittable

MAX_LOOP_SEEDS = 4
"""Loop-lifted candidates at most (over every loop class and choice of split classes)."""

#: ops that scale their operand (linear in it): a deferred factor passes through them
_SCALING = ("mul", "div", "neg", "mul_scalar")

@dataclass(frozen=True)
class RowRms:
    """The after-loop factor an ``rms_norm`` over R divides by: sqrt(mean over R of x² + eps)
    of its operand ``x`` (a program node carrying R at its last axis), which has no program
    node of its own. Its shape is ``x``'s with the last axis 1 (it lines up like a row sum)."""

    x: Node
    eps: float

    @property
    def shape(self) -> tuple[int, ...]:
        return (*self.x.shape[:-1], 1)


Factors = tuple[tuple[str, "Node | RowRms"], ...]
"""Deferred factors of an in-loop value: ("mul" | "div", after-loop program node or a
:class:`RowRms`), in order."""


def loop_classes(program: KernelGraph, dv: DimVars) -> list[int]:
    """Classes a for-loop may walk, largest first: reduced by matmul contractions and sums or
    means (and maybe normalised by rms_norm, whose division is deferred: :class:`RowRms`), of
    size > 1, carried by no output, and carried at most once by every input (one ``fmap``)."""
    roots = {dv.find(v) for v in dv.loop_reducible}
    out = []
    for r in roots:
        size = dv.size[r]
        if size <= 1:
            continue
        if any(r in dv.roots(o) for o in program.outputs):
            continue
        if any(dv.roots(i).count(r) > 1 for i in program.inputs):
            continue
        out.append(r)
    return sorted(out, key=lambda r: (-dv.size[r], r))


@dataclass
class _Built:
    """An in-loop value: a block node and the factors still to apply to it."""

    node: Node
    factors: Factors = ()


class _LoopLift:
    """Builds one loop lift (see the module doc); raises :class:`Unliftable` where R cannot be
    walked, :class:`GraphError` where an op refuses the tiles."""

    def __init__(self, program: KernelGraph, dv: DimVars, r: int, grid_vars: Sequence[int],
                 grid: Sequence[int], forloop: int, threads: int) -> None:
        self.program, self.dv, self.r, self.threads = program, dv, r, threads
        self.grid_vars = list(grid_vars)
        self.g3 = (*grid, *(1,) * (3 - len(grid)))
        self.forloop = forloop
        self.inputs = list(program.inputs)
        self.sig = tuple((i.shape, i.dtype) for i in self.inputs)
        self.phase = self._phases()
        self.loop: dict[Node, _Built] = {}
        self.post: dict[Node, Node] = {}
        self.iters: dict[Node, Node] = {}
        self.rms: dict[RowRms, Node] = {}

    # ------------------------------------------------------------ analysis

    def _reduces_r(self, n: Node) -> bool:
        """``n`` contracts or sums R (its operand carries R, it does not)."""
        return (self.r not in self.dv.roots(n)
                and any(self.r in self.dv.roots(s) for s in n.src))

    def _phases(self) -> dict[Node, str]:
        """"loop" (carries R), "free" (loop-invariant) or "post" (after a reduction over R)."""
        ph: dict[Node, str] = {}
        for n in self.program.nodes:
            if self.dv.roots(n).count(self.r) > 1:
                raise Unliftable("a tensor carrying the loop's dimension twice")
            if n.op == INPUT:
                ph[n] = "loop" if self.r in self.dv.roots(n) else "free"
            elif self.r in self.dv.roots(n):
                ph[n] = "loop"
            elif self._reduces_r(n):
                d = REGISTRY[n.op]
                if d.label not in ("matmul", "reduce") or (d.label == "reduce" and n.op not in ("sum", "mean")):
                    raise Unliftable(n.op)
                ph[n] = "post"
            else:
                ph[n] = "post" if any(ph[s] == "post" for s in n.src) else "free"
        return ph

    def axis_map(self, n: Node) -> tuple[int, int, int]:
        return self.dv.axis_map(n, self.grid_vars)

    # ------------------------------------------------------------ building

    def _iter(self, i: Node) -> Node:
        it = self.iters.get(i)
        if it is None:
            roots = self.dv.roots(i)
            fmap = roots.index(self.r) if self.r in roots else -1
            it = make_iter(self.sig, self.inputs.index(i), self.axis_map(i), fmap, self.g3,  # type: ignore[arg-type]
                           self.forloop)
            self.iters[i] = it
        return it

    def in_loop(self, n: Node) -> _Built:
        """The in-loop value of a "loop" or "free" node."""
        got = self.loop.get(n)
        if got is not None:
            return got
        if self.phase[n] == "post":
            raise Unliftable("an after-loop value inside the loop")
        got = (_Built(self._iter(n)) if n.op == INPUT
               else self._normed(n) or self._scaled(n) or self._plain(n))
        self.loop[n] = got
        return got

    def _normed(self, n: Node) -> _Built | None:
        """``rms_norm(x[, gain])`` over R: ``x`` (times the gain's tile) in the loop, its
        division by the row's rms deferred (:class:`RowRms`: the rms needs all of R, so it is
        accumulated beside the loop's reductions and divides their results). None for any other
        op; an rms_norm over another axis runs on its chunk as any op does."""
        if n.op != "rms_norm" or self.dv.roots(n.src[0])[-1] != self.r:
            return None
        x = self.in_loop(n.src[0])
        if x.factors:
            raise Unliftable("an rms_norm of a deferred factor")
        v = x.node
        if len(n.src) == 2:
            gain = self.in_loop(n.src[1])
            if gain.factors:
                raise Unliftable("an rms_norm gain with a deferred factor")
            v = make_op("mul", [v, gain.node], {}, BLOCK)
        return _Built(v, (("div", RowRms(n.src[0], float(n.attr("eps")))),))

    def _plain(self, n: Node) -> _Built:
        srcs = [self.in_loop(s) for s in n.src]
        if any(s.factors for s in srcs):
            raise Unliftable(f"{n.op} of a deferred factor")
        return _Built(make_op(n.op, [s.node for s in srcs], n.attr_dict, BLOCK))

    def _scaled(self, n: Node) -> _Built | None:
        """``n`` as a scaling of an in-loop value by after-loop factors, or None when it is no
        such op (or has no deferred factor in play)."""
        if n.op not in _SCALING:
            return None
        post = [self.phase[s] == "post" for s in n.src]
        if n.op in ("neg", "mul_scalar"):
            (x,) = n.src
            b = self.in_loop(x)
            if not b.factors:
                return None
            return _Built(make_op(n.op, [b.node], n.attr_dict, BLOCK), b.factors)
        a, s = n.src
        if n.op == "mul" and post[0] and not post[1]:
            a, s = s, a
            post = [False, True]
        if post[0]:
            raise Unliftable(f"{n.op} of an after-loop value by an in-loop one")
        if post[1]:
            b = self.in_loop(a)
            self._check_fits(n, a, s)
            return _Built(b.node, (*b.factors, (n.op, s)))
        ba, bs = self.in_loop(a), self.in_loop(s)
        if not ba.factors and not bs.factors:
            return None
        flipped = bs.factors if n.op == "mul" else tuple(
            ("div" if k == "mul" else "mul", f) for k, f in bs.factors)
        return _Built(make_op(n.op, [ba.node, bs.node], n.attr_dict, BLOCK), (*ba.factors, *flipped))

    def _check_fits(self, n: Node, a: Node, s: Node) -> None:
        """A factor ``s`` of ``a`` must not change ``a``'s shape (it broadcasts into it) and
        must have size 1 (or no axis) where ``a`` carries R."""
        if tuple(n.shape) != tuple(a.shape):
            raise Unliftable("a factor that broadcasts its operand")
        axis = self.dv.roots(a).index(self.r)
        j = axis - (len(a.shape) - len(s.shape))
        if j >= 0 and s.shape[j] != 1:
            raise Unliftable("a factor that varies along the loop")

    def after_loop(self, n: Node) -> Node:
        """The after-loop value of a "post" or "free" node."""
        got = self.post.get(n)
        if got is not None:
            return got
        ph = self.phase[n]
        if ph == "loop":
            raise Unliftable("an in-loop value read after the loop")
        if n.op == INPUT:
            got = make_op("accum", [self._iter(n)], {"kind": "mean", "fold": None}, BLOCK)
        elif ph == "free" or not self._reduces_r(n):
            got = make_op(n.op, [self.after_loop(s) for s in n.src], n.attr_dict, BLOCK)
        else:
            got = self._reduction(n)
        self.post[n] = got
        return got

    def _reduction(self, n: Node) -> Node:
        """A reduction over R: the op on the chunk, an accumulator, then the deferred factors."""
        srcs = [self.in_loop(s) for s in n.src]
        if (self.forloop == 1 and n.op == "sum" and n.attr("keepdims")
                and n.attr("axis") in (-1, len(n.shape) - 1)):
            # one iteration: the row sum as a folding accumulator of the chunk itself (the
            # same value), the form codegen's register chain keeps in registers (a loop's
            # seeds keep the sum op: their kernels are measured that way)
            acc = make_op("accum", [srcs[0].node], {"kind": "sum", "fold": 1}, BLOCK)
        else:
            part = make_op(n.op, [s.node for s in srcs], n.attr_dict, BLOCK)
            kind = "mean" if n.op == "mean" else "sum"
            acc = make_op("accum", [part], {"kind": kind, "fold": None}, BLOCK)
        for pos, (src, b) in enumerate(zip(n.src, srcs, strict=True)):
            for k, f in b.factors:
                self._check_lines_up(n, pos, src, f)
                acc = make_op(k, [acc, self._factor(f)], {}, BLOCK)
        return acc

    def _factor(self, f: Node | RowRms) -> Node:
        """A deferred factor's after-loop block value. A :class:`RowRms` is its operand's
        tile accumulated over the loop and folded over the tile's R axis: with eps 0 the
        ``rms`` accumulator itself; else sqrt(mean of squares + eps), as ``rms_norm`` computes
        it (the same function of the same mean in the prime field: the verifier's rule)."""
        if not isinstance(f, RowRms):
            return self.after_loop(f)
        got = self.rms.get(f)
        if got is None:
            x = self.in_loop(f.x).node
            if f.eps == 0.0:
                got = make_op("accum", [x], {"kind": "rms", "fold": 1}, BLOCK)
            else:
                sq = make_op("square", [x], {}, BLOCK)
                ms = make_op("accum", [sq], {"kind": "mean", "fold": 1}, BLOCK)
                got = make_op("sqrt", [make_op("add_scalar", [ms], {"scalar": f.eps}, BLOCK)], {}, BLOCK)
            self.rms[f] = got
        return got

    def _check_lines_up(self, n: Node, pos: int, src: Node, f: Node | RowRms) -> None:
        """Factor ``f`` of reduction ``n``'s operand ``src`` keeps its meaning on ``n``'s result:
        it has size 1 (or no axis) at the axis the reduction drops or replaces, and lines up
        with the result's other axes from the right."""
        rank = len(src.shape)
        if n.op == "matmul":
            dropped = rank - 1 if pos == 0 else rank - 2
            keeps_rank = True
        else:
            dropped = int(n.attr("axis")) % rank
            keeps_rank = bool(n.attr("keepdims"))
        j = dropped - (rank - len(f.shape))
        if j < 0:
            return  # the factor does not reach the dropped axis
        if f.shape[j] != 1 or not keeps_rank:
            raise Unliftable("a factor that does not line up with the reduced result")

    def build(self) -> KernelGraph:
        outs = tuple(BlockOutput(self.after_loop(o), self.axis_map(o)) for o in self.program.outputs)
        bg = BlockGraph(self.g3, self.threads, self.forloop, self.sig, outs)  # type: ignore[arg-type]
        return KernelGraph(self.program.inputs, tuple(make_kernel(bg, self.inputs)))


def loop_lift(program: KernelGraph, dv: DimVars, r: int, grid_vars: Sequence[int],
              grid: Sequence[int], forloop: int, threads: int = 128) -> KernelGraph:
    """The program as one kernel whose for-loop walks class ``r`` in ``forloop`` chunks, grid
    axis ``a`` splitting class ``grid_vars[a]`` into ``grid[a]`` slices (see the module doc)."""
    g = _LoopLift(program, dv, r, grid_vars, grid, forloop, threads).build()
    if [tuple(o.shape) for o in g.outputs] != [tuple(o.shape) for o in program.outputs]:
        raise GraphError("a loop lift changed an output's shape")
    return g


def _single_row_classes(program: KernelGraph, dv: DimVars, classes: Sequence[int],
                        grid_sizes: Sequence[int]) -> set[int]:
    """Split classes whose every grid split leaves one element a block along a product's rows
    or columns (ViT's 197 query rows: a prime, split only into 197 one-row blocks, each product
    a vector). Leaving them whole loses nothing the tuner cannot give back: it cuts a block's
    whole rows into bands itself (``Schedule.refine_rows``)."""
    out = set()
    for r in classes:
        sizes = [s for s in grid_sizes if s > 1 and dv.size[r] % s == 0]
        if sizes and dv.size[r] // min(sizes) == 1 and any(
                n.op == "matmul" and r in dv.roots(n)[-2:] for n in program.nodes):
            out.add(r)
    return out


def loop_lifted_candidates(program: KernelGraph, grid_sizes: Sequence[int], forloops: Sequence[int],
                           max_grid_axes: int = 3, threads: int = 128,
                           limit: int = MAX_LOOP_SEEDS) -> list[KernelGraph]:
    """Up to ``limit`` loop lifts of ``program``: per loop class (largest first), per choice
    of split classes (most first), at the smallest grid sizes and loop range of the space that
    divide (the search's variant expansion tries the others; one iteration where none
    divides); none when nothing can be walked.

    Where more choices exist than ``limit``, those that cut a product's rows or columns into
    single elements (:func:`_single_row_classes`) are the ones left out: the variant expansion
    never un-splits an axis, so the choice of classes is final. ViT's attention at batch 8 has
    four split classes (197 query rows, V's 64 columns, 12 heads, 8 images); the four three-class
    choices filled the list, three of them with one-row blocks, and the one that splits heads and
    images only (each score computed once) was never seeded: 20.1 µs tuned against the table's
    30.5 (H200, s51 c1)."""
    try:
        dv = DimVars(program)
    except Unliftable:
        return []
    classes = splittable(program, dv)
    single = _single_row_classes(program, dv, classes, grid_sizes)
    out: list[tuple[tuple[bool, int], KernelGraph]] = []
    whole = 0  # built choices without single-element splits
    for r in loop_classes(program, dv):
        # a size no loop range divides (a prime token count: ViT's 197 keys) is walked in
        # one iteration: the accumulators and the deferred factors still put the softmax's
        # division after the products (codegen's register chain then runs over the keys in
        # passes of its own)
        loops = [f for f in sorted(forloops) if f > 1 and dv.size[r] % f == 0] or [1]
        most = min(3, max_grid_axes, len(classes))
        for k in range(most, 0 if most else -1, -1):  # (one block only when nothing splits)
            for combo in itertools.combinations(classes, k):
                grid = dv.smallest_grid(combo, grid_sizes)
                if grid is None:
                    continue
                try:
                    graph = loop_lift(program, dv, r, combo, grid, loops[0], threads)
                except (Unliftable, GraphError):
                    continue
                cut = bool(single & set(combo))
                out.append(((cut, len(out)), graph))
                whole += not cut
                if whole >= limit:
                    return _first_kept(out, limit)
    return _first_kept(out, limit)


def _first_kept(built: list[tuple[tuple[bool, int], KernelGraph]], limit: int) -> list[KernelGraph]:
    """The first ``limit`` lifts in the order built, those without single-element splits
    preferred."""
    kept = sorted(sorted(built, key=lambda e: e[0])[:limit], key=lambda e: e[0][1])
    return [g for _, g in kept]
