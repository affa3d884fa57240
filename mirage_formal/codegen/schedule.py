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

:func:`candidate_schedules` proposes a small set of schedules for one block graph from rules
(blocks vs SM count, loop length, tile sizes); the autotuner (:mod:`autotune`) measures them.

Imports ``ir`` and :mod:`coarsen` only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from mirage_formal.codegen.coarsen import coarsenable, coarsened, narrow_axes
from mirage_formal.codegen.tma import BOX_COLS, box_rows, tma_tile_ok
from mirage_formal.errors import GraphError
from mirage_formal.ir.dtypes import tensor_core_type
from mirage_formal.ir.graph import BlockGraph, elementwise_tree, streams_weights
from mirage_formal.ir.node import Node
from mirage_formal.ir.occupancy import loop_splits
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


def gemv_rows_ok(rows: int, threads: int) -> bool:
    """Whether a gemv with ``rows`` rows fits a block of ``threads`` threads' registers."""
    return rows <= 8 or (rows <= GEMV_MAX_ROWS and threads <= GEMV_WIDE_THREADS)


#: the schedule's on/off fields that must be given as True or False (a 0/1 or a string from a
#: hand-edited file is refused, not silently taken)
_CHECKED_FLAGS = ("cluster_combine", "fold_registers", "ring_first", "row_registers", "evict_first",
                  "dense_rows", "mma_kpair", "reg_epilogue", "fold_fragments", "one_barrier",
                  "tma_ring", "a_op_fragments", "wgmma", "tma_multicast", "pad_acc_rows",
                  "fold_mma")


#: the fields a schedule's text key holds only when they differ from their default
_KEYED_WHEN_SET = ("stream_k", "dense_rows", "mma_kpair", "mma_kslice", "reg_epilogue",
                   "fold_fragments", "one_barrier", "tma_ring", "a_op_fragments", "wgmma",
                   "tma_multicast", "wgmma_cols", "pad_acc_rows", "fold_mma", "cc_rows",
                   "cc_cols")


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
    #: 28.9; so a second-round trial of the tuner (:func:`refinements`), not a default
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

    def short(self) -> str:
        """A short human label: only the fields that differ from the default."""
        base = Schedule()
        diff = [f"{k}={v}" for k, v in self.to_dict().items() if getattr(base, k) != v]
        return ",".join(diff) or "default"


_DEFAULTS = {f.name: f.default for f in fields(Schedule)}


#: the most 16x8 fp32 accumulator tiles one warp keeps in registers (4 registers each)
WARP_TILES_MAX = 16


