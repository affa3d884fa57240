"""superoptimize's GPU stage: which accepted μGraphs are autotuned and timed on the device,
which size variants of the fastest are measured too (the cost model's cheapest, the widest
tiles a split still spreads, the grid-filling, warpgroup-MMA and TF32 sizes, longer loop
ranges of fp32 loops, and a walk over neighbouring sizes while it finds faster ones), and the
re-ranking by measured time (``_gpu_rank``). Every μGraph it
measures is verified and re-checked in float64 first; the tuner (``codegen.autotune``)
validates every kernel against the program before timing it.

Imports ``ir``, ``search``, ``verify``, ``optimized`` and, lazily, ``codegen.autotune`` and
``codegen.schedule``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from mirage_formal.errors import MirageError
from mirage_formal.ir.dtypes import DType
from mirage_formal.ir.graph import KERNEL_OP, BlockGraph, KernelGraph, streams_weights
from mirage_formal.ir.node import Node
from mirage_formal.ir.serialize import ugraph_to_json
from mirage_formal.optimized import RECHECK_RTOL, Optimized
from mirage_formal.search import Cost, SearchConfig
from mirage_formal.search.derive import H100_SMS
from mirage_formal.search.state import ranked_variants
from mirage_formal.verify import Verifier
from mirage_formal.verify.float64 import FloatRecheck


def gpu_candidates(accepted: list[Optimized], top: int,
                   program: KernelGraph | None = None) -> list[Optimized]:
    """The ``top`` candidates the GPU stage measures: the cost model's best of each kernel
    count first (the model is least sure across structures: a fused kernel against the
    lowered program), then the rest by estimated cost; and the input ``program``'s own
    lowering when it is among ``accepted``, so the result is never slower than it."""
    firsts: dict[int, Optimized] = {}
    for a in accepted:  # best-first by the cost model
        firsts.setdefault(len(a.graph.kernels), a)
    picked = list(firsts.values())[:top]
    for a in accepted:
        if len(picked) >= top:
            break
        if all(a is not p for p in picked):
            picked.append(a)
    if program is not None:
        own = next((a for a in accepted if a.graph.key == program.key), None)
        if own is not None and all(own is not p for p in picked):
            picked.append(own)  # the input's own lowering, measured as the floor to beat
    return picked


#: the GPU stage also measures size variants (other grid sizes and loop ranges of the space:
#: other tiles, as many blocks as they make) of this many of the fastest measured structures ...
GPU_VARIANT_STRUCTURES = 2
#: ... this many each: the analytic cost model ranks tile shapes least reliably (rmsnorm's fused
#: kernel: 48-column tiles estimated best, 128-column tiles measured 27% faster)
GPU_VARIANTS = 4
#: with time left after those, the fastest this many structures in all get theirs too
GPU_MORE_STRUCTURES = 4
#: how many of the fastest structures get the tuner's second round (time allowing), and how
#: far behind the fastest one (its first-round time) the others may be
SECOND_ROUND_STRUCTURES = 2
SECOND_ROUND_MARGIN = 0.03
#: the input program's own lowering (the floor a result must beat), when the cost model ranks
#: another candidate first, is timed at its default schedules (or its cached ones) only: a full
#: first round of its several library kernels took 5 s of mqa b=8's 38 s stage for a floor
#: 6.5x slower than the best candidate (H200, s37 c3), and left two candidates untuned. It gets
#: the full round, time allowing, when that time is within this factor of the fastest other
#: candidate's, where tuning might make it the winner
FLOOR_FULL_ROUND_WITHIN = 2.0


@dataclass
class VariantContext:
    """What the GPU stage needs to try size variants: the search space they come from, and the
    checks every returned μGraph passes (the verifier's verdict, the float64 re-check)."""

    config: SearchConfig
    verifier: Verifier
    recheck: FloatRecheck
    #: the GPU's SM count (which tile widths a split can still spread over the SMs)
    n_sm: int = H100_SMS
    #: the validation and timing inputs and the program's float64 outputs, drawn once for
    #: every μGraph the stage tunes (``autotune.tune``'s ``shared``)
    shared: dict[Any, Any] = field(default_factory=dict)


def _kernel_grids(g: KernelGraph) -> tuple[tuple[tuple[int, int, int], int], ...]:
    """(grid, forloop) of each graph-defined kernel of ``g``."""
    return tuple((n.attr("graph").grid, n.attr("graph").forloop) for n in g.nodes
                 if n.op == KERNEL_OP)


def _grids(g: KernelGraph) -> tuple[tuple[int, int, int], ...]:
    return tuple(gr for gr, _ in _kernel_grids(g))


def _loop_blocks(g: KernelGraph) -> list[BlockGraph]:
    """The block graphs of ``g``'s graph-defined kernels that have a real loop."""
    return [n.attr("graph") for n in g.nodes if n.op == KERNEL_OP and n.attr("graph").forloop > 1]


def _fp32_product(x: Node) -> bool:
    """Block op ``x`` is a product of two fp32 tiles."""
    return x.op == "matmul" and all(s.dtype is DType.F32 for s in x.src)


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
        loops = [f for _, f in _kernel_grids(graph)]
        same = [vc for vc in ranked if _grids(vc[0]) == _grids(full[0][0])
                and [f for _, f in _kernel_grids(vc[0])] == loops]
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
    sizes = _kernel_grids(g)
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
    return all(math.prod(gr) >= n_sm for gr, f in _kernel_grids(g) if f > 1)


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


def _wgmma_sizes(g: KernelGraph) -> bool:
    """Every looping graph-defined kernel of ``g`` (at least one) has a product that
    :attr:`Schedule.wgmma` can run (``codegen.schedule.wgmma_threads``)."""
    from mirage_formal.codegen.schedule import wgmma_threads

    loops = _loop_blocks(g)
    return bool(loops) and all(wgmma_threads(bg) is not None for bg in loops)


def wgmma_variants(config: SearchConfig, accepted: Sequence[Optimized],
                   limit: int = GPU_WGMMA_SIZES, pool: int = GPU_GRID_FILLING_POOL,
                   n_sm: int = H100_SMS) -> list[tuple[Optimized, KernelGraph, Cost]]:
    """Up to ``limit`` (structure, size variant, cost): among the first ``pool`` structures of
    ``accepted``, each one's size variant whose products all run as warpgroup MMAs
    (:func:`_wgmma_sizes`) with the most blocks up to ``n_sm`` (one wave), the cost model's
    cheapest among those; the ones with the most blocks first, then the cheapest."""
    return _fullest_wave_sizes(config, accepted, _wgmma_sizes, limit, pool, n_sm)


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
    return bool(loops) and all(any(_fp32_product(x) for x in bg.nodes) for bg in loops)


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
    own = _kernel_grids(graph)
    want = [tuple((gr, f * m if f > 1 else f) for gr, f in own) for m in factors]
    # a space of the graph's own grid sizes and the wanted ranges only (a few variants)
    narrow = dataclasses.replace(
        config, forloop=tuple(sorted({1} | {f for w in want for _, f in w})),
        grid_sizes=tuple(sorted({s for gr, _ in own for s in gr if s > 1})) or config.grid_sizes)
    from mirage_formal.codegen.schedule import Schedule

    # (sizes the emitter fits, not the cost model's shared-memory count: the fused gated
    # MLP's 128 x 128 tiles at k 64 count past the limit, s40 c4)
    out: list[tuple[KernelGraph, Cost]] = []
    for v, c in _sizes_that_emit(narrow, graph, lambda v: _kernel_grids(v) in want,
                                 Schedule(tf32x3=True, threads=TF32_SIZE_THREADS)):
        sizes = _kernel_grids(v)  # (cheapest first: the first of each range)
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
    TF32_SIZE_MIN_TILES 16 x 8 tiles a warp (``codegen.schedule.tf32_warp_tiling``)."""
    from mirage_formal.codegen.schedule import tf32_product_dims, tf32_warp_tiling

    def large(x: Node) -> bool:  # (an fp32 product's TF32 warp tiles on 256 threads)
        dims = tf32_product_dims(x)
        tiling = tf32_warp_tiling(*dims, TF32_SIZE_THREADS // 32) if dims is not None else None
        return tiling is not None and tiling[0] * tiling[1] >= TF32_SIZE_MIN_TILES

    return _fp32_loops(g) and all(large(x) for bg in _loop_blocks(g) for x in bg.nodes
                                  if _fp32_product(x))


def tf32_variants(config: SearchConfig, accepted: Sequence[Optimized],
                  limit: int = GPU_TF32_SIZES, pool: int = GPU_GRID_FILLING_POOL,
                  n_sm: int = H100_SMS) -> list[tuple[Optimized, KernelGraph, Cost]]:
    """Up to ``limit`` (structure, size variant, cost): among the first ``pool`` structures of
    ``accepted``, each one's size variant whose fp32 products all take TF32 MMAs on large
    enough warp tiles (:func:`_tf32_sizes`) with the most blocks up to ``n_sm`` (one wave), the
    cost model's cheapest among those; the ones with the most blocks first, then the
    cheapest. (The same rule as :func:`wgmma_variants`, for fp32 products.)"""
    from mirage_formal.codegen.schedule import Schedule

    # (structures without fp32 loops have no such size: their sizes are not enumerated)
    fp32 = [a for a in accepted[:pool] if _fp32_loops(a.graph)][:GPU_TF32_POOL]
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
            if _fp32_product(x):
                dims = tf32_product_dims(x)
                t = tf32_warp_tiling(*dims, TF32_SIZE_THREADS // 32) if dims is not None else None
                counts.append(t[0] * t[1] if t is not None else 0)
    return min(counts, default=0)


def _operand_rows(g: KernelGraph) -> int:
    """The rows plus columns of every looping fp32 product of ``g``'s outputs: the operand
    words one k step reads per unit of k."""
    return sum(x.shape[-2] + x.shape[-1] for bg in _loop_blocks(g) for x in bg.nodes
               if _fp32_product(x))


def _split_wave_blocks(g: KernelGraph, n_sm: int) -> int:
    """``g``'s blocks with every looping kernel split as the tuner's wave split does (0 where
    some looping kernel has no split or the split overfills one wave of ``n_sm``)."""
    from mirage_formal.ir.occupancy import loop_splits

    total = 0
    for gr, f in _kernel_grids(g):
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
    for a in [a for a in accepted[:pool] if _fp32_loops(a.graph)][:GPU_TF32_POOL]:
        best: tuple[tuple[int, int, int, float], KernelGraph, Cost] | None = None
        for v, c in _wave_sizes_that_emit(config, a.graph, n_sm, sched,
                                          lambda v: bool(_split_wave_blocks(v, n_sm))
                                          and _tf32_sizes(v)):  # cheapest first
            tiles, blocks = _tf32_warp_tiles(v), _split_wave_blocks(v, n_sm)
            if tiles >= TF32_SIZE_MIN_TILES:
                # (then the squarest tiles: fewer operand words a step for the same outputs;
                # 64 x 256 tiles ran 103.9 µs where 128 x 128 ran 91.4)
                rank = (-tiles, _operand_rows(v), -blocks, c.seconds)
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
    return all(math.prod(gr) * max(1, f // 2) >= n_sm for gr, f in _kernel_grids(g) if f > 1)


def _fastest_measured(accepted: Sequence[Optimized], program: KernelGraph,
                      n: int = GPU_VARIANT_STRUCTURES) -> list[Optimized]:
    """The ``n`` fastest measured structures that have sizes to vary (a graph-defined
    kernel), the input program's own lowering left out. (A μGraph of library kernels alone
    took one of rmsnorm b=8's two slots, and the fused structure measured third at its first
    size never had its other sizes measured.)"""
    return sorted((a for a in accepted if a.measured_us is not None and a.graph.key != program.key
                   and _kernel_grids(a.graph)),
                  key=lambda a: a.measured_us or 0.0)[:n]


def _tune_one(graph: KernelGraph, program: KernelGraph, seed: int | None,
              estimated_us: float, deadline: float | None = None,
              start: Any = None, shared: dict[Any, Any] | None = None) -> Any:
    """The first tuning round (``start`` None: ranking candidates, no second round), or the
    second round from ``start``'s schedules (the winner's). ``shared``: the stage's inputs and
    float64 reference outputs, drawn once for every μGraph (``autotune.tune``)."""
    from mirage_formal.codegen.autotune import tune

    # every trial is logged with the μGraph and its estimate: data for the cost model
    return tune(graph, program, seed=seed or 0, deadline=deadline, refine=start is not None,
                start=start, shared=shared,
                context={"ugraph": ugraph_to_json(graph), "estimated_us": estimated_us})


class _StageDeadline:
    """The GPU stage's deadline, looking one step ahead: a step (tuning one μGraph, or
    verifying and tuning one size variant) is not begun unless the longest step so far would
    still end before the deadline. A b=8 attention variant's field verification alone takes
    seconds, so checking only the clock let the stage run 13 s past a 110 s budget.
    Call it for "out of time?"; wrap each step in :meth:`step`. ``reserve`` keeps that many
    more such steps free: the ranking and size-variant steps leave one for the winner's second
    tuning round (which tries the L2 policies; a budget the size variants used up used to
    skip it)."""

    def __init__(self, deadline: float | None) -> None:
        self.deadline = deadline
        self.longest = 0.0

    def __call__(self, reserve: int = 0) -> bool:
        return (self.deadline is not None
                and time.monotonic() + self.longest * (1 + reserve) >= self.deadline)

    @contextlib.contextmanager
    def step(self) -> Iterator[None]:
        t = time.monotonic()
        try:
            yield
        finally:
            self.longest = max(self.longest, time.monotonic() - t)


def _gpu_rank(program: KernelGraph, accepted: list[Optimized], top: int,
              seed: int | None, deadline: float | None = None,
              variants: VariantContext | None = None) -> tuple[list[Optimized], Any, list[str]]:
    """Autotune, validate and time the ``top`` best (codegen.autotune: every kernel's schedule
    measured on this GPU, timed like the benchmarks' baselines); then, with ``variants``, the
    size variants of the fastest few (each verified and re-checked in float64 first; a faster
    one replaces its structure's entry), walks of their sizes, and with time left the same
    for the next fastest structures (up to ``GPU_MORE_STRUCTURES`` in all); re-rank by
    measured time."""
    notes: list[str] = []
    best_cg: Any = None
    best_us = math.inf
    #: the first round's schedules of each μGraph measured (a size variant's once it
    #: replaced its structure's entry): where the second round starts
    start_sched: dict[str, Any] = {}

    out_of_time = _StageDeadline(deadline)
    shared: dict[Any, Any] = variants.shared if variants is not None else {}
    picked = gpu_candidates(accepted, top, program)
    if picked and not out_of_time():
        # the program's validation draws and float64 outputs, once for every μGraph, before
        # the first step: its time would count as a tuning's in the steps planned after it
        from mirage_formal.codegen.autotune import VALIDATION_TRIALS
        from mirage_formal.codegen.validate import program_draws

        program_draws(program, VALIDATION_TRIALS, seed or 0, shared)
    def first_round(a: Optimized, quick: bool = False) -> None:
        """``a``'s first tuning round (``quick``: its first schedules only, a deadline of now)."""
        nonlocal best_us, best_cg
        with out_of_time.step():
            tuned = _tune_one(a.graph, program, seed, a.cost.seconds * 1e6,
                              time.monotonic() if quick else deadline, shared=shared)
        if tuned is None:
            a.validation = "no schedule validated"
            notes.append(f"candidate {a.graph.key[:12]} FAILED validation under every schedule "
                         "(a codegen bug; see the tuning log measurements.jsonl)")
            return
        bad = [t for t in tuned.trials if not t.valid]
        for t in bad:
            notes.append(f"candidate {a.graph.key[:12]} schedule "
                         f"{'; '.join(s.short() for s in t.schedules.values())} FAILED: {t.error[:200]}")
        if a.measured_us is not None and tuned.us >= a.measured_us:
            # (a full round after the quick one that found nothing faster)
            a.validation = f"{a.validation}; a full first round found nothing faster"
            return
        a.measured_us = tuned.us
        a.schedule = tuned.describe()
        a.validation = (f"validated; {len(tuned.trials) - len(bad)} schedules timed"
                        + (" (cached winner)" if tuned.from_cache else "")
                        + (f"; default schedule {tuned.default_us:.2f} µs" if tuned.default_us else "")
                        + ("; its first schedules only (the input's own lowering)" if quick else ""))
        start_sched[a.graph.key] = tuned.schedules
        if tuned.us < best_us:
            best_us, best_cg = tuned.us, tuned.compiled

    floor: Optimized | None = None
    for i, a in enumerate(picked):
        if out_of_time(reserve=1):
            notes.append(f"budget spent: {len(picked) - i} candidate(s) not tuned or timed")
            break
        quick = i > 0 and a.graph.key == program.key
        first_round(a, quick)
        floor = a if quick else floor
    others = [a.measured_us for a in picked if a is not floor and a.measured_us is not None]
    if (floor is not None and floor.measured_us is not None
            and (not others or floor.measured_us <= FLOOR_FULL_ROUND_WITHIN * min(others))
            and not out_of_time(reserve=1)):
        first_round(floor)  # a floor that may win: its full first round
    if variants is not None:
        ctx = variants

        tried: set[str] = {a.graph.key for a in accepted}

        def measure(a: Optimized, vcs: Sequence[tuple[KernelGraph, Cost]], kind: str,
                    reserve: int = 1) -> None:
            nonlocal best_us, best_cg
            tried.update(v.key for v, _ in vcs)
            cg, us, more = _measure_variants(a, vcs, program, seed, ctx, out_of_time, start_sched,
                                             kind, reserve)
            notes.extend(more)
            if cg is not None and us < best_us:
                best_us, best_cg = us, cg

        hedges = grid_filling_variants(ctx.config, accepted, n_sm=ctx.n_sm)
        for a, v, c in hedges:
            measure(a, [(v, c)], "grid-filling size")
        wgmma = wgmma_variants(ctx.config, accepted, n_sm=ctx.n_sm)
        for a, v, c in wgmma:
            measure(a, [(v, c)], "warpgroup-MMA size")
        hedges += wgmma
        tf32 = tf32_variants(ctx.config, accepted, n_sm=ctx.n_sm)
        for a, v, c in tf32:
            measure(a, [(v, c)], "TF32 size")
        hedges += tf32
        tf32_split = [h for h in tf32_split_variants(ctx.config, accepted, n_sm=ctx.n_sm)
                      if h[1].key not in tried]
        for a, v, c in tf32_split:
            measure(a, [(v, c)], "TF32 split size")
        hedges += tf32_split
        for a in _fastest_measured(accepted, program, 1):
            # (fp32 loops: the fastest structure's own grids at longer loop ranges, before the
            # other sizes: two targeted variants that a 90 s budget never reached after them;
            # the prefill product's k 16 tiles, s40 c3)
            ranges = loop_range_variants(ctx.config, a.graph, tried)
            if ranges:
                measure(a, ranges, "loop range")
        # the fastest structures' size variants in turns (each one's first, then each one's
        # second...): a budget that ends early still measured the most likely sizes of each
        queues = [(a, variants_to_measure(ctx.config, a.graph, n_sm=ctx.n_sm))
                  for a in _fastest_measured(accepted, program)]
        for turn in range(max((len(q) for _, q in queues), default=0)):
            for a, q in queues:
                if turn < len(q):
                    measure(a, q[turn:turn + 1], "size")
        # walk the fastest structures' sizes, and the grid-filling ones' (the model ranks their
        # sizes least reliably: gqa b=1's attention-plus-combine at 256 blocks measured 19.4 µs,
        # a neighbour at 128 blocks is Mirage's 11.5), each while a step finds a faster size
        def walk(a: Optimized) -> None:
            # (one step kept free beyond the second rounds' SECOND_ROUND_STRUCTURES: a second
            # round tries up to REFINE_MAX schedules, longer than a first-round step; rmsnorm
            # b=8's walk once left it no time, s26, and b=1's runner-up had none left in s35)
            reserve = 1 + SECOND_ROUND_STRUCTURES
            while not out_of_time(reserve=reserve):
                before = a.measured_us
                step = walk_step(ctx.config, a.graph, tried)
                if not step:
                    break
                measure(a, step, "walk", reserve=reserve)
                if a.measured_us is None or before is None or a.measured_us >= before:
                    break

        walkers = _fastest_measured(accepted, program)
        for a, _, _ in hedges:  # (a structure may be both a grid-filling and a wgmma hedge)
            if a.measured_us is not None and all(a is not w for w in walkers):
                walkers.append(a)
        for a in walkers:
            walk(a)
        # with time left, the next fastest structures get size variants and a walk too, one
        # at a time (rmsnorm b=8's fused kernel measured third at its first size and was
        # never walked, with 35 s of the stage's budget left)
        more = [a for a in _fastest_measured(accepted, program, GPU_MORE_STRUCTURES)
                if all(a is not w for w in walkers)]
        for a in more:
            if out_of_time(reserve=SECOND_ROUND_STRUCTURES):
                break
            measure(a, variants_to_measure(ctx.config, a.graph, n_sm=ctx.n_sm), "size")
            walk(a)
    # the tuner's second round (every kind of choice on its threads and split) for the
    # winner and for a runner-up within SECOND_ROUND_MARGIN of it: the first round ranks, the
    # second polishes. (rmsnorm b=1, H100 s35: the first round put a 128-column structure at
    # 24.37 µs and the 64-column one at 24.70, whose second round (a 2-deep ring, the fold on
    # the tensor cores) measures 24.2 against the other's best 24.4)
    ranked = sorted((a for a in accepted if a.measured_us is not None and a.graph.key in start_sched),
                    key=lambda a: a.measured_us or 0.0)
    second = ranked[:1] + [a for a in ranked[1:SECOND_ROUND_STRUCTURES]
                           if (a.measured_us or 0.0) <= (ranked[0].measured_us or 0.0) * (1 + SECOND_ROUND_MARGIN)]
    for j, win in enumerate(second):
        if out_of_time():
            if j == 0:
                notes.append(f"budget spent: no second tuning round for {win.graph.key[:12]}")
            break
        with out_of_time.step():
            tuned = _tune_one(win.graph, program, seed, win.cost.seconds * 1e6, deadline,
                              start=start_sched[win.graph.key], shared=shared)
        if tuned is not None and win.measured_us is not None and tuned.us < win.measured_us:
            win.measured_us, win.schedule = tuned.us, tuned.describe()
            win.validation = f"{win.validation or 'validated'}; second tuning round {tuned.us:.2f} µs"
            if tuned.us < best_us:
                best_us, best_cg = tuned.us, tuned.compiled
    timed = sorted((a for a in accepted if a.measured_us is not None), key=lambda a: a.measured_us or 0.0)
    rest = [a for a in accepted if a.measured_us is None]
    return timed + rest, best_cg, list(dict.fromkeys(notes))  # (a note once, however often)


def _measure_variants(a: Optimized, vcs: Sequence[tuple[KernelGraph, Cost]], program: KernelGraph,
                      seed: int | None, ctx: VariantContext, out_of_time: _StageDeadline,
                      start_sched: dict[str, Any] | None = None,
                      kind: str = "size", reserve: int = 1) -> tuple[Any, float, list[str]]:
    """Verify, re-check and tune each size variant of ``vcs``; the fastest, if faster than
    ``a`` (or ``a`` was not measured), replaces ``a``'s graph, verdict, cost and measurements
    (same structure: it stays one entry). Returns its compiled kernel and time (None, inf when
    none was faster). No variant is begun unless ``reserve`` more steps would still fit."""
    notes: list[str] = []
    best: tuple[Any, float] = (None, math.inf)
    base_key = a.graph.key
    for v, c in vcs:
        if out_of_time(reserve=reserve):
            notes.append(f"budget spent: {kind} variants of {base_key[:12]} not all measured")
            break
        with out_of_time.step():
            verdict = ctx.verifier.check(v)
            err = ctx.recheck.error(v, verdict.output_map) if verdict.accepted else math.inf
            if not verdict.accepted or err > RECHECK_RTOL:
                # cannot happen for a sound structure: its variants compute the same function
                notes.append(f"{kind} variant {v.key[:12]} of {base_key[:12]} failed verification "
                             f"(accepted={verdict.accepted}, float64 error {err:.2g}); not used")
                continue
            tuned = _tune_one(v, program, seed, c.seconds * 1e6, out_of_time.deadline,
                              shared=ctx.shared)
            if tuned is None:
                notes.append(f"{kind} variant {v.key[:12]} of {base_key[:12]} FAILED validation under "
                             "every schedule (a codegen bug; see the tuning log)")
                continue
            if a.measured_us is None or tuned.us < a.measured_us:
                why = ("measured instead of" if a.measured_us is None else "faster on this GPU than")
                a.graph, a.verdict, a.cost, a.float64_error = v, verdict, c, err
                a.measured_us, a.schedule = tuned.us, tuned.describe()
                a.validation = (f"validated; {kind} variant of {base_key[:12]} ({why} the cost "
                                f"model's pick); {len(tuned.trials)} schedules timed")
                best = (tuned.compiled, tuned.us)
                if start_sched is not None:
                    start_sched[v.key] = tuned.schedules
    return best[0], best[1], notes
