"""Lowering: pre-defined kernel ops become default block graphs, so the emitter has one job.

A kernel-level registry op ``op(x, y, ...)`` with output shape out_shape becomes a graph-defined kernel
whose blocks each compute one tile of out_shape:

- *matmul* (..., M, K) @ (..., K, N): grid x over N (tiles of up to 64 columns), y over M (up
  to 64 rows), z over the outermost batch dimension; the for-loop runs over K in chunks of up
  to 64; the tile product is accumulated (sum) and saved. Column tiles narrow to 32 or 16
  while there are fewer than ``MIN_BLOCKS`` blocks (small-M products are memory-bound and
  need many blocks in flight). An fp16 product of a multiple of 64 rows and columns with
  enough such blocks takes the tiles warpgroup MMA runs instead (:func:`_warpgroup_tiles`:
  64 x 128 tiles, k 128). Batch dimensions along which B is broadcast (a weight against
  ``(batch, 1, hidden)`` activations, PyTorch's linear layer at decode shapes) stay whole in
  every block while they and the rows make at most :data:`SHARED_B_ROWS` rows
  (:func:`_shared_b_axes`): each block then reads its tile of B once for all of them, where
  a grid axis over them read every B tile once per batch element (8x the weight traffic at
  batch 8); grid z takes the first batch dimension B has.
- *anything else* (elementwise with broadcasting, sum/mean over an axis, rms_norm over the
  last axis): up to three output dimensions the op treats independently are split over the
  grid until a tile has at most ``TILE_ELEMS`` elements and there are ``MIN_BLOCKS`` blocks
  (while tiles stay above ``MIN_TILE`` elements; outer dimensions first; the last
  dimension only in multiples of 8 so 16-byte vector moves stay possible); an operand
  dimension that is broadcast (size 1) is not split for that operand; the for-loop range is
  1 and the op's tile goes through a plain accumulator (the identity for F = 1).

Every lowered block graph is built through ``ir.graph`` and so passes its checks; its output
shapes and dtypes equal the op's. :func:`launches` turns a whole kernel graph into the ordered
list of block graphs with the kernel-level tensors each reads and writes.

A graph-defined kernel without a loop is launched with its plain accumulators moved down
(:func:`accums_pushed_down`): over one iteration a sum or mean accumulator (no fold) is the
identity, so ``matmul(accum(a), accum(b))`` computes ``accum(matmul(a, b))``. The product
then reads iterator tiles directly, which the emitter's fast paths need (Mirage's published rmsnorm μGraph #14
multiplies accum(X) by accum(W): a copy of each whole tile, then a matmul from shared memory,
where ``matmul(X, W)`` streams W through registers).

Imports ``ir`` only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from mirage_formal.errors import GraphError
from mirage_formal.ir.dtypes import tensor_core_type
from mirage_formal.ir.flatten import flat_rows
from mirage_formal.ir.graph import (
    GET,
    INPUT,
    KERNEL_OP,
    BlockGraph,
    BlockOutput,
    KernelGraph,
    MapT,
    make_iter,
    make_op,
)
from mirage_formal.ir.node import Node, node
from mirage_formal.ir.ops import BLOCK, REGISTRY

TILE_ELEMS = 4096
THREADS = 128
#: a matmul lowering narrows its column tiles (down to 16) until it has this many blocks
MIN_BLOCKS = 264
#: elementwise-like lowerings split further (for more blocks) only down to this tile size
MIN_TILE = 512
#: a matmul lowering keeps the batch dimensions B is broadcast along whole in each block
#: while they and the product's rows make at most this many rows (one row tile's worth)
SHARED_B_ROWS = 64


def _divisor_at_least(n: int, want: int, step: int = 1) -> int:
    """Smallest divisor g of n with g >= want whose quotient n/g is a multiple of ``step``
    (falls back to the largest such divisor below ``want``; 1 if none)."""
    best = 1
    for g in range(1, n + 1):
        if n % g or (n // g) % step:
            continue
        if g >= want:
            return g
        best = g
    return best


def _largest_divisor_le(n: int, cap: int) -> int:
    return max(g for g in range(1, min(n, cap) + 1) if n % g == 0)


#: a tile side under this many elements wastes a block (a product's tile of one row or one k)
MIN_TILE_SIDE = 16
#: ... so a size without a divisor in [MIN_TILE_SIDE, 64] takes its smallest divisor of at
#: least MIN_TILE_SIDE up to this many elements (197 tokens: the whole 197)
MAX_TILE_SIDE = 256
#: a contraction with no divisor from MIN_TILE_SIDE to MAX_TILE_SIDE stays whole in one k tile
#: up to this many elements (a prime k of 521: one iteration, not 521 of one element)
MAX_WHOLE_K = 1024


def _tile_side(n: int, cap: int = 64, whole_up_to: int = 0) -> int:
    """A product's tile side along a dimension of size ``n``: its largest divisor up to
    ``cap``; where that is under :data:`MIN_TILE_SIDE` (a prime size: 1), its smallest divisor
    from MIN_TILE_SIDE up to :data:`MAX_TILE_SIDE` instead, else ``n`` itself when at most
    ``whole_up_to`` (a contraction's k tile). Tiles divide their dimensions
    (the μGraph semantics), so a prime size is one tile or as many as its elements: a block a
    row of 197 (Q·K at ViT's shapes: 465k blocks of one dot product each, 708 µs on an H200
    against torch's 10.6) or all 197."""
    d = _largest_divisor_le(n, cap)
    if d >= min(MIN_TILE_SIDE, n):
        return d
    wider = [g for g in range(MIN_TILE_SIDE, min(n, MAX_TILE_SIDE) + 1) if n % g == 0]
    return wider[0] if wider else n if n <= whole_up_to else d


def _maps(in_dims: Sequence[dict[int, int]], split: Sequence[tuple[int, int]]) -> list[MapT]:
    """imaps of each operand: grid axis a splits output dim d -> the operand's matching dim."""
    out = []
    for dims in in_dims:
        m = [-1, -1, -1]
        for a, (d, _) in enumerate(split):
            if d in dims:
                m[a] = dims[d]
        out.append((m[0], m[1], m[2]))
    return out


def _operand_dims(n: Node) -> tuple[list[int], list[dict[int, int]]]:
    """Output dims the op computes independently, and per operand: output dim -> its dim."""
    out_shape = n.shape
    r = len(out_shape)
    d = REGISTRY[n.op]
    if d.elementwise:
        maps = []
        for s in n.src:
            off = r - len(s.shape)
            maps.append({off + j: j for j, sz in enumerate(s.shape) if sz == out_shape[off + j] and sz > 1})
        return list(range(r)), maps
    if n.op in ("sum", "mean"):
        x = n.src[0]
        ax = n.attr("axis") % len(x.shape)
        if n.attr("keepdims"):
            dims = {j: j for j in range(r) if j != ax}
        else:
            dims = {j: (j if j < ax else j + 1) for j in range(r)}
        return sorted(dims), [dims]
    if n.op == "rms_norm":
        maps = [{j: j for j in range(r - 1)}]
        if len(n.src) == 2:
            maps.append({})
        return list(range(r - 1)), maps
    return [], [{} for _ in n.src]


def _elementwise_like(n: Node, threads: int) -> BlockGraph:
    out_shape = n.shape
    free, in_dims = _operand_dims(n)
    split: list[tuple[int, int]] = []
    tiles = [list(out_shape), *[list(s.shape) for s in n.src]]
    dims = [{d: d for d in range(len(out_shape))}, *in_dims]

    def biggest() -> int:
        return max(math.prod(t) for t in tiles)

    blocks = 1
    for d in free:
        enough = blocks >= MIN_BLOCKS or biggest() <= MIN_TILE
        if len(split) == 3 or (biggest() <= TILE_ELEMS and enough):
            break
        if out_shape[d] == 1:
            continue
        want = max(-(-biggest() // TILE_ELEMS), 1 if enough else -(-MIN_BLOCKS // blocks))
        want = min(want, max(1, biggest() // MIN_TILE))
        step = 8 if d == len(out_shape) - 1 and out_shape[d] % 8 == 0 else 1
        g = _divisor_at_least(out_shape[d], min(want, out_shape[d]), step)
        if g > 1:
            blocks *= g
            split.append((d, g))
            for t, m in zip(tiles, dims, strict=True):
                if d in m:
                    t[m[d]] //= g
    grid = tuple(g for _, g in split) + (1,) * (3 - len(split))
    imaps = _maps(in_dims, split)
    sig = tuple((s.shape, s.dtype) for s in n.src)
    its = [make_iter(sig, i, imaps[i], -1, grid, 1) for i in range(len(n.src))]  # type: ignore[arg-type]
    y = make_op(n.op, its, n.attr_dict, BLOCK)
    acc = make_op("accum", [y], {"kind": "sum", "fold": None}, BLOCK)
    om = [-1, -1, -1]
    for a, (d, _) in enumerate(split):
        om[a] = d
    return BlockGraph(grid, threads, 1, sig, (BlockOutput(acc, (om[0], om[1], om[2])),))  # type: ignore[arg-type]


#: a product lowered to warpgroup-MMA tiles (:func:`_warpgroup_tiles`) has at least this many
#: blocks: half the SMs of an H100 (fewer, and the narrow column tiles' wider grid wins)
WGMMA_MIN_BLOCKS = 64
#: ... and at least this many multiply-adds per element it reads or writes (M·N·K over
#: M·K + K·N + M·N; about where an H100's fp16 tensor cores, not its DRAM, set the time): X
#: (512, 2048) · W (2048, 2048) has 341; attention's P·V at b=8 (256 x 4096 · 4096 x 64 a
#: head) 50, a weight stream whose narrow tiles keep more blocks reading
WGMMA_MIN_INTENSITY = 128
#: ... and a product of ragged rows (:func:`_ragged_warpgroup_tiles`) this many 64-row bands of
#: blocks: ViT's 197 x 768 outputs make 48 of 64 x 64 (its narrow-tile lowering on 48 blocks
#: of 197 x 16 ran 8.1 µs of a 768 x 768 product where cuBLAS's warpgroup kernel took 4.2;
#: H200 s50 c2)
RAGGED_WGMMA_MIN_BLOCKS = 32
#: ... with 128-column tiles only where those make this many bands x column tiles (about
#: half of an H100's or H200's 132 SMs), else 64 columns: ViT-L's 257 x 4096 · 4096 x 1024
#: on 5 x 8 blocks of 128 columns ran 14.7 µs, each SM near a warpgroup's peak but 92 of 132
#: idle (cuBLAS: 8.0 split over k, plus 2.8 for the reduction; H200 s51 c3)
RAGGED_WGMMA_WIDE_BLOCKS = 64


def _warpgroup_tiles(M: int, N: int, K: int, batch: int, f16: bool) -> tuple[int, int, int] | None:
    """(rows, columns, k) of a product's block tile that runs as warpgroup MMAs on sm_90
    (``codegen.schedule.wgmma_threads``: 64 rows on 128 threads, 128 or 64 columns, k 128 or
    64, at least two iterations) where an fp16 product has the rows, columns and k for them,
    at least :data:`WGMMA_MIN_BLOCKS` such blocks and :data:`WGMMA_MIN_INTENSITY`; else
    None. The narrow column tiles (``MIN_BLOCKS``) are for products of a few rows, which
    stream their weights; a product of many rows is bound by its tensor cores, where
    mma.sync's fragment reads cost most
    (X (512, 2048) · W (2048, 2048): the narrow-tile lowering 34.0 µs, 64 x 128 tiles of k 128
    as wgmma 14.9-15.8, cuBLAS 13.6; H100 s32 c2, c4, c7, c8)."""
    if not (f16 and M % 64 == 0 and N % 64 == 0 and K % 64 == 0 and K >= 128
            and M * N * K >= WGMMA_MIN_INTENSITY * (M * K + K * N + M * N)):
        return None
    tn = 128 if N % 128 == 0 else 64
    tk = 128 if K % 128 == 0 and K >= 256 else 64
    return (64, tn, tk) if (M // 64) * (N // tn) * batch >= WGMMA_MIN_BLOCKS else None


def _ragged_warpgroup_tiles(M: int, N: int, K: int, batch: int,
                            f16: bool) -> tuple[int, int, int] | None:
    """(rows, columns, k) for a product whose M rows no tile side divides (a block holds all
    of them: ViT's 197 tokens) but which is otherwise :func:`_warpgroup_tiles`' kind: all M
    rows a block, columns and k as warpgroup tiles. The tuner runs such a block refined
    into 64-row bands (``codegen.refine``; the last band shifted back to end at row M), each
    a warpgroup's product; so the block count asked of it is the bands': 128 columns where
    they make :data:`RAGGED_WGMMA_WIDE_BLOCKS`, else 64 where those make
    :data:`RAGGED_WGMMA_MIN_BLOCKS`. None where that does not apply."""
    if not (f16 and M > 64 and M % 64 and N % 64 == 0 and K % 64 == 0 and K >= 128
            and M * N * K >= WGMMA_MIN_INTENSITY * (M * K + K * N + M * N)):
        return None
    bands = -(-M // 64) * batch
    tk = 128 if K % 128 == 0 and K >= 256 else 64
    fits = [tn for tn in (128, 64) if N % tn == 0 and bands * (N // tn) >= RAGGED_WGMMA_MIN_BLOCKS]
    if not fits:
        return None
    wide = fits[0] == 128 and bands * (N // 128) >= RAGGED_WGMMA_WIDE_BLOCKS
    return M, (128 if wide else fits[-1]), tk


def _shared_b_axes(n: Node) -> list[int]:
    """The batch dimensions of matmul ``n``'s output (size > 1) along which its B operand
    is broadcast (B lacks them or has size 1 there): every element of them multiplies the
    same B."""
    B = n.src[1]
    lead = len(n.shape) - len(B.shape)
    return [d for d in range(len(n.shape) - 2)
            if n.shape[d] > 1 and (d < lead or B.shape[d - lead] == 1)]


def _matmul(n: Node, threads: int) -> BlockGraph:
    A, B = n.src
    out_shape = n.shape
    r, ra, rb = len(out_shape), len(A.shape), len(B.shape)
    M, N, K = out_shape[-2], out_shape[-1], A.shape[-1]
    shared = _shared_b_axes(n)
    # B broadcast along batch dimensions of few rows in all: those stay whole in each block
    # (the module doc), so B's tiles are read once rather than once per batch element
    whole = shared if shared and math.prod(out_shape[d] for d in shared) * M <= SHARED_B_ROWS else []
    batch = math.prod(out_shape[:-2])
    z_axes = [d for d in range(r - 2) if out_shape[d] > 1 and d not in whole]
    z_parts = out_shape[z_axes[0]] if z_axes else 1
    if not whole and shared == z_axes and len(z_axes) == 1 and M <= SHARED_B_ROWS:
        # one batch dimension, B broadcast along it, too many rows for one block: grid z
        # takes it in as few parts as keep each part's rows within SHARED_B_ROWS (B read
        # once a part)
        z_parts = _divisor_at_least(z_parts, -(-z_parts * M // SHARED_B_ROWS))
    # the blocks' rows share B's tiles: all M rows a block, and grid z gives z_parts blocks
    # (else, as always, the batch elements each have their own blocks)
    share_b = bool(whole) or (bool(z_axes) and z_parts < out_shape[z_axes[0]])
    tm = M if share_b else _tile_side(M)
    tk = _tile_side(K, whole_up_to=MAX_WHOLE_K)
    over_z = z_parts if share_b else batch
    # Narrower column tiles until there are a few blocks per multiprocessor (132 on H100).
    tn = _tile_side(N)
    for cand in (64, 32, 16):
        if N % cand == 0:
            tn = cand
            if (N // cand) * (M // tm) * over_z >= MIN_BLOCKS:
                break
    f16 = tensor_core_type(A.dtype, B.dtype) is not None
    wide = None if share_b else _warpgroup_tiles(M, N, K, batch, f16)
    if wide is None and not share_b and (tm == M or tm < MIN_TILE_SIDE):
        # (a prime above MAX_TILE_SIDE rows lowers to 1-row tiles otherwise)
        wide = _ragged_warpgroup_tiles(M, N, K, batch, f16)
    if wide is not None:
        tm, tn, tk = wide
    grid = [N // tn, M // tm, 1]
    am = [-1, ra - 2 if M // tm > 1 else -1, -1]
    bm = [rb - 1 if N // tn > 1 else -1, -1, -1]
    om = [r - 1 if grid[0] > 1 else -1, r - 2 if grid[1] > 1 else -1, -1]
    if wide is not None:
        # warpgroup tiles: the row tiles on grid x, so the blocks launched together share B's
        # column tile (X (512, 2048) · W (2048, 2048) as wgmma on 64 x 128 tiles: 14.3-14.9
        # µs with rows on x, 17.0-17.2 with columns on x, the same schedule, H100 s33 c1,
        # c2, c4)
        grid = [grid[1], grid[0], 1]
        am = [am[1], am[0], -1]
        bm = [bm[1], bm[0], -1]
        om = [om[1], om[0], -1]
    for d in z_axes[:1]:
        grid[2] = z_parts
        om[2] = d
        da, db = d - (r - ra), d - (r - rb)
        if da >= 0 and A.shape[da] == out_shape[d]:
            am[2] = da
        if db >= 0 and B.shape[db] == out_shape[d]:
            bm[2] = db
    g = (grid[0], grid[1], grid[2])
    F = K // tk
    sig = ((A.shape, A.dtype), (B.shape, B.dtype))
    at = make_iter(sig, 0, (am[0], am[1], am[2]), ra - 1, g, F)
    bt = make_iter(sig, 1, (bm[0], bm[1], bm[2]), rb - 2, g, F)
    acc = make_op("accum", [make_op("matmul", [at, bt], {}, BLOCK)], {"kind": "sum", "fold": None}, BLOCK)
    return BlockGraph(g, threads, F, sig, (BlockOutput(acc, (om[0], om[1], om[2])),))


def default_block_graph(n: Node, threads: int = THREADS) -> BlockGraph:
    """The block graph that computes kernel-level registry op ``n``."""
    if n.op not in REGISTRY or BLOCK not in REGISTRY[n.op].levels:
        raise GraphError(f"codegen: kernel op {n.op!r} has no default block graph")
    bg = _matmul(n, threads) if n.op == "matmul" else _elementwise_like(n, threads)
    (shape, dtype), = bg.output_types()
    if shape != n.shape or dtype != n.dtype:
        raise GraphError(f"codegen: lowering of {n.op} gave {dtype}{list(shape)}, expected "
                         f"{n.dtype}{list(n.shape)}")
    return bg


@dataclass(frozen=True)
class Launch:
    """One kernel launch of a lowered kernel graph: block graph, tensors read and written."""

    graph: BlockGraph
    inputs: tuple[Node, ...]
    outputs: tuple[Node, ...]
    source: Node  # the kernel-graph node it came from (a registry op or a ``kernel`` node)


def _identity_accum(n: Node) -> bool:
    return n.op == "accum" and n.attr("fold") is None and n.attr("kind") in ("sum", "mean")


def accums_pushed_down(bg: BlockGraph) -> BlockGraph:
    """``bg`` without a loop (forloop 1): every matmul whose operands are computed from plain
    accumulators (sum or mean, no fold: the identity over one iteration), each of its
    operands' paths from an iterator through exactly one of them, multiplies the same
    operands computed from the accumulators' sources instead, and its product is accumulated
    (sum). The same function, element for element. Any other ``bg`` (or one where an
    operand's accumulated form would still be needed by another reader: computing it twice)
    is returned as it is.

    ``matmul(accum(X), accum(W))`` becomes ``accum(matmul(X, W))``, and so does
    ``matmul(f(accum(X)), accum(W))`` for any ops ``f`` (a layer norm's mean, difference,
    square root and quotient: the outside layernorm_matmul's fused kernel). Only matmuls: the
    emitter's tensor-core, cp.async and gemv paths want iterator operands; an elementwise op's
    accumulator already shares its source's buffer, and moving it changed the row-register
    kernels of ntrans."""
    if bg.forloop != 1:
        return bg
    # per node: "pre" (no accumulator on any path from an iterator), "post" (exactly one
    # plain accumulator on every such path), or None (anything else)
    kind: dict[Node, str | None] = {}
    for n in bg.nodes:
        ks = {kind[s] for s in n.src}
        if n.op == "iter":
            kind[n] = "pre"
        elif _identity_accum(n):
            kind[n] = "post" if ks == {"pre"} else None
        elif n.op == "accum":
            kind[n] = None
        else:
            kind[n] = ks.pop() if len(ks) == 1 else None
    new: dict[Node, Node] = {}
    pre: dict[Node, Node] = {}  # a post node computed from the accumulators' sources

    def stripped(n: Node) -> Node:
        if n not in pre:
            pre[n] = (new[n] if kind[n] == "pre" else stripped(n.src[0]) if _identity_accum(n)
                      else make_op(n.op, [stripped(s) for s in n.src], n.attr_dict, BLOCK))
        return pre[n]

    try:
        for n in bg.nodes:
            if n.op == "iter":
                new[n] = n
                continue
            if n.op == "matmul" and kind[n] == "post":
                inner = make_op(n.op, [stripped(s) for s in n.src], n.attr_dict, BLOCK)
                new[n] = make_op("accum", [inner], {"kind": "sum", "fold": None}, BLOCK)
            else:
                new[n] = make_op(n.op, [new[s] for s in n.src], n.attr_dict, BLOCK)
        out = BlockGraph(bg.grid, bg.threads, bg.forloop, bg.inputs,
                         tuple(BlockOutput(new[o.node], o.omap) for o in bg.outputs))
    except GraphError:
        return bg
    # (an op both forms of which the new graph still computes: the move would duplicate it)
    kept = {n.key for n in out.nodes}
    if any(new[n].key in kept and pre[n].key in kept and new[n].key != pre[n].key
           for n in pre if n.op != "accum" and kind[n] == "post"):
        return bg
    return bg if out.key == bg.key else out


def launches(kg: KernelGraph, threads: int = THREADS) -> list[Launch]:
    """Every kernel of ``kg`` as a block graph, in a valid launch (topological) order (a
    loop-free kernel with its plain accumulators moved down: :func:`accums_pushed_down`; one
    on (batch, ..., rows, columns) activations on their 2-D views where that computes the
    same, :func:`~mirage_formal.ir.flatten.flat_rows`: a launch's graph may then have
    other input and output shapes than its tensors, with the same elements in the same
    order)."""
    out: list[Launch] = []
    for n in kg.kernels:
        if n.op == KERNEL_OP:
            bg: BlockGraph = accums_pushed_down(n.attr("graph"))
            gets = tuple(node(GET, (n,), (("index", i),), s, d)
                         for i, (s, d) in enumerate(bg.output_types()))
            out.append(Launch(flat_rows(bg) or bg, n.src, gets, n))
        elif n.op in (INPUT, GET):
            continue
        else:
            bg = default_block_graph(n, threads)
            out.append(Launch(flat_rows(bg) or bg, n.src, (n,), n))
    return out


def lowered_graph(kg: KernelGraph, threads: int = THREADS) -> KernelGraph:
    """``kg`` with every pre-defined kernel op replaced by its default graph-defined kernel
    (an equivalent μGraph made only of ``kernel`` nodes; used to test the lowering)."""
    from mirage_formal.ir.graph import make_kernel

    new: dict[Node, Node] = {n: n for n in kg.inputs}
    for n in kg.nodes:
        if n in new:
            continue
        if n.op == KERNEL_OP:
            bg = n.attr("graph")
            srcs = [new[s] for s in n.src]
            gets = make_kernel(bg, srcs)
            new[n] = gets[0].src[0]
        elif n.op == GET:
            kn = new[n.src[0]]
            new[n] = node(GET, (kn,), n.attrs, n.shape, n.dtype)
        elif n.op == INPUT:
            raise GraphError(f"input {n.attr('name')!r} is used but not declared")
        else:
            (y,) = make_kernel(default_block_graph(n, threads), [new[s] for s in n.src])
            new[n] = y
    return KernelGraph(kg.inputs, tuple(new[o] for o in kg.outputs))
