"""Warpgroup MMA products (Schedule.wgmma): a block's one product of at least 64 rows, both
operands streamed through the TMA ring, multiplied by ``wgmma`` straight from the ring.

- on any machine: the tuner proposes it exactly where it applies (:func:`wgmma_threads`),
  first in the first round and as a second-round trial; the kernel it prints issues one
  m64n64k16 per 64-column box of B and k-step, no ldmatrix and no mma.sync; a kernel it does
  not apply to prints as without it; every such kernel compiles (for sm_90a, which
  ``compile_cubin`` picks from the source);
- on the GPU: the kernels validate against the float64 program at several shapes, with an
  epilogue op, a bias operand, one slice of a batched product a block, and with the loop
  split over blocks (global combine); a block of ragged rows (ViT's 197 tokens) refined
  into 64-row bands, each a warpgroup's product.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from graph_strategies import gated_program, gemm_program

import mirage_formal as mf
from mirage_formal.codegen import candidate_schedules, compile_graph, gpu_available, launches
from mirage_formal.codegen.nvrtc import WGMMA_MARK, feature_arch
from mirage_formal.codegen.schedule import Schedule, wgmma_threads
from mirage_formal.codegen.tuning_rules import opening_schedule, refinements
from mirage_formal.codegen.validate import validate
from mirage_formal.ir.graph import KernelGraph
from mirage_formal.ir.text import parse_text


def batched_gemm_program(batch: int = 2, m: int = 64, k: int = 128, n: int = 128,
                         forloop: int = 4, gm: int = 2, gn: int = 2) -> KernelGraph:
    """X (batch, gm*m, k*F) · W (batch, k*F, gn*n), one slice of both a block (grid batch x
    gm x gn), as the search builds a batched GEMM."""
    return parse_text(
        "ugraph {\n"
        f"  %0 = input() {{name='X'}} : f16[{batch}, {gm * m}, {k * forloop}]\n"
        f"  %1 = input() {{name='W'}} : f16[{batch}, {k * forloop}, {gn * n}]\n"
        f"  %2 = kernel(%0, %1) {{forloop={forloop}, grid=({batch}, {gm}, {gn}), threads=128}} {{\n"
        f"    %b0 = iter() {{fmap=2, imap=(0, 1, -1), input=0}} : f16[1, {m}, {k}]\n"
        f"    %b1 = iter() {{fmap=1, imap=(0, -1, 2), input=1}} : f16[1, {k}, {n}]\n"
        f"    %b2 = matmul(%b0, %b1) : f16[1, {m}, {n}]\n"
        f"    %b3 = accum(%b2) {{fold=None, kind='sum'}} : f16[1, {m}, {n}]\n"
        "    save %b3 {omap=(0, 1, 2)}\n"
        "  }\n"
        f"  %3 = get(%2) {{index=0}} : f16[{batch}, {gm * m}, {gn * n}]\n"
        "  return %3\n"
        "}\n")


def _block(prog: KernelGraph):  # type: ignore[no-untyped-def]
    (la,) = launches(prog, 128)
    return la.graph


#: (m, k, n, forloop, gm, gn, epilogue): 1-4 warpgroups, 1-4 boxes of B, 1-2 boxes of A a stage
SHAPES = {
    "64x64x64": (64, 64, 64, 4, 1, 2, None),
    "128x64x128": (128, 64, 128, 6, 2, 2, None),
    "256x128x64": (256, 128, 64, 4, 1, 2, None),
    "64x128x256 relu": (64, 128, 256, 3, 2, 1, "relu"),
    "192x64x192 gelu": (192, 64, 192, 5, 1, 2, "gelu"),
}


def test_wgmma_is_proposed_exactly_where_it_applies() -> None:
    for name, (m, k, n, f, gm, gn, epi) in SHAPES.items():
        bg = _block(gemm_program(m, k, n, f, gm, gn, epi))
        assert wgmma_threads(bg) == 2 * m, name
        first = candidate_schedules(bg)
        assert first[1].wgmma and first[1].threads == 2 * m and first[1].tma_ring, name
        assert not first[1].mma_kpair and first[1].reg_epilogue
        # (the columns over two warpgroups in the second round, where each takes whole
        # 64-column boxes and 448 rows x 2 fit the block)
        two = n % 128 == 0 and 2 * m <= 448
        assert (wgmma_threads(bg, 2) == 4 * m) == two, name
        assert any(s.wgmma_cols == 2 and s.threads == 4 * m
                   for s in refinements(first[1], first[:2], bg)) == two, name
        # a cp.async winner's second round tries it too; a wgmma winner's keeps it in its
        # own trials (ring depths, L2 policies)
        assert any(s.wgmma for s in refinements(first[0], first[:1], bg)), name
        assert all(s.wgmma for s in refinements(first[1], first[:2], bg)[:3]), name
    # not: rows or columns off a multiple of 64, too many rows for the block, a fixed A tile,
    # no loop, two products
    assert wgmma_threads(_block(gemm_program(48, 64, 64, 4))) is None
    assert wgmma_threads(_block(gemm_program(64, 64, 96, 4))) is None
    assert wgmma_threads(_block(gemm_program(512, 64, 64, 4))) is None
    assert wgmma_threads(_block(gemm_program(64, 64, 64, 1))) is None
    g = mf.Graph()
    x = g.input((64, 64), "f16", "X")
    w = g.input((64 * 4, 128), "f16", "W")
    kern = g.kernel([x, w], grid=(2, 1, 1), forloop=4)
    a = kern.iter(x, imap=(-1, -1, -1), fmap=-1)
    b = kern.iter(w, imap=(1, -1, -1), fmap=0)
    kern.output(kern.accum(kern.op("matmul", a, b), kind="sum"), omap=(1, -1, -1))
    (y,) = kern.build()
    g.output(y)
    assert wgmma_threads(_block(g.build())) is None


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_wgmma_kernels_print_warpgroup_products_and_compile(name: str) -> None:
    m, k, n, f, gm, gn, epi = SHAPES[name]
    prog = gemm_program(m, k, n, f, gm, gn, epi)
    bg = _block(prog)
    scheds = [s for s in candidate_schedules(bg) if s.wgmma]
    two = wgmma_threads(bg, 2)
    for sched in scheds + ([replace(scheds[0], wgmma_cols=2, threads=two)] if two else []):
        (kern,) = compile_graph(prog, schedules={bg.key: sched}, arch="sm_90", load=False).kernels
        src = kern.source
        cols = n // sched.wgmma_cols  # (each warpgroup's)
        width = max(w for w in (64, 128, 256) if cols % w == 0)
        assert src.count(WGMMA_MARK) == 1 and f"<{width}>" in src and f"ks < {k // 16}" in src
        assert f"nb < {cols // width}" in src
        assert "mma_16816" not in src and "ldsm" not in src
        assert "wgmma_wait_all();" in src and "wgmma_fence();" in src
        assert feature_arch(src, "sm_90") == "sm_90a"
    assert feature_arch("mf::mma_16816(", "sm_90") == "sm_90"


def test_the_tuner_proposes_it_only_to_sm_90() -> None:
    """A GPU without warpgroup MMA (here sm_100, sm_80) never runs the schedules: their helpers
    trap, and a trap leaves the context unusable for the trials after it."""
    from mirage_formal.codegen.autotune import runs_here

    cands = candidate_schedules(_block(gemm_program(64, 64, 64, 4)))
    assert any(s.wgmma for s in runs_here(cands, "sm_90"))
    for arch in ("sm_100", "sm_80"):
        kept = runs_here(cands, arch)
        assert kept and not any(s.wgmma for s in kept)
        assert kept == [s for s in cands if not s.wgmma]


def test_kernels_wgmma_does_not_apply_to_print_as_without_it() -> None:
    """The field on a kernel whose ring the TMA path does not take (no dense rows) or whose
    thread count is not one warp per 16 rows prints the mma.sync kernel, no wgmma."""
    prog = gemm_program(64, 64, 64, 4)
    bg = _block(prog)
    for sched in (Schedule(wgmma=True, tma_ring=True, threads=128),
                  Schedule(wgmma=True, tma_ring=True, dense_rows=True, threads=256)):
        (kern,) = compile_graph(prog, schedules={bg.key: sched}, arch="sm_90", load=False).kernels
        assert WGMMA_MARK not in kern.source and "mma_16816" in kern.source


def test_a_small_grid_gets_split_candidates_through_global_memory_and_the_cluster() -> None:
    """Where the grid is at most half the SMs, the wgmma candidate comes again at the split
    that fills a wave, once with the global combine and once through the cluster; the
    clustered one keeps the warpgroup products and compiles for sm_90a."""
    prog = gemm_program(64, 64, 128, 8)
    bg = _block(prog)
    wg = [s for s in candidate_schedules(bg, sm_count=8) if s.wgmma and s.wgmma_cols == 1]
    assert [(s.split, s.cluster_combine) for s in wg] == [(1, False), (4, False), (4, True)]
    (kern,) = compile_graph(prog, schedules={bg.key: wg[2]}, arch="sm_90", load=False).kernels
    assert WGMMA_MARK in kern.source and "__cluster_dims__(4, 1, 1)" in kern.source
    assert kern.tensor_maps and feature_arch(kern.source, "sm_90") == "sm_90a"


def biased_gemm_program(m: int = 64, k: int = 128, n: int = 128, forloop: int = 8,
                        gm: int = 2, gn: int = 2) -> KernelGraph:
    """gelu(X·W + c) in one kernel, the bias row c through a plain mean of its loop-invariant
    tile (as the search builds an epilogue operand)."""
    return parse_text(
        "ugraph {\n"
        f"  %0 = input() {{name='X'}} : f16[{gm * m}, {k * forloop}]\n"
        f"  %1 = input() {{name='W'}} : f16[{k * forloop}, {gn * n}]\n"
        f"  %2 = input() {{name='C'}} : f16[{gn * n}]\n"
        f"  %3 = kernel(%0, %1, %2) {{forloop={forloop}, grid=({gn}, {gm}, 1), threads=128}} {{\n"
        f"    %b0 = iter() {{fmap=1, imap=(-1, 0, -1), input=0}} : f16[{m}, {k}]\n"
        f"    %b1 = iter() {{fmap=0, imap=(1, -1, -1), input=1}} : f16[{k}, {n}]\n"
        f"    %b2 = iter() {{fmap=-1, imap=(0, -1, -1), input=2}} : f16[{n}]\n"
        f"    %b3 = matmul(%b0, %b1) : f16[{m}, {n}]\n"
        f"    %b4 = accum(%b3) {{fold=None, kind='sum'}} : f16[{m}, {n}]\n"
        f"    %b5 = accum(%b2) {{fold=None, kind='mean'}} : f16[{n}]\n"
        f"    %b6 = add(%b4, %b5) : f16[{m}, {n}]\n"
        f"    %b7 = gelu(%b6) : f16[{m}, {n}]\n"
        "    save %b7 {omap=(1, 0, -1)}\n"
        "  }\n"
        f"  %4 = get(%3) {{index=0}} : f16[{gm * m}, {gn * n}]\n"
        "  return %4\n"
        "}\n")


def _wgmma_sources(prog: KernelGraph) -> list[str]:
    """The CUDA of ``prog``'s kernel under each of its wgmma candidates, compiled for sm_90."""
    bg = _block(prog)
    return [compile_graph(prog, schedules={bg.key: sched}, arch="sm_90", load=False).kernels[0].source
            for sched in candidate_schedules(bg) if sched.wgmma]


