"""Hypothesis strategies for random, well-formed kernel graphs and graph-defined kernels.

Graphs are drawn by building with the public builder and skipping any step the builder
rejects, so every drawn graph passed the same checks users' graphs do; shrinking tends
towards few inputs, few ops and unit grids.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from hypothesis import assume
from hypothesis import strategies as st

import mirage_formal as mf
from mirage_formal.codegen.schedule import Schedule
from mirage_formal.errors import GraphError
from mirage_formal.ir.graph import KernelGraph
from mirage_formal.ir.text import parse_text

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


def matmul_loop_program(m: int, k: int, n: int, forloop: int, batch: int = 0,
                        pre_a: bool = False, pre_b: bool = False,
                        fixed_a: bool = False, dtype: str = "f16") -> mf.KernelGraph:
    """``sum over the loop of A_it @ B_it`` as one graph-defined kernel: X (m, k*F) and
    W (k*F, 2n), fp16, grid 2 over W's columns (and ``batch`` > 0: a leading batch dimension
    also split over grid y). ``pre_a``/``pre_b``: the operand passes through ``neg`` first
    (an fp32 tile), otherwise it is an iterator tile read only by the matmul (cp.async).
    ``fixed_a``: X is (m, k), its tile the same in every iteration (fmap -1). ``dtype``: both
    inputs' (fp32: the product on the CUDA cores)."""
    g = mf.Graph()
    lead = (batch,) if batch else ()
    x = g.input((*lead, m, k if fixed_a else k * forloop), dtype, "X")
    w = g.input((*lead, k * forloop, 2 * n), dtype, "W")
    r = len(lead)
    kern = g.kernel([x, w], grid=(2, batch or 1, 1), forloop=forloop)
    by = 0 if batch else -1
    a = kern.iter(x, imap=(-1, by, -1), fmap=-1 if fixed_a else r + 1)
    b = kern.iter(w, imap=(r + 1, by, -1), fmap=r)
    if pre_a:
        a = kern.op("neg", a)
    if pre_b:
        b = kern.op("neg", b)
    acc = kern.accum(kern.op("matmul", a, b), kind="sum")
    kern.output(acc, omap=(r + 1, by, -1))
    (y,) = kern.build()
    g.output(y)
    return g.build()


def chained_matmul_program(m: int = 16, k: int = 64, n1: int = 128, n2: int = 32,
                           forloop1: int = 8, forloop2: int = 4) -> mf.KernelGraph:
    """Two graph-defined kernels, the second reading the first's output: Y = X @ W1 (grid 2
    over W1's columns, ``forloop1`` iterations of ``k`` rows), then Z = Y @ W2 (grid 2 over
    W2's columns, ``forloop2`` iterations over Y's ``n1`` columns). Split both loops and each
    kernel keeps partial records and tickets in the workspace; the defaults make the first
    kernel's partials (2 x S x 16 x 64 floats) reach past where the second's tickets would
    sit if the two shared one region."""
    g = mf.Graph()
    x = g.input((m, k * forloop1), "f16", "X")
    w1 = g.input((k * forloop1, n1), "f16", "W1")
    w2 = g.input((n1, n2), "f16", "W2")
    k1 = g.kernel([x, w1], grid=(2, 1, 1), forloop=forloop1)
    y_tile = k1.accum(k1.op("matmul", k1.iter(x, imap=(-1, -1, -1), fmap=1),
                            k1.iter(w1, imap=(1, -1, -1), fmap=0)), kind="sum")
    k1.output(y_tile, omap=(1, -1, -1))
    (y,) = k1.build()
    k2 = g.kernel([y, w2], grid=(2, 1, 1), forloop=forloop2)
    z_tile = k2.accum(k2.op("matmul", k2.iter(y, imap=(-1, -1, -1), fmap=1),
                            k2.iter(w2, imap=(1, -1, -1), fmap=0)), kind="sum")
    k2.output(z_tile, omap=(1, -1, -1))
    (z,) = k2.build()
    g.output(z)
    return g.build()


#: (m, k, n, forloop, batch, pre_a, pre_b): shapes for the cp.async/ldmatrix path: both
#: operands raw (M multiple of 16 or not), K not a multiple of 16 (scalar fragments), one
#: operand fp32, odd loop counts, a batch dimension
MATMUL_LOOP_CASES = [
    (16, 32, 16, 4, 0, False, False), (8, 64, 16, 3, 0, False, False),
    (24, 16, 8, 2, 0, False, False), (16, 8, 16, 5, 0, False, False),
    (32, 32, 24, 3, 0, True, False), (16, 32, 32, 2, 0, False, True),
    (2, 128, 64, 4, 0, False, False), (16, 16, 16, 3, 2, False, False),
    # register-blocked warp tiles (schedule.warp_tiles): both raw, an fp32 A with a partial
    # last row tile, a batch with K not a multiple of 16, an fp32 B
    (64, 32, 64, 2, 0, False, False), (40, 48, 64, 2, 0, True, False),
    (64, 24, 32, 2, 2, False, False), (128, 64, 128, 2, 0, False, True),
    # a loop-invariant A (its fragments loaded into registers once), with a batch
    (64, 64, 64, 3, 0, False, False, True), (32, 32, 32, 2, 2, False, False, True),
]

