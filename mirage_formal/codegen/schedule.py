"""Thread-level schedules: every choice a block graph leaves open, as one value.

A μGraph fixes *what* each thread block computes (DESIGN.md's normative semantics); a
:class:`Schedule` fixes *how*: threads per block, tensor-core use, register prefetch depth,
the cp.async pipeline's depth and shared-memory budget, ldmatrix fragments, and a **split**
of the for-loop over extra blocks. No schedule changes the function a kernel computes; every
one is validated on the GPU before it is timed, cached or returned.

The split (split-K in GEMM terms) runs a block graph with grid (gx·S, gy, gz): block
(bx·S + s, by, bz) runs iterations [s·F/S, (s+1)·F/S) of block (bx, by, bz)'s loop into its own
accumulators, writes them to a global workspace, and the last of the S blocks to arrive (an
atomic ticket per original block) sums the S partial accumulators in the fixed order
s = 0..S-1 — deterministic, whichever block arrives last — resets the ticket, and runs the
post-loop ops and output savers. It pays when gx·gy·gz blocks cannot fill the GPU's SMs.

:mod:`tuning_rules` proposes a small set of schedules for one block graph from rules (blocks
vs SM count, loop length, tile sizes); the autotuner (:mod:`autotune`) measures them. This
module holds the schedule value and the predicates the layout and printers share with those
rules (which splits, stream-K runs, row registers and warpgroup products a block graph allows).

Imports ``ir``, ``errors`` and :mod:`tma` only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from mirage_formal.codegen.tma import BOX_COLS, box_rows, tma_tile_ok
from mirage_formal.errors import GraphError
from mirage_formal.ir.dtypes import DType, tensor_core_type
from mirage_formal.ir.graph import BlockGraph
from mirage_formal.ir.node import Node
from mirage_formal.ir.ops import REGISTRY

#: streaming multiprocessors of the H100 SXM / H200 (the default target)
DEFAULT_SM_COUNT = 132
#: gemv keeps rows x 8 fp32 accumulators per thread: up to 8 rows at any block size, up to 16
#: (128 registers of accumulators) only with at most GEMV_WIDE_THREADS threads, so the
#: compiler has 255 registers a thread for them, the B ring and the rest
GEMV_MAX_ROWS = 16
GEMV_WIDE_THREADS = 256
#: the largest thread-block cluster a split combine uses (the portable cluster size on sm_90)
CLUSTER_MAX = 8


def cc_block(shape: Sequence[int], cc_rows: int, cc_cols: int, threads: int) -> tuple[int, int]:
    """The outputs a thread (rows, columns) of a product of ``shape`` (..., M, N) off the
    tensor cores under :attr:`Schedule.cc_rows` / ``cc_cols`` on a block of ``threads``: the
    largest powers of two within them that divide M and N, halved (the larger first, rows on
    a tie) while the block's threads would outnumber its blocks of outputs. (1, 1) is the
    unblocked loop."""
    M, N = shape[-2], shape[-1]
    R, C = max(cc_rows, 1), max(cc_cols, 1)
    while M % R:
        R //= 2
    while N % C:
        C //= 2
    batch = math.prod(shape[:-2])
    while R * C > 1 and batch * (M // R) * (N // C) < threads:
        if R >= C:
            R //= 2
        else:
            C //= 2
    return R, C


#: 16 x 8 output tiles a warp of a TF32 product owns at most (4 fp32 sums each a thread, and
#: as many again for the sums of one loop step: print_tf32)
TF32_MAX_TILES = 16


def tf32_product_dims(n: Node) -> tuple[int, int, int] | None:
    """(M, N, K) of block op ``n`` when it is a product Schedule.tf32x3 may take: a matmul of
    two fp32 tiles with no batch but dimensions of size 1 (a per-head tile [1, M, K]), A of
    the product's M rows and B of its N columns (no broadcast one-row A or one-column B);
    None otherwise. Whether its tiles then divide over a block's warps is
    :func:`tf32_warp_tiling`'s."""
    if n.op != "matmul" or len(n.shape) < 2:
        return None
    A, B = n.src
    if (A.dtype is not DType.F32 or B.dtype is not DType.F32 or len(A.shape) < 2
            or len(B.shape) < 2 or any(math.prod(x.shape[:-2]) != 1 for x in (n, A, B))):
        return None
    M, N, K = n.shape[-2], n.shape[-1], A.shape[-1]
    if A.shape[-2] != M or B.shape[-1] != N:
        return None
    return M, N, K