def test_one_slice_of_a_batched_product_takes_it() -> None:
    prog = batched_gemm_program()
    assert wgmma_threads(_block(prog)) == 128
    assert wgmma_threads(_block(batched_gemm_program(m=48))) is None
    for src in _wgmma_sources(prog):
        assert WGMMA_MARK in src and "mma_16816" not in src


def _validate_wgmma_candidates(prog: KernelGraph) -> None:
    """Every wgmma candidate of ``prog``'s kernel, and the first split 2 ways (global and
    cluster combine), against the float64 program on fresh random inputs."""
    bg = _block(prog)
    scheds = [s for s in candidate_schedules(bg) if s.wgmma]
    assert scheds
    for sched in [*scheds, *(replace(scheds[0], split=2, reg_epilogue=False, cluster_combine=c)
                             for c in (False, True))]:
        cg = compile_graph(prog, schedules={bg.key: sched})
        rep = validate(cg, low=-0.5, high=0.5, trials=2)
        assert rep.ok, f"{sched.short()}: {rep}"


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a GPU")
def test_a_batched_wgmma_kernel_validates() -> None:
    for prog in (batched_gemm_program(), batched_gemm_program(batch=3, m=128, k=64, n=64, forloop=6)):
        _validate_wgmma_candidates(prog)