def attention_loop_program(m: int, d: int, kv: int, dv: int, forloop: int, batch: int = 0,
                           scale: bool = False, kind: str | None = "sum",
                           norms: str = "", divide: bool = False) -> mf.KernelGraph:
    """One graph-defined kernel of the attention shape the register chain takes
    (Schedule.mma_chain): per iteration S = Q·K_it (Q the same every iteration), E = exp(S)
    (``scale``: exp(S·0.125)), accumulators sum_it E·V_it and, unless ``kind`` is None, the row
    reduction of E (``kind`` 'sum' or 'mean', fold 1). Q (2m, d), K (d, kv·F), V (kv·F, dv),
    fp16, grid 2 over Q's rows (and ``batch`` > 0: a leading batch dimension over grid y).
    ``norms``: the tiles (letters q, k, v) that pass through rms_norm (eps 0.01) before their
    product: Q's before the loop, K's and V's every iteration (qknorm_gqa's in-loop norm).
    ``divide``: one output instead, the first accumulator divided by the row reduction after
    the loop (the single-kernel FlashAttention; split, the division follows the combine)."""
    g = mf.Graph()
    lead = (batch,) if batch else ()
    r = len(lead)
    q = g.input((*lead, 2 * m, d), "f16", "Q")
    k = g.input((*lead, d, kv * forloop), "f16", "K")
    v = g.input((*lead, kv * forloop, dv), "f16", "V")
    kern = g.kernel([q, k, v], grid=(2, batch or 1, 1), forloop=forloop)
    by = 0 if batch else -1
    qt = kern.iter(q, imap=(r, by, -1), fmap=-1)
    kt = kern.iter(k, imap=(-1, by, -1), fmap=r + 1)
    vt = kern.iter(v, imap=(-1, by, -1), fmap=r)
    qt = kern.op("rms_norm", qt, eps=0.01) if "q" in norms else qt
    kt = kern.op("rms_norm", kt, eps=0.01) if "k" in norms else kt
    vt = kern.op("rms_norm", vt, eps=0.01) if "v" in norms else vt
    s = kern.op("matmul", qt, kt)
    if scale:
        s = kern.op("mul_scalar", s, scalar=0.125)
    e = kern.op("exp", s)
    o = kern.accum(kern.op("matmul", e, vt), kind="sum")
    if divide:
        kern.output(kern.op("div", o, kern.accum(e, kind=kind or "sum", fold=1)), omap=(r, by, -1))
    else:
        kern.output(o, omap=(r, by, -1))
        if kind is not None:
            kern.output(kern.accum(e, kind=kind, fold=1), omap=(r, by, -1))
    outs = kern.build()
    g.output(*outs)
    return g.build()


#: (m, d, kv, dv, forloop, batch, scale, kind): attention kernels for the register chain —
#: one 16-row tile per warp, two per warp (128 rows on 4 warps), a batch with 128-column
#: scores and a mean, head dimension 16, a 24-column output (3 n-tiles), no row sums, and
#: more row tiles than a block's warps can own (no chain: the stored path)
CHAIN_CASES = [
    (64, 64, 64, 64, 4, 0, False, "sum"), (128, 64, 64, 64, 3, 0, True, "sum"),
    (16, 32, 128, 32, 2, 2, True, "mean"), (32, 16, 32, 16, 2, 0, False, "sum"),
    (16, 64, 64, 24, 2, 0, False, "sum"), (32, 32, 32, 32, 2, 0, True, None),
    (512, 16, 16, 16, 2, 0, False, "sum"),
    # 8-row query tiles (mha b=8's): a partial 16-row tile, with a batch and without
    (8, 64, 64, 64, 3, 2, False, "sum"), (8, 32, 128, 32, 2, 0, True, "mean"),
]


#: single-kernel FlashAttention (attention_loop_program with ``divide``): the division after
#: the loop, with one and two 16-row tiles per warp, a batch, a partial 8-row tile
ONE_KERNEL_ATTENTION_CASES = [
    (64, 64, 64, 64, 4, 0, False, "sum", "", True), (16, 32, 128, 32, 4, 2, True, "sum", "", True),
    (8, 64, 64, 64, 8, 0, False, "sum", "", True), (128, 64, 64, 64, 2, 0, False, "sum", "", True),
]


#: register chains over key counts that are not a multiple of 16 (their last 16 columns
#: padded, the padding zeroed before the row sums and the second product) and over more keys
#: than one warp's registers hold (the warp runs the chain pass by pass over its columns):
#: ViT-Base's 197 keys in one iteration (returning the sums, or dividing by them), 100-key
#: tiles of a loop with mean row sums and a batch, 50 keys, 520 keys in one iteration
PADDED_CHAIN_CASES = [
    (197, 64, 197, 64, 1, 0, True, "sum", "", True), (197, 64, 197, 64, 1, 0, True, "sum"),
    (37, 32, 100, 32, 2, 2, False, "mean"), (16, 64, 50, 64, 1, 0, True, "sum", "", True),
    (64, 64, 520, 64, 1, 0, False, "sum", "", True),
    # 112 rows a block: 7 row tiles, two a warp on 4 warps, the last group past the rows
    (112, 64, 64, 64, 2, 0, False, "sum"),
]


#: attention_loop_program cases with rms_norms on the operands: an in-loop norm of the B
#: operand (raw fp16 ring in, fp16 or padded fp32 tile out), Q's norm before the loop (read
#: straight from global memory), K's rows of 96 (pairs of columns not possible: 32-column
#: steps), a batch, a row length above the row-wise limit (the two-pass norm), rows of 16
#: (two lanes per row) and of 12 (no 16-byte vectors: one value per lane)
NORM_CHAIN_CASES = [
    (64, 64, 64, 64, 2, 0, False, "sum", "v"), (32, 64, 64, 64, 3, 0, False, "sum", "qv"),
    (16, 32, 96, 32, 2, 2, True, "mean", "kv"), (16, 64, 64, 64, 2, 0, False, None, "q"),
    (16, 16, 16, 576, 2, 0, False, "sum", "v"), (16, 16, 16, 16, 3, 0, False, "sum", "qkv"),
    (16, 16, 24, 12, 2, 0, False, "sum", "v"),
]


#: matmul_loop_program cases whose tile rows are not a multiple of 16 bytes: 8-byte vectors
#: (12-column W tiles, 12-column X tiles), 4-byte vectors (6 and 10 columns), and none (11:
#: element by element), each prefetched through registers when it has vectors
NARROW_VECTOR_CASES = [
    (2, 64, 6, 4, 0, False, False), (4, 48, 12, 3, 0, False, False),
    (3, 12, 10, 2, 0, False, False), (2, 32, 11, 2, 0, False, False),
]


#: (warp_m, warp_n) register blockings forced by a schedule, for the blocked cases above
WARP_BLOCKINGS = [(1, 1), (2, 2), (4, 1), (1, 8), (4, 4), (2, 8)]