def tf32_warp_tiling(M: int, N: int, K: int, warps: int) -> tuple[int, int, int] | None:
    """How ``warps`` warps share an M x N product over k ``K`` as TF32 MMAs
    (:attr:`Schedule.tf32x3`): (WM, WN, GN), each warp owning WM x WN of its 16 x 8 output
    tiles (a WM*16 x WN*8 block) and the warps laid out GN blocks across; None where M, N and
    K do not split into 16, 8 and 8 or the tiles do not divide evenly over the warps, at most
    :data:`TF32_MAX_TILES` a warp. Of the warp blocks, the one with the fewest fragment
    loads per k step (two a 16-row tile, two an 8-column one) wins, the one of fewer columns
    on a tie (a warp keeps all its B fragments through a k step, one tile row's A at a time)."""
    if M % 16 or N % 8 or K % 8 or warps < 1:
        return None
    tiles_m, tiles_n = M // 16, N // 8
    if (tiles_m * tiles_n) % warps or (tiles_m * tiles_n) // warps > TF32_MAX_TILES:
        return None
    per_warp = tiles_m * tiles_n // warps
    best: tuple[int, int, int] | None = None
    for wm in range(1, per_warp + 1):
        wn = per_warp // wm
        if per_warp % wm or tiles_m % wm or tiles_n % wn:
            continue
        if (tiles_m // wm) * (tiles_n // wn) != warps:
            continue
        if best is None or wm + wn <= best[0] + best[1]:
            best = (wm, wn, tiles_n // wn)
    return best


def gemv_rows_ok(rows: int, threads: int) -> bool:
    """Whether a gemv with ``rows`` rows fits a block of ``threads`` threads' registers."""
    return rows <= 8 or (rows <= GEMV_MAX_ROWS and threads <= GEMV_WIDE_THREADS)


#: the schedule's on/off fields that must be given as True or False (a 0/1 or a string from a
#: hand-edited file is refused, not silently taken)
_CHECKED_FLAGS = ("cluster_combine", "fold_registers", "ring_first", "row_registers", "evict_first",
                  "dense_rows", "mma_kpair", "reg_epilogue", "fold_fragments", "one_barrier",
                  "tma_ring", "a_op_fragments", "wgmma", "tma_multicast", "pad_acc_rows",
                  "fold_mma", "tf32x3", "ring32")


#: the fields a schedule's text key holds only when they differ from their default
_KEYED_WHEN_SET = ("stream_k", "dense_rows", "mma_kpair", "mma_kslice", "reg_epilogue",
                   "fold_fragments", "one_barrier", "tma_ring", "a_op_fragments", "wgmma",
                   "tma_multicast", "wgmma_cols", "pad_acc_rows", "fold_mma", "cc_rows",
                   "cc_cols", "tf32x3", "ring32")


@dataclass(frozen=True)
class Schedule:
    """How one block graph runs on the GPU; every combination computes the same function.

    ``threads``: threads per block (None: the block graph's own). ``split``: the for-loop is
    split over this many blocks per grid block, with a deterministic combine (1: no split;
    must divide the loop range). ``mma``: fp16 tile products on tensor cores (``mma.sync``
    m16n8k16, fp32 accumulation). ``prefetch``: inside the loop, global loads of the next
    iterations' tiles are issued into registers before this iteration's compute (up to
    ``prefetch_depth`` iterations ahead, ``prefetch_regs`` x 16 bytes per thread).
    ``async_copy``: per-iteration fp16 tiles read only by tensor-core matmuls stay raw fp16 in
    shared memory, in a ring of ``async_stages`` stages filled by ``cp.async`` (fewer while
    all stages would exceed ``async_stage_bytes``); ``ldmatrix``: their fragments come from
    ``ldmatrix`` where the shape allows.
    """

    threads: int | None = None
    split: int = 1
    mma: bool = True
    prefetch: bool = True
    prefetch_regs: int = 16
    prefetch_depth: int = 4
    async_copy: bool = True
    ldmatrix: bool = True
    async_stages: int = 4
    async_stage_bytes: int = 48 * 1024
    #: skinny matmuls (at most 8 rows, 16 at <= 256 threads; no batch) folded into a sum
    #: accumulator stream their fp16 B tile from global memory straight into registers
    #: (16-byte loads, prefetched with the register pipeline) and keep the accumulator in
    #: registers for the whole loop, reduced across threads once after it: no shared-memory
    #: staging, no tensor cores
    gemv: bool = False
    #: a gemv thread that loads its B vectors itself reads them in chunks of ``gemv_chunk``
    #: 16-byte vectors through a register ring of ``gemv_depth`` chunks (depth - 1 chunks in
    #: flight while one is multiplied; depth x chunk x 4 registers)
    gemv_chunk: int = 8
    gemv_depth: int = 2
    #: elementwise tiles read only by tensor-core matmuls (as operand A) and accumulators —
    #: attention's exp(QK) — are stored as fp16 in shared memory (rows padded by 8 halves),
    #: so the matmul reads them with ldmatrix: half the shared-memory traffic of fp32 tiles
    half_tiles: bool = False
    #: tensor-core register blocking: a warp computes ``warp_m`` x ``warp_n`` output tiles of
    #: 16x8 per pass, reusing each A fragment ``warp_n`` times and each B fragment ``warp_m``
    #: times (0: chosen by :func:`warp_tiles`; a value that does not divide the tile counts
    #: falls back to the rule)
    warp_m: int = 0
    warp_n: int = 0
    #: tensor-core matmuls that add into a plain accumulator keep the running sum in
    #: registers for the whole loop when each warp owns one warp tile (stored to the
    #: accumulator's tile once after the loop), and a loop-invariant A operand's fragments
    #: are loaded into registers once before the loop
    mma_registers: bool = True
    #: a tensor-core matmul whose product feeds, through elementwise ops only, the A operand
    #: of a second tensor-core matmul (and row sums) keeps that tile in registers: each warp
    #: owns whole rows of both products, turns its product's accumulators into the second
    #: matmul's A fragments and its row sums in registers (attention's exp(QK)·V and
    #: sum(exp(QK)): the FlashAttention-2 register path; no shared-memory round trip)
    mma_chain: bool = True
    #: the most warps that share one 16-row tile of a register chain, each taking a k slice
    #: of its second product (layout.Chain.kw); 0: as many as the block's warps allow
    chain_warps: int = 0
    #: 16-row tiles each warp of a register chain owns (1, 2 or 4; 0: the fewest that give
    #: every warp a row tile). More rows per warp read each K and V fragment from shared
    #: memory for more rows (2: half the fragment traffic per product); the warps left over
    #: share the row tiles' columns as k slices (``chain_warps`` still caps how many)
    chain_rows: int = 0
    #: L2 fetch size of streamed global reads (prefetch registers, gemv vectors, cp.async),
    #: bytes: 0 (the hardware's default) or a PTX hint for 128 or 256 bytes per miss, so tiles
    #: of short rows that neighbouring blocks read together cost fewer DRAM accesses
    l2_fetch: int = 0
    #: streamed global reads of iterator tiles (the same reads as ``l2_fetch``) carry an L2
    #: evict-first cache policy: the lines they bring in are the first victims when L2 needs
    #: room, so a weight stream read once does not push out lines still wanted, nor dirty
    #: lines (each such eviction is a DRAM write in the middle of the stream)
    evict_first: bool = False
    #: a split loop's S blocks of one grid block (S <= ``CLUSTER_MAX``) run as one thread-block
    #: cluster and combine their accumulators through distributed shared memory (block 0 of
    #: the cluster sums the S tiles in split order after a cluster barrier) instead of through
    #: global memory and an atomic ticket; accumulators that do not fit shared memory
    #: keep the global-memory combine
    cluster_combine: bool = False
    #: a fold accumulator (a row sum, mean or rms over tile columns, added up over the loop)
    #: keeps each thread's partial sums in registers through the loop and reduces them across
    #: threads once after it, instead of a block-wide reduction (warp sums, a shared scratch
    #: and two barriers) in every iteration: rmsnorm's fused kernel sums X² beside its matmul
    fold_registers: bool = True
    #: the cp.async ring's first stages are issued before the loop-invariant tiles are loaded
    #: (those loads hold their thread until the data arrives: issued after the ring's copies,
    #: both are in flight together) instead of after them. Measured both ways on the H100:
    #: lora 10.4 -> 9.6 µs, mqa b=1 16.0 -> 15.7, but mqa b=8 42.2 -> 44.6 and gqa b=8 28.3 ->
    #: 28.9; so a second-round trial of the tuner (:func:`tuning_rules.refinements`), not a default
    ring_first: bool = False
    #: ``__launch_bounds__(threads, min_blocks)``: ptxas keeps the registers a thread uses
    #: low enough for this many blocks per SM (0: no such bound, ptxas's own choice, which
    #: capped gqa b=1's 128-thread chain kernel at 128 registers with spills in its loop)
    min_blocks: int = 0
    #: a loop-free kernel of one-row tiles (:func:`row_registers_ok`) keeps every tile in
    #: registers, thread t owning the 8-column chunks t, t + T, ... of each row; threads meet
    #: only for row reductions (``print_row_registers``) instead of passing every tile
    #: through shared memory with a barrier around each step
    row_registers: bool = False
    #: ``coarsen`` adjacent blocks of grid axis ``coarsen_axis`` run as one block over tiles
    #: that many times wider (:mod:`coarsen`; only where no block op combines elements across
    #: them): a kernel reading a few columns of each weight row per block reads whole DRAM
    #: sectors per block instead. Every other field applies to the coarsened block graph
    coarsen: int = 1
    coarsen_axis: int = 0
    #: the other direction (:mod:`refine`): each logical block runs as several CTAs along a
    #: grid axis the μGraph leaves at 1, each computing ``refine_rows`` of its outputs'
    #: dimension ``refine_dim`` (0: off), the last band shifted back to end at the
    #: dimension's end. Only where no block op combines elements across that dimension, so
    #: a prime row count (ViT's 197 tokens) is spread over more SMs. Every other field
    #: applies to the refined (virtual) block graph
    refine_rows: int = 0
    refine_dim: int = 0
    #: stream-K (:mod:`stream_k`): launch this many blocks (0: off) and give each an equal
    #: contiguous run of the grid's (block, loop iteration) units; a grid block whose
    #: iterations several launched blocks share is combined like a split's (partials summed
    #: in block order by the last to arrive). Keeps every SM streaming where the grid's own
    #: blocks would leave some idle or run a partial second wave. Not with ``split``
    stream_k: int = 0
    #: raw fp16 tiles (the cp.async ring) keep their rows dense in shared memory instead of
    #: padding each by 8 halves. Padding puts the 8 rows one ``ldmatrix`` reads in distinct
    #: banks; dense rows of 128 bytes keep every row's copy aligned to 128 bytes, which a
    #: weight stream needs to run at full speed: on the H100 a cp.async ring reading 64-column
    #: bands of gated_mlp's weights took 34.9 µs with padded rows against 29.7 dense (s24,
    #: benchmarks/stream_probe.py). The fragment reads then meet bank conflicts, which a
    #: kernel bound by its weight stream does not feel
    dense_rows: bool = False
    #: a tensor-core product summed in registers through the loop (``mma_registers``) adds its
    #: even and odd k-steps into two accumulator sets, summed once after the loop, and its
    #: k-loop is unrolled whole: two independent chains of dependent ``mma`` instead of one.
    #: A kernel on one block per SM waits on that chain every iteration; gated_mlp's fused
    #: kernel on 64 blocks went from 35.3 to 32.7 µs with it (H100, s24)
    mma_kpair: bool = False
    #: a tensor-core product summed in registers (``mma_registers``; not a register chain, no
    #: hoisted A) splits its k-steps over this many warps: the warp tiles are those of
    #: ``threads / 32 / mma_kslice`` warps (wider, so each A fragment read from shared memory
    #: feeds more products), each run by ``mma_kslice`` warps over their own k slice; after the
    #: loop the partial sums go to the slices of a scratch tile and are added in slice order.
    #: A skinny product (M <= 16) otherwise has every warp read the whole A tile from shared
    #: memory each iteration, as many bytes as the B tile it streams (rmsnorm b=8 on the H100:
    #: the A reads cost 0.4 µs of 24.8, s25)
    mma_kslice: int = 1
    #: an output computed after the loop from register-summed products alone (through
    #: elementwise ops, with any other tiles from shared memory) is written to global memory
    #: straight from each warp's accumulator registers, instead of through the accumulators'
    #: shared-memory tiles and a barrier: rmsnorm's fused kernel scales its product by the
    #: rows' rms and stores it from the registers (H100, s25: 25.0 -> 24.8 µs at b=8, 25.4 ->
    #: 25.2 at b=1, a hand edit of the emitted kernel). Not with a split loop or stream-K
    #: (their partial sums meet in memory), nor k slices
    reg_epilogue: bool = False
    #: a fold accumulator (a row sum or rms over its tile's columns, one per row) of the tile
    #: a register-summed tensor-core product streams as its A operand adds its terms from the
    #: product's A fragments, already in registers, instead of reading the tile again from
    #: shared memory: the warps of the first column tile add the squares (or values) of their
    #: fragments' halves, and after the loop each row's quad of lanes is added by shuffles
    #: (k slices: in slice order through a scratch tile). rmsnorm's fused kernel sums X² this
    #: way beside X·W
    fold_fragments: bool = False
    #: a loop streaming tiles through the cp.async ring (no register prefetch, no stream-K)
    #: runs one barrier per iteration instead of two: wait for the iteration's stage, a
    #: barrier, then refill the stage the previous iteration read (every thread is past it)
    #: and compute, with no barrier at the body's end (one after the loop). A kernel that
    #: streams its weights waits on each iteration's barriers on the way to its next copies
    one_barrier: bool = False
    #: the loop's ring (every raw tile in swizzled dense rows, each a 2D box of a 2D input)
    #: is filled by one extra warp with 2D tensor-map copies (``cp.async.bulk.tensor``, sm_90;
    #: one instruction per 64-column box of a stage) and handed over through mbarriers: the
    #: consumer warps wait for a stage on its "full" barrier and give it back on its "empty"
    #: one, so a refill never waits for a block-wide barrier or for the slowest warp's
    #: products, and the copies take no consumer issue slots. Kernels it does not apply to
    #: (no such ring, a split or stream-K loop, register prefetches) print as without it.
    #: rmsnorm's fused kernel by hand (H100, s28 c1): 23.7 µs against 25.2 for the table's
    #: cp.async winner in the same run
    tma_ring: bool = False
    #: a tensor-core product whose A operand is an elementwise op of one or two tiles that
    #: change every iteration (``(X + Y)·W``, a gated ``(A ⊙ B)·W``, ``silu(X)·W``) computes
    #: that op on the A fragments: the tiles stay raw fp16 in the ring (cp.async or the TMA
    #: ring), each warp loads their fragments with ldmatrix and combines them register by
    #: register (add, sub, mul: one half2 instruction; other ops in fp32 per half). Without it the op's result goes through a shared-memory tile and a
    #: barrier every iteration: the outside (X + Y)·W's one-kernel 80-block size measured
    #: 29-52 µs against 22.4 for the add as its own kernel beside the ring matmul (H100, s29
    #: c13)
    a_op_fragments: bool = False
    #: (with the TMA ring) the block's products run as warpgroup MMAs (``wgmma``, sm_90a):
    #: each warpgroup of four consumer warps multiplies 64 rows of A by all of B straight
    #: from the ring's swizzled boxes, one instruction per 16-deep k-step and up to 256
    #: columns of B, accumulating in registers laid out as the mma.sync warp tiles of one
    #: 16-row tile a warp (so the epilogue, the combine and the register outputs are the
    #: same). It needs 2-D products (or slices of batched ones) of the same multiple of 64
    #: rows and of multiples of 64 columns whose A and B all stream through the ring (a gated
    #: MLP's two products of X), and one consumer warp per 16 rows (``threads`` = 2 x rows:
    #: :func:`wgmma_threads`); other kernels print as without it. There is no fragment load
    #: and no ``mma.sync``: on the 512 x 2048 x 2048 product the mma.sync kernels spent their
    #: time on shared-memory fragment reads (the outside prefill_matmul, 0.57x of cuBLAS,
    #: H100 s32 c1)
    wgmma: bool = False
    #: (with the TMA ring) pairs of blocks that read the same tile every iteration (blocks
    #: along a grid axis the tile's map does not use, such as the row tiles of X·W sharing
    #: W's column tile) run as a cluster of two: each copies half of the shared tile's boxes
    #: into both blocks' shared memory at once (``.multicast::cluster``), so L2 sends the tile
    #: once per pair. A stage is refilled only after both blocks' consumers gave it back. It
    #: needs a grid axis of even extent that some ring tile's map leaves out, no split and no
    #: stream-K (:attr:`KernelLayout.mcast_axis`); other kernels print as without it. A 512 x
    #: 2048 x 2048 product on 64 x 128 tiles reads ~98 MB from L2 in ~10 µs, but the pairs
    #: measured slower (15.0 -> 16.6 µs, the same with each block copying all its boxes: the
    #: coupling costs, L2 was not the limit; H100 s33 c3), so the tuner only tries it in the
    #: second round
    tma_multicast: bool = False
    #: (with wgmma) the products' columns over this many warpgroups: warpgroup g multiplies
    #: rows 64 (g % R) .. + 63 (R = rows / 64) by columns group g / R of B, so a 64-row tile
    #: keeps two warpgroups issuing. (One warpgroup a block ran the tensor cores at ~45% of
    #: their peak on the 512 x 2048 x 2048 product, but two over the columns measured 0.9-3.5
    #: µs slower at each of six tile sizes: H100 s33 c4. A second-round trial only.)
    wgmma_cols: int = 1
    #: the shared tiles that register-summed tensor-core products store their sums into after
    #: the loop (a split's partials, stream-K's, any accumulator that goes through memory) get
    #: rows padded by 8 floats, and each lane stores its two adjacent sums as one float2: with
    #: rows of a multiple of 32 floats the 8 lanes of a column (g = 0..7) hit one bank, an
    #: 8-way conflict on every store (the 128 x 128 split-2 wgmma kernel spent 5.1-5.8 µs
    #: after its loop before any partial left the block: H100 s33 c5); padded, each
    #: half-warp's float2 store covers the 32 banks once
    pad_acc_rows: bool = False
    #: a fragment fold (``fold_fragments``) adds its terms on the tensor cores: one m16n8k16
    #: per 8 rows of the A fragments and k-step (an rms: X·Xᵀ, whose diagonal holds the sums
    #: of squares; a sum: X times ones), instead of about 20 conversions and adds per warp
    #: tile and k-step on the CUDA cores. The fold then costs the consumer warps a tenth of
    #: the instructions: on rmsnorm's fused kernel the scalar fold was 320 of the loop's 900
    #: instructions a stage and 0.23 µs of 24.1 (H100, s35 c3)
    fold_mma: bool = False
    #: products off the tensor cores (fp32 operands, or ``mma`` off) blocked in registers: each
    #: thread computes up to ``cc_rows`` x ``cc_cols`` outputs (powers of two up to 8), so that
    #: each A value it reads from shared memory serves ``cc_cols`` products and each B value
    #: ``cc_rows``. 0 (the default) is one output per thread: two shared-memory reads per FMA,
    #: which bound the outside fp32 gated MLP (X 8 x 4096, W1 and W2 4096 x 4096) at 78.6 µs,
    #: 1.7 TB/s, where its weights stream at 3.0 TB/s without the products (H200, s37 c5). The
    #: printer takes the largest block within these that divides the product's rows and columns
    #: and still gives every thread of the block an output (:func:`cc_block`).
    cc_rows: int = 0
    cc_cols: int = 0
    #: products of fp32 operands on the tensor cores as three TF32 MMAs each (m16n8k8): every
    #: operand value x is split into big = x rounded to TF32 (11 significant bits) and small =
    #: x - big rounded to TF32, and a·b is taken as small_a·big_b + big_a·small_b +
    #: big_a·big_b with fp32 sums (the small·small term, below 2^-22 |a·b|, is dropped). Each
    #: product is then exact to about 3·2^-22 of |a·b| before the fp32 summation (fp32 FMAs:
    #: 2^-24), at up to 2.5 times the FMA units' rate (H200: 495 TFLOP/s of TF32 over 3
    #: against 67 of fp32 FMA). Applies where a product's tile (:func:`tf32_product_dims`)
    #: splits evenly into 16 x 8 output tiles, at most 16 a warp (:func:`tf32_warp_tiling`);
    #: the others stay on the CUDA cores. Off by default: a tuner candidate, validated like any other
    #: against the float64 program (fp32 tolerance 1e-4)
    tf32x3: bool = False
    #: fp32 iterator tiles that change every iteration and are read only by TF32 products
    #: (``tf32x3``) stream through the cp.async ring like fp16 tiles (``async_stages`` deep,
    #: 16-byte copies, rows padded for the TF32 fragment reads) instead of through prefetch
    #: registers and a store to shared memory: the registers go to the TF32 sums, and the
    #: copies of later iterations overlap the products
    ring32: bool = False

    def __post_init__(self) -> None:
        if self.l2_fetch not in (0, 128, 256):
            raise GraphError(f"schedule: l2_fetch must be 0, 128 or 256, got {self.l2_fetch}")
        for name in _CHECKED_FLAGS:
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise GraphError(f"schedule: {name} must be True or False, got {value!r}")
        if self.threads is not None and not (32 <= self.threads <= 1024 and self.threads % 32 == 0):
            raise GraphError(f"schedule: threads must be a multiple of 32 in [32, 1024], "
                             f"got {self.threads}")
        if not 0 <= self.min_blocks <= 32:
            raise GraphError(f"schedule: min_blocks must be in [0, 32], got {self.min_blocks}")
        if self.chain_warps < 0:
            raise GraphError(f"schedule: chain_warps must be >= 0, got {self.chain_warps}")
        if self.chain_rows not in (0, 1, 2, 4):
            raise GraphError(f"schedule: chain_rows must be 0, 1, 2 or 4, got {self.chain_rows}")
        if self.split < 1:
            raise GraphError(f"schedule: split must be >= 1, got {self.split}")
        if self.stream_k < 0 or (self.stream_k and (self.split > 1 or self.cluster_combine)):
            raise GraphError(f"schedule: stream_k must be >= 0 and comes without split and "
                             f"cluster_combine, got stream_k={self.stream_k}, split={self.split}")
        if self.coarsen < 1 or self.coarsen_axis not in (0, 1, 2):
            raise GraphError(f"schedule: coarsen must be >= 1 and coarsen_axis 0, 1 or 2, got "
                             f"{self.coarsen} and {self.coarsen_axis}")
        if self.refine_rows < 0 or self.refine_dim < 0:
            raise GraphError(f"schedule: refine_rows and refine_dim must be >= 0, got "
                             f"{self.refine_rows} and {self.refine_dim}")
        if self.gemv_chunk < 1 or self.gemv_depth < 2:
            raise GraphError("schedule: gemv_chunk >= 1 and gemv_depth >= 2 are required")
        if self.warp_m not in (0, 1, 2, 4) or self.warp_n not in (0, 1, 2, 4, 8):
            raise GraphError("schedule: warp_m must be 0, 1, 2 or 4 and warp_n 0, 1, 2, 4 or 8")
        if self.wgmma_cols not in (1, 2):
            raise GraphError(f"schedule: wgmma_cols must be 1 or 2, got {self.wgmma_cols}")
        if self.cc_rows not in (0, 1, 2, 4, 8) or self.cc_cols not in (0, 1, 2, 4, 8):
            raise GraphError(f"schedule: cc_rows and cc_cols must be 0, 1, 2, 4 or 8, got "
                             f"{self.cc_rows} and {self.cc_cols}")
        if self.mma_kslice not in (1, 2, 4, 8):
            raise GraphError(f"schedule: mma_kslice must be 1, 2, 4 or 8, got {self.mma_kslice}")
        if self.async_stages < 2 or self.prefetch_depth < 1 or self.prefetch_regs < 0:
            raise GraphError("schedule: async_stages >= 2, prefetch_depth >= 1 and "
                             "prefetch_regs >= 0 are required")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if self.coarsen == 1:  # (so that the keys of uncoarsened schedules stay as they were)
            del d["coarsen"], d["coarsen_axis"]
        if self.refine_rows == 0:
            del d["refine_rows"], d["refine_dim"]
        # fields added after schedules were first cached: left out at their default, so the
        # keys of schedules that do not use them stay as they were
        for name in _KEYED_WHEN_SET:
            if getattr(self, name) == _DEFAULTS[name]:
                del d[name]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Schedule:
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise GraphError(f"schedule: unknown fields {sorted(unknown)}")
        return cls(**d)

    @property
    def key(self) -> str:
        """A stable text key (cache keys, kernel names)."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @property
    def refine_conflict(self) -> str | None:
        """Why this schedule's refinement (``refine_rows``) cannot be emitted with its other
        choices, or None: a refined block runs without a split loop, stream-K, a cluster
        combine, coarsening or TMA multicast (their partials, tickets and pairs are per
        logical block)."""
        if self.refine_rows and (self.split > 1 or self.stream_k or self.cluster_combine
                                 or self.coarsen > 1 or self.tma_multicast):
            return ("refine_rows comes without split, stream_k, cluster_combine, coarsen and "
                    f"tma_multicast; got split={self.split}, stream_k={self.stream_k}, "
                    f"cluster_combine={self.cluster_combine}, coarsen={self.coarsen}, "
                    f"tma_multicast={self.tma_multicast}")
        return None

    def short(self) -> str:
        """A short human label: only the fields that differ from the default."""
        base = Schedule()
        diff = [f"{k}={v}" for k, v in self.to_dict().items() if getattr(base, k) != v]
        return ",".join(diff) or "default"


_DEFAULTS = {f.name: f.default for f in fields(Schedule)}


#: the most 16x8 fp32 accumulator tiles one warp keeps in registers (4 registers each)
WARP_TILES_MAX = 16


def row_groups(mt: int, wm: int) -> int:
    """Groups of ``wm`` 16-row tiles covering ``mt`` row tiles (the last may run past the
    rows: :func:`warp_tiles`' ragged blockings)."""
    return -(-mt // wm)


def warp_tiles(batch: int, mt: int, nt: int, warps: int, want_m: int = 0,
               want_n: int = 0, ragged: bool = False) -> tuple[int, int]:
    """Register blocking (WM, WN) for a tensor-core matmul of ``batch`` x ``mt`` x ``nt``
    16x8 output tiles on ``warps`` warps.

    An explicit ``want_m``/``want_n`` (the schedule's) is used when it divides the tile counts.
    Otherwise, among WM in {1, 2, 4} and WN in {1, 2, 4, 8} dividing ``mt`` and ``nt`` (WM·WN
    <= WARP_TILES_MAX), keep the blockings that still give every warp a warp tile, and take the
    one that reads the fewest fragment bytes from shared memory in all (each warp tile reads WM
    A fragments of 512 B and WN B fragments of 256 B per 16-deep step), then the one whose
    warp tiles spread most evenly over the warps. With fewer tiles than warps: (1, 1).

    ``ragged`` (the product's rows are not a multiple of 16, so its loads already clamp and
    its stores skip rows past the last): WM need not divide ``mt``; the last warp's group of
    row tiles then runs past the rows (:func:`row_groups`). Where the blocking above leaves a
    warp more than one warp tile (so its sums cannot stay in its registers through the loop),
    the ragged blocking with the most warp tiles that still gives each warp at most one is
    taken instead. A prime row count has no other: ViT's 197 rows are 13 row tiles, and 8
    warps walked 13 tiles a k step, summing each into shared memory, at 3x the time of 16
    columns a block (H200 s47 c6).
    """
    opts = [(m, n) for m in (1, 2, 4) if mt % m == 0 for n in (1, 2, 4, 8)
            if nt % n == 0 and m * n <= WARP_TILES_MAX]
    if want_m or want_n:
        m = want_m or 1
        n = want_n or 1
        if (m, n) in opts or (ragged and nt % n == 0 and m * n <= WARP_TILES_MAX):
            return m, n
    fits = [(m, n) for m, n in opts if batch * (mt // m) * (nt // n) >= warps]

    def score(mn: tuple[int, int]) -> tuple[int, int, int]:
        m, n = mn
        tiles = batch * (mt // m) * (nt // n)
        waves = -(-tiles // warps)
        return (tiles * (2 * m + n), waves * warps - tiles, m * n)

    best = min(fits, key=score) if fits else (1, 1)
    if not ragged or batch * (mt // best[0]) * (nt // best[1]) <= warps:
        return best
    static = [(m, n) for m in (1, 2, 4) for n in (1, 2, 4, 8)
              if nt % n == 0 and m * n <= WARP_TILES_MAX
              and batch * row_groups(mt, m) * (nt // n) <= warps]
    if not static:
        return best

    def tiles_then_bytes(mn: tuple[int, int]) -> tuple[int, int, int]:
        m, n = mn
        tiles = batch * row_groups(mt, m) * (nt // n)
        return (-tiles, tiles * (2 * m + n), m * n)

    return min(static, key=tiles_then_bytes)


def tma_ring_fits(bg: BlockGraph) -> bool:
    """``bg`` streams a changing tile into a matmul and every changing tile a matmul reads
    is one :attr:`Schedule.tma_ring` can copy (64-column multiples of a 2-D tile or of one
    slice of a batched input, :func:`tma.tma_tile_ok`; rows in boxes of at most 256:
    :func:`tma.box_rows`): where its trials can change the kernel (the layout has the last
    word)."""
    tiles = {s for n in bg.nodes if n.op == "matmul" for s in n.src
             if s.op == "iter" and s.attr("fmap") != -1}
    return streams_raw_tiles(bg) and all(
        tma_tile_ok(t.shape, bg.inputs[t.attr("input")][0]) and t.shape[-1] % BOX_COLS == 0
        and box_rows(t.shape[-2]) is not None for t in tiles)


def wgmma_threads(bg: BlockGraph, cols: int = 1) -> int | None:
    """The thread count of :attr:`Schedule.wgmma` for ``bg`` with its products' columns over
    ``cols`` warpgroups (:attr:`Schedule.wgmma_cols`; one warp per 16 rows of each column
    group), or None where it cannot apply: ``bg`` loops, and each of its matmuls is 2-D (or
    one slice of a batched product: every leading extent 1, as a batched GEMM's block takes),
    of the same multiple of 64 rows and of a multiple of 64 x ``cols`` columns, with a k of a
    multiple of 64, both operands fp16 tiles that change every iteration and that a tensor
    map can copy (:func:`tma_ring_fits`); rows x ``cols`` at most 448 (the consumers and the
    producer warp in 1024 threads); their accumulators together at most
    :data:`WGMMA_MAX_ACCUMULATORS` a thread (a gated MLP's two products of 128 columns: 128).
    The layout has the last word (:attr:`KernelLayout.wg`)."""
    mms = [n for n in bg.nodes if n.op == "matmul"]
    if bg.forloop < 2 or not mms or not tma_ring_fits(bg):
        return None
    M = mms[0].shape[-2]

    def fits(n: Node) -> bool:
        N, K = n.shape[-1], n.src[0].shape[-1]
        return (all(d == 1 for d in n.shape[:-2]) and n.shape[-2] == M and N % (64 * cols) == 0
                and K % 64 == 0 and n.src[0] is not n.src[1]
                and all(x.op == "iter" and x.attr("fmap") != -1 for x in n.src)
                and tensor_core_type(*(bg.inputs[x.attr("input")][1] for x in n.src)) is not None)

    ok = (M % 64 == 0 and M * cols <= 448 and all(fits(n) for n in mms)
          and sum(n.shape[-1] // 2 // cols for n in mms) <= WGMMA_MAX_ACCUMULATORS)
    return 2 * M * cols if ok else None


def pair_axis(tiles: Iterable[Node], grid: tuple[int, int, int]) -> tuple[int, int] | None:
    """(axis, elements): the grid axis of even extent along which pairs of blocks read the
    most elements of ``tiles`` in common (the tiles whose maps leave that axis out; the lowest
    axis on a tie), or None where no such axis shares any (:attr:`Schedule.tma_multicast`)."""
    tiles = list(tiles)
    best: tuple[int, int] | None = None
    for a in range(3):
        shared = sum(math.prod(n.shape) for n in tiles if n.attr("imap")[a] == -1)
        if grid[a] % 2 == 0 and shared and (best is None or shared > best[1]):
            best = (a, shared)
    return best


#: the emitter's fallback: no tensor cores, no prefetching, no cp.async (the simplest code)
SIMPLE = Schedule(mma=False, prefetch=False, async_copy=False, ldmatrix=False)


#: binary ops Schedule.a_op_fragments applies to two packed half2 fragment registers with one
#: instruction (the mf_tile.cuh helper); any other elementwise op goes through fp32 per half
FRAGMENT_OPS = {"add": "mf::h2_add", "sub": "mf::h2_sub", "mul": "mf::h2_mul"}


def split_ok(bg: BlockGraph, split: int) -> bool:
    """``split`` divides the loop and the block graph has accumulators to combine."""
    if split == 1:
        return True
    return bg.forloop % split == 0 and bg.forloop >= split and any(
        n.op == "accum" for n in bg.nodes)


def stream_k_ok(bg: BlockGraph, blocks: int) -> bool:
    """Stream-K over ``blocks`` launched blocks applies to ``bg``: a loop of at least two
    iterations, accumulators to combine, and at least one unit per launched block."""
    if blocks == 0:
        return True
    return (blocks >= 2 and bg.forloop >= 2 and math.prod(bg.grid) * bg.forloop >= blocks
            and any(n.op == "accum" for n in bg.nodes))


#: the longest rms_norm row the emitter normalizes row-wise, from registers (at most 16
#: values per lane: ``layout.KernelLayout.rms_rowwise``)
ROWWISE_MAX_ROW = 512


#: columns a thread of a :attr:`Schedule.row_registers` kernel owns together (one 16-byte
#: vector of fp16, two of fp32)
ROW_CHUNK = 8
#: ... and the most such chunks per thread of each row tile (registers: 8 floats a chunk)
ROW_CHUNKS_MAX = 4
#: the row reductions a row_registers kernel computes (beside elementwise ops)
ROW_REDUCTIONS = ("rms_norm", "sum", "mean")


def row_registers_ok(bg: BlockGraph, threads: int) -> bool:
    """Whether :attr:`Schedule.row_registers` applies to ``bg`` run by ``threads`` threads: no
    loop (no split), every tile one row of the same length L (or one value: a reduction of a
    row, an op of such values), L a multiple of 8·threads with at most ROW_CHUNKS_MAX chunks
    a thread; nodes are iterators of 2- or 4-byte types whose rows start 16-byte aligned,
    loop accumulators of a sum or mean (the identity without a loop), elementwise ops,
    rms_norm and sum or mean over the row; every output a whole row of a 2- or 4-byte type."""
    if bg.forloop != 1 or not bg.nodes:
        return False
    L = max(n.shape[-1] if n.shape else 1 for n in bg.nodes)
    if L % (ROW_CHUNK * threads) or L // (ROW_CHUNK * threads) > ROW_CHUNKS_MAX:
        return False

    def row(n: Any) -> bool:
        return bool(n.shape) and n.shape[-1] == L and math.prod(n.shape[:-1]) == 1

    for n in bg.nodes:
        one = math.prod(n.shape) == 1
        if not (row(n) or one):
            return False
        if n.op == "iter":
            shape, dt = bg.inputs[n.attr("input")]
            if not row(n) or dt.itemsize not in (2, 4) or shape[-1] % ROW_CHUNK:
                return False
        elif n.op == "accum":
            if n.attr("fold") is not None or n.attr("kind") not in ("sum", "mean"):
                return False
        elif n.op in ROW_REDUCTIONS:
            x = n.src[0]
            if not row(x):
                return False
            if n.op == "rms_norm":
                if not row(n) or any(not row(g) for g in n.src[1:]):
                    return False
            elif not one or n.attr("axis") % len(x.shape) != len(x.shape) - 1:
                return False
        else:
            d = REGISTRY.get(n.op)
            if d is None or not d.elementwise or d.c_expr is None:
                return False
            if one and not all(math.prod(s.shape) == 1 for s in n.src):
                return False
    return all(row(o.node) and o.node.dtype.itemsize in (2, 4) for o in bg.outputs)


def streams_raw_tiles(bg: BlockGraph) -> bool:
    """``bg`` has a loop whose changing fp16 tiles a matmul may read from the cp.async ring:
    where :attr:`Schedule.dense_rows` can change the kernel."""
    return bg.forloop > 1 and any(
        n.op == "matmul" and any(s.op == "iter" and s.attr("fmap") != -1 for s in n.src)
        for n in bg.nodes)


#: fp32 accumulators a thread holds for Schedule.wgmma's products (N/2 each: a warp's 16 rows
#: of N columns)
WGMMA_MAX_ACCUMULATORS = 128