def test_two_products_of_one_tile_take_it_within_the_accumulator_budget() -> None:
    """A gated MLP's two products (128 accumulators a thread at 128 columns each) run as
    warpgroup MMAs, each its own instruction stream; at 256 columns each (256 a thread) they
    do not."""
    prog = gated_program()
    assert wgmma_threads(_block(prog)) == 128
    assert wgmma_threads(_block(gated_program(n=256))) is None
    sources = _wgmma_sources(prog)
    assert sources
    for src in sources:
        assert src.count(WGMMA_MARK) == 2 and "mma_16816" not in src


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a GPU")
def test_a_gated_wgmma_kernel_validates() -> None:
    for prog in (gated_program(), gated_program(m=128, k=64, n=64, forloop=6, gm=1)):
        _validate_wgmma_candidates(prog)


def test_an_epilogue_operand_keeps_the_warpgroup_product() -> None:
    prog = biased_gemm_program()
    bg = _block(prog)
    scheds = [s for s in candidate_schedules(bg) if s.wgmma]
    assert scheds and wgmma_threads(bg) == 128
    for sched in scheds:
        (kern,) = compile_graph(prog, schedules={bg.key: sched}, arch="sm_90", load=False).kernels
        assert WGMMA_MARK in kern.source and "in2[" in kern.source


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a GPU")
def test_a_wgmma_kernel_with_an_epilogue_operand_validates() -> None:
    prog = biased_gemm_program()
    bg = _block(prog)
    for sched in [s for s in candidate_schedules(bg) if s.wgmma]:
        cg = compile_graph(prog, schedules={bg.key: sched})
        rep = validate(cg, low=-0.5, high=0.5, trials=2)
        assert rep.ok, f"{sched.short()}: {rep}"


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a GPU")
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_wgmma_kernels_validate(name: str) -> None:
    """Every wgmma candidate (with register outputs), and the same with the loop split over 2
    blocks where it can be (the split candidate's path: partials through the global
    combine), against the float64 program on fresh random inputs."""
    m, k, n, f, gm, gn, epi = SHAPES[name]
    prog = gemm_program(m, k, n, f, gm, gn, epi)
    bg = _block(prog)
    scheds = [s for s in candidate_schedules(bg) if s.wgmma]
    two = wgmma_threads(bg, 2)
    scheds += [replace(scheds[0], wgmma_cols=2, threads=two)] if two else []
    scheds += [replace(s, split=2, reg_epilogue=False, cluster_combine=c) for s in scheds
               for c in (False, True) if f % 2 == 0]
    for sched in scheds:
        cg = compile_graph(prog, schedules={bg.key: sched})
        assert WGMMA_MARK in cg.kernels[0].source
        rep = validate(cg, low=-0.5, high=0.5, trials=2)
        assert rep.ok, f"{name} {sched.short()}: {rep}"


