"""Hypothesis strategies for random, well-formed kernel graphs and graph-defined kernels.

Graphs are drawn by building with the public builder and skipping any step the builder
rejects, so every drawn graph passed the same checks users' graphs do; shrinking tends
towards few inputs, few ops and unit grids.
"""

from __future__ import annotations

from typing import Any

from hypothesis import assume
from hypothesis import strategies as st

import mirage_formal as mf
from mirage_formal.errors import GraphError

UNARY = ["neg", "exp", "square", "silu", "sigmoid", "relu", "gelu"]
BINARY = ["add", "sub", "mul", "div", "matmul"]
DIMS = [2, 4]


def _shape(draw: Any, rank: int) -> tuple[int, ...]:
    return tuple(draw(st.sampled_from(DIMS)) for _ in range(rank))


def _apply_random_op(draw: Any, b: Any, pool: list[Any], level: str) -> None:
    kind = draw(st.sampled_from(["unary", "binary", "reduce", "scalar", "norm"]))
    a = draw(st.sampled_from(pool))
    try:
        if kind == "unary":
            t = b.op(draw(st.sampled_from(UNARY)), a)
        elif kind == "binary":
            t = b.op(draw(st.sampled_from(BINARY)), a, draw(st.sampled_from(pool)))
        elif kind == "reduce":
            t = b.op(draw(st.sampled_from(["sum", "mean"])), a,
                     axis=draw(st.integers(-len(a.shape), len(a.shape) - 1)), keepdims=True)
        elif kind == "scalar":
            t = b.mul_scalar(a, scalar=draw(st.sampled_from([0.5, -2.0, 3.0])))
        else:
            t = b.rms_norm(a, eps=0.1)
    except GraphError:
        return
    pool.append(t)


@st.composite
def kernel_programs(draw: Any, max_ops: int = 6) -> mf.KernelGraph:
    """A random kernel-level program over 1-3 inputs of rank 2-3."""
    g = mf.Graph()
    rank = draw(st.integers(2, 3))
    pool = [g.input(_shape(draw, rank), draw(st.sampled_from(["f16", "f32"])), f"x{i}")
            for i in range(draw(st.integers(1, 3)))]
    for _ in range(draw(st.integers(1, max_ops))):
        _apply_random_op(draw, g, pool, "kernel")
    outs = [pool[-1], *draw(st.lists(st.sampled_from(pool), max_size=1))]
    g.output(*outs)
    return g.build()


@st.composite
def block_programs(draw: Any, max_ops: int = 4) -> mf.KernelGraph:
    """A random μGraph with one graph-defined kernel (random grid, maps, loop, ops, accums)."""
    g = mf.Graph()
    rank = draw(st.integers(2, 3))
    ins = [g.input(tuple(draw(st.sampled_from([4, 8])) for _ in range(rank)), "f16", f"x{i}")
           for i in range(draw(st.integers(1, 2)))]
    grid = tuple(draw(st.sampled_from([1, 2])) for _ in range(3))
    forloop = draw(st.sampled_from([1, 2]))
    k = g.kernel(ins, grid=grid, forloop=forloop)
    pool = []
    for x in ins:
        dims = list(range(-1, rank))
        try:
            imap = tuple(draw(st.sampled_from(dims)) if grid[a] > 1 else -1 for a in range(3))
            pool.append(k.iter(x, imap=imap, fmap=draw(st.sampled_from(dims))))
        except GraphError:
            assume(False)
    for _ in range(draw(st.integers(0, max_ops))):
        _apply_random_op(draw, k, pool, "block")
    src = draw(st.sampled_from(pool))
    fold = draw(st.sampled_from([None, 1, 2]))
    try:
        acc = k.accum(src, kind=draw(st.sampled_from(["sum", "mean", "rms"])), fold=fold)
    except GraphError:
        assume(False)
    post = [acc]
    if draw(st.booleans()):
        _apply_random_op(draw, k, post, "block")
    out = post[-1]
    free = list(range(len(out.shape)))
    omap = []
    for a in range(3):
        if grid[a] > 1:
            if not free:
                assume(False)
            d = draw(st.sampled_from(free))
            free.remove(d)
            omap.append(d)
        else:
            omap.append(-1)
    k.output(out, omap=tuple(omap))
    try:
        (y,) = k.build()
    except GraphError:
        assume(False)
    g.output(y)
    return g.build()