#: (m, k, n, forloop): skinny matmuls the gemv path streams through registers — N/8 column
#: vectors not a power of two (6, 3, 5: block sizes 192/384, 96/192, 160/320 threads) and long
#: K slices (a thread's vectors loaded in pipelined chunks), beside the shuffle cases (N/8 =
#: 2 and 1)
GEMV_LOOP_CASES = [
    (2, 2048, 48, 2), (4, 384, 24, 3), (8, 1024, 40, 2), (1, 512, 16, 4), (3, 4096, 8, 2),
    # 9-16 rows: gemv only at <= 256 threads (schedule.gemv_rows_ok)
    (16, 1024, 48, 2), (12, 256, 16, 4),
    # loop-free: the whole K x N weight slice streamed in register chunks (Mirage's rmsnorm
    # μGraphs with 4096 x 8 tiles)
    (2, 2048, 8, 1), (4, 1024, 16, 1),
]


def fold_loop_program(rows: int, cols: int, forloop: int, kind: str = "rms", fold: int = 1,
                      n: int = 16, dtype: str = "f16") -> mf.KernelGraph:
    """rmsnorm's fused kernel in small: per iteration X_it (rows, cols) · W_it (cols, n) into a
    sum accumulator beside a fold accumulator of X_it (``kind`` over groups of ``fold``
    columns), the product divided by it after the loop; grid 2 over W's columns. The fold's
    rows and columns per iteration pick how a block's threads share it (a row per several
    warps, a row per warp, a row per thread); ``dtype`` the inputs'."""
    g = mf.Graph()
    x = g.input((rows, cols * forloop), dtype, "X")
    w = g.input((cols * forloop, 2 * n), dtype, "W")
    kern = g.kernel([x, w], grid=(2, 1, 1), forloop=forloop)
    xt = kern.iter(x, imap=(-1, -1, -1), fmap=1)
    wt = kern.iter(w, imap=(1, -1, -1), fmap=0)
    acc = kern.accum(kern.op("matmul", xt, wt), kind="sum")
    f = kern.accum(xt, kind=kind, fold=fold)
    if fold > 1:  # (rows, fold): one column of it per group of ``fold`` columns
        f = kern.op("sum", f, axis=-1, keepdims=True)
    kern.output(kern.op("div", acc, f), omap=(1, -1, -1))
    (y,) = kern.build()
    g.output(y)
    return g.build()


def gated_loop_program(m: int, k: int, n: int, forloop: int, gate: str = "silu",
                       dtype: str = "f16") -> mf.KernelGraph:
    """gated_mlp's fused kernel in small: per iteration X_it (m, k) times W1_it and W2_it
    (k, n) into two sum accumulators, then ``gate``(X·W1) ⊙ (X·W2) after the loop; grid 2
    over the weights' columns; ``dtype`` the inputs'."""
    g = mf.Graph()
    x = g.input((m, k * forloop), dtype, "X")
    w1 = g.input((k * forloop, 2 * n), dtype, "W1")
    w2 = g.input((k * forloop, 2 * n), dtype, "W2")
    kern = g.kernel([x, w1, w2], grid=(2, 1, 1), forloop=forloop)
    xt = kern.iter(x, imap=(-1, -1, -1), fmap=1)
    a1 = kern.accum(kern.op("matmul", xt, kern.iter(w1, imap=(1, -1, -1), fmap=0)), kind="sum")
    a2 = kern.accum(kern.op("matmul", xt, kern.iter(w2, imap=(1, -1, -1), fmap=0)), kind="sum")
    kern.output(kern.op("mul", kern.op(gate, a1), a2), omap=(1, -1, -1))
    (y,) = kern.build()
    g.output(y)
    return g.build()


#: (m, k, n, forloop): gated products (rows a multiple of 16 or not, columns of 8 or not)
GATED_LOOP_CASES = [(8, 64, 64, 4), (16, 32, 32, 3), (24, 32, 24, 2), (2, 128, 16, 4)]


#: the schedules a fragment fold is compiled under: alone, with the streamed-product
#: candidate's fields, k slices, outputs stored from registers, a split loop
FRAGMENT_FOLD_SCHEDULES = [
    Schedule(fold_fragments=True),
    Schedule(threads=256, fold_fragments=True, mma_kpair=True, dense_rows=True, evict_first=True),
    Schedule(threads=256, fold_fragments=True, mma_kslice=2),
    Schedule(threads=256, fold_fragments=True, mma_kslice=8, dense_rows=True),
    Schedule(threads=256, fold_fragments=True, reg_epilogue=True, dense_rows=True, mma_kpair=True),
    Schedule(fold_fragments=True, split=2),
    # the terms on the tensor cores (Schedule.fold_mma): alone, with the fast path's fields
    # and registers outputs, with k slices, with a split loop
    Schedule(fold_fragments=True, fold_mma=True),
    Schedule(threads=256, fold_fragments=True, fold_mma=True, reg_epilogue=True, dense_rows=True,
             mma_kpair=True),
    Schedule(threads=256, fold_fragments=True, fold_mma=True, mma_kslice=2),
    Schedule(fold_fragments=True, fold_mma=True, split=2, mma_kpair=True),
]


#: (rows, cols, forloop, kind, fold): fold accumulators whose threads share rows by warps
#: (2 rows of 256), by one warp (8 rows of 64), by one thread (12 rows of 16); a mean over
#: groups of 4 columns; a loop of one iteration per split block
FOLD_LOOP_CASES = [
    (2, 256, 4, "rms", 1), (8, 64, 3, "rms", 1), (12, 16, 4, "rms", 1), (4, 128, 4, "mean", 4),
    (16, 32, 2, "sum", 1),
]


def row_kernel_program(op: str, dtype: str = "f16", rows: int = 4, length: int = 2048,
                       attrs: dict[str, Any] | None = None) -> mf.KernelGraph:
    """One loop-free graph-defined kernel of one-row tiles (the shape Schedule.row_registers
    takes): per block one row of X and Y (rows x length, ``dtype``), each through a sum
    accumulator (ntrans's kernels have that form); ``op`` applied to them, its rms_norm (eps
    0.01), scaled by X's row sum and by ``op`` of Y's row mean (a reduction feeding an op of
    one value), plus X. Grid: one block per row."""
    from mirage_formal.ir.ops import REGISTRY

    d = REGISTRY[op]
    g = mf.Graph()
    x = g.input((rows, length), dtype, "X")
    y = g.input((rows, length), dtype, "Y")
    kern = g.kernel([x, y], grid=(rows, 1, 1), forloop=1)
    xa = kern.accum(kern.iter(x, imap=(0, -1, -1), fmap=-1), kind="sum")
    ya = kern.accum(kern.iter(y, imap=(0, -1, -1), fmap=-1), kind="sum")
    e = kern.op(op, *[xa, ya, xa][:d.arity[1]], **(attrs or {}))
    nrm = kern.op("rms_norm", e, eps=0.01)
    total = kern.op("sum", xa, axis=1, keepdims=True)
    avg = kern.op("mean", ya, axis=1, keepdims=True)
    one = kern.op(op, *[avg, avg, avg][:d.arity[1]], **(attrs or {}))
    scaled = kern.op("mul", kern.op("mul", nrm, total), one)
    kern.output(kern.op("add", scaled, xa), omap=(0, -1, -1))
    outs = kern.build()
    g.output(*outs)
    return g.build()


