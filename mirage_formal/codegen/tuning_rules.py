"""The tuner's rules: which schedules to measure for one block graph.

:func:`candidate_schedules` is the first round (the default first, then one schedule of each
kind the block graph admits: thread counts, loop splits, gemv, rings, the TMA ring, warpgroup
MMAs, register blocking, coarsening...), :func:`refinements` the second round around a
measured winner. Rules, not a search: each kind says in its comment which measurement put it
there. The schedule value itself and the predicates the layout shares with these rules live in
:mod:`schedule`.

Imports ``ir``, :mod:`schedule`, :mod:`coarsen` and :mod:`refine` only.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from mirage_formal.codegen.coarsen import coarsenable, coarsened, narrow_axes
from mirage_formal.codegen.refine import refinable_dims, refined, refinement
from mirage_formal.codegen.schedule import (
    CLUSTER_MAX,
    DEFAULT_SM_COUNT,
    FRAGMENT_OPS,
    GEMV_MAX_ROWS,
    ROWWISE_MAX_ROW,
    WARP_TILES_MAX,
    Schedule,
    gemv_rows_ok,
    pair_axis,
    row_registers_ok,
    split_ok,
    stream_k_ok,
    streams_raw_tiles,
    tf32_product_dims,
    tf32_warp_tiling,
    tma_ring_fits,
    wgmma_threads,
)
from mirage_formal.ir.dtypes import tensor_core_type
from mirage_formal.ir.graph import BlockGraph, elementwise_tree, streams_weights
from mirage_formal.ir.node import Node
from mirage_formal.ir.occupancy import loop_splits


def opening_schedule(bg: BlockGraph, sm_count: int = DEFAULT_SM_COUNT) -> Schedule:
    """The schedule the tuner measures first (and the only one it measures when its deadline
    is already near, as under the PyTorch backend's short per-region budgets): the default,
    except that a kernel on fewer blocks than SMs whose loop can be split runs that loop split
    over blocks filling about one wave (``ir.occupancy.loop_splits``' first split), one of
    :func:`candidate_schedules`' own grid points. On the H200's tuning logs (s22-s45), where
    this split and the unsplit default were both measured with every other choice equal, the
    split was faster 607 of 714 times, 0.60x in geometric mean: 516 of 537 times (0.53x) on
    grids of at most half the SMs, 91 of 177 (0.88x, at worst 1.25x slower) on larger ones
    (``benchmarks/opening_split_evidence.py``).

    A block of more rows than a warpgroup's 64 that runs as warpgroup MMAs once refined into
    64-row bands (a lowered product of ViT's 197 tokens) opens with that refined schedule:
    the same block split over the loop ran 170 µs of a 197 x 768 x 2304 product where its
    bands took about 10 (H200, s50 c3)."""
    blocks = math.prod(bg.grid)
    if bg.forloop > 1 and wgmma_threads(bg) is None and any(n.op == "matmul" for n in bg.nodes):
        banded = [c for c in _refined_candidates(bg, sm_count)
                  if c.wgmma and c.refine_rows == REFINE_ROWS]
        if banded:
            return banded[0]
    if blocks < sm_count:
        splits = [s for s in loop_splits(blocks, bg.forloop, sm_count) if split_ok(bg, s)]
        if splits:
            # (candidate_schedules' own grid point: the same policies as its other candidates)
            return replace(_base_schedule(bg), split=splits[0])
    return Schedule()


def _base_schedule(bg: BlockGraph) -> Schedule:
    """What every candidate of ``bg`` starts from: the L2 evict-first policy for a kernel that
    streams enough bytes once, and no register bound for one with a register chain."""
    return Schedule(evict_first=streamed_once_bytes(bg) >= EVICT_FIRST_MIN_BYTES,
                    min_blocks=1 if chained_matmuls(bg) else 0)


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
    # a coarsened (refined) winner's other choices apply to its coarsened (virtual) block graph
    bg = unrefined = coarsened(bg, best.coarsen_axis, best.coarsen)
    if best.refine_rows:
        bg = refined(bg, best.refine_dim, best.refine_rows).graph
    # the winner itself with 256-byte L2 fetches for its streamed reads, and with its streamed
    # reads evicted first from L2 (two more trials)
    if any(n.op == "iter" for n in bg.nodes):
        policies = []
        if (best.async_copy and not best.tma_ring and not best.cluster_combine
                and not best.stream_k and tma_ring_fits(bg)):
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
        if best.async_copy and not best.dense_rows and streams_raw_tiles(bg):
            policies.append(replace(best, dense_rows=True))
        if best.mma and not best.mma_kpair and streams_raw_tiles(bg):
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
                and streams_raw_tiles(bg) and bg.forloop // best.split >= 3):
            # a cp.async ring 3 deep (a counted ring): the first round tries 2, 4 and 6; some
            # outside winners ran faster at 3 (norm-with-gain matmul 20.58 -> 20.18 µs,
            # scaled attention 13.90 -> 13.62), others slower (H100, s27 c12)
            policies.append(replace(best, async_stages=3))
        for r in policies:
            if r.key not in seen and not r.refine_conflict:
                seen.add(r.key)
                out.append(r)
    for rows in (best.refine_rows - 16, best.refine_rows + 16) if best.refine_rows else ():
        # a refined winner's neighbouring bands, 16 rows fewer and more
        r = replace(best, refine_rows=rows)
        rf = refinement(unrefined, best.refine_dim, rows) if rows >= 16 else None
        if rf is None or r.key in seen:
            continue
        # (a TF32 winner only where that band's products still tile on its warps)
        if best.tf32x3 and not _tf32_thread_counts(rf.graph, [best.threads]):
            continue
        seen.add(r.key)
        out.append(r)
    for s in tried:
        if s.wgmma:  # (its thread count is its product's: it does not combine with another)
            continue
        r = replace(s, threads=best.threads, split=best.split, coarsen=best.coarsen,
                    coarsen_axis=best.coarsen_axis, stream_k=best.stream_k,
                    refine_rows=best.refine_rows, refine_dim=best.refine_dim)
        if r.key in seen or not split_ok(bg, r.split) or r.refine_conflict:
            continue
        if r.gemv and not _gemv_threads_ok(bg, r.threads or bg.threads):
            continue
        if r.row_registers and not row_registers_ok(bg, r.threads or bg.threads):
            continue
        seen.add(r.key)
        out.append(r)
    return out


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


def _stores_conflicting_sums(bg: BlockGraph) -> bool:
    """A loop whose matmul sums into an accumulator of rows of a multiple of 32 floats (the
    layout pads such a tile's rows under :attr:`Schedule.pad_acc_rows` where the sums are
    held in registers through the loop)."""
    summed = {c.src[0] for c in bg.nodes if c.op == "accum" and c.attr("kind") == "sum"}
    return bg.forloop > 1 and any(n.op == "matmul" and n.shape[-1] % 32 == 0 and n in summed
                                  for n in bg.nodes)


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


def _tf32_thread_counts(bg: BlockGraph, threads: list[int | None]) -> list[int | None]:
    """The block sizes among ``threads`` (None: the block graph's own) whose warps tile every
    fp32 product of ``bg`` that Schedule.tf32x3 could take (:func:`tf32_warp_tiling`), widest
    first; none when no product could."""
    prods = [d for n in bg.nodes if (d := tf32_product_dims(n)) is not None]
    if not prods:
        return []
    return [t for t in reversed(threads)
            if all(tf32_warp_tiling(*d, (t or bg.threads) // 32) for d in prods)]


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
#: bytes of input a kernel reads once (:func:`streamed_once_bytes`) from which its candidate
#: schedules carry the L2 evict-first policy (the plain default is still measured first): a
#: stream that large would otherwise push most of the L2 out
EVICT_FIRST_MIN_BYTES = 8 << 20


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


#: a grid of at most this many waves of blocks over the SMs gets refined candidates
REFINE_MAX_WAVES = 2
#: the band every refinable kernel also tries: four 16-row tiles, one a warp of 128 threads
REFINE_ROWS = 64


def _refined_candidates(bg: BlockGraph, sm_count: int) -> list[Schedule]:
    """Refined variants of a kernel of many rows on few blocks (see :func:`candidate_schedules`)."""
    blocks = math.prod(bg.grid)
    if blocks > REFINE_MAX_WAVES * sm_count:
        return []
    out: list[Schedule] = []
    for dim, size in refinable_dims(bg)[:1]:
        tiles = -(-size // 16)
        bands = [16 * -(-tiles // max(2, min(tiles, target // blocks)))
                 for target in (sm_count, 2 * sm_count)] + [REFINE_ROWS]
        for rows in dict.fromkeys(bands):
            rf = refinement(bg, dim, rows) if rows < size else None
            if rf is None:
                continue
            virtual = rf.graph
            cands = [c for c in candidate_schedules(virtual, sm_count, limit=64, coarsen=False)
                     if c.split == 1 and not c.stream_k and not c.cluster_combine
                     and not c.tma_multicast]
            # its default, and its first other block size without fp16 tiles (a chain's
            # one warp per row tile: 48-row bands of ViT's attention on 3 warps)
            picks = cands[:1] + [c for c in cands if c.threads and not c.half_tiles][:1]
            for p in picks:
                r = replace(p, refine_rows=rows, refine_dim=dim)
                if r not in out:
                    out.append(r)
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
      row tiles' k slices); when it has fewer warps than 16-row tiles (at most 32 of them),
      a block of one warp per row tile (the chain's passes wider than at two row tiles a warp);
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
      and where a tensor map can copy every streamed tile (:func:`tma_ring_fits`) that ring
      filled by the TMA producer warp on half those warps (``warp_n=2``, register outputs),
      and, for a grid of at most half the SMs, that ring at the split that fills a wave;
      where the product's A is an elementwise op of one or two loop tiles, those two rings
      again with the op computed on the A fragments (``a_op_fragments``) when every op of
      it is an add, sub or mul of half2 registers (:data:`FRAGMENT_OPS`);
    - for a kernel with a register chain, every candidate with ``min_blocks=1`` (ptxas may
      then give a thread up to 255 registers);
    - for a product off the tensor cores (fp32 operands), its outputs blocked in registers
      (``cc_rows`` x ``cc_cols``: 2 x 2 at the fullest split, alone and with 32 prefetch
      registers, 4 x 4 there with them, and up to 8 x 8 on the widest block, alone, with
      them, and at the split that fills one wave); and the same products as TF32 MMAs
      (``tf32x3``) on each block size whose warps tile them, at the split that fills one
      wave, with 8 and with 16 prefetch registers, and with the fp32 tiles through the
      cp.async ring (``ring32``);
    - for a loop-free kernel of one-row tiles (:func:`row_registers_ok`), every tile in
      registers (``row_registers``) at each of the thread counts above where it applies;
    - for a kernel whose blocks read fewer than 64 bytes of each row of an input
      (:func:`coarsen.narrow_axes`; Mirage's published gated MLP reads 8 columns of each
      weight row per block), the blocks of that axis coarsened 2, 4, 8... times
      (:attr:`Schedule.coarsen`) up to 256 bytes per row and at least a quarter of the SMs'
      count of blocks, where :func:`coarsen.coarsenable` allows it: for each factor the
      coarsened block graph's own default, its first split and its first gemv candidate
      (``coarsen`` False: none, how those are computed);
    - for a kernel on at most two waves of blocks whose outputs' rows no block op combines
      (:func:`refine.refinable_dims`: attention's queries, a product's rows; first among
      the other kinds, after the coarsened ones: of the table's winners only ViT's kernels
      of 197 rows have them), each block refined into bands of rows (:attr:`Schedule.refine_rows`): the bands that bring
      the grid to about one and two waves, and bands of 64 rows; for each, the refined block
      graph's own default and its first other block size without fp16 tiles (ViT's 197-token
      attention: 16.3 -> 13.4 µs, H200 s49 c2-c3).

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
    base = _base_schedule(bg)
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
        # more 16-row tiles than warps (ViT's 197 queries: 13): a block of one warp per row
        # tile, where the chain runs in wider passes than at two row tiles a warp
        tiles16 = math.prod(chained[0].shape[:-2]) * -(-chained[0].shape[-2] // 16)
        if (threads[-1] or bg.threads) // 32 < tiles16 <= 1024 // 32:  # (the most a block has)
            extra.append(replace(base, threads=32 * tiles16, split=wave))
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
    if (streamed and not _product_of_products(bg) and tma_ring_fits(bg)
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
        # classic SGEMM blocking; a skinny one's is cut to keep every thread busy), also with
        # 32 (a 64 x 256 A tile takes the default's 16 a thread, leaving B unprefetched) and
        # at the split that fills one wave (a 128 x 128 tile leaves half the SMs idle on the
        # fp32 prefill matmul's 64 blocks; 32 prefetch registers spill there: 8 x 8 takes 255
        # registers with 16): the unblocked loop reads shared memory twice per FMA, 4 x 4 half
        # a float per FMA, at most half the FMA rate (Schedule.cc_rows)
        extra[:0] = [replace(base, cc_rows=2, cc_cols=2, split=splits[-1]),
                     replace(base, cc_rows=2, cc_cols=2, split=splits[-1], prefetch_regs=32),
                     replace(base, cc_rows=4, cc_cols=4, split=splits[-1], prefetch_regs=32),
                     replace(base, cc_rows=8, cc_cols=8, threads=threads[-1]),
                     replace(base, cc_rows=8, cc_cols=8, threads=threads[-1], prefetch_regs=32),
                     replace(base, cc_rows=8, cc_cols=8, threads=threads[-1], split=wave)]
        # the same products on the tensor cores as three TF32 MMAs (Schedule.tf32x3) on each
        # block size whose warps tile them, at the split that fills a wave, with 8 prefetch
        # registers and with the default 16 (the 512 x 2048 x 2048 product's fastest: 128 x 128
        # tiles on 256 threads split 2, 8 registers, 91.4 µs against 113.0 for 8 x 8 FMA
        # blocking and 99.3 for cuBLAS's sgemm; 16 registers spilled there, 100.4: H200 s39 c5)
        tf32_threads = _tf32_thread_counts(bg, threads)
        extra[:0] = [replace(base, tf32x3=True, threads=t, split=wave, prefetch_regs=p)
                     for t in tf32_threads for p in (8, 16)]
        # ... and with their fp32 tiles through the cp.async ring instead of prefetch
        # registers (Schedule.ring32; up to 128 KB of stages: 3 of a 128 x 128 tile at k 32)
        extra[len(tf32_threads) * 2:len(tf32_threads) * 2] = [
            replace(base, tf32x3=True, ring32=True, threads=t, split=wave,
                    async_stage_bytes=128 * 1024) for t in tf32_threads]
    if coarsen:
        extra[:0] = _coarsened_candidates(bg, sm_count) + _refined_candidates(bg, sm_count)
    out = [grid[0], *extra, *grid[1:]]
    seen: set[str] = set()
    uniq = []
    for sc in out:
        if sc.key not in seen:
            seen.add(sc.key)
            uniq.append(sc)
    return uniq[:limit]
