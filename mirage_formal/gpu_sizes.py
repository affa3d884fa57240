"""Which size variants of the accepted μGraphs superoptimize's GPU stage measures besides the
candidates themselves (other grid sizes and loop ranges of one structure: other tiles, as many
blocks as they make; the verifier proves them equivalent like the rest): the cost model's
cheapest and the fullest single wave (``variants_to_measure``), a walk over neighbouring sizes
(``walk_step``), and hedges for what the cost model ranks least reliably: sizes whose grid fills
the SMs without a loop split (``grid_filling_variants``), whose products run as warpgroup MMAs
(``wgmma_variants``) or as TF32 MMAs on large warp tiles (``tf32_variants``,
``tf32_split_variants``), and longer loop ranges of fp32 loops (``loop_range_variants``). The
rules only choose sizes; ``gpu_stage`` measures them.

Imports ``ir``, ``search`` and, lazily, ``codegen.schedule``, ``codegen.emit`` (whether a size
fits in shared memory), ``codegen.refine`` and ``codegen.tuning_rules`` (bands a warpgroup MMA
takes) and ``ir.occupancy``; not ``codegen.autotune`` or the runtime.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

from mirage_formal.errors import MirageError
from mirage_formal.ir.graph import KERNEL_OP, BlockGraph, KernelGraph, streams_weights
from mirage_formal.optimized import Optimized
from mirage_formal.search import Cost, SearchConfig
from mirage_formal.search.cost import fp32_product
from mirage_formal.search.derive import H100_SMS
from mirage_formal.search.state import ranked_variants

#: the GPU stage measures this many size variants of each of its fastest structures: the
#: analytic cost model ranks tile shapes least reliably (rmsnorm's fused kernel: 48-column
#: tiles estimated best, 128-column tiles measured 27% faster)
GPU_VARIANTS = 4


def kernel_grids(g: KernelGraph) -> tuple[tuple[tuple[int, int, int], int], ...]:
    """(grid, forloop) of each graph-defined kernel of ``g``."""
    return tuple((n.attr("graph").grid, n.attr("graph").forloop) for n in g.nodes
                 if n.op == KERNEL_OP)


def _grids(g: KernelGraph) -> tuple[tuple[int, int, int], ...]:
    return tuple(gr for gr, _ in kernel_grids(g))


def _loop_blocks(g: KernelGraph) -> list[BlockGraph]:
    """The block graphs of ``g``'s graph-defined kernels that have a real loop."""
    return [n.attr("graph") for n in g.nodes if n.op == KERNEL_OP and n.attr("graph").forloop > 1]