def one_barrier_cases() -> list[tuple[str, mf.KernelGraph, Schedule]]:
    """Loops over the cp.async ring under Schedule.one_barrier, only where it changes the
    kernel: tensor-core matmuls (ldmatrix and scalar fragments, rows not a multiple of 16,
    batches), gemv reading B from the ring, folds beside a product (rmsnorm's fused kernel,
    with the fold from fragments too), gated products with outputs from registers, attention
    chains, rings of 2 and 6 stages, a split loop, and the rmsnorm benchmark at b=1 and b=8."""
    from dataclasses import replace

    from mirage_formal import workloads
    from mirage_formal.codegen import emit_graph

    on = Schedule(one_barrier=True)
    fast = Schedule(threads=256, one_barrier=True, dense_rows=True, mma_kpair=True, evict_first=True,
                    async_stages=4, async_stage_bytes=150 * 1024)
    cases: list[tuple[str, mf.KernelGraph, Schedule]] = []
    for c in MATMUL_LOOP_CASES:
        cases += [(f"matmul {c}", matmul_loop_program(*c), s) for s in (on, fast)]
    cases.append((f"matmul {MATMUL_LOOP_CASES[0]} scalar fragments",
                  matmul_loop_program(*MATMUL_LOOP_CASES[0]), replace(on, ldmatrix=False)))
    for c in GEMV_LOOP_CASES:
        cases.append((f"gemv {c}", matmul_loop_program(*c), replace(on, gemv=True, threads=256)))
    for c in FOLD_LOOP_CASES:
        cases += [(f"fold {c}", fold_loop_program(*c), s)
                  for s in (on, fast, replace(fast, fold_fragments=True, mma_kslice=2))]
    for c in GATED_LOOP_CASES:
        cases.append((f"gated {c}", gated_loop_program(*c), replace(fast, reg_epilogue=True)))
    for c in ONE_KERNEL_ATTENTION_CASES[:3]:
        cases += [(f"attention {c}", attention_loop_program(*c), s) for s in (on, replace(on, dense_rows=True))]
    for stages in (2, 6):
        cases.append((f"matmul (16, 64, 64, 8) {stages} stages", matmul_loop_program(16, 64, 64, 8),
                      replace(on, async_stages=stages, async_stage_bytes=200 * 1024)))
    cases.append(("split matmul", matmul_loop_program(16, 64, 64, 8), replace(on, split=4)))
    for b in (1, 8):
        cases.append((f"rmsnorm b={b}", workloads.handwritten("rmsnorm", b),
                      replace(fast, reg_epilogue=True)))
    return [(n, g, s) for n, g, s in cases
            if emit_graph(g, opts=s)[0] != emit_graph(g, opts=replace(s, one_barrier=False))[0]]


def counted_ring_cases() -> list[tuple[str, mf.KernelGraph, Schedule]]:
    """Loops over a cp.async ring whose depth is not a power of two, where the loop keeps its
    ring slots in counters (layout.ring_counted): tensor-core and gemv products, a fold
    beside a product, a gated pair, at 3, 5, 6 and 7 stages, with one barrier per iteration,
    a split loop and stream-K segments (each segment restarts the counter), and rmsnorm's
    benchmark kernel at b=8."""
    from dataclasses import replace

    from mirage_formal import workloads
    from mirage_formal.codegen import emit_graph

    base = Schedule(async_stage_bytes=200 * 1024)
    fast = Schedule(threads=256, dense_rows=True, mma_kpair=True, evict_first=True,
                    async_stage_bytes=200 * 1024, reg_epilogue=True)
    cases: list[tuple[str, mf.KernelGraph, Schedule]] = []
    for stages in (3, 5, 6, 7):
        s, f = replace(base, async_stages=stages), replace(fast, async_stages=stages)
        mm = matmul_loop_program(16, 64, 64, 8)
        cases += [(f"matmul {stages} stages", mm, s), (f"matmul {stages} stages fast", mm, f),
                  (f"matmul {stages} stages one barrier", mm, replace(s, one_barrier=True)),
                  (f"gemv {stages} stages", matmul_loop_program(2, 256, 48, 8), replace(s, gemv=True, threads=256)),
                  (f"fold {stages} stages", fold_loop_program(8, 64, 8, "rms", 1), f),
                  (f"gated {stages} stages", gated_loop_program(16, 32, 32, 8), f)]
    cases += [("split matmul 3 stages", matmul_loop_program(16, 64, 64, 12), replace(base, async_stages=3, split=2)),
              ("stream-K matmul 3 stages", matmul_loop_program(16, 64, 64, 8), replace(base, async_stages=3, stream_k=3)),
              ("rmsnorm b=8 5 stages", workloads.handwritten("rmsnorm", 8), replace(fast, async_stages=5))]
    def depth(g: mf.KernelGraph, s: Schedule) -> int:
        found = re.search(r"raw fp16, (\d+) stages", emit_graph(g, opts=s)[0])
        return int(found.group(1)) if found else 0

    return [(n, g, s) for n, g, s in cases if (d := depth(g, s)) & (d - 1)]


