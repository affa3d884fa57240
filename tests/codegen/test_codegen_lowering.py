"""The lowering of pre-defined kernel ops to default block graphs is exact (float64), and the
shared-memory planner never gives two live buffers overlapping memory."""

from __future__ import annotations

import numpy as np
import pytest
from graph_strategies import kernel_programs, product_program
from hypothesis import given, settings
from hypothesis import strategies as st

from mirage_formal import workloads
from mirage_formal.codegen import launches, lowered_graph
from mirage_formal.codegen.plan import ALIGN, Buffer, plan_buffers
from mirage_formal.ir.graph import KERNEL_OP
from mirage_formal.semantics import random_inputs, run_reference


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> None:
    for x, y in zip(a, b, strict=True):
        scale = max(float(np.max(np.abs(y))), 1e-300)
        assert float(np.max(np.abs(x - y))) / scale <= 1e-9


@pytest.mark.parametrize("batch", [1, 8])
@pytest.mark.parametrize("name", sorted(workloads.PROGRAMS))
def test_workload_lowering_is_exact(name: str, batch: int) -> None:
    # Full sizes at b=1; at b=8 the attention key length is cut to keep CI fast (the lowering
    # of every op is exercised either way; the GPU bench checks full sizes).
    small = {"kv": 512} if batch == 8 and name in ("gqa", "mha", "mqa", "qknorm_gqa") else {}
    prog = workloads.program(name, batch, **small)
    low = lowered_graph(prog)
    assert all(n.op == KERNEL_OP for n in low.kernels)
    assert len(launches(prog)) == len(low.kernels)
    x = random_inputs(prog, 7, -0.5, 0.5)
    _same(run_reference(low, x), run_reference(prog, x))


@given(kernel_programs())
def test_random_program_lowering_is_exact(prog: object) -> None:
    low = lowered_graph(prog)  # type: ignore[arg-type]
    x = random_inputs(low, 3, 0.5, 1.5)  # positive: keeps div and rms_norm well conditioned
    with np.errstate(all="ignore"):
        a, b = run_reference(low, x), run_reference(prog, x)  # type: ignore[arg-type]
    for p, q in zip(a, b, strict=True):
        ok = np.isfinite(q)
        scale = max(float(np.max(np.abs(q[ok]))) if ok.any() else 1.0, 1e-300)
        assert float(np.max(np.abs(p[ok] - q[ok]), initial=0.0)) / scale <= 1e-9


@given(st.lists(st.tuples(st.integers(1, 300), st.integers(0, 20), st.integers(0, 20)),
                min_size=1, max_size=12), st.integers(16, 2000))
def test_plan_never_overlaps_live_buffers(spec: list[tuple[int, int, int]], limit: int) -> None:
    bufs = [Buffer(f"b{i}", size, min(a, b), max(a, b)) for i, (size, a, b) in enumerate(spec)]
    plan = plan_buffers(bufs, limit)
    assert plan.smem_floats <= limit or all(b.space == "ws" for b in bufs)
    for b in bufs:
        assert b.offset % ALIGN == 0
        assert b.offset + b.size <= (plan.smem_floats if b.space == "smem" else plan.ws_floats)
    for i, x in enumerate(bufs):
        for y in bufs[i + 1:]:
            if x.space == y.space and x.overlaps(y):
                assert x.offset + x.size <= y.offset or y.offset + y.size <= x.offset


