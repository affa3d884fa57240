"""The TMA ring (Schedule.tma_ring) without a GPU: which kernels take it, what their source
holds (a producer warp, mbarriers, no block-wide barrier after the producer leaves, no
cp.async), that they compile for sm_90, that the shared-memory places the printed addresses
give each tile element are where the copy engine's 128-byte swizzle puts it, the plan's
alignment of the ring, and the tuner's trials of it."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from graph_strategies import fold_loop_program, matmul_loop_program, tma_ring_cases
from hypothesis import given, settings
from hypothesis import strategies as st

import mirage_formal as mf
from mirage_formal import workloads
from mirage_formal.codegen import Schedule, compile_graph, emit_graph, launches
from mirage_formal.codegen.barriers import with_barriers
from mirage_formal.codegen.layout import KernelLayout
from mirage_formal.codegen.plan import Buffer, plan_buffers
from mirage_formal.codegen.print_combine import CLUSTER_COMBINE_BARRIERS
from mirage_formal.codegen.tma import BOX_COLS, box_rows
from mirage_formal.codegen.tuning_rules import candidate_schedules, half_warps, refinements
from mirage_formal.ir.dtypes import DType


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cubin")


@pytest.mark.parametrize("case", tma_ring_cases(), ids=lambda c: c[0])
def test_tma_ring_kernels_hand_their_stages_over_through_mbarriers(case: tuple, cache: Path) -> None:
    """Every case's ring kernels take the TMA ring: one tensor map per ring tile, a producer
    warp beyond the schedule's threads issuing one 2D copy per 64-column box, consumers that
    wait on the full barriers and give stages back on the empty ones, and after the producer's
    exit only named barriers of the consumers; each compiles for sm_90."""
    _, prog, sched = case
    cg = compile_graph(prog, opts=sched, arch="sm_90", cache=cache, load=False)
    ring_kernels = [k for k in cg.kernels if k.tensor_maps]
    assert ring_kernels
    for k in ring_kernels:
        src = k.source
        T = sched.threads or next(la.graph.threads for la in cg.launches if la.graph is not None)
        assert k.threads == T + 32
        assert f"if (threadIdx.x >= {T}) {{" in src
        consumers = src[src.index("    return;\n  }"):]
        assert "__syncthreads" not in consumers and "cp_async" not in src
        assert "mf::mbar_wait(&mf_full[mf_s], mf_ph);" in consumers
        assert "mf::mbar_arrive(&mf_empty[mf_s]);" in consumers
        # the stage's announced bytes are those of its copies (a box: its rows x 128 bytes)
        copies = re.findall(r"mf::tma_load_2d<(?:true|false)>\([^;]*&tm(\d+),", src)
        nbytes = sum(k.tensor_maps[int(j)].box_rows * 2 * BOX_COLS for j in copies)
        assert f"mf::mbar_expect_tx(&mf_full[s], {nbytes});" in src
        assert {int(j) for j in copies} == set(range(len(k.tensor_maps)))


def test_tma_ring_copies_one_box_per_64_columns_of_each_tile(cache: Path) -> None:
    """rmsnorm b=8's fused kernel: X's 16 x 128 tile is two boxes, W's 128 x 64 tile one; the
    stage's byte count is both tiles'; the maps describe X and W with boxes of their rows."""
    prog = workloads.handwritten("rmsnorm", 8)
    sched = Schedule(tma_ring=True, dense_rows=True, async_stage_bytes=200 * 1024)
    _, _, (k,) = emit_graph(prog, opts=sched)
    x_map, w_map = k.tensor_maps
    assert (x_map.input, x_map.rows, x_map.cols, x_map.box_rows) == (0, 16, 4096, 16)
    assert (w_map.input, w_map.rows, w_map.cols, w_map.box_rows) == (1, 4096, 6144, 128)
    assert x_map.dtype is DType.F16
    copies = re.findall(r"mf::tma_load_2d<(?:true|false)>\((\w+) [^;]*&tm(\d)", k.source)
    assert [c[1] for c in copies] == ["1", "0", "0"]  # (the weight stream first)
    assert "mf::mbar_expect_tx(&mf_full[s], 20480);" in k.source


def test_a_tile_taller_than_a_box_is_copied_in_equal_boxes(cache: Path) -> None:
    """A 384-row weight tile (a box holds at most 256 rows) is copied as two boxes of 192
    rows, the second 192 rows further in the input and 192 x 128 bytes further in the stage
    (where one taller box would have put those rows); its map's boxes have 192 rows; the
    stage's byte count is the whole tile's; it compiles for sm_90. A tile no multiple of 8
    rows up to 256 divides gets no ring."""
    assert [box_rows(r) for r in (2, 256, 384, 512, 520, 1000, 260)] == [2, 256, 192, 256, 104, 200, None]
    prog = matmul_loop_program(16, 384, 64, 4)
    sched = Schedule(tma_ring=True, dense_rows=True, min_blocks=1, async_stage_bytes=200 * 1024)
    cg = compile_graph(prog, opts=sched, arch="sm_90", cache=cache, load=False)
    (k,) = cg.kernels
    w_map = next(m for m in k.tensor_maps if m.input == 1)
    assert (w_map.rows, w_map.box_rows) == (384 * 4, 192)
    j = k.tensor_maps.index(w_map)
    copies = re.findall(rf"mf::tma_load_2d<(?:true|false)>\((\w+) \+ s \* (\d+)(?: \+ (\d+))?, "
                        rf"&tm{j}, ([^,]+), ([^,]+),", k.source)
    assert [(c[2] or "0", c[4]) for c in copies] == [("0", "it*384"), (str(192 * 64), "it*384 + 192")]
    assert f"mf::mbar_expect_tx(&mf_full[s], {(384 * 64 + 16 * 384) * 2});" in k.source


def _two_slice_matmul_program() -> mf.KernelGraph:
    """A batched product whose blocks each take both slices of the batch: tiles (2, 16, 64)
    and (2, 64, 64), not one 2-D box of a 2-D view of the inputs."""
    g = mf.Graph()
    x = g.input((2, 16, 512), "f16", "X")
    w = g.input((2, 512, 128), "f16", "W")
    k = g.kernel([x, w], grid=(2, 1, 1), forloop=8)
    a = k.iter(x, imap=(-1, -1, -1), fmap=2)
    b = k.iter(w, imap=(2, -1, -1), fmap=1)
    k.output(k.accum(k.op("matmul", a, b), kind="sum"), omap=(2, -1, -1))
    (y,) = k.build()
    g.output(y)
    return g.build()


@pytest.mark.parametrize("prog, sched", [
    (matmul_loop_program(16, 64, 64, 8), Schedule(tma_ring=True)),  # (no dense rows)
    (_two_slice_matmul_program(), Schedule(tma_ring=True, dense_rows=True)),
    (matmul_loop_program(16, 64, 32, 8), Schedule(tma_ring=True, dense_rows=True)),  # 32 columns
], ids=["no dense rows", "two slices a tile", "narrow"])
def test_tma_ring_falls_back_where_it_does_not_apply(prog: object, sched: Schedule) -> None:
    """Where the TMA ring does not apply (no swizzled dense rows, a tile of two slices of a
    batched input, a narrow tile), the kernel prints as without it."""
    src, _, kernels = emit_graph(prog, opts=sched)  # type: ignore[arg-type]
    plain, _, _ = emit_graph(prog, opts=replace(sched, tma_ring=False))  # type: ignore[arg-type]
    assert not any(k.tensor_maps for k in kernels)
    assert src == plain


_COPY = re.compile(r"mf::tma_load_2d<(?:true|false)>\((\w+) \+ s \* (\d+)(?: \+ (\d+))?, &tm(\d+), "
                   r"([^,]+), ([^,]+), &mf_full\[s\]")


def _tile_origin(bg: object, n: object, block: tuple[int, int, int], it: int) -> list[int]:
    """Where iterator tile ``n`` starts in its input for ``block`` at loop iteration ``it``,
    from the μGraph's semantics alone: each grid axis a mapped to dimension d (imap) moves it
    by block[a] * (extent of d / grid[a]), the for-loop dimension (fmap) by it * the tile's
    extent."""
    shape = bg.inputs[n.attr("input")][0]  # type: ignore[attr-defined]
    imap, fmap = n.attr("imap"), n.attr("fmap")  # type: ignore[attr-defined]
    return [sum(block[a] * (shape[d] // bg.grid[a]) for a in range(3) if imap[a] == d)  # type: ignore[attr-defined]
            + (it * n.shape[d] if fmap == d else 0) for d in range(len(shape))]  # type: ignore[attr-defined]


@pytest.mark.parametrize("case", tma_ring_cases(), ids=lambda c: c[0])
def test_each_copy_lands_where_the_consumers_read(case: tuple) -> None:
    """A CPU model of the copy engine against the printed kernel, for every case (2-D tiles,
    several boxes a row, tiles taller than a box, one slice of a batched input, split loops):
    for some blocks and iterations, each printed copy (its stage offset, tensor map and
    coordinates, the C expressions evaluated) writes its box row by row with the 128-byte
    swizzle; every element of every ring tile, located in its input from the μGraph's own
    imap/fmap semantics, must land at the address the consumers read it from
    (KernelLayout.addr), and every such address is written exactly once."""
    _, prog, sched = case
    cg = compile_graph(prog, opts=sched, arch="sm_90", load=False)
    for la, k in zip(cg.launches, cg.kernels, strict=True):
        if not k.tensor_maps:
            continue
        bg = la.graph
        lay = KernelLayout(bg, k.name, 227 * 1024, k.schedule)
        lay.plan()  # (names the buffers)
        assert lay.tma
        raw = sorted(lay.raw, key=lay.ids.__getitem__)
        copies = _COPY.findall(k.source)
        assert copies
        split = k.schedule.split
        for block in {(0, 0, 0), tuple(g - 1 for g in bg.grid)}:
            for part in range(split):
                for it_local in (0, lay.FL - 1):
                    env = {"bx": block[0], "by": block[1], "bz": block[2], "it": it_local,
                           "itb": part * lay.FL}
                    written: dict[tuple[str, int], tuple[int, int, int]] = {}
                    for buf, _stride, off, j, col, row in copies:
                        spec = k.tensor_maps[int(j)]
                        c0, r0 = eval(col, {}, env), eval(row, {}, env)  # (C arithmetic)
                        for i in range(spec.box_rows):
                            for cc in range(BOX_COLS):
                                at = int(off or 0) + _tma_offset(i, cc, spec.box_rows)
                                assert (buf, at) not in written
                                written[buf, at] = (int(j), r0 + i, c0 + cc)
                    for j, n in enumerate(raw):
                        shape = bg.inputs[n.attr("input")][0]
                        origin = _tile_origin(bg, n, block, part * lay.FL + it_local)
                        lead = 0
                        for d in range(len(shape) - 2):
                            lead = (lead + origin[d]) * shape[d + 1]
                        names = ["0"] * (len(n.shape) - 2) + ["R", "C"]
                        expr = compile(lay.addr(n, names), "<addr>", "eval")
                        for r in range(n.shape[-2]):
                            for c in range(n.shape[-1]):
                                at = eval(expr, {}, {"R": r, "C": c})
                                want = (j, lead + origin[-2] + r, origin[-1] + c)
                                assert written.get((lay.buf[n], at)) == want, (n.shape, r, c)


def _tma_offset(r: int, c: int, rows: int) -> int:
    """Halves from a stage's start to element (r, c) as the copy engine writes a tile of
    ``rows`` rows in 64-column boxes with the 128-byte swizzle: box after box (each padded to
    whole 1024-byte swizzle periods), 128 bytes a row, the 16-byte chunk k of row r at
    k ^ (r % 8) (the address bits 4-6 XORed with bits 7-9 of a 1024-aligned box)."""
    box_halves = -(-rows // 8) * 8 * 64
    box, cc = divmod(c, 64)
    return box * box_halves + r * 64 + (((cc // 8) ^ (r % 8)) * 8) + cc % 8


@settings(max_examples=30, deadline=None)
@given(rows=st.sampled_from([2, 8, 12, 16, 64, 128]), boxes=st.integers(1, 4))
def test_printed_addresses_are_where_the_copy_engine_writes(rows: int, boxes: int) -> None:
    """Every element of a TMA ring tile: the printed address (KernelLayout.addr, the C
    expression evaluated) is where the 2D tensor-map copy with the 128-byte swizzle puts it."""
    cols = 64 * boxes
    prog = matmul_loop_program(rows, cols, 64, 3)
    (la,) = launches(prog, 128)
    lay = KernelLayout(la.graph, "k", 227 * 1024,
                       Schedule(tma_ring=True, dense_rows=True, async_stage_bytes=200 * 1024))
    assert lay.tma
    a = next(n for n in lay.raw if n.shape == (rows, cols))
    expr = lay.addr(a, ["R", "C"])
    for r in range(rows):
        got = [eval(expr, {"R": r, "C": c}) for c in range(cols)]
        assert got == [_tma_offset(r, c, rows) for c in range(cols)]
    assert lay.stage_halves(a) == boxes * -(-rows // 8) * 8 * 64


def test_the_plan_starts_aligned_buffers_on_their_alignment() -> None:
    """A buffer with a larger alignment (a TMA ring's, 1024 bytes) gets an offset that is a
    multiple of it, after buffers that overlap it in time."""
    small = Buffer("a", 100, 0, 5)
    ring = Buffer("b", 60, 0, 5, align=256)
    late = Buffer("c", 40, 6, 9)
    plan = plan_buffers([small, ring, late], 10_000)
    assert ring.offset % 256 == 0
    assert not (small.offset < ring.offset + 60 and ring.offset < small.offset + 100)
    assert plan.smem_floats >= ring.offset + 60


def test_a_loop_body_that_only_reads_needs_no_closing_barrier() -> None:
    """with_barriers(close_if_written): a barrier after the body only if a step writes
    memory."""
    ext = {"t": ("smem", 0, 64), "u": ("smem", 64, 128)}
    reads = [(["x = t[0];"], frozenset({"t"}))]
    writes = [(["u[0] = 1.f;"], frozenset[str]())]
    assert with_barriers(reads, ext, "", close=False, close_if_written=True) == ["x = t[0];"]
    assert with_barriers(reads + writes, ext, "", close=False,
                         close_if_written=True)[-1] == "__syncthreads();"


def test_the_tuner_tries_the_tma_ring_first_on_a_streamed_winner() -> None:
    """The second round of a streamed tensor-core winner opens with the TMA ring: alone, with
    outputs from the registers and the fold from the fragments, and on half the warps with
    twice the columns, each with min_blocks=1, the last also with the fold on the tensor
    cores; a gemv winner the same on tensor cores (with
    two accumulator chains) first, then as a gemv; a winner
    whose tiles a tensor map cannot copy gets none; a TMA ring winner gets its other depths
    with room for them, a cp.async ring winner its ring 3 deep."""
    (la,) = launches(workloads.handwritten("rmsnorm", 8), 128)
    best = Schedule(threads=256, dense_rows=True, mma_kpair=True, evict_first=True)
    first = refinements(best, [], la.graph)[:3]
    assert all(s.tma_ring and s.min_blocks == 1 and s.dense_rows for s in first)
    assert first[1].reg_epilogue and first[1].fold_fragments
    assert (first[2].threads, first[2].warp_n) == (128, 2)
    # then the last with the fold on the tensor cores
    assert refinements(best, [], la.graph)[3] == replace(first[2], fold_mma=True)
    (lg,) = launches(workloads.handwritten("rmsnorm", 1), 128)
    gemv = refinements(Schedule(threads=256, gemv=True), [], lg.graph)[:5]
    assert all(s.tma_ring for s in gemv) and [s.gemv for s in gemv] == [False, False, False, False, True]
    assert gemv[2].reg_epilogue and (gemv[2].threads, gemv[2].warp_n) == (128, 2)
    assert gemv[3] == replace(gemv[2], fold_mma=True)
    assert [s.mma_kpair for s in gemv] == [True, True, True, True, False]
    (lb,) = launches(matmul_loop_program(16, 64, 32, 8), 128)
    assert not any(s.tma_ring for s in refinements(Schedule(), [], lb.graph))
    # a TMA ring winner: the same ring at the other depths, each with room for its stages
    # (at least 150 KB of them), under a small cap too
    for won in (first[2], replace(first[2], async_stage_bytes=48 * 1024)):
        room = max(won.async_stage_bytes, 150 * 1024)
        depths = [s.async_stages for s in refinements(won, [], la.graph)
                  if s.tma_ring and s == replace(won, async_stages=s.async_stages,
                                                 async_stage_bytes=room)]
        assert sorted(depths) == [2, 3, 6]
    # a cp.async ring winner: the same ring 3 deep (counted), once
    ring = Schedule(threads=256, dense_rows=True, mma_kpair=True, evict_first=True)
    assert sum(s == replace(ring, async_stages=3) for s in refinements(ring, [], la.graph)) == 1
    three = replace(ring, async_stages=3)
    assert three not in refinements(three, [], la.graph)


def test_a_small_grid_gets_the_tma_ring_at_the_split_that_fills_a_wave(cache: Path) -> None:
    """A streamed loop on a grid of at most half the SMs gets a first-round TMA candidate at
    the smallest split that reaches a wave (its partials summed by the global combine), beside
    the unsplit one; each block's producer copies its own iterations; it compiles for sm_90.
    A grid of more than half the SMs gets no split one."""
    prog = matmul_loop_program(16, 64, 64, 16)  # (2 blocks: 8 SMs reach a wave at split 4)
    (la,) = launches(prog, 128)
    tma = [s for s in candidate_schedules(la.graph, sm_count=8) if s.tma_ring]
    assert [s.split for s in tma] == [1, 4]
    assert not tma[1].cluster_combine
    cg = compile_graph(prog, opts=tma[1], arch="sm_90", cache=cache, load=False)
    (k,) = cg.kernels
    assert k.tensor_maps and k.grid == (8, 1, 1)
    assert "const int itb = mf_split * 4;" in k.source and "(itb + it)*64" in k.source
    assert "mf::ticket_acq_rel" in k.source  # (the global combine)
    assert [s.split for s in candidate_schedules(la.graph, sm_count=3) if s.tma_ring] == [1]


def test_a_register_epilogue_finishes_fragment_folds_in_registers() -> None:
    """rmsnorm's fused kernel with register outputs and the fold from the A fragments: each
    warp finishes its rows' rms from its own partial sums (quad shuffles, then the square
    root) beside the stores, and the fold's shared tile is never zeroed, written or read; in
    a TMA ring kernel nothing after the loop touches shared memory, so no barrier follows it.
    With k slices (partial sums spread over warps) the fold still goes through its tile."""
    prog = workloads.handwritten("rmsnorm", 8)
    (la,) = launches(prog, 128)
    sched = Schedule(threads=128, warp_n=2, dense_rows=True, mma_kpair=True, fold_fragments=True,
                     reg_epilogue=True, tma_ring=True, min_blocks=1, async_stage_bytes=200 * 1024)
    lay = KernelLayout(la.graph, "k", 227 * 1024, sched)
    (fold,) = lay.register_folds()
    src = emit_graph(prog, opts=sched)[0]
    tile = f"b{lay.ids[fold]}"
    assert not re.search(rf"\b{tile}\[", src)
    assert f"fq{lay.ids[fold]}[wm][e >> 1]" in src and "sqrtf(s * " in src
    after = src[src.index("mf_ph ^= 1;"):]
    assert "consumer_sync" not in after and "__syncthreads" not in after
    sliced = replace(sched, tma_ring=False, mma_kslice=2, threads=256, warp_n=0)
    assert not KernelLayout(la.graph, "k", 227 * 1024, sliced).register_folds()
    assert re.search(rf"\b{tile}\[", emit_graph(prog, opts=sliced)[0])


def test_touches_finds_buffer_names_only() -> None:
    """barriers.touches: printed code that names a buffer touches memory; code that names
    only registers and outputs does not."""
    from mirage_formal.codegen.barriers import touches

    ext = {"b3": ("smem", 0, 64), "mf_red": ("red", 0, 1)}
    assert touches([(["x = b3[i];"], frozenset[str]())], ext)
    assert touches([(["mf_red[w] = s;"], frozenset[str]())], ext)
    assert not touches([(["out0[i] = ab3 + b33;"], frozenset[str]())], ext)
    assert not touches([(["x = b3[i];"], frozenset[str]())], {})


@pytest.mark.parametrize("rows", [16, 24, 32, 48])
def test_half_warp_tma_schedules_keep_every_product_in_registers(rows: int) -> None:
    """The TMA schedules on half the warps (the first-round candidate and the second round's
    trial) give each warp at most one warp tile of every product, so the accumulators stay in
    registers through the loop: a product of more than 16 rows takes 16-row tiles in pairs
    (``warp_m``) where ``warp_n=2`` alone would leave more warp tiles than warps. Where no
    blocking does that (48 rows: three row tiles), the candidate keeps all the warps."""
    prog = fold_loop_program(rows, 64, 4, n=64)
    (la,) = launches(prog, 128)
    bg = la.graph
    half = half_warps(bg, 256)
    if rows == 48:
        assert half is None
        (tma,) = [s for s in candidate_schedules(bg) if s.tma_ring]
        assert tma.warp_n == 0 and tma.threads == 256
        return
    assert half is not None and half.threads == 128 and half.warp_n == 2
    assert half.warp_m == (0 if rows <= 16 else 2)
    best = Schedule(threads=256, dense_rows=True, mma_kpair=True, evict_first=True)
    trial = next(s for s in refinements(best, [], bg) if s.tma_ring and s.threads == 128)
    first = next(s for s in candidate_schedules(bg) if s.tma_ring)
    for sched in (trial, first):
        assert (sched.warp_m, sched.warp_n) == (half.warp_m, 2)
        lay = KernelLayout(bg, "k", 227 * 1024, sched)
        (mm,) = [n for n in bg.nodes if n.op == "matmul"]
        assert mm in lay.reg_acc and lay.static_warp_tiles(mm)


@pytest.mark.parametrize("split", [2, 4])
def test_a_clustered_split_keeps_the_ring_and_its_producer_passes_the_cluster_barriers(
        split: int, cache: Path) -> None:
    """A split combined through the cluster keeps the TMA ring: the producer warp, done with
    its copies, passes the cluster combine's barriers before it leaves (they count every
    thread of the cluster), as many as the consumers pass; it compiles for sm_90."""
    prog = matmul_loop_program(16, 64, 64, 8)
    sched = Schedule(tma_ring=True, dense_rows=True, split=split, cluster_combine=True)
    cg = compile_graph(prog, opts=sched, arch="sm_90", cache=cache, load=False)
    (k,) = cg.kernels
    assert k.tensor_maps and f"__cluster_dims__({split}, 1, 1)" in k.source
    producer, consumers = k.source.split("    return;\n  }\n", 1)
    assert "mf::tma_load_2d" in producer and "mf::tma_load_2d" not in consumers
    assert producer.count("mf::cluster_sync();") == CLUSTER_COMBINE_BARRIERS
    assert consumers.count("mf::cluster_sync();") == CLUSTER_COMBINE_BARRIERS
    assert "mf_ticket" not in k.source