def tma_ring_cases() -> list[tuple[str, mf.KernelGraph, Schedule]]:
    """Loops whose ring a producer warp fills with tensor-map copies (Schedule.tma_ring), each
    case one the layout takes (a test checks that): tensor-core and gemv products, tiles of
    one and of several 64-column boxes, A tiles of 2 and 12 rows (boxes padded to 8 rows), 2 to
    6 stages with and without the evict-first policy, a fold beside the product (from shared
    memory and from the A fragments, outputs from the registers), a gated pair, an A tile
    through an op (an fp32 tile loaded in the loop: the body writes shared memory, so it ends
    with a barrier), the second kernel of a graph (its ring reads the first kernel's output:
    the producer waits for it), half the warps with twice the columns, a tile taller than a
    box, one slice of a batched input (a batched product, attention on the register chain),
    split loops (2, 3 and 4 ways, the global combine), and rmsnorm's benchmark kernels at b=1 and b=8 under the
    tuner's TMA trials."""
    from dataclasses import replace

    from mirage_formal import workloads

    tma = Schedule(tma_ring=True, dense_rows=True, min_blocks=1, async_stage_bytes=200 * 1024)
    fast = replace(tma, threads=256, mma_kpair=True, evict_first=True)
    cases: list[tuple[str, mf.KernelGraph, Schedule]] = [
        ("matmul 64-column tiles", matmul_loop_program(16, 64, 64, 8), tma),
        ("matmul two boxes", matmul_loop_program(16, 128, 64, 6), fast),
        ("matmul 2 rows", matmul_loop_program(2, 256, 64, 4), tma),
        ("matmul 12 rows", matmul_loop_program(12, 64, 128, 5), replace(fast, async_stages=3)),
        ("gemv 2 rows", matmul_loop_program(2, 256, 64, 8), replace(tma, gemv=True, threads=256)),
        ("matmul A through neg", matmul_loop_program(16, 64, 64, 4, pre_a=True), tma),
        ("fold rms", fold_loop_program(16, 64, 6, "rms", 1, n=64), fast),
        ("fold rms fragments", fold_loop_program(16, 128, 4, "rms", 1, n=64),
         replace(fast, fold_fragments=True, reg_epilogue=True)),
        ("gated", gated_loop_program(16, 64, 64, 6), replace(fast, threads=128, warp_n=2)),
        ("second kernel", chained_matmul_program(16, 64, 256, 128, 4, 4), tma),
        # one slice of a batched input per block (the map views the input as 2-D): a batched
        # product, and attention's K and V tiles of one head on the register chain
        ("batched matmul", matmul_loop_program(16, 64, 64, 8, batch=2), tma),
        ("attention one head a block", attention_loop_program(16, 64, 64, 64, 4, batch=2, divide=True),
         replace(tma, mma_chain=True)),
        # a weight tile taller than a box: two boxes of 192 rows
        ("matmul 384-row tile", matmul_loop_program(16, 384, 64, 4), tma),
        # a split loop: each block's producer copies its own iterations, the global combine
        ("matmul split 2", matmul_loop_program(16, 64, 64, 8), replace(tma, split=2)),
        ("fold rms split 4", fold_loop_program(16, 128, 8, "rms", 1, n=64),
         replace(fast, split=4, fold_fragments=True)),
        ("gated split 3", gated_loop_program(16, 64, 64, 6), replace(fast, split=3)),
    ]
    for stages in (2, 3, 5, 6):
        cases.append((f"matmul {stages} stages", matmul_loop_program(16, 64, 64, 7),
                      replace(fast, async_stages=stages, evict_first=stages % 2 == 0)))
    for b in (1, 8):
        prog = workloads.handwritten("rmsnorm", b)
        cases += [(f"rmsnorm b={b}", prog, fast),
                  (f"rmsnorm b={b} half warps", prog,
                   replace(fast, threads=128, warp_n=2, fold_fragments=True, reg_epilogue=True))]
    return cases


#: (rows, cols per iteration, columns of W per block, loop count, op): elementwise_loop_program
ELEMENTWISE_LOOP_CASES = [(12, 128, 64, 8, "add"), (8, 64, 32, 6, "mul"), (16, 32, 16, 4, "sub"),
                          (2, 256, 64, 5, "add")]


#: the elementwise ops of the registry an A expression can be made of (a C expression, one or
#: two operands of the same shape): every one gets a_op_fragments tests, a new op included
def a_expression_ops() -> list[str]:
    from mirage_formal.ir.ops import REGISTRY

    return sorted(n for n, d in REGISTRY.items() if d.elementwise and d.c_expr is not None
                  and d.arity[0] >= 1 and d.arity[1] <= 2)


def a_expression_loop_program(op: str, rows: int = 16, cols: int = 128, n: int = 64,
                              forloop: int = 6) -> mf.KernelGraph:
    """``op``(X_it) (one operand) or ``op``(X_it, Y_it) (two) as a product's A, times W_it,
    summed over the loop in one kernel, grid 2 over W's columns; every required attribute
    given a plain value (0.75 for a float)."""
    from mirage_formal.ir.ops import REGISTRY

    d = REGISTRY[op]
    g = mf.Graph()
    ins = [g.input((rows, cols * forloop), "f16", name) for name in "XY"[:d.arity[1]]]
    w = g.input((cols * forloop, 2 * n), "f16", "W")
    kern = g.kernel([*ins, w], grid=(2, 1, 1), forloop=forloop)
    tiles = [kern.iter(x, imap=(-1, -1, -1), fmap=1) for x in ins]
    wt = kern.iter(w, imap=(1, -1, -1), fmap=0)
    attrs = {a.name: 0.75 if a.kind is float else 1 for a in d.attrs
             if a.default is None and not a.optional}
    kern.output(kern.accum(kern.op("matmul", kern.op(op, *tiles, **attrs), wt), kind="sum"),
                omap=(1, -1, -1))
    (out,) = kern.build()
    g.output(out)
    return g.build()


def gated_a_loop_program(rows: int, cols: int, n: int, forloop: int) -> mf.KernelGraph:
    """(silu(X_it) ⊙ Y_it) · W_it summed over the loop in one kernel (an MLP's gated down
    projection), grid 2 over W's columns: the product's A is an expression of two ops over
    two loop tiles."""
    return elementwise_loop_program(rows, cols, n, forloop, "mul", x_op="silu")


#: Schedule.a_op_fragments on the cp.async ring of dense rows, and on the TMA ring (half the
#: warps, register outputs: the first round's candidate) where a tensor map can copy the tiles
A_OP_SCHEDULES = {
    "cp.async": Schedule(dense_rows=True, mma_kpair=True, min_blocks=1, a_op_fragments=True),
    "tma": Schedule(threads=128, warp_n=2, dense_rows=True, mma_kpair=True, min_blocks=1,
                    reg_epilogue=True, tma_ring=True, async_stage_bytes=153600, a_op_fragments=True),
}