@pytest.mark.parametrize("dt", ["f16", "bf16"])
@pytest.mark.parametrize(("lead", "m", "k", "n", "tiles"), [
    ((), 512, 256, 1024, (64, 128, 128)),       # 8 x 8 blocks of 64 x 128, k 128
    ((8,), 256, 1024, 512, (64, 128, 128)),     # a batched GEMM: 8 x 4 x 4 blocks
    ((), 512, 512, 960, (64, 64, 128)),         # 960 columns: tiles of 64
])
def test_large_16_bit_products_lower_to_warpgroup_mma_tiles(
        lead: tuple[int, ...], m: int, k: int, n: int, tiles: tuple[int, int, int], dt: str) -> None:
    """A product of many rows (fp16 or bf16) lowers to the tiles warpgroup MMA runs (one wave
    or more of them, the tuner's wgmma schedule applies), its row tiles on grid x (the blocks
    launched together share W's column tile), and the lowering still computes the product."""
    import mirage_formal as mf
    from mirage_formal.codegen.schedule import wgmma_threads

    g = mf.Graph()
    x = g.input((*lead, m, k), dt, "X")
    w = g.input((*lead, k, n), dt, "W")
    g.output(g.matmul(x, w))
    prog = g.build()
    (la,) = launches(prog)
    bg = la.graph
    (mm,) = [x for x in bg.nodes if x.op == "matmul"]
    assert (mm.shape[-2], mm.shape[-1], mm.src[0].shape[-1]) == tiles
    assert wgmma_threads(bg) == 2 * tiles[0] == bg.threads
    assert bg.grid[:2] == (m // tiles[0], n // tiles[1])
    a_tile, b_tile = mm.src
    assert a_tile.attr("imap")[0] == len(lead) and b_tile.attr("imap")[1] == len(lead) + 1
    xs = random_inputs(prog, 5, -0.5, 0.5)
    _same(run_reference(lowered_graph(prog), xs), run_reference(prog, xs))


def test_small_or_mixed_products_keep_the_narrow_column_tiles() -> None:
    """Few rows (a weight stream), too few wgmma blocks, too few multiply-adds per element
    moved (attention's P·V at b=8), or operands of two types: the narrow-tile rule."""
    import mirage_formal as mf

    for shape_x, shape_w, dt in (((16, 4096), (4096, 4096), "f16"),
                                 ((128, 512), (512, 256), "f16"),
                                 ((16, 256, 4096), (16, 4096, 64), "bf16"),
                                 ((512, 256), (256, 1024), "f32")):
        g = mf.Graph()
        x = g.input(shape_x, dt, "X")
        w = g.input(shape_w, dt, "W")
        g.output(g.matmul(x, w))
        (la,) = launches(g.build())
        (mm,) = [x for x in la.graph.nodes if x.op == "matmul"]
        assert mm.shape[-1] <= 64 and mm.src[0].shape[-1] <= 64


#: (activations, weight, dtype, blocks reading each tile of B, rows of A in a block): B
#: broadcast along the activations' batch dimensions
SHARED_B_CASES = [
    ((8, 1, 1, 4096), (4096, 11008), "f16", 1, 8),   # a linear layer at decode shapes, batch 8
    ((8, 1, 1, 4096), (32, 4096, 128), "f16", 1, 8),  # per-head projections: grid z over heads
    ((8, 4, 4096), (4096, 1024), "bf16", 1, 32),      # 8 x 4 = 32 rows in one block
    ((16, 8, 512), (512, 256), "f16", 2, 64),         # 128 rows: two parts of 64
    ((12, 16, 128), (1, 128, 64), "f32", 3, 64),      # B's batch of size 1: three parts
]


@pytest.mark.parametrize(("xs", "ws", "dt", "readers", "rows"), SHARED_B_CASES)
def test_products_with_a_shared_weight_read_each_weight_tile_once_a_part(
        xs: tuple[int, ...], ws: tuple[int, ...], dt: str, readers: int, rows: int) -> None:
    """A product whose B is broadcast along batch dimensions of the output keeps those
    dimensions whole in each block (or in as few parts as keep 64 rows a block), so each of
    B's tiles is read by one block per part, not one per batch element; still exact."""
    import math

    prog = product_program(xs, ws, dt)
    (la,) = launches(prog)
    bg = la.graph
    (mm,) = [n for n in bg.nodes if n.op == "matmul"]
    a_tile, b_tile = mm.src
    assert math.prod(s for s, m in zip(bg.grid, b_tile.attr("imap"), strict=True) if m == -1) == readers
    assert math.prod(a_tile.shape[:-1]) == rows
    xin = random_inputs(prog, 11, -0.5, 0.5)
    _same(run_reference(lowered_graph(prog), xin), run_reference(prog, xin))


def test_products_with_too_many_shared_rows_keep_the_batch_on_the_grid() -> None:
    """Past 64 rows in one block and no divisor that fits (7 x 16 rows), or rows that alone
    exceed a tile: grid z takes the batch dimension as before (B read once per element)."""
    for xs, ws in (((7, 16, 128), (128, 64)), ((2, 128, 256), (256, 64))):
        prog = product_program(xs, ws, "f16")
        (la,) = launches(prog)
        assert la.graph.grid[2] == xs[0]
        xin = random_inputs(prog, 2, -0.5, 0.5)
        _same(run_reference(lowered_graph(prog), xin), run_reference(prog, xin))


@pytest.mark.parametrize(("a_shape", "b_shape"), [
    ((12, 197, 64), (12, 64, 197)),    # ViT-Base's Q·K: 197 rows and columns, prime
    ((12, 197, 197), (12, 197, 64)),   # its P·V: a prime contraction
    ((394, 96), (96, 131)),            # 2 x 197 rows, 131 columns
    ((4, 521), (521, 48)),             # a prime contraction above 256: one k tile
])
def test_prime_sizes_lower_to_tiles_of_at_least_16(a_shape: tuple[int, ...],
                                                   b_shape: tuple[int, ...]) -> None:
    """A product's tile sides are divisors of its sizes; where a size has no divisor from 16 to
    64 (a prime), the tile takes its smallest divisor of at least 16 (up to 256) rather than 1
    (a contraction without one: all of it, up to 1024), so no block computes a single dot
    product or loops over k one element at a time. The lowering still computes the product."""
    import mirage_formal as mf

    g = mf.Graph()
    g.output(g.matmul(g.input(a_shape, "f16", "A"), g.input(b_shape, "f16", "B")))
    prog = g.build()
    (la,) = launches(prog)
    bg = la.graph
    (it_a, it_b) = [n for n in bg.nodes if n.op == "iter"]
    tile_m, tile_k = it_a.shape[-2], it_a.shape[-1]
    tile_n = it_b.shape[-1]
    for side, size in ((tile_m, a_shape[-2]), (tile_k, a_shape[-1]), (tile_n, b_shape[-1])):
        assert size % side == 0 and side >= min(16, size)
    assert tile_k == a_shape[-1] or tile_k <= 256
    x = random_inputs(prog, 5, -0.5, 0.5)
    _same(run_reference(lowered_graph(prog), x), run_reference(prog, x))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 600), st.integers(1, 1100), st.integers(1, 600))