#: (rows, k, n, forloop, column blocks): products of ragged rows (ViT's 197 and 257 tokens)
#: whose block holds every row, with a bias and gelu after the product
RAGGED = {"197x768x2304": (197, 64, 64, 12, 36), "257x512x512": (257, 128, 128, 4, 4),
          "80x256x256": (80, 64, 64, 4, 4)}


def _ragged_wgmma(name: str) -> tuple[KernelGraph, Any, Schedule]:
    m, k, n, f, gn = RAGGED[name]
    # (every row in each block: no grid axis maps X's rows, as the search builds it)
    text = str(biased_gemm_program(m=m, k=k, n=n, forloop=f, gm=1, gn=gn))
    prog = parse_text(text.replace("imap=(-1, 0, -1), input=0", "imap=(-1, -1, -1), input=0")
                      .replace("omap=(1, 0, -1)", "omap=(1, -1, -1)"))
    bg = _block(prog)
    return prog, bg, opening_schedule(bg)


@pytest.mark.parametrize("name", sorted(RAGGED))
def test_ragged_rows_open_with_warpgroup_bands_and_compile(name: str) -> None:
    """A block of all its ragged rows is no warpgroup's product at its own size; refined into
    64-row bands it is: the tuner opens with that refined schedule (and keeps it among its
    candidates), and the kernel prints one warpgroup product per band, the last band
    shifted back to end at the last row, and compiles for sm_90a."""
    prog, bg, sched = _ragged_wgmma(name)
    m = RAGGED[name][0]
    assert wgmma_threads(bg) is None
    assert sched.wgmma and sched.refine_rows == 64 and sched in candidate_schedules(bg)
    (kern,) = compile_graph(prog, schedules={bg.key: sched}, arch="sm_90", load=False).kernels
    assert WGMMA_MARK in kern.source and "mf_band" in kern.source
    assert f"min(mf_band*64, {m - 64})" in kern.source


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a GPU")
@pytest.mark.parametrize("name", sorted(RAGGED))
def test_ragged_rows_in_warpgroup_bands_validate(name: str) -> None:
    """The refined warpgroup kernel against the float64 program on fresh random inputs (the
    overlapping last band included), as is the ragged lowering of a plain product under the
    tuner's opening schedules."""
    prog, bg, sched = _ragged_wgmma(name)
    rep = validate(compile_graph(prog, schedules={bg.key: sched}), low=-0.5, high=0.5, trials=2)
    assert rep.ok, f"{sched.short()}: {rep}"
    m, k, n, f, gn = RAGGED[name]
    g = mf.Graph()
    g.output(g.matmul(g.input((m, k * f), "f16", "X"), g.input((k * f, n * gn), "f16", "W")))
    plain = g.build()
    (la,) = launches(plain, 128)
    rep = validate(compile_graph(plain, schedules={la.graph.key: opening_schedule(la.graph)}),
                   low=-0.5, high=0.5, trials=2)
    assert rep.ok, str(rep)