def elementwise_loop_program(rows: int, cols: int, n: int, forloop: int, op: str = "add",
                             x_op: str | None = None) -> mf.KernelGraph:
    """``op``(X_it, Y_it) · W_it summed over the loop in one kernel, grid 2 over W's columns:
    two tiles that change every iteration and that only an elementwise op reads (the loop
    prefetches them instead of reading them in place, layout._prefetchable); ``x_op``: a
    unary op applied to X_it first."""
    g = mf.Graph()
    x = g.input((rows, cols * forloop), "f16", "X")
    y = g.input((rows, cols * forloop), "f16", "Y")
    w = g.input((cols * forloop, 2 * n), "f16", "W")
    kern = g.kernel([x, y, w], grid=(2, 1, 1), forloop=forloop)
    xt = kern.iter(x, imap=(-1, -1, -1), fmap=1)
    yt = kern.iter(y, imap=(-1, -1, -1), fmap=1)
    wt = kern.iter(w, imap=(1, -1, -1), fmap=0)
    if x_op is not None:
        xt = kern.op(x_op, xt)
    kern.output(kern.accum(kern.op("matmul", kern.op(op, xt, yt), wt), kind="sum"), omap=(1, -1, -1))
    (out,) = kern.build()
    g.output(out)
    return g.build()


def defined_on_positive_inputs(prog: object) -> bool:
    """The program's float64 value is finite on inputs in [0.5, 1.5] (a random program may
    divide by an exact zero, x / (x - x), at every input scale: there is nothing to validate a
    kernel against)."""
    import numpy as np

    from mirage_formal.semantics.reference import run_reference

    g = prog  # a KernelGraph
    xs = [np.random.default_rng(0).uniform(0.5, 1.5, n.shape) for n in g.inputs]  # type: ignore[attr-defined]
    with np.errstate(all="ignore"):
        outs = run_reference(g, xs)  # type: ignore[arg-type]
    return all(np.all(np.isfinite(o)) for o in outs)


def gemm_program(m: int, k: int, n: int, forloop: int, gm: int = 1, gn: int = 2,
                 epilogue: str | None = None, dtype: str = "f16") -> mf.KernelGraph:
    """X (gm*m, k*F) · W (k*F, gn*n) as one graph-defined kernel of gn x gm blocks, each
    summing ``forloop`` products of an m x k tile of X by a k x n tile of W; ``epilogue``: a
    unary elementwise op applied to the sum before it is saved; ``dtype``: of X, W and Y."""
    g = mf.Graph()
    x = g.input((gm * m, k * forloop), dtype, "X")
    w = g.input((k * forloop, gn * n), dtype, "W")
    kern = g.kernel([x, w], grid=(gn, gm, 1), forloop=forloop)
    a = kern.iter(x, imap=(-1, 0, -1), fmap=1)
    b = kern.iter(w, imap=(1, -1, -1), fmap=0)
    out = kern.accum(kern.op("matmul", a, b), kind="sum")
    if epilogue is not None:
        out = kern.op(epilogue, out)
    kern.output(out, omap=(1, 0, -1))
    (y,) = kern.build()
    g.output(y)
    return g.build()


def gated_program(m: int = 64, k: int = 128, n: int = 128, forloop: int = 4, gm: int = 2,
                  gn: int = 2, dtype: str = "f16") -> mf.KernelGraph:
    """silu(X·W1) ⊙ (X·W2) in one kernel: two products of the same X tile, as the search fuses
    a gated MLP."""
    g = mf.Graph()
    x = g.input((gm * m, k * forloop), dtype, "X")
    w1 = g.input((k * forloop, gn * n), dtype, "W1")
    w2 = g.input((k * forloop, gn * n), dtype, "W2")
    kern = g.kernel([x, w1, w2], grid=(gn, gm, 1), forloop=forloop)
    a = kern.iter(x, imap=(-1, 0, -1), fmap=1)
    b1 = kern.iter(w1, imap=(1, -1, -1), fmap=0)
    b2 = kern.iter(w2, imap=(1, -1, -1), fmap=0)
    h1 = kern.accum(kern.op("matmul", a, b1), kind="sum")
    h2 = kern.accum(kern.op("matmul", a, b2), kind="sum")
    kern.output(kern.op("mul", kern.op("silu", h1), h2), omap=(1, 0, -1))
    (y,) = kern.build()
    g.output(y)
    return g.build()


#: the benchmark programs at sizes small enough to validate in a test (workloads.program's
#: keyword arguments for each)
SMALL_WORKLOADS: dict[str, dict[str, int]] = {
    "gqa": {"kv": 512}, "mha": {"kv": 512}, "mqa": {"kv": 512, "q": 64},
    "qknorm_gqa": {"kv": 512}, "rmsnorm": {"h": 256, "n": 512},
    "lora": {"n": 512}, "gated_mlp": {"k": 256, "n": 512}, "ntrans": {"h": 512}}


def as_dtype_program(prog: mf.KernelGraph, dtype: str) -> mf.KernelGraph:
    """``prog`` (a program or μGraph whose tensors are all fp16) with every tensor in
    ``dtype`` instead: the same structure, tiles and maps (through the text form)."""
    return parse_text(str(prog).replace("f16[", f"{dtype}["))


# ---------------------------------------------------------------- seed checks

SEED_GRIDS = (2, 4, 8, 16, 32, 64)