def warp_tiles(batch: int, mt: int, nt: int, warps: int, want_m: int = 0,
               want_n: int = 0) -> tuple[int, int]:
    """Register blocking (WM, WN) for a tensor-core matmul of ``batch`` x ``mt`` x ``nt``
    16x8 output tiles on ``warps`` warps.

    An explicit ``want_m``/``want_n`` (the schedule's) is used when it divides the tile counts.
    Otherwise, among WM in {1, 2, 4} and WN in {1, 2, 4, 8} dividing ``mt`` and ``nt`` (WM·WN
    <= WARP_TILES_MAX), keep the blockings that still give every warp a warp tile, and take the
    one that reads the fewest fragment bytes from shared memory in all (each warp tile reads WM
    A fragments of 512 B and WN B fragments of 256 B per 16-deep step), then the one whose
    warp tiles spread most evenly over the warps. With fewer tiles than warps: (1, 1).
    """
    opts = [(m, n) for m in (1, 2, 4) if mt % m == 0 for n in (1, 2, 4, 8)
            if nt % n == 0 and m * n <= WARP_TILES_MAX]
    if want_m or want_n:
        m = want_m or 1
        n = want_n or 1
        if (m, n) in opts:
            return m, n
    fits = [(m, n) for m, n in opts if batch * (mt // m) * (nt // n) >= warps]
    if not fits:
        return 1, 1

    def score(mn: tuple[int, int]) -> tuple[int, int, int]:
        m, n = mn
        tiles = batch * (mt // m) * (nt // n)
        waves = -(-tiles // warps)
        return (tiles * (2 * m + n), waves * warps - tiles, m * n)

    return min(fits, key=score)


def refinements(best: Schedule, tried: list[Schedule], bg: BlockGraph,
                sm_count: int = DEFAULT_SM_COUNT) -> list[Schedule]:
    """The second round of tuning one kernel: (a ring of boxes a tensor map can copy) the
    winner with the TMA ring (:func:`_tma_trials`), (an A that is an op of two loop tiles) with
    that op on the A fragments, (a TMA ring winner) at the other depths of
    :data:`TMA_RING_DEPTHS`, the winner with 256-byte L2 fetches, with the
    evict-first policy, (a loop streaming fp16 tiles) with dense ring rows and with two-chain
    products, (a loop over the cp.async ring) with one barrier per iteration, (a product summed
    in registers, not split) with outputs stored from the
    registers, (a row fold of a streamed A tile) with the fold taken from the A fragments (alone,
    with the register outputs, with the widest k slices), (a skinny streamed product) with
    its k-steps sliced over warps, (split, not yet
    clustered) with the cluster combine, (not split, on fewer blocks than ``sm_count`` SMs)
    split 2 and 4 ways through a cluster, (fewer blocks than SMs) stream-K over one block per
    SM, (a loop
    with loop-invariant tiles) with the ring's copies issued first, and (a cp.async ring) 3
    deep; then each tried
    schedule's other choices (ring depth, gemv, tiles, chain...) on the winner's thread count
    and split, where that combination was not tried and is valid for ``bg`` (the first round
    varies one kind of choice at a time from the default)."""
    seen = {s.key for s in tried}
    out = []
    # a coarsened winner's other choices apply to its coarsened block graph
    bg = coarsened(bg, best.coarsen_axis, best.coarsen)
    # the winner itself with 256-byte L2 fetches for its streamed reads, and with its streamed
    # reads evicted first from L2 (two more trials)
    if any(n.op == "iter" for n in bg.nodes):
        policies = []
        if (best.async_copy and not best.tma_ring and not best.cluster_combine
                and not best.stream_k and _tma_ring_fits(bg)):
            policies += _tma_trials(best, bg)
        wg = _wgmma_trial(best, bg)
        if wg is not None and best.async_copy:
            policies.append(wg)
        if best.wgmma and best.wgmma_cols == 1 and not best.stream_k:
            # a wgmma winner with its columns over two warpgroups (second round only: on the
            # 512 x 2048 x 2048 product it measured 0.9-3.5 µs slower at each of six tile
            # sizes, H100 s33 c4)
            two = wgmma_threads(bg, 2)
            if two is not None:
                policies.append(replace(best, wgmma_cols=2, threads=two))
        if not best.a_op_fragments and best.async_copy and _op_of_loop_tiles_as_a(bg):
            # an op of two loop tiles computed on the product's A fragments, both tiles raw
            policies.append(replace(best, a_op_fragments=True, dense_rows=True))
        if best.tma_ring and bg.forloop > 2:
            # a TMA ring winner (the first round's candidate keeps 4 stages) at other depths:
            # rmsnorm b=1's 256-row stages measured 24.13 µs 2 deep against 26.08 4 deep, b=8's
            # 128-row ones 24.24 at 4 against 24.45 at 3, gated_mlp's best ring had 3 (H100,
            # s28 c6, s29 c3/c10), each with room for its depth (under the winner's 48 KB cap
            # rmsnorm b=1's 32 KB stages stayed 2 deep at every depth asked, s30; the layout
            # still takes fewer where shared memory runs out)
            policies += [replace(best, async_stages=k,
                                 async_stage_bytes=max(best.async_stage_bytes, 150 * 1024))
                         for k in TMA_RING_DEPTHS if k != best.async_stages]
        if (best.tma_ring and not best.tma_multicast and best.split == 1 and not best.stream_k
                and multicast_share(bg) >= MULTICAST_MIN_SHARE):
            # a TMA ring winner whose pairs of blocks read the same tile: copied once per pair
            # (second round only: on 512 x 2048 x 2048 wgmma kernels the pair's coupling cost
            # 1.1-2.0 µs and the halved L2 reads gained nothing, 15.0 -> 16.6 µs, H100 s33 c3)
            policies.append(replace(best, tma_multicast=True))
        if best.l2_fetch == 0:
            policies.append(replace(best, l2_fetch=256))
        if not best.evict_first:
            policies.append(replace(best, evict_first=True))
        if (best.mma and not best.pad_acc_rows and (best.split > 1 or best.stream_k)
                and _stores_conflicting_sums(bg)):
            # a split (or stream-K) winner whose register sums go through a shared tile of
            # rows that put a column's lanes on one bank: those rows padded
            policies.append(replace(best, pad_acc_rows=True))
        if best.async_copy and not best.dense_rows and _streams_raw_tiles(bg):
            policies.append(replace(best, dense_rows=True))
        if best.mma and not best.mma_kpair and _streams_raw_tiles(bg):
            policies.append(replace(best, mma_kpair=True))
        if best.async_copy and not best.one_barrier and not best.stream_k and bg.forloop > 1:
            # one barrier per iteration (H100, s26: mha b=8's winner 106.0 -> 105.3 µs,
            # gated_mlp's 31.0 -> 30.8; attention at b=1 and gqa b=8 0.3-1.4 slower)
            policies.append(replace(best, one_barrier=True))
        reg_epilogue = (best.mma and not best.reg_epilogue and best.split == 1
                        and best.stream_k == 0 and bg.forloop > 1
                        and any(n.op == "matmul" for n in bg.nodes))
        if reg_epilogue:
            policies.append(replace(best, reg_epilogue=True))
        kws = _kslices(bg, (best.threads or bg.threads) // 32) if best.mma and best.mma_kslice == 1 else []
        if best.mma and not best.fold_fragments and _folds_a_stream(bg):
            # a fold of a streamed A tile from the product's fragments, alone, with outputs
            # stored from the registers, and with the widest k slices (A read once)
            policies.append(replace(best, fold_fragments=True))
            if reg_epilogue:
                policies.append(replace(best, fold_fragments=True, reg_epilogue=True))
            policies += [replace(best, fold_fragments=True, mma_kslice=kw) for kw in kws[-1:]]
        if best.fold_fragments and not best.fold_mma and _folds_a_stream(bg):
            # the fold's terms on the tensor cores instead of the CUDA cores (rmsnorm's fused
            # kernel: a tenth of the fold's instructions)
            policies.append(replace(best, fold_mma=True))
        # a skinny streamed product's k-steps over 2, 4 or 8 warps per warp tile
        policies += [replace(best, mma_kslice=kw) for kw in kws]
        if 1 < best.split <= CLUSTER_MAX and not best.cluster_combine:
            # (second round only: on the H100 it measured slower than the global combine on
            # every split winner of the benchmark table, 1-78%: gpu_optimize_2026-11-24_s14)
            policies.append(replace(best, cluster_combine=True))
        if (best.split == 1 and math.prod(bg.grid) < sm_count and bg.forloop >= 4
                and any(n.op == "accum" for n in bg.nodes)):
            # an unsplit winner on fewer blocks than SMs: its loop split over 2 and 4 blocks
            # combined through their cluster (rmsnorm's fused kernel runs 96 blocks on 132
            # SMs; on an H200 its 2-way clustered split won by 14%, s22 c3)
            policies += [replace(best, split=sp, cluster_combine=True) for sp in (2, 4)
                         if sp <= CLUSTER_MAX and split_ok(bg, sp)]
        if best.stream_k == 0 and not best.cluster_combine:
            # stream-K: equal runs of (block, iteration) units over one block per SM where
            # the winner's grid leaves SMs idle
            policies += [replace(best, split=1, stream_k=p) for p in
                         stream_k_blocks(bg, math.prod(bg.grid) * best.split, sm_count)]
        if (best.async_copy and not best.gemv and not best.ring_first
                and _ring_and_invariant_loads(bg)):
            policies.append(replace(best, ring_first=True))
        if (best.async_copy and not best.tma_ring and best.async_stages != 3
                and _streams_raw_tiles(bg) and bg.forloop // best.split >= 3):
            # a cp.async ring 3 deep (a counted ring): the first round tries 2, 4 and 6; some
            # outside winners ran faster at 3 (norm-with-gain matmul 20.58 -> 20.18 µs,
            # scaled attention 13.90 -> 13.62), others slower (H100, s27 c12)
            policies.append(replace(best, async_stages=3))
        for r in policies:
            if r.key not in seen:
                seen.add(r.key)
                out.append(r)
    for s in tried:
        if s.wgmma:  # (its thread count is its product's: it does not combine with another)
            continue
        r = replace(s, threads=best.threads, split=best.split, coarsen=best.coarsen,
                    coarsen_axis=best.coarsen_axis, stream_k=best.stream_k)
        if r.key in seen or not split_ok(bg, r.split):
            continue
        if r.gemv and not _gemv_threads_ok(bg, r.threads or bg.threads):
            continue
        if r.row_registers and not row_registers_ok(bg, r.threads or bg.threads):
            continue
        seen.add(r.key)
        out.append(r)
    return out


def _streams_raw_tiles(bg: BlockGraph) -> bool:
    """``bg`` has a loop whose changing fp16 tiles a matmul may read from the cp.async ring:
    where :attr:`Schedule.dense_rows` can change the kernel."""
    return bg.forloop > 1 and any(
        n.op == "matmul" and any(s.op == "iter" and s.attr("fmap") != -1 for s in n.src)
        for n in bg.nodes)


def _tma_ring_fits(bg: BlockGraph) -> bool:
    """``bg`` streams a changing tile into a matmul and every changing tile a matmul reads
    is one :attr:`Schedule.tma_ring` can copy (64-column multiples of a 2-D tile or of one
    slice of a batched input, :func:`tma.tma_tile_ok`; rows in boxes of at most 256:
    :func:`tma.box_rows`): where its trials can change the kernel (the layout has the last
    word)."""
    tiles = {s for n in bg.nodes if n.op == "matmul" for s in n.src
             if s.op == "iter" and s.attr("fmap") != -1}
    return _streams_raw_tiles(bg) and all(
        tma_tile_ok(t.shape, bg.inputs[t.attr("input")][0]) and t.shape[-1] % BOX_COLS == 0
        and box_rows(t.shape[-2]) is not None for t in tiles)


#: the ring depths a TMA ring winner's second round tries besides its own
TMA_RING_DEPTHS = (2, 3, 4, 6)

#: bytes a weight stream's TMA rings hold in flight over the whole GPU, which the first
#: round's ring candidate aims at. Under the table's timing (L2 flushed with a memset before
#: each run) each line in flight evicts a dirty line of the flush, so more than needed to
#: cover the memory latency costs write-back bandwidth: the rmsnorm rings measured best at
#: 96 blocks x 2 stages of 33 KB (6.3 MB; 3 stages: 24.9 against 24.1 µs), 96 x 4 of 20 KB
#: (7.7 MB; 3 stages: 24.45 against 24.24) and 48 x 4 of 33 KB (6.3 MB; 3 stages 24.86
#: against 24.2-24.4), H100 s30-s35. (The second round still tries the winner's other depths.)
RING_BYTES_IN_FLIGHT = 7 * 1024 * 1024


def _streamed_16bit_tiles(bg: BlockGraph) -> list[Node]:
    """``bg``'s iterator tiles that change every iteration and hold 16-bit values (fp16,
    bf16): what a ring stage copies."""
    return [n for n in bg.nodes if n.op == "iter" and n.attr("fmap") != -1
            and bg.inputs[n.attr("input")][1].itemsize == 2]


def ring_stage_budget(bg: BlockGraph, blocks: int, sm_count: int, most: int = 4) -> int:
    """``async_stage_bytes`` for a TMA ring of ``bg`` on ``blocks`` blocks (one a SM) that
    holds about :data:`RING_BYTES_IN_FLIGHT` over the GPU: the stage count nearest to it, 2
    to ``most``, times the bytes of one stage (the loop's changing 16-bit tiles; half a stage
    more, so that the layout's whole-stage division lands on that count)."""
    stage = sum(2 * math.prod(n.shape) for n in _streamed_16bit_tiles(bg))
    if stage == 0:
        return 150 * 1024
    stages = max(2, min(most, round(RING_BYTES_IN_FLIGHT / (min(blocks, sm_count) * stage))))
    return stages * stage + stage // 2


def half_warps(bg: BlockGraph, threads: int) -> Schedule | None:
    """``bg``'s tensor-core products on half of ``threads``' warps with warp tiles twice as
    wide (``warp_n=2``: each A fragment read feeds two products), and as many 16-row tiles
    per warp (``warp_m`` 1, 2 or 4) as it takes for every warp to own at most one warp tile
    of each product, which keeps the accumulators in registers through the loop. None where
    no such blocking exists (then the layout's own blocking on all the warps stays).

    ``warp_n=2`` alone gives a product of more than 16 rows more warp tiles than warps:
    each warp then walks several tiles per iteration and sums them into a shared tile.
    The outside rms_rows24_matmul's 24-row fused kernel measured 38.3 µs that way and 20.0
    with 16-row tiles in pairs (H100, s31 c3). ``warp_m`` stays 0 (the rule's 1) where one
    row tile per warp does."""
    warps = threads // 2 // 32
    mms = [n for n in bg.nodes if n.op == "matmul"]
    if warps < 1 or not mms:
        return None
    for wm in (1, 2, 4):
        if all(-(-n.shape[-2] // 16) % wm == 0 and -(-n.shape[-1] // 8) % 2 == 0
               and 2 * wm <= WARP_TILES_MAX
               and math.prod(n.shape[:-2]) * (-(-n.shape[-2] // 16) // wm)
               * (-(-n.shape[-1] // 8) // 2) <= warps for n in mms):
            return Schedule(threads=threads // 2, warp_m=0 if wm == 1 else wm, warp_n=2)
    return None


def wgmma_threads(bg: BlockGraph, cols: int = 1) -> int | None:
    """The thread count of :attr:`Schedule.wgmma` for ``bg`` with its products' columns over
    ``cols`` warpgroups (:attr:`Schedule.wgmma_cols`; one warp per 16 rows of each column
    group), or None where it cannot apply: ``bg`` loops, and each of its matmuls is 2-D (or
    one slice of a batched product: every leading extent 1, as a batched GEMM's block takes),
    of the same multiple of 64 rows and of a multiple of 64 x ``cols`` columns, with a k of a
    multiple of 64, both operands fp16 tiles that change every iteration and that a tensor
    map can copy (:func:`_tma_ring_fits`); rows x ``cols`` at most 448 (the consumers and the
    producer warp in 1024 threads); their accumulators together at most
    :data:`WGMMA_MAX_ACCUMULATORS` a thread (a gated MLP's two products of 128 columns: 128).
    The layout has the last word (:attr:`KernelLayout.wg`)."""
    mms = [n for n in bg.nodes if n.op == "matmul"]
    if bg.forloop < 2 or not mms or not _tma_ring_fits(bg):
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


def _stores_conflicting_sums(bg: BlockGraph) -> bool:
    """A loop whose matmul sums into an accumulator of rows of a multiple of 32 floats (the
    layout pads such a tile's rows under :attr:`Schedule.pad_acc_rows` where the sums are
    held in registers through the loop)."""
    summed = {c.src[0] for c in bg.nodes if c.op == "accum" and c.attr("kind") == "sum"}
    return bg.forloop > 1 and any(n.op == "matmul" and n.shape[-1] % 32 == 0 and n in summed
                                  for n in bg.nodes)


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


def multicast_share(bg: BlockGraph) -> float:
    """The share of a TMA ring stage's bytes that :attr:`Schedule.tma_multicast` would copy
    once for a pair of blocks: the elements of streamed fp16 tiles shared along
    :func:`pair_axis`, over all streamed fp16 tiles' elements (0 where none; the layout has
    the last word: :meth:`KernelLayout._multicast`)."""
    tiles = _streamed_16bit_tiles(bg)
    total = sum(math.prod(n.shape) for n in tiles)
    pair = pair_axis(tiles, bg.grid)
    return pair[1] / total if pair and total else 0.0


#: the least share of a ring stage a pair of blocks must share for the tuner to try
#: Schedule.tma_multicast (a weight stream beside a small activation tile shares too little
#: to pay for the pair's coupling)
MULTICAST_MIN_SHARE = 0.25


#: fp32 accumulators a thread holds for Schedule.wgmma's products (N/2 each: a warp's 16 rows
#: of N columns)
WGMMA_MAX_ACCUMULATORS = 128


def _wgmma_trial(best: Schedule, bg: BlockGraph) -> Schedule | None:
    """``best`` with its product as warpgroup MMAs on the TMA ring (:func:`wgmma_threads`),
    its outputs from the registers unless its loop is split; None where that cannot apply."""
    t = wgmma_threads(bg)
    if t is None or best.wgmma or best.stream_k:
        return None
    return replace(best, tma_ring=True, dense_rows=True, min_blocks=1, wgmma=True, threads=t,
                   warp_m=0, warp_n=0, mma=True, gemv=False, mma_kpair=False, mma_kslice=1,
                   fold_fragments=False, a_op_fragments=False, reg_epilogue=best.split == 1,
                   async_stages=max(best.async_stages, WGMMA_STAGES),
                   async_stage_bytes=max(best.async_stage_bytes, WGMMA_RING_BYTES))


#: the ring a wgmma candidate asks for: up to 6 stages in up to 200 KB (the layout takes
#: fewer where the loop is shorter or shared memory runs out). On the 512 x 2048 x 2048
#: product 2 stages of 24 KB ran 24.2 µs, 4 stages 17.3, 6 stages 16.5 (128 x 64 tiles,
#: k 64; H100 s32 c2)
WGMMA_STAGES = 6
WGMMA_RING_BYTES = 200 * 1024


def _tma_trials(best: Schedule, bg: BlockGraph) -> list[Schedule]:
    """Second-round trials of :attr:`Schedule.tma_ring` on ``best``: alone; with outputs from
    the registers (and the fold from the A fragments where there is one); on half the warps
    with warp tiles twice as wide (each A fragment read feeds two products); for a gemv
    winner the same three on tensor cores (two accumulator chains: ``mma_kpair``), then the
    gemv itself. Every one with
    ``min_blocks=1``: without it ptxas kept each
    k-step's fragment loads right before its ``mma`` in the same registers (to spare
    registers for an occupancy the kernel does not use), so a stage's loads never overlapped;
    with it all of a stage's loads go first (rmsnorm b=8's fused kernel, H100, s28 c6: 25.2 ->
    24.5 µs with the first three together; gated_mlp's 31.2 -> 30.3)."""
    tma = replace(best, tma_ring=True, dense_rows=True, min_blocks=1)
    has_mm = any(n.op == "matmul" for n in bg.nodes)
    threads = best.threads or bg.threads

    def fuller(t: Schedule) -> list[Schedule]:
        """``t``, with register outputs (and the fold from the fragments), on half the warps,
        then the last of these with the fold on the tensor cores."""
        out = [t]
        if has_mm and not t.reg_epilogue and t.split == 1:  # (a split's outputs: combined)
            out.append(replace(t, reg_epilogue=True, fold_fragments=_folds_a_stream(bg) or t.fold_fragments))
        half = half_warps(bg, threads) if t.mma and not t.gemv and threads >= 128 else None
        if half is not None:
            out.append(replace(out[-1], threads=half.threads, warp_m=half.warp_m, warp_n=2))
        if out[-1].fold_fragments and not out[-1].fold_mma:
            out.append(replace(out[-1], fold_mma=True))
        return out

    # a gemv winner: on tensor cores first (the gemv path's TMA kernels measured 24.9-25.0
    # µs on rmsnorm b=1 against 24.5 for the tensor-core one, s28 c12), with the two
    # accumulator chains a tensor-core winner streaming rows has (a gemv winner never tuned
    # its mma fields; rmsnorm b=1's half-warp trial measured 24.13 µs with them against
    # 25.06 without, the gemv itself 24.4-24.6 on the same arrays, H100, s29 c4/c10/c13)
    on_tensor_cores = replace(tma, gemv=False, mma=True, mma_kpair=has_mm or tma.mma_kpair)
    return [*fuller(on_tensor_cores), tma] if best.gemv else fuller(tma)


def _folds_a_stream(bg: BlockGraph) -> bool:
    """``bg`` has a loop and a row fold (one value per row: sum, mean or rms) of a changing 2-D
    iterator tile that is also a matmul's A operand: where :attr:`Schedule.fold_fragments`
    can change the kernel."""
    streamed_a = {n.src[0] for n in bg.nodes if n.op == "matmul"}
    return bg.forloop > 1 and any(
        n.op == "accum" and n.attr("fold") == 1
        and n.src[0] in streamed_a and n.src[0].op == "iter" and n.src[0].attr("fmap") != -1
        and len(n.src[0].shape) == 2 for n in bg.nodes)


def _skinny_products(bg: BlockGraph) -> bool:
    """Every matmul of ``bg`` has at most 16 rows (one m16n8k16 row tile: the tensor cores
    wait on the stream, and an extra product per k-step costs them nothing measurable)."""
    return all(n.shape[-2] <= 16 for n in bg.nodes if n.op == "matmul")


def _kslices(bg: BlockGraph, warps: int) -> list[int]:
    """The :attr:`Schedule.mma_kslice` values worth a trial for ``bg`` on ``warps`` warps: a
    loop whose product of at most 16 rows streams a changing tile (each warp would otherwise
    read all of A for its few columns), the warps and the product's k-steps divisible by it.
    (The layout still falls back to 1 where the slices' warp tiles do not fit.)"""
    ks = [n.src[0].shape[-1] // 16 for n in bg.nodes
          if n.op == "matmul" and n.shape[-2] <= 16 and n.src[0].shape[-1] % 16 == 0
          and any(s.op == "iter" and s.attr("fmap") != -1 for s in n.src)]
    if bg.forloop < 2 or not ks:
        return []
    return [kw for kw in (2, 4, 8) if warps % kw == 0 and all(k % kw == 0 for k in ks)]


def _ring_and_invariant_loads(bg: BlockGraph) -> bool:
    """``bg`` has a loop (whose streamed tiles may go through the cp.async ring) and a
    loop-invariant iterator tile loaded before it: where :attr:`Schedule.ring_first` changes
    the kernel."""
    iters = [n for n in bg.nodes if n.op == "iter"]
    return (bg.forloop > 1 and any(n.attr("fmap") == -1 for n in iters)
            and any(n.attr("fmap") != -1 for n in iters))


def _gemv_threads_ok(bg: BlockGraph, threads: int) -> bool:
    """Some skinny matmul of ``bg`` can stream B through registers with ``threads`` threads."""
    for n in bg.nodes:
        if n.op == "matmul" and len(n.shape) == 2 and n.src[1].op == "iter":
            K, N = n.src[1].shape
            nc = N // 8
            if (N % 8 == 0 and gemv_rows_ok(n.shape[0], threads) and threads % nc == 0
                    and (K * nc) % threads == 0):
                return True
    return False


#: the emitter's fallback: no tensor cores, no prefetching, no cp.async (the simplest code)
SIMPLE = Schedule(mma=False, prefetch=False, async_copy=False, ldmatrix=False)


#: binary ops Schedule.a_op_fragments applies to two packed half2 fragment registers with one
#: instruction (the mf_tile.cuh helper); any other elementwise op goes through fp32 per half
FRAGMENT_OPS = {"add": "mf::h2_add", "sub": "mf::h2_sub", "mul": "mf::h2_mul"}


def _op_of_loop_tiles_as_a(bg: BlockGraph, half2_only: bool = False) -> bool:
    """Some matmul of ``bg``'s loop takes as its A an expression of elementwise ops over one or
    two tiles that change every iteration (:func:`ir.graph.elementwise_tree`): where
    :attr:`Schedule.a_op_fragments` can change the kernel (the layout has the last word).
    ``half2_only``: every op of the expression is one of :data:`FRAGMENT_OPS`."""
    def of_loop_tiles(a: Any) -> bool:
        tree = elementwise_tree(bg, a) if a.op != "iter" else None
        return tree is not None and 1 <= len(tree[0]) <= 2 and all(
            x.attr("fmap") != -1 for x in tree[0]) and (
            not half2_only or all(x.op in FRAGMENT_OPS for x in (a, *tree[1])))

    return bg.forloop > 1 and any(n.op == "matmul" and of_loop_tiles(n.src[0]) for n in bg.nodes)


def _product_of_products(bg: BlockGraph) -> bool:
    """Some matmul of ``bg`` reads, through any ops, another matmul's product as its A
    operand (attention's exp(QK)·V): a register chain's kernel, not a plain weight stream
    (an A computed from loop tiles alone, as (X + Y)·W's, is one)."""
    def from_matmul(n: Any, seen: set[int]) -> bool:
        if id(n) in seen or n.op == "iter":
            return False
        seen.add(id(n))
        return n.op == "matmul" or any(from_matmul(x, seen) for x in n.src)

    return any(from_matmul(n.src[0], set()) for n in bg.nodes if n.op == "matmul")


def chained_matmuls(bg: BlockGraph) -> list[Any]:
    """The matmuls of ``bg`` whose A operand is computed in the block and also feeds another
    matmul (attention's exp(QK)·V beside its QK): where a register chain may apply."""
    return [n for n in bg.nodes if n.op == "matmul" and n.src[0].op not in ("iter", "accum")
            and any(c.op == "matmul" for c in _consumers(bg, n.src[0]))]


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


def stream_k_blocks(bg: BlockGraph, launched: int, sm_count: int) -> list[int]:
    """Stream-K block counts worth a trial for ``bg`` whose winner launches ``launched``
    blocks: one block per SM, when the winner leaves SMs idle and each block would run at
    least four iterations. (Measured on the H100, s23: slower on every memory-bound winner
    tried, whose weight streams lose DRAM locality when blocks read different row bands at
    once; kept as one second-round trial for kernels that are not bound that way.)"""
    if launched >= sm_count:
        return []
    units = math.prod(bg.grid) * bg.forloop
    return [sm_count] if units >= 4 * sm_count and stream_k_ok(bg, sm_count) else []


def _consumers(bg: BlockGraph, n: object) -> list[Any]:
    return [c for c in bg.nodes if n in c.src]


def _gemv_thread_counts(n: Any, bg: BlockGraph) -> list[int]:
    """Thread counts under which skinny matmul ``n`` can stream B through registers when the
    usual ones cannot: each thread keeps one of its N/8 column vectors, so the block needs a
    multiple of N/8 threads (and of 32) that also divides K·N/8 (N = 48: 192 and 384)."""
    K, N = n.src[1].shape
    nc = N // 8
    if any(t % nc == 0 for t in (bg.threads, 256)):
        return []
    step = math.lcm(nc, 32)
    out = []
    for cap in (256, 512):
        t = next((t for t in range(cap // step * step, 0, -step) if (K * nc) % t == 0), 0)
        if t and t not in out:
            out.append(t)
    return out


#: the longest rms_norm row the emitter normalizes row-wise, from registers (at most 16
#: values per lane: ``layout.KernelLayout.rms_rowwise``)
ROWWISE_MAX_ROW = 512
#: bytes of input a kernel reads once (:func:`streamed_once_bytes`) from which its candidate
#: schedules carry the L2 evict-first policy (the plain default is still measured first): a
#: stream that large would otherwise push most of the L2 out
EVICT_FIRST_MIN_BYTES = 8 << 20


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


def streamed_once_bytes(bg: BlockGraph) -> int:
    """Bytes of the kernel's inputs that it streams and reads once: iterator tiles that change
    with the loop (every iterator of a loop-free kernel) whose input no grid axis of more than
    one block replicates, so that each element is read by one block, one time (a weight
    stream; not attention's K and V, which every query-row block re-reads from L2)."""
    total = 0
    for n in bg.nodes:
        if n.op != "iter" or (bg.forloop > 1 and n.attr("fmap") == -1):
            continue
        imap = n.attr("imap")
        if any(g > 1 and imap[ax] == -1 for ax, g in enumerate(bg.grid)):
            continue
        shape, dt = bg.inputs[n.attr("input")]
        total += math.prod(shape) * dt.itemsize
    return total


#: a block reading fewer bytes of each row of an input than this gets coarsened candidates
NARROW_ROW_BYTES = 64
#: the widest row (bytes) a coarsened block reads of an input the grid splits by columns
COARSEN_MAX_ROW_BYTES = 256


def _coarsened_candidates(bg: BlockGraph, sm_count: int) -> list[Schedule]:
    """Coarsened variants of a kernel that reads narrow rows (see :func:`candidate_schedules`)."""
    out: list[Schedule] = []
    blocks = math.prod(bg.grid)
    for ax, width in narrow_axes(bg, NARROW_ROW_BYTES):
        c = 2
        while (width * c <= COARSEN_MAX_ROW_BYTES and bg.grid[ax] % c == 0
               and blocks // c >= sm_count // 4):
            if width * c >= NARROW_ROW_BYTES and coarsenable(bg, ax, c):
                cands = candidate_schedules(coarsened(bg, ax, c), sm_count, limit=64, coarsen=False)
                # (its first cp.async split: the split TMA ring of a small grid is not one)
                picks = [cands[0], next((s for s in cands if s.split > 1 and not s.tma_ring), cands[0]),
                         next((s for s in cands if s.gemv), cands[0])]
                for p in picks:
                    r = replace(p, coarsen=c, coarsen_axis=ax)
                    if r not in out:
                        out.append(r)
            c *= 2
    return out


def candidate_schedules(bg: BlockGraph, sm_count: int = DEFAULT_SM_COUNT,
                        limit: int = 19, coarsen: bool = True) -> list[Schedule]:
    """A few schedules worth measuring for ``bg``, the default first (rules, not a search).

    - threads: the block graph's own, and 256 when a tile has enough elements to keep 8
      warps busy (>= 2048 elements in the largest tile); 512 and 1024 too for a kernel without
      matmuls on fewer blocks than SMs (>= 4 elements per thread in the largest tile);
    - split: when the grid has fewer blocks than about 1.5 waves over the SMs and the loop is
      long, the smallest divisors S of F that reach about one and two full waves
      (gx·gy·gz·S >= 0.9·SMs, >= 2·SMs), each with F/S >= 2 iterations left per block;
    - gemv (register streaming) for each of these when a matmul has at most 8 rows (16 at
      <= 256 threads: :func:`gemv_rows_ok`) and reads an iterator as B, plus the thread
      counts that let it (a multiple of N/8 and of 32) when neither the block's own nor 256
      is one;
    - when a matmul reads a row-wise rms_norm's tile (rows of at most 512): that tile as fp16
      (``half_tiles``, the register chain kept); when one reads another matmul's product (no
      chain): that product as fp16 (``half_tiles``);
    - when a matmul reads a computed tile as A (attention's exp(QK)·V): fp16 intermediate
      tiles (``half_tiles``, without the register chain) tried first, and, when the block
      has more warps than 16-row tiles, a block of one warp per row tile and the widest block
      with one warp per row tile computing (``chain_warps=1``; by default the others share the
      row tiles' k slices);
    - for gemv, deeper register rings for B vectors the thread loads itself (chunk 4 x depth 4,
      chunk 8 x depth 3, beside the default 8 x 2);
    - for such a chain with at most one 16-row tile per warp, two row tiles per warp
      (``chain_rows=2``: half the K and V fragment reads, the other warps on k slices);
    - the chain's variants at the split that fills one wave of SMs (1 when the grid does),
      not the largest: a split combine costs the attention loops more than a second wave gains;
    - a 2-stage cp.async ring beside the default's 4 (less shared memory, more blocks per SM);
    - for tensor-core matmuls of more than GEMV_MAX_ROWS rows, unblocked warp tiles
      (``warp_m = warp_n = 1``) beside :func:`warp_tiles`' register blocking (not for a
      chain kernel: the logged tunings say it never won there by more than 1%);
    - when a matmul streams an iterator tile as B through a loop of >= 4 iterations, a
      6-stage cp.async ring of up to 160 KB (more bytes in flight per block); and (no
      register chain) a 4-stage ring of dense swizzled rows with two-chain products
      (``dense_rows``, ``mma_kpair``) on the grid's own blocks, at the widest thread count,
      and where a tensor map can copy every streamed tile (:func:`_tma_ring_fits`) that ring
      filled by the TMA producer warp on half those warps (``warp_n=2``, register outputs),
      and, for a grid of at most half the SMs, that ring at the split that fills a wave;
      where the product's A is an elementwise op of one or two loop tiles, those two rings
      again with the op computed on the A fragments (``a_op_fragments``) when every op of
      it is an add, sub or mul of half2 registers (:data:`FRAGMENT_OPS`);
    - for a kernel with a register chain, every candidate with ``min_blocks=1`` (ptxas may
      then give a thread up to 255 registers);
    - for a product off the tensor cores (fp32 operands), its outputs blocked in registers
      (``cc_rows`` x ``cc_cols``: 2 x 2 at the fullest split, alone and with 32 prefetch
      registers, 4 x 4 there with them, and up to 8 x 8 on the widest block);
    - for a loop-free kernel of one-row tiles (:func:`row_registers_ok`), every tile in
      registers (``row_registers``) at each of the thread counts above where it applies;
    - for a kernel whose blocks read fewer than 64 bytes of each row of an input
      (:func:`coarsen.narrow_axes`; Mirage's published gated MLP reads 8 columns of each
      weight row per block), the blocks of that axis coarsened 2, 4, 8... times
      (:attr:`Schedule.coarsen`) up to 256 bytes per row and at least a quarter of the SMs'
      count of blocks, where :func:`coarsen.coarsenable` allows it: for each factor the
      coarsened block graph's own default, its first split and its first gemv candidate
      (``coarsen`` False: none, how those are computed).

    Every one of them carries the L2 evict-first policy when the kernel streams at least
    ``EVICT_FIRST_MIN_BYTES`` it reads once (:func:`streamed_once_bytes`; the tuner measures
    the plain default before these, and its second round tries the policy on any winner
    without it), so that candidates are ranked as they will run.

    The default comes first, then one of each other kind, then the rest of the thread x split
    grid, so that ``limit`` cuts grid points rather than kinds.
    """
    # (a kernel with a register chain: no occupancy bound on its registers, min_blocks=1.
    # Measured on every table winner, two rounds each, H100: the chain kernels 0.5-2.7%
    # faster (qknorm_gqa b=8 38.0 -> 37.0 µs), the others within noise either way)
    chained = chained_matmuls(bg)
    base = Schedule(evict_first=streamed_once_bytes(bg) >= EVICT_FIRST_MIN_BYTES,
                    min_blocks=1 if chained else 0)
    blocks = math.prod(bg.grid)
    largest = max((math.prod(n.shape) for n in bg.nodes), default=1)
    threads: list[int | None] = [None]
    if bg.threads < 256 and largest >= 2048:
        threads.append(256)
    if not any(n.op == "matmul" for n in bg.nodes) and blocks < sm_count:
        # row-wise kernels (norms, elementwise chains) on few blocks: every warp of a wide
        # block shares the rows' loads and reductions
        threads += [t for t in (512, 1024) if bg.threads < t and largest >= 4 * t]
    splits = [1] + [s for s in loop_splits(blocks, bg.forloop, sm_count) if split_ok(bg, s)]
    skinny_mms = [n for n in bg.nodes if n.op == "matmul" and len(n.shape) == 2
                  and n.shape[0] <= GEMV_MAX_ROWS and n.src[1].op == "iter"
                  and n.src[1].shape[1] % 8 == 0]
    rows = max((n.shape[0] for n in skinny_mms), default=0)
    for n in skinny_mms:
        threads += [t for t in _gemv_thread_counts(n, bg) if t not in threads]
    # the block sizes whose registers hold the gemv accumulators (none: no gemv schedules)
    # (a loop-free kernel too, when its weight slice is large: streamed in register chunks
    # instead of staged whole in shared memory)
    streams = bg.forloop > 1 or any(math.prod(n.src[1].shape) >= 4096 for n in skinny_mms)
    gemv_threads = ([t for t in threads if gemv_rows_ok(rows, t or bg.threads)]
                    if skinny_mms and streams else [])
    # the thread x split grid (default first), and the other kinds of variant, which go
    # right after the default so that truncation to ``limit`` drops grid points, not kinds
    grid: list[Schedule] = []
    for s in splits:
        for t in threads:
            grid.append(replace(base, threads=t, split=s))
            if t in gemv_threads:
                grid.append(replace(base, threads=t, split=s, gemv=True))
    extra: list[Schedule] = []
    # one-row tiles without a loop: every tile in registers, at each thread count that
    # divides the row into 8-column chunks
    extra += [replace(base, threads=t, row_registers=True) for t in threads
              if row_registers_ok(bg, t or bg.threads)]
    # a chain's variants at the split that fills one wave of SMs (none when the grid does):
    # its combine costs more than a second wave gains (the attention rows' tuned winners on
    # the H100 all split to one wave)
    wave = 1 if blocks >= math.ceil(0.9 * sm_count) else splits[min(1, len(splits) - 1)]
    if chained:
        # the default keeps a matmul-to-matmul tile in registers where it can (mma_chain: a
        # warp owns whole rows); the alternative stores it as fp16 for ldmatrix, all warps
        # sharing its columns
        for t in threads:
            extra.append(replace(base, threads=t, half_tiles=True, mma_chain=False, split=wave))
        # a chain keeps one warp per 16-row tile busy: with fewer row tiles than warps, a
        # block of just those warps
        rows16 = math.prod(chained[0].shape[:-1]) // 16
        if 0 < rows16 < bg.threads // 32:
            extra.append(replace(base, threads=32 * rows16, split=wave))
        if 0 < rows16 < (threads[-1] or bg.threads) // 32:
            # ... or the widest block with one warp per row tile (the others only copy):
            # the k-sliced chain's after-loop sums can cost more than they save
            extra.append(replace(base, threads=threads[-1], chain_warps=1, split=wave))
        if rows16 % 2 == 0 and 0 < rows16 <= (threads[-1] or bg.threads) // 32:
            # one row tile per warp by the rule: two per warp instead, each K and V fragment
            # read from shared memory serving twice the rows, the other warps on k slices
            extra.append(replace(base, threads=threads[-1], chain_rows=2, split=wave))
            # (with the 2-stage ring: more shared memory left, as mqa b=8's winner had)
            extra.append(replace(base, threads=threads[-1], chain_rows=2, split=wave,
                                 async_stages=2))
    normed = [n for n in bg.nodes if n.op == "matmul"
              and any(s.op == "rms_norm" and s.shape[-1] <= ROWWISE_MAX_ROW for s in n.src)]
    if normed:
        # a row-wise norm's result read by a tensor-core product: stored as fp16 it is read
        # with ldmatrix (the register chain, if any, kept)
        extra.append(replace(base, half_tiles=True, split=wave if chained else splits[-1]))
    if not chained and any(n.op == "matmul" and any(s.op == "matmul" for s in n.src)
                           for n in bg.nodes):
        # a product read by another tensor-core product (lora's X·(A·B)): stored as fp16 it
        # is read with ldmatrix instead of as scalar pairs of an fp32 tile
        extra.append(replace(base, half_tiles=True))
    # (not for a chain kernel: over the 369 logged tunings that tried them on one, leaving
    # them out never cost the best more than 1% (0.01% on average), and a trial fewer per
    # candidate lets the GPU stage tune more: benchmarks/tuning_kinds.py,
    # results/tuning_kinds.md)
    if not chained and any(n.op == "matmul" and n.shape[-2] > GEMV_MAX_ROWS for n in bg.nodes):
        # the register blocking rule's alternative: one 16x8 tile per warp pass (more warp
        # tiles to share, three fragment reads per product)
        extra.append(replace(base, warp_m=1, warp_n=1, split=splits[-1]))
    streamed = streams_weights(bg)
    ring = replace(base, threads=threads[-1], async_stages=4, async_stage_bytes=150 * 1024,
                   dense_rows=True, mma_kpair=True)
    if streamed and not chained:
        # weights streamed through a 4-stage cp.async ring of dense, swizzled rows, the
        # products summed in two register chains, on the grid's own blocks (no combine at the
        # end): gated_mlp's fused kernel 32.7 µs on 64 blocks against 33.5 for its split-2
        # winner without these (H100, s24)
        extra.append(ring)
    if (streamed and not _product_of_products(bg) and _tma_ring_fits(bg)
            and (threads[-1] or bg.threads) >= 128):
        # that ring filled by tensor-map copies from a producer warp, on half the warps with
        # twice the columns each and the outputs stored from registers (the second round's
        # best TMA trial on every streamed winner it applied to, H100 s28), so that a size
        # whose tiles a tensor map can copy is ranked as it will run: the outside (X + Y)·W's
        # first round ranked a 160-column split kernel (25.0 µs) above the sizes the ring
        # takes, which the second round only polishes (s29). (Also where an op of loop tiles
        # feeds the product, which counts as a chain above.)
        # (all the warps with the layout's own blocking where no half-warp blocking keeps
        # the accumulators in registers: half_warps)
        half = half_warps(bg, threads[-1] or bg.threads) or replace(ring)
        # (its depth by the bytes in flight over the GPU, RING_BYTES_IN_FLIGHT; a fold from
        # the fragments of a product of at most 16 rows on the tensor cores, which such a
        # product leaves idle: fold_mma)
        fold = _folds_a_stream(bg)
        tma = replace(ring, tma_ring=True, min_blocks=1, threads=half.threads,
                      warp_m=half.warp_m, warp_n=half.warp_n, reg_epilogue=True,
                      fold_fragments=fold, fold_mma=fold and _skinny_products(bg),
                      async_stage_bytes=ring_stage_budget(bg, blocks, sm_count))
        extra.append(tma)
        wave_split = splits[1] if len(splits) > 1 else 1  # (the first to reach a wave)
        if 2 * blocks <= sm_count and wave_split > 1:
            # a grid of at most half the SMs streams through too few of them: the ring again
            # at the split that fills a wave, its partials summed by the global combine (the
            # outside (silu(X) ⊙ Y)·W's best size runs 32 blocks: its winner was a cp.async
            # split-4 kernel while the ring had no split, H100 s30)
            extra.append(replace(tma, split=wave_split, reg_epilogue=False,
                                 async_stage_bytes=ring_stage_budget(bg, blocks * wave_split, sm_count)))
        if _op_of_loop_tiles_as_a(bg, half2_only=True):
            # ... with an op of two loop tiles computed on the A fragments (both tiles in the
            # ring): no shared tile and no barrier for the op in any iteration. (Only for
            # half2 ops in the first round: every warp computes the op on all of A, so an fp32
            # op with a transcendental costs more than the shared tile it saves, e.g. the
            # outside (silu(X) ⊙ Y)·W at split 4: 43.6 µs against 20.0, H100 s30 c2; the
            # second round still tries any op on its winner)
            extra.append(replace(tma, a_op_fragments=True))
    wg = _wgmma_trial(replace(base, split=splits[0]), bg)
    if wg is not None:
        # the product as warpgroup MMAs on the TMA ring, first among the others (a product of
        # 64 rows or more: the mma.sync kernels spend their time reading fragments from
        # shared memory), and again at the split that fills a wave where the grid is at most
        # half the SMs: partials through the global combine, and (a split the cluster takes)
        # through the cluster's shared memory (a 128 x 128 tile's 64 KB of fp32 partials
        # took 8 µs to combine through global memory after a 7.4 µs loop: H100 s32 c3)
        extra.insert(0, wg)
        if 2 * blocks <= sm_count and len(splits) > 1:
            extra.insert(1, replace(wg, split=splits[1], reg_epilogue=False))
            if splits[1] <= CLUSTER_MAX:
                extra.insert(2, replace(wg, split=splits[1], reg_epilogue=False, cluster_combine=True))
    if streamed and _op_of_loop_tiles_as_a(bg, half2_only=True):
        # (the same on the cp.async ring of dense rows)
        extra.append(replace(ring, a_op_fragments=True, min_blocks=1))
    if streamed:
        # weights streamed through the cp.async ring: a deeper ring (up to 160 KB in flight
        # per block) for the tensor-core path too (the winner's second round tries it at the
        # winner's split)
        extra.append(replace(base, split=splits[-1], async_stages=6, async_stage_bytes=160 * 1024))
    if gemv_threads:
        tw = gemv_threads[-1]  # the deeper rings below use the widest block that fits
        # deeper pipelines for the streamed tiles: a long cp.async ring in shared memory (the
        # gemv reads 16-byte vectors from it), or more prefetch registers per thread
        for s in splits[1:] or splits:
            extra.append(replace(base, threads=tw, split=s, gemv=True, async_stages=8,
                                 async_stage_bytes=160 * 1024))
        extra.append(replace(base, threads=tw, split=splits[-1], gemv=True,
                             async_stages=4, async_stage_bytes=72 * 1024))
        extra.append(replace(base, threads=tw, split=splits[-1], gemv=True, async_copy=False,
                             prefetch_regs=48, prefetch_depth=6))
        # B tiles too large to stage (the thread loads them itself in chunks): deeper register
        # rings, more 16-byte loads in flight per thread
        for chunk, depth in ((4, 4), (8, 3)):
            extra.append(replace(base, threads=tw, split=splits[-1], gemv=True,
                                 async_copy=False, gemv_chunk=chunk, gemv_depth=depth))
    if bg.forloop >= 4:
        extra.append(replace(base, async_stages=2, split=splits[-1]))
    if any(n.op == "matmul" and tensor_core_type(*(s.dtype for s in n.src)) is None
           for n in bg.nodes):
        # a product on the CUDA cores (fp32 operands) blocked in registers, 2 x 2 and up to
        # 4 x 4 outputs a thread at the fullest split (also with twice the prefetch
        # registers: fp32 tiles take no cp.async ring, and the gated MLP's second weight tile
        # did not fit the default's), and up to 8 x 8 on the widest block (a large tile's
        # classic SGEMM blocking; a skinny one's is cut to keep every thread busy): the
        # unblocked loop reads shared memory twice per FMA (Schedule.cc_rows)
        extra[:0] = [replace(base, cc_rows=2, cc_cols=2, split=splits[-1]),
                     replace(base, cc_rows=2, cc_cols=2, split=splits[-1], prefetch_regs=32),
                     replace(base, cc_rows=4, cc_cols=4, split=splits[-1], prefetch_regs=32),
                     replace(base, cc_rows=8, cc_cols=8, threads=threads[-1])]
    if coarsen:
        extra[:0] = _coarsened_candidates(bg, sm_count)
    out = [grid[0], *extra, *grid[1:]]
    seen: set[str] = set()
    uniq = []
    for sc in out:
        if sc.key not in seen:
            seen.add(sc.key)
            uniq.append(sc)
    return uniq[:limit]