def test_product_tiles_divide_and_are_never_needlessly_thin(m: int, k: int, n: int) -> None:
    """For any sizes (primes included), a lowered product's tile sides divide their
    dimensions; a side under 16 (or under the size) happens only when no divisor from 16 to
    256 exists (a contraction up to 1024 without one is whole)."""
    import mirage_formal as mf

    g = mf.Graph()
    g.output(g.matmul(g.input((m, k), "f32", "A"), g.input((k, n), "f32", "B")))
    (la,) = launches(g.build())
    it_a, it_b = [x for x in la.graph.nodes if x.op == "iter"]
    sides = {"m": (it_a.shape[-2], m), "k": (it_a.shape[-1], k), "n": (it_b.shape[-1], n)}
    for axis, (side, size) in sides.items():
        assert size % side == 0, axis
        if side < min(16, size):
            assert not any(size % d == 0 for d in range(16, min(size, 256) + 1)), axis
            assert axis != "k" or size > 1024


@pytest.mark.parametrize(("lead", "m", "k", "n", "tiles"), [
    ((1,), 197, 768, 2304, (197, 128, 128)),   # ViT-Base's q/k/v projection: 4 bands x 18
    ((1,), 197, 3072, 768, (197, 64, 128)),    # its MLP's down projection: 4 bands x 12
    ((), 257, 1024, 4096, (257, 128, 128)),    # ViT-L's MLP up projection: 5 bands x 32
    # its down projection: 5 bands x 8 of 128 columns would leave most SMs idle; 5 x 16 of 64
    ((), 257, 4096, 1024, (257, 64, 128)),
])
def test_ragged_rows_lower_to_warpgroup_tiles_the_tuner_refines(
        lead: tuple[int, ...], m: int, k: int, n: int, tiles: tuple[int, int, int]) -> None:
    """A product of more than 64 rows that no tile side divides (a prime token count) keeps
    all its rows in each block with warpgroup column and k tiles; the tuner's refined
    candidates then include 64-row bands run as warpgroup MMAs, and the lowering is exact."""
    import mirage_formal as mf
    from mirage_formal.codegen.refine import refined
    from mirage_formal.codegen.schedule import wgmma_threads
    from mirage_formal.codegen.tuning_rules import candidate_schedules

    g = mf.Graph()
    g.output(g.matmul(g.input((*lead, m, k), "f16", "X"), g.input((k, n), "f16", "W")))
    prog = g.build()
    (la,) = launches(prog)
    bg = la.graph
    (mm,) = [x for x in bg.nodes if x.op == "matmul"]
    assert (mm.shape[-2], mm.shape[-1], mm.src[0].shape[-1]) == tiles
    assert wgmma_threads(bg) is None  # (all the rows: no warpgroup's product)
    banded = [c for c in candidate_schedules(bg) if c.wgmma and c.refine_rows == 64]
    assert banded
    assert wgmma_threads(refined(bg, banded[0].refine_dim, 64).graph) == banded[0].threads
    xs = random_inputs(prog, 5, -0.5, 0.5)
    _same(run_reference(lowered_graph(prog), xs), run_reference(prog, xs))


def test_ragged_rows_of_too_few_bands_or_multiply_adds_keep_the_narrow_tiles() -> None:
    """Ragged rows with too few bands of blocks (197 x 512 outputs: 4 x 8 of 64) or too few
    multiply-adds per element moved (k 128) stay on the narrow-tile rule."""
    import mirage_formal as mf

    for m, k, n in ((197, 768, 256), (197, 128, 4096)):
        g = mf.Graph()
        g.output(g.matmul(g.input((m, k), "f16", "X"), g.input((k, n), "f16", "W")))
        (la,) = launches(g.build())
        (mm,) = [x for x in la.graph.nodes if x.op == "matmul"]
        assert mm.shape[-1] <= 64 and mm.src[0].shape[-1] <= 64