def variants_to_measure(config: SearchConfig, graph: KernelGraph,
                        limit: int = GPU_VARIANTS, n_sm: int = H100_SMS) -> list[tuple[KernelGraph, Cost]]:
    """Up to ``limit`` size variants of ``graph`` besides itself, one per grid: half the
    slots to the cost model's cheapest grids, the rest to the fullest single wave (the most
    blocks up to ``n_sm``, tiles of whole 128-byte lines first) and spread over tile widths
    from the widest whose loop the autotuner's split can still spread over the SMs (blocks x
    F/2 >= ``n_sm``: long contiguous rows per block, what the model ranks worst and DRAM may
    like best) towards the cheapest. In measuring order: the cheapest, the fullest wave, the
    other cheap ones, the spread; the fullest wave first when a loop streams weights
    (:func:`_streams_weights`)."""
    taken = {_grids(graph)}
    per_grid: list[tuple[KernelGraph, Cost]] = []
    ranked = ranked_variants(config, graph)
    for v, c in ranked:  # cheapest first: keep each grid's best
        if _grids(v) not in taken:
            taken.add(_grids(v))
            per_grid.append((v, c))
    cheap = per_grid[:max(1, limit // 2)]
    # the fullest single wave: the most blocks that still run at once, one per SM, more than
    # the graph's own (a kernel streaming its weights wants every SM reading; rmsnorm's fused
    # kernel at 96 blocks of 64 columns measured 24.8 µs, at 48 of 128 columns 28.2, while
    # the cost model rated them alike); tiles of whole lines first; at the graph's own loop
    # ranges where the space has them (only the tile widths change: the same rows per
    # iteration, the ring depth its measured schedules had; rmsnorm's 96-block kernel at the
    # cost model's loop range, twice the rows per stage, measured 27.8 µs)
    wave = [vc for vc in per_grid[1:] if _blocks(graph) < _blocks(vc[0]) <= n_sm]
    full = [max(wave, key=lambda vc: (_whole_lines(vc[0]), _blocks(vc[0]), -vc[1].seconds))
            ] if wave and limit > 1 else []
    if full:
        loops = [f for _, f in kernel_grids(graph)]
        same = [vc for vc in ranked if _grids(vc[0]) == _grids(full[0][0])
                and [f for _, f in kernel_grids(vc[0])] == loops]
        full = same[:1] or full
    cheap = [vc for vc in cheap if all(vc is not f for f in full)]
    rest = [vc for vc in per_grid if _split_fills(vc[0], n_sm)
            and all(vc is not x for x in [*cheap, *full])]
    rest.sort(key=lambda vc: (_blocks(vc[0]), vc[1].seconds))
    want = limit - len(cheap) - len(full)
    spread: list[tuple[KernelGraph, Cost]] = []
    if rest and want > 0:
        step = max(1, len(rest) // want)
        spread = rest[::step][:want]
    # measured in this order: the cheapest, the fullest wave, the other cheap ones, the
    # spread. Where a loop streams weights the fullest wave goes first if its tiles read
    # whole lines, it has more blocks than the cheapest and the model rates it at most
    # FULL_WAVE_FIRST_MAX_RATIO times as costly: the outside (X + Y)·W's cheapest had 20
    # blocks and its 80-block wave was not reached in 150 s; but a 96-block split-K size of
    # it was rated 13x its cheapest, and (X ⊙ Y)·W's cheapest is already a whole-line wave
    # (48 blocks) beside a fuller one of 24-column tiles, which split lines
    if (full and cheap and _streams_weights(graph) and _whole_lines(full[0][0])
            and _blocks(full[0][0]) > _blocks(cheap[0][0])
            and full[0][1].seconds <= FULL_WAVE_FIRST_MAX_RATIO * cheap[0][1].seconds):
        return [*full, *cheap, *spread][:limit]
    return [*cheap[:1], *full, *cheap[1:], *spread][:limit]


#: the fullest wave goes first only while the cost model rates it at most this many times
#: its cheapest size
FULL_WAVE_FIRST_MAX_RATIO = 1.5


def _streams_weights(g: KernelGraph) -> bool:
    """Some graph-defined kernel of ``g`` streams weights (:func:`ir.graph.streams_weights`)."""
    return any(streams_weights(n.attr("graph")) for n in g.nodes if n.op == KERNEL_OP)


#: after the size variants, the fastest structures walk their sizes by measurement: each step
#: measures this many of the sizes near the current best (``space.size_distance`` at most
#: WALK_RADIUS: halve or double one or two of a kernel's grid axes and loop range), cheapest
#: by the cost model first, and moves to the fastest while a step finds a faster one. The cost
#: model misranks neighbouring sizes most (gqa b=1: Mirage's attention-plus-combine μGraph at
#: 64-row query tiles and 16 KV splits runs 11.1-11.9 µs on our codegen; the model ranks 16-row
#: tiles first and the stage measured only those)
WALK_WIDTH = 3
WALK_RADIUS = 2.0


def _looping_sizes(g: KernelGraph) -> tuple[tuple[tuple[int, int, int], int], ...]:
    """(grid, loop range) of ``g``'s looping kernels (of every kernel when none loops): the
    sizes a walk step tells apart (a split combine's grid barely moves the time)."""
    sizes = kernel_grids(g)
    return tuple(s for s in sizes if s[1] > 1) or sizes


def walk_step(config: SearchConfig, graph: KernelGraph, tried: set[str],
              width: int = WALK_WIDTH, radius: float = WALK_RADIUS) -> list[tuple[KernelGraph, Cost]]:
    """Up to ``width`` size variants of ``graph`` near its own sizes (``radius``), none of
    ``tried`` (graph keys), one per sizes of its looping kernels, cheapest first."""
    step: list[tuple[KernelGraph, Cost]] = []
    taken = {_looping_sizes(graph)}
    for v, c in ranked_variants(config, graph, radius=radius):
        if v.key in tried or _looping_sizes(v) in taken:
            continue
        taken.add(_looping_sizes(v))
        step.append((v, c))
        if len(step) == width:
            break
    return step


#: the GPU stage also measures this many structures at their cheapest size whose grid alone
#: fills the SMs (no loop split): the cost model ranks a loop split by the schedule (S x the
#: blocks, fp32 partials and a serial combine) against a loop split by the grid (inputs re-read
#: through the L2 by more blocks) least reliably — gqa b=1: grid-split μGraphs estimated 27-30 µs
#: measured 16.7-18, schedule-split ones estimated 22.5 measured 22
GPU_GRID_FILLING = 2
#: ... found among this many of the cost model's best structures
GPU_GRID_FILLING_POOL = 32


def _grid_fills(g: KernelGraph, n_sm: int) -> bool:
    """Every looping kernel of ``g`` has at least ``n_sm`` blocks without a loop split."""
    return all(math.prod(gr) >= n_sm for gr, f in kernel_grids(g) if f > 1)


def grid_filling_variants(config: SearchConfig, accepted: Sequence[Optimized],
                          limit: int = GPU_GRID_FILLING, pool: int = GPU_GRID_FILLING_POOL,
                          n_sm: int = H100_SMS) -> list[tuple[Optimized, KernelGraph, Cost]]:
    """Up to ``limit`` (structure, size variant, cost): among the first ``pool`` structures of
    ``accepted`` (best-first by cost) whose own size leaves some loop to a schedule split, each
    one's cheapest size variant whose grid fills ``n_sm`` SMs by itself; the cheapest
    ``limit`` of those."""
    found: list[tuple[Optimized, KernelGraph, Cost]] = []
    for a in accepted[:pool]:
        if _grid_fills(a.graph, n_sm):
            continue  # already fills the GPU at the size the model picked
        for v, c in ranked_variants(config, a.graph):  # cheapest first
            if _grid_fills(v, n_sm):
                found.append((a, v, c))
                break
    found.sort(key=lambda t: (t[2].seconds, t[1].key))
    return found[:limit]


#: the GPU stage also measures this many structures at the size whose products run as
#: warpgroup MMAs (Schedule.wgmma) on the most blocks one wave holds: the cost model knows
#: only mma.sync, and ranks those sizes far down (the outside prefill_matmul, 512 x 2048 x
#: 2048: its cheapest size ran 23.6 µs; 64 x 128 tiles as wgmma 15.8, H100 s32 c4)
GPU_WGMMA_SIZES = 2


def wgmma_variants(config: SearchConfig, accepted: Sequence[Optimized],
                   limit: int = GPU_WGMMA_SIZES, pool: int = GPU_GRID_FILLING_POOL,
                   n_sm: int = H100_SMS) -> list[tuple[Optimized, KernelGraph, Cost]]:
    """Up to ``limit`` (structure, size variant, cost): among the first ``pool`` structures of
    ``accepted``, each one's size variant whose products all run as warpgroup MMAs, at their
    own rows or refined into 64-row bands (:func:`_wgmma_kernel`), each looping kernel at its
    size with the most blocks up to ``n_sm`` (one wave; :func:`_kernelwise_wave_size`), the
    cost model's cheapest among those; the ones whose looping kernels have the most blocks
    first, then the cheapest."""
    found: list[tuple[Optimized, KernelGraph, Cost]] = []
    for a in accepted[:pool]:
        vc = _kernelwise_wave_size(config, a.graph, _wgmma_kernel, n_sm)
        if vc is not None:
            found.append((a, *vc))
    found.sort(key=lambda t: (-_loop_kernel_blocks(t[1]), t[2].seconds, t[1].key))
    return found[:limit]


def _loop_kernel_blocks(g: KernelGraph) -> int:
    """Blocks of ``g``'s looping kernels (a row-wise kernel beside them, ViT's layer norm
    on 197 blocks before its projection, does not take the product's blocks)."""
    return sum(math.prod(gr) for gr, f in kernel_grids(g) if f > 1)


@functools.lru_cache(maxsize=4096)
def _wgmma_kernel(bg: BlockGraph) -> BlockGraph | None:
    """The block graph a CTA of ``bg`` runs with its products as warpgroup MMAs: ``bg``
    itself, or the virtual block graph of one 64-row band of it where ``bg`` holds more rows
    than one band, of a dimension no op combines, and the band's products qualify
    (:mod:`codegen.refine`: a row count no grid divides into 64s, ViT's 197 tokens, whose
    whole-row product is no warpgroup's); None where neither."""
    from mirage_formal.codegen.refine import refinable_dims, refinement
    from mirage_formal.codegen.schedule import wgmma_threads
    from mirage_formal.codegen.tuning_rules import REFINE_ROWS

    if wgmma_threads(bg) is not None:
        return bg
    for dim, size in refinable_dims(bg)[:1]:
        rf = refinement(bg, dim, REFINE_ROWS) if size > REFINE_ROWS else None
        if rf is not None and wgmma_threads(rf.graph) is not None:
            return rf.graph
    return None


def _kernelwise_wave_size(config: SearchConfig, graph: KernelGraph,
                          runs: Callable[[BlockGraph], BlockGraph | None],
                          n_sm: int) -> tuple[KernelGraph, Cost] | None:
    """``graph`` with each looping graph-defined kernel resized in turn, the others kept
    (``space.size_variants`` with ``vary``), to its size in ``config``'s space with the most
    blocks up to ``n_sm`` (the cheapest estimate among those) whose block graph a CTA
    ``runs`` (that graph, or None where it cannot) fits in shared memory (a refined block's
    one band: the whole 197-row block counts its every tile); None where some looping kernel
    has no such size. Kernel by kernel: a kernel's tiles do not change what another reads,
    and the space's list of whole-graph variants, cut at ``max_variants``, varies the last
    kernel only."""
    from mirage_formal.search.cost import estimate, smem_bytes
    from mirage_formal.search.space import size_variants

    g = graph
    kernels = [n for n in g.nodes if n.op == KERNEL_OP]
    for j, kn in enumerate(kernels):
        if kn.attr("graph").forloop < 2:
            continue
        best: tuple[int, float, KernelGraph] | None = None
        for v in size_variants(dataclasses.replace(config, max_variants=WAVE_SIZES_ENUMERATED),
                               g, vary=j):
            bg = [n for n in v.nodes if n.op == KERNEL_OP][j].attr("graph")
            blocks = math.prod(bg.grid)
            if blocks > n_sm or (best is not None and blocks < best[0]):
                continue
            cta = runs(bg)
            if cta is None or smem_bytes(cta, chains=True) > config.smem_limit:
                continue
            us = estimate(v, config.target).seconds
            if best is None or (blocks, -us) > (best[0], -best[1]):
                best = (blocks, us, v)
        if best is None:
            return None
        g = best[2]
    return (g, estimate(g, config.target)) if _loop_blocks(g) else None


def _fullest_wave_sizes(config: SearchConfig, accepted: Sequence[Optimized],
                        fits: Callable[[KernelGraph], bool], limit: int, pool: int,
                        n_sm: int, emitted: Any = None) -> list[tuple[Optimized, KernelGraph, Cost]]:
    """Up to ``limit`` (structure, size variant, cost): among the first ``pool`` structures of
    ``accepted``, each one's size variant that ``fits`` with the most blocks up to ``n_sm``,
    the cost model's cheapest among those; the most blocks first, then the cheapest. With
    ``emitted`` (a Schedule), the sizes are those the emitter fits under it
    (:func:`_wave_sizes_that_emit`), not the space's ranked variants."""
    found: list[tuple[Optimized, KernelGraph, Cost]] = []
    for a in accepted[:pool]:
        best: tuple[Optimized, KernelGraph, Cost] | None = None
        sizes = (ranked_variants(config, a.graph) if emitted is None else
                 _wave_sizes_that_emit(config, a.graph, n_sm, emitted, fits))
        for v, c in sizes:  # cheapest first
            if _blocks(v) <= n_sm and fits(v) and (best is None or _blocks(v) > _blocks(best[1])):
                best = (a, v, c)
        if best is not None:
            found.append(best)
    found.sort(key=lambda t: (-_blocks(t[1]), t[2].seconds, t[1].key))
    return found[:limit]


#: the GPU stage also measures the fastest structure at its own grids with each looping
#: kernel's loop range this many times longer (shorter k tiles), where its loops multiply fp32
#: tiles: the search keeps one loop range per structure, the cost model's, and for fp32
#: products the tuner's kernels run faster on shorter k tiles (fewer prefetch registers beside
#: the TF32 sums): the 512 x 2048 x 2048 fp32 product at 128 x 128 tiles ran 99.4 µs at k 64
#: (the model's), 92.8 at k 32 and 91.4 at k 16 (H200, s39 c5, c7)
GPU_LOOP_RANGE_FACTORS = (2, 4)


def _fp32_loops(g: KernelGraph) -> bool:
    """Every looping graph-defined kernel of ``g`` (at least one) has a product of two fp32
    tiles."""
    loops = _loop_blocks(g)
    return bool(loops) and all(any(fp32_product(x) for x in bg.nodes) for bg in loops)


def loop_range_variants(config: SearchConfig, graph: KernelGraph, tried: set[str],
                        factors: Sequence[int] = GPU_LOOP_RANGE_FACTORS) -> list[tuple[KernelGraph, Cost]]:
    """The size variants of ``graph`` with its grids and every looping kernel's loop range
    times each of ``factors``, none of ``tried`` (graph keys), when its loops multiply fp32
    tiles (:func:`_fp32_loops`); none otherwise. The ranges may lie past the space's own
    (the search stops at ``derive.MAX_FORLOOP``; the prefill product's best k 16 tiles are a
    range of 128), down to k tiles of LOOP_RANGE_MIN_K: the GPU stage verifies every variant
    before it times it, as it does the space's."""
    if not _fp32_loops(graph):
        return []
    own = kernel_grids(graph)
    want = [tuple((gr, f * m if f > 1 else f) for gr, f in own) for m in factors]
    # a space of the graph's own grid sizes and the wanted ranges only (a few variants)
    narrow = dataclasses.replace(
        config, forloop=tuple(sorted({1} | {f for w in want for _, f in w})),
        grid_sizes=tuple(sorted({s for gr, _ in own for s in gr if s > 1})) or config.grid_sizes)
    from mirage_formal.codegen.schedule import Schedule

    # (sizes the emitter fits, not the cost model's shared-memory count: the fused gated
    # MLP's 128 x 128 tiles at k 64 count past the limit, s40 c4)
    out: list[tuple[KernelGraph, Cost]] = []
    for v, c in _sizes_that_emit(narrow, graph, lambda v: kernel_grids(v) in want,
                                 Schedule(tf32x3=True, threads=TF32_SIZE_THREADS)):
        sizes = kernel_grids(v)  # (cheapest first: the first of each range)
        if sizes in want and v.key not in tried and _loop_k_at_least(v, LOOP_RANGE_MIN_K):
            want.remove(sizes)
            out.append((v, c))
    return out


#: the shortest k tile (elements) a loop range variant may leave an fp32 product: one TF32
#: MMA's k (Schedule.tf32x3's m16n8k8)
LOOP_RANGE_MIN_K = 8


def _loop_k_at_least(g: KernelGraph, k: int) -> bool:
    """Every product in ``g``'s looping kernels contracts at least ``k`` elements a step."""
    return all(x.src[0].shape[-1] >= k for bg in _loop_blocks(g) for x in bg.nodes
               if x.op == "matmul")


#: the GPU stage also measures this many structures whose loops multiply fp32 tiles at the
#: size whose every looping fp32 product gives a 256-thread block at least
#: TF32_SIZE_MIN_TILES 16 x 8 output tiles a warp (Schedule.tf32x3: A and B fragments then
#: serve several MMAs each) on the most blocks up to one wave: the search's sizes of the
#: fused fp32 gated MLP at 512 rows (64 x 32 outputs a block) ran 258 µs, its 128 x 64 size
#: 207 (H200, s39 c11)
GPU_TF32_SIZES = 2
#: the TF32 hedges look at the first this many structures whose loops multiply fp32 tiles
#: (each enumerates up to WAVE_SIZES_ENUMERATED sizes and emits the candidates: about a
#: second a structure on the device machine's CPU)
GPU_TF32_POOL = 8
TF32_SIZE_MIN_TILES = 8
TF32_SIZE_THREADS = 256


def _tf32_sizes(g: KernelGraph) -> bool:
    """Every looping graph-defined kernel of ``g`` (at least one) multiplies fp32 tiles, and
    each such product tiles for TF32 MMAs on TF32_SIZE_THREADS threads with at least
    TF32_SIZE_MIN_TILES 16 x 8 tiles a warp (:func:`_tf32_warp_tiles`)."""
    return _fp32_loops(g) and _tf32_warp_tiles(g) >= TF32_SIZE_MIN_TILES


def _fp32_structures(accepted: Sequence[Optimized], pool: int) -> list[Optimized]:
    """The first GPU_TF32_POOL of the first ``pool`` structures whose loops multiply fp32
    tiles: the TF32 hedges' candidates (others have no such size, and their sizes are not
    enumerated)."""
    return [a for a in accepted[:pool] if _fp32_loops(a.graph)][:GPU_TF32_POOL]


def tf32_variants(config: SearchConfig, accepted: Sequence[Optimized],
                  limit: int = GPU_TF32_SIZES, pool: int = GPU_GRID_FILLING_POOL,
                  n_sm: int = H100_SMS) -> list[tuple[Optimized, KernelGraph, Cost]]:
    """Up to ``limit`` (structure, size variant, cost): among the first ``pool`` structures of
    ``accepted``, each one's size variant whose fp32 products all take TF32 MMAs on large
    enough warp tiles (:func:`_tf32_sizes`) with the most blocks up to ``n_sm`` (one wave), the
    cost model's cheapest among those; the ones with the most blocks first, then the
    cheapest. (The same rule as :func:`wgmma_variants`, for fp32 products.)"""
    from mirage_formal.codegen.schedule import Schedule

    fp32 = _fp32_structures(accepted, pool)
    return _fullest_wave_sizes(config, fp32, _tf32_sizes, limit, len(fp32), n_sm,
                               emitted=Schedule(tf32x3=True, threads=TF32_SIZE_THREADS))


#: the GPU stage also measures this many structures whose loops multiply fp32 tiles at the
#: size with the widest warp tiles (the most TF32 16 x 8 tiles a warp of 256 threads) whose
#: blocks, times the split that fills a wave (``occupancy.loop_splits``), stay within one wave:
#: larger tiles reuse each fragment more, and the tuner's TF32 candidates take that split. The
#: 512 x 2048 x 2048 fp32 product's fastest, 128 x 128 tiles on 64 blocks split 2, ran 91.4 µs;
#: the fullest wave's 128 x 64 tiles on 128 blocks 99.0-102.8 (H200, s39 c5; s40 c1, c2)
GPU_TF32_SPLIT_SIZES = 1


def _tf32_warp_tiles(g: KernelGraph) -> int:
    """The fewest TF32 16 x 8 tiles a warp of TF32_SIZE_THREADS threads gets among ``g``'s
    looping fp32 products (0 where one does not tile)."""
    from mirage_formal.codegen.schedule import tf32_product_dims, tf32_warp_tiling

    counts = []
    for bg in _loop_blocks(g):
        for x in bg.nodes:
            if fp32_product(x):
                dims = tf32_product_dims(x)
                t = tf32_warp_tiling(*dims, TF32_SIZE_THREADS // 32) if dims is not None else None
                counts.append(t[0] * t[1] if t is not None else 0)
    return min(counts, default=0)


def _operand_rows(g: KernelGraph) -> int:
    """The rows plus columns of every looping fp32 product of ``g``'s outputs: the operand
    words one k step reads per unit of k."""
    return sum(x.shape[-2] + x.shape[-1] for bg in _loop_blocks(g) for x in bg.nodes
               if fp32_product(x))


def _split_wave_blocks(g: KernelGraph, n_sm: int) -> int:
    """``g``'s blocks with every looping kernel split as the tuner's wave split does (0 where
    some looping kernel has no split or the split overfills one wave of ``n_sm``)."""
    from mirage_formal.ir.occupancy import loop_splits

    total = 0
    for gr, f in kernel_grids(g):
        blocks = math.prod(gr)
        if f > 1:
            splits = loop_splits(blocks, f, n_sm)
            if not splits or blocks * splits[0] > n_sm:
                return 0
            blocks *= splits[0]
        total += blocks
    return total


def tf32_split_variants(config: SearchConfig, accepted: Sequence[Optimized],
                        limit: int = GPU_TF32_SPLIT_SIZES, pool: int = GPU_GRID_FILLING_POOL,
                        n_sm: int = H100_SMS) -> list[tuple[Optimized, KernelGraph, Cost]]:
    """Up to ``limit`` (structure, size variant, cost): among the first ``pool`` structures of
    ``accepted`` whose loops multiply fp32 tiles, each one's size that the emitter fits
    (:func:`_wave_sizes_that_emit`) and that a wave split fills (:func:`_split_wave_blocks`)
    with the most TF32 tiles a warp (at least TF32_SIZE_MIN_TILES), then the squarest tiles,
    the most split blocks, the cheapest; the widest tiles first, then in ``accepted``'s
    order."""
    from mirage_formal.codegen.schedule import Schedule

    sched = Schedule(tf32x3=True, threads=TF32_SIZE_THREADS)
    found: list[tuple[tuple[int, int, int, float], Optimized, KernelGraph, Cost]] = []
    for a in _fp32_structures(accepted, pool):
        best: tuple[tuple[int, int, int, float], KernelGraph, Cost] | None = None
        for v, c in _wave_sizes_that_emit(config, a.graph, n_sm, sched,
                                          lambda v: bool(_split_wave_blocks(v, n_sm))
                                          and _tf32_sizes(v)):  # cheapest first
            # (then the squarest tiles: fewer operand words a step for the same outputs;
            # 64 x 256 tiles ran 103.9 µs where 128 x 128 ran 91.4)
            rank = (-_tf32_warp_tiles(v), _operand_rows(v), -_split_wave_blocks(v, n_sm), c.seconds)
            if best is None or rank < best[0]:
                best = (rank, v, c)
        if best is not None:
            found.append((best[0], a, best[1], best[2]))
    found.sort(key=lambda t: t[0][0])  # (stable: structures of equal tiles in the search's order)
    return [(a, v, c) for _, a, v, c in found[:limit]]


#: size variants :func:`_wave_sizes_that_emit` enumerates at most per structure
WAVE_SIZES_ENUMERATED = 4096


def _wave_sizes_that_emit(config: SearchConfig, graph: KernelGraph, n_sm: int, schedule: Any,
                          fits: Callable[[KernelGraph], bool] = lambda v: True,
                          ) -> list[tuple[KernelGraph, Cost]]:
    """The size variants of ``graph`` with at most ``n_sm`` blocks that ``fits`` and that the
    emitter fits (:func:`_sizes_that_emit`), cheapest first."""
    return _sizes_that_emit(config, graph, lambda v: _blocks(v) <= n_sm and fits(v), schedule)


def _sizes_that_emit(config: SearchConfig, graph: KernelGraph, keep: Callable[[KernelGraph], bool],
                     schedule: Any) -> list[tuple[KernelGraph, Cost]]:
    """The size variants of ``graph`` in ``config``'s space that ``keep`` and whose every
    graph-defined kernel the emitter places in shared memory under ``schedule`` (no workspace
    spill), cheapest first. Unlike ``ranked_variants`` this neither stops at the space's
    ``max_variants`` (up to WAVE_SIZES_ENUMERATED) nor trusts the cost model's shared-memory
    count, which holds every tile of the block graph (accumulators and products included): the
    fused fp32 gated MLP's 128 x 64 outputs a block, 207 µs against the search's 258 (H200,
    s39 c11), count 320 KB there and need 64 KB in the kernel. (The sizes of a structure and
    each kernel's verdict are cached: two hedges ask about the same structures, and one
    kernel size recurs across many variants.)"""
    from mirage_formal.search.cost import estimate

    ranked: list[tuple[float, str, KernelGraph, Cost]] = []
    for v in _every_size(config, graph):
        if keep(v) and all(_emits_in_smem(n.attr("graph"), schedule) for n in v.nodes
                           if n.op == KERNEL_OP):
            c = estimate(v, config.target)
            ranked.append((c.seconds, v.key, v, c))
    ranked.sort(key=lambda r: (r[0], r[1]))
    return [(v, c) for _, _, v, c in ranked]


@functools.lru_cache(maxsize=16)
def _every_size(config: SearchConfig, graph: KernelGraph) -> tuple[KernelGraph, ...]:
    """Up to WAVE_SIZES_ENUMERATED size variants of ``graph`` in ``config``'s space."""
    from mirage_formal.search.space import size_variants

    return tuple(size_variants(dataclasses.replace(config, max_variants=WAVE_SIZES_ENUMERATED), graph))


@functools.lru_cache(maxsize=4096)
def _emits_in_smem(bg: BlockGraph, schedule: Any) -> bool:
    """The emitter places block graph ``bg`` under ``schedule`` in shared memory (within the
    limit, no workspace spill), and does not refuse it."""
    from mirage_formal.codegen.emit import SMEM_LIMIT_BYTES, emit_block_graph

    try:
        e = emit_block_graph(bg, "k", opts=schedule)
    except MirageError:  # (a schedule the emitter refuses for this size)
        return False
    return e.smem_bytes <= SMEM_LIMIT_BYTES and e.ws_floats == 0


#: bytes of one L2 line (and DRAM burst) on the GPUs we target
LINE_BYTES = 128


def _whole_lines(g: KernelGraph) -> bool:
    """Every looping kernel's changing iterator tiles read whole 128-byte lines per row (their
    rows are a multiple of a line, or span the input's whole rows): neighbouring blocks
    then never share a line (48-column fp16 tiles split lines between blocks)."""
    for n in g.nodes:
        if n.op != KERNEL_OP or n.attr("graph").forloop < 2:
            continue
        bg = n.attr("graph")
        for x in bg.nodes:
            if x.op != "iter" or x.attr("fmap") == -1:
                continue
            shape, dt = bg.inputs[x.attr("input")]
            if x.shape[-1] != shape[-1] and (x.shape[-1] * dt.itemsize) % LINE_BYTES:
                return False
    return True


def _blocks(g: KernelGraph) -> int:
    return sum(math.prod(gr) for gr in _grids(g))


def _split_fills(g: KernelGraph, n_sm: int) -> bool:
    """Every looping kernel of ``g`` reaches ``n_sm`` blocks when split (at most F/2 ways)."""
    return all(math.prod(gr) * max(1, f // 2) >= n_sm for gr, f in kernel_grids(g) if f > 1)