def assert_computes_program(program: mf.KernelGraph, cand: mf.KernelGraph, seed: int) -> None:
    """``cand`` equals ``program`` in float64 on inputs drawn inside each op's domain."""
    import numpy as np

    from mirage_formal.semantics import run_reference
    from mirage_formal.semantics.reference import domain_inputs

    x = domain_inputs(program, np.random.default_rng(seed))
    for want, got in zip(run_reference(program, x), run_reference(cand, x), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def seed_size_variants(program: mf.KernelGraph, cand: mf.KernelGraph) -> list[mf.KernelGraph]:
    """The search's size variants of ``cand`` over :data:`SEED_GRIDS` (default loop ranges)."""
    from mirage_formal.search.config import SearchConfig
    from mirage_formal.search.space import Enumerator, Stats

    cfg = SearchConfig(grid_sizes=SEED_GRIDS)
    e = Enumerator(program, cfg, lambda *a: True, lambda g: None, lambda: None, Stats())
    return list(e.variants(cand))


def _decode_mlp(batch: int, seq: int, hidden: int = 256, ffn: int = 512, dt: str = "f16") -> KernelGraph:
    g = mf.Graph()
    x = g.input((batch, seq, hidden), dt, "X")
    wg = g.input((hidden, ffn), dt, "Wg")
    wu = g.input((hidden, ffn), dt, "Wu")
    wd = g.input((ffn, hidden), dt, "Wd")
    h = g.rms_norm(x)
    g.output(g.add(x, g.matmul(g.mul(g.silu(g.matmul(h, wg)), g.matmul(h, wu)), wd)))
    return g.build()


def _norm_gain_matmul(lead: tuple[int, ...]) -> KernelGraph:
    g = mf.Graph()
    x = g.input((*lead, 128), "f16", "X")
    gain = g.input((128,), "f16", "G")
    w = g.input((128, 96), "f16", "W")
    s = g.sum(g.square(x), axis=-1, keepdims=True)
    g.output(g.div(g.matmul(g.rms_norm(x, gain), w), s))
    return g.build()


#: programs on (batch, ..., rows, columns) activations against 2-D weights, as PyTorch's linear
#: layers have them (codegen runs their products on 2-D views: ir/flatten.py)
ROW_ACTIVATION_PROGRAMS: dict[str, Callable[[], KernelGraph]] = {
    "decode_mlp_b8": lambda: _decode_mlp(8, 1),
    "decode_mlp_b4_s2": lambda: _decode_mlp(4, 2),
    "mlp_bf16": lambda: _decode_mlp(2, 3, dt="bf16"),
    "norm_gain_4d": lambda: _norm_gain_matmul((2, 1, 4)),
    "norm_gain_3d": lambda: _norm_gain_matmul((6, 1)),
}


@st.composite
def row_activation_programs(draw: Any) -> KernelGraph:
    """A random program on (lead..., columns) activations (lead of 2-3 dimensions) against
    2-D weights: products, elementwise ops with activations or row vectors, sums and means
    over the last axis, rms_norm; what PyTorch's linear layers and norms produce."""
    g = mf.Graph()
    lead = tuple(draw(st.lists(st.sampled_from([1, 2, 4]), min_size=2, max_size=3)))
    lead = (draw(st.sampled_from([2, 4, 8])), *lead[1:])
    dt = draw(st.sampled_from(["f16", "f32"]))
    x = g.input((*lead, 32), dt, "X")
    pool = [x]
    n_in = 1
    for _ in range(draw(st.integers(1, 5))):
        a = draw(st.sampled_from(pool))
        kind = draw(st.sampled_from(["matmul", "matmul", "unary", "binary", "row", "reduce", "norm"]))
        if kind == "matmul":
            w = g.input((a.shape[-1], draw(st.sampled_from([16, 32, 48]))), dt, f"W{n_in}")
            n_in += 1
            t = g.matmul(a, w)
        elif kind == "unary":
            t = g.op(draw(st.sampled_from(["silu", "exp", "square", "neg"])), a)
        elif kind == "binary":
            same = [p for p in pool if p.shape == a.shape]
            t = g.op(draw(st.sampled_from(["add", "mul", "sub"])), a, draw(st.sampled_from(same)))
        elif kind == "row":
            v = g.input((a.shape[-1],), dt, f"V{n_in}")
            n_in += 1
            t = g.op(draw(st.sampled_from(["add", "mul"])), a, v)
        elif kind == "reduce":
            t = g.op(draw(st.sampled_from(["sum", "mean"])), a, axis=-1, keepdims=True)
        else:
            t = g.rms_norm(a, eps=0.1)
        pool.append(t)
    g.output(pool[-1])
    return g.build()


#: (activations, weight, dtype): a weight broadcast along the activations' batch dimensions
#: (codegen/lower.py reads each of its tiles once a part of the batch)
SHARED_WEIGHT_CASES = [((8, 1, 1, 4096), (4096, 11008), "f16"),
                       ((8, 1, 1, 4096), (32, 4096, 128), "bf16"),
                       ((16, 8, 512), (512, 256), "f16"),
                       ((4, 2, 256), (256, 96), "f32")]


def product_program(xs: tuple[int, ...], ws: tuple[int, ...], dt: str) -> KernelGraph:
    """X (``xs``) · W (``ws``) in ``dt``, one pre-defined product."""
    g = mf.Graph()
    x = g.input(xs, dt, "X")
    w = g.input(ws, dt, "W")
    g.output(g.matmul(x, w))
    return g.build()


#: (activations, weight, eps, gain, dtype): rms_norm(X[, G], eps) · W, whose loop seed walks
#: the normalised dimension (search/loop_seeds.py: the row's rms accumulated beside the
#: product; with an eps, a mean of squares, ``add_scalar`` and ``sqrt`` after the loop)
NORM_PROJECTION_CASES = [((1, 1, 1, 4096), (32, 4096, 128), 1e-6, True, "f16"),
                         ((2, 4096), (4096, 6144), 0.0, False, "f16"),
                         ((16, 1024), (1024, 512), 1e-5, True, "bf16"),
                         ((4, 512), (512, 256), 1e-6, False, "f32"),
                         # ViT's 197 tokens: ragged warp row groups with the rms fold
                         ((197, 512), (512, 256), 1e-6, True, "f16")]


def norm_projection_loop_seeds(xs: tuple[int, ...], ws: tuple[int, ...], eps: float, gain: bool,
                               dt: str) -> tuple[KernelGraph, list[KernelGraph]]:
    """The program of a :data:`NORM_PROJECTION_CASES` case and its loop seeds, each at the
    cheapest size the search's ranking gives it (the size the GPU stage tunes first)."""
    from mirage_formal.optimize import make_config
    from mirage_formal.search.loop_seeds import loop_lifted_candidates
    from mirage_formal.search.state import ranked_variants

    g = mf.Graph()
    x = g.input(xs, dt, "X")
    w = g.input(ws, dt, "W")
    args = [x, g.input((xs[-1],), dt, "G")] if gain else [x]
    g.output(g.matmul(g.rms_norm(*args, eps=eps), w))
    prog = g.build()
    cfg = make_config(prog, None)
    seeds = loop_lifted_candidates(prog, cfg.grid_sizes, cfg.forloop, cfg.max_grid_axes, cfg.threads)
    return prog, [r[0][0] for s in seeds if (r := ranked_variants(cfg, s))]


#: (rows, hidden, ffn, dtype, residual) of :func:`mlp_down_program`: a decode MLP's second half
#: as the PyTorch bridge cuts it (the gate's product comes from the region before)
MLP_DOWN_CASES = [(1, 512, 1376, "f16", True), (8, 256, 688, "f16", True),
                  (2, 256, 512, "bf16", False), (4, 128, 256, "f32", True)]


def mlp_down_program(rows: int, hidden: int, ffn: int, dt: str, residual: bool) -> KernelGraph:
    """``(silu(gate) * (h·Wu))·Wd (+ r)`` on (rows, 1, 1, ·) activations."""
    g = mf.Graph()
    gate = g.input((rows, 1, 1, ffn), dt, "gate")
    h = g.input((rows, 1, 1, hidden), dt, "h")
    wu = g.input((hidden, ffn), dt, "wu")
    wd = g.input((ffn, hidden), dt, "wd")
    y = g.matmul(g.mul(g.silu(gate), g.matmul(h, wu)), wd)
    g.output(g.add(y, g.input((rows, 1, 1, hidden), dt, "r")) if residual else y)
    return g.build()


def mlp_down_cut_joins(case: tuple[int, int, int, str, bool]) -> tuple[KernelGraph, list[KernelGraph]]:
    """The program of a :data:`MLP_DOWN_CASES` case and its cut joins
    (``search.cone_seeds.cut_joined_candidates``, each cone at its cheapest size)."""
    from mirage_formal.optimize import make_config
    from mirage_formal.search.cone_seeds import cut_joined_candidates
    from mirage_formal.search.space import Enumerator, Stats

    prog = mlp_down_program(*case)
    cfg = make_config(prog, None)
    e = Enumerator(prog, cfg, lambda *a: True, lambda g: None, lambda: None, Stats())
    return prog, cut_joined_candidates(prog, cfg, e._cheapest)


#: (rows, d, n, dtype) of :func:`layer_norm_program`: decode and a few prefill rows, fp16 and
#: fp32, a small and a GPT-2-sized width
LAYER_NORM_CASES = [(4, 2048, 2048, "f16"), (1, 768, 3072, "f16"), (16, 512, 256, "f32")]


def layer_norm_program(rows: int, d: int, n: int, dt: str) -> KernelGraph:
    """A layer norm with a gain, then a projection: ``((x - mean) * rsqrt(var + eps)) * g ·
    W``. Its centring keeps the loop lifts from walking the projection's k
    (``search.loop_seeds``), so its cut joins (``search.cone_seeds``) carry it."""
    g = mf.Graph()
    x = g.input((rows, d), dt, "x")
    gain = g.input((d,), dt, "gain")
    w = g.input((d, n), dt, "w")
    c = g.sub(x, g.mean(x, axis=-1, keepdims=True))
    var = g.mean(g.square(c), axis=-1, keepdims=True)
    g.output(g.matmul(g.mul(g.mul(c, g.rsqrt(g.add_scalar(var, 1e-5))), gain), w))
    return g.build()


def layer_norm_cut_joins(case: tuple[int, int, int, str]) -> tuple[KernelGraph, list[KernelGraph]]:
    """The program of a :data:`LAYER_NORM_CASES` case and its cut joins, each cone at its
    cheapest size."""
    from mirage_formal.optimize import make_config
    from mirage_formal.search.cone_seeds import cut_joined_candidates
    from mirage_formal.search.space import Enumerator, Stats

    prog = layer_norm_program(*case)
    cfg = make_config(prog, None)
    e = Enumerator(prog, cfg, lambda *a: True, lambda g: None, lambda: None, Stats())
    return prog, cut_joined_candidates(prog, cfg, e._cheapest)


#: the cut joins the GPU tests and CI's compile tests cover: (family, case) of a decode MLP's
#: second half (:data:`MLP_DOWN_CASES`) and of a layer norm before its projection
#: (:data:`LAYER_NORM_CASES`)
CUT_JOIN_CASES: list[tuple[str, tuple[Any, ...]]] = [
    *(("mlp_down", c) for c in MLP_DOWN_CASES), *(("layer_norm", c) for c in LAYER_NORM_CASES)]


def cut_join_case(family: str, case: tuple[Any, ...]) -> tuple[KernelGraph, list[KernelGraph]]:
    """The program of a :data:`CUT_JOIN_CASES` entry and its cut joins."""
    if family == "mlp_down":
        rows, k, n, dt, residual = case
        return mlp_down_cut_joins((rows, k, n, dt, residual))
    rows, d, n, dt = case
    return layer_norm_cut_joins((rows, d, n, dt))


@st.composite
def product_chain_programs(draw: Any) -> KernelGraph:
    """Two products in a row, ``(pre(X·W1))·W2 (+ R)``: activations of 1-8 rows as 2-D or
    PyTorch-style (rows, 1, 1, ·) tensors, fp16 or fp32, with an elementwise step between the
    products (none, silu, times a gate's silu, plus a bias row) and an optional residual
    after them: what ``search.cone_seeds``' cut joins split."""
    rows = draw(st.sampled_from([1, 2, 4, 8]))
    k, n, m = (draw(st.sampled_from([16, 32, 64, 128])) for _ in range(3))
    dt = draw(st.sampled_from(["f16", "f32"]))
    lead = (rows, 1, 1) if draw(st.booleans()) else (rows,)
    g = mf.Graph()
    a = g.matmul(g.input((*lead, k), dt, "x"), g.input((k, n), dt, "w1"))
    step = draw(st.sampled_from(["none", "silu", "gate", "bias"]))
    if step == "silu":
        a = g.silu(a)
    elif step == "gate":
        a = g.mul(g.silu(g.input((*lead, n), dt, "gate")), a)
    elif step == "bias":
        a = g.add(a, g.input((n,), dt, "bias"))
    y = g.matmul(a, g.input((n, m), dt, "w2"))
    if draw(st.booleans()):
        y = g.add(y, g.input((*lead, m), dt, "r"))
    g.output(y)
    return g.build()
