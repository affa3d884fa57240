"""Block coarsening (Schedule.coarsen): several logical blocks of a grid axis run as one block.

- on any machine: a narrow weight-streaming kernel (Mirage's published gated MLP reads 8
  columns of each weight row per block) coarsens to wide tiles; on random μGraphs, whenever
  :func:`coarsenable` allows it the coarsened kernel computes the same float64 function;
  kernels that combine elements across the merged blocks are refused; the tuner proposes
  coarsened schedules for narrow kernels only, and each compiles for sm_90;
- on the GPU: the narrow kernel validates under every coarsened candidate schedule.
"""

from __future__ import annotations

import numpy as np
import pytest
from graph_strategies import block_programs
from hypothesis import given, settings

from mirage_formal.codegen import (
    Schedule,
    candidate_schedules,
    compile_graph,
    gpu_available,
    launches,
)
from mirage_formal.codegen.coarsen import coarsenable, coarsened, narrow_axes
from mirage_formal.errors import GraphError
from mirage_formal.ir.graph import GET, KERNEL_OP, KernelGraph, make_kernel
from mirage_formal.ir.text import parse_text
from mirage_formal.semantics import F64, evaluate, random_inputs


def _narrow_gated_mlp(rows: int = 8, k: int = 1024, n: int = 512, cols: int = 8,
                      loop: int = 4) -> KernelGraph:
    """silu(X·W1) ⊙ (X·W2) as one kernel on grid n / cols: each block reads ``cols`` columns
    of each weight row (the shape of Mirage's published gated MLP μGraphs #18-#27)."""
    kt = k // loop
    return parse_text(
        "ugraph {\n"
        f"  %0 = input() {{name='X'}} : f16[{rows}, {k}]\n"
        f"  %1 = input() {{name='W1'}} : f16[{k}, {n}]\n"
        f"  %2 = input() {{name='W2'}} : f16[{k}, {n}]\n"
        f"  %3 = kernel(%0, %1, %2) {{forloop={loop}, grid=({n // cols}, 1, 1), threads=128}} {{\n"
        f"    %b0 = iter() {{fmap=1, imap=(-1, -1, -1), input=0}} : f16[{rows}, {kt}]\n"
        f"    %b1 = iter() {{fmap=0, imap=(1, -1, -1), input=2}} : f16[{kt}, {cols}]\n"
        f"    %b2 = matmul(%b0, %b1) : f16[{rows}, {cols}]\n"
        f"    %b3 = accum(%b2) {{fold=None, kind='sum'}} : f16[{rows}, {cols}]\n"
        f"    %b4 = iter() {{fmap=0, imap=(1, -1, -1), input=1}} : f16[{kt}, {cols}]\n"
        f"    %b5 = matmul(%b0, %b4) : f16[{rows}, {cols}]\n"
        f"    %b6 = accum(%b5) {{fold=None, kind='sum'}} : f16[{rows}, {cols}]\n"
        f"    %b7 = silu(%b6) : f16[{rows}, {cols}]\n"
        f"    %b8 = mul(%b3, %b7) : f16[{rows}, {cols}]\n"
        "    save %b8 {omap=(1, -1, -1)}\n"
        "  }\n"
        f"  %4 = get(%3) {{index=0}} : f16[{rows}, {n}]\n"
        "  return %4\n"
        "}\n")


def _with_coarsened(graph: KernelGraph, ax: int, c: int) -> KernelGraph:
    """``graph`` (one graph-defined kernel) with that kernel coarsened: a μGraph whose float64
    function can be compared with the original's."""
    (kn,) = [n for n in graph.nodes if n.op == KERNEL_OP]
    gets = make_kernel(coarsened(kn.attr("graph"), ax, c), list(kn.src))
    old = [n for n in graph.nodes if n.op == GET and n.src[0] is kn]
    by_index = {g.attr("index"): g for g in gets}
    swap = {o: by_index[o.attr("index")] for o in old}
    return KernelGraph(graph.inputs, tuple(swap.get(o, o) for o in graph.outputs))


def _same_function(a: KernelGraph, b: KernelGraph, seed: int = 0) -> bool:
    xs = random_inputs(a, np.random.default_rng(seed))
    return all(np.allclose(x, y, rtol=1e-9, atol=1e-12)
               for x, y in zip(evaluate(a, xs, F64()), evaluate(b, xs, F64()), strict=True))


def test_a_narrow_kernel_coarsens_to_wide_tiles() -> None:
    g = _narrow_gated_mlp()
    bg = launches(g, 128)[0].graph
    assert narrow_axes(bg) == [(0, 16)]
    assert coarsenable(bg, 0, 8)
    wide = coarsened(bg, 0, 8)
    assert wide.grid == (8, 1, 1)
    assert sorted(n.shape for n in wide.nodes if n.op == "iter") == [(8, 256), (256, 64), (256, 64)]
    assert _same_function(g, _with_coarsened(g, 0, 8))
    assert not coarsenable(bg, 0, 3)  # does not divide the 64 blocks


@settings(max_examples=60, deadline=None)
@given(block_programs())
def test_coarsening_keeps_the_function_wherever_it_is_allowed(graph: KernelGraph) -> None:
    (kn,) = [n for n in graph.nodes if n.op == KERNEL_OP]
    bg = kn.attr("graph")
    for ax in range(3):
        if bg.grid[ax] == 2 and coarsenable(bg, ax, 2):
            assert _same_function(graph, _with_coarsened(graph, ax, 2)), (ax, bg)


def test_partial_sums_over_a_split_contraction_are_not_coarsened() -> None:
    """Grid x splits the contraction of X·W and the blocks' partial products are saved side
    by side (a later kernel adds them): merging two blocks would add their halves together."""
    g = parse_text(
        "ugraph {\n"
        "  %0 = input() {name='X'} : f16[4, 64]\n"
        "  %1 = input() {name='W'} : f16[64, 16]\n"
        "  %2 = kernel(%0, %1) {forloop=1, grid=(4, 1, 1), threads=128} {\n"
        "    %b0 = iter() {fmap=-1, imap=(1, -1, -1), input=0} : f16[4, 16]\n"
        "    %b1 = iter() {fmap=-1, imap=(0, -1, -1), input=1} : f16[16, 16]\n"
        "    %b2 = matmul(%b0, %b1) : f16[4, 16]\n"
        "    %b3 = accum(%b2) {fold=None, kind='sum'} : f16[4, 16]\n"
        "    save %b3 {omap=(1, -1, -1)}\n"
        "  }\n"
        "  %3 = get(%2) {index=0} : f16[4, 64]\n"
        "  return %3\n"
        "}\n")
    bg = launches(g, 128)[0].graph
    assert not coarsenable(bg, 0, 2)
    with pytest.raises(GraphError, match="cannot be coarsened"):
        coarsened(bg, 0, 2)


def test_a_row_sum_over_split_columns_is_not_coarsened() -> None:
    g = parse_text(
        "ugraph {\n"
        "  %0 = input() {name='X'} : f16[4, 64]\n"
        "  %1 = kernel(%0) {forloop=1, grid=(4, 1, 1), threads=128} {\n"
        "    %b0 = iter() {fmap=-1, imap=(1, -1, -1), input=0} : f16[4, 16]\n"
        "    %b1 = sum(%b0) {axis=1, keepdims=True} : f16[4, 1]\n"
        "    %b2 = accum(%b1) {fold=None, kind='sum'} : f16[4, 1]\n"
        "    save %b2 {omap=(1, -1, -1)}\n"
        "  }\n"
        "  %2 = get(%1) {index=0} : f16[4, 4]\n"
        "  return %2\n"
        "}\n")
    assert not coarsenable(launches(g, 128)[0].graph, 0, 2)


def test_the_tuner_proposes_coarsening_for_narrow_kernels_only_and_each_compiles() -> None:
    g = _narrow_gated_mlp(k=512, n=4096)  # 512 blocks, as Mirage's
    bg = launches(g, 128)[0].graph
    cands = candidate_schedules(bg)
    coarse = [s for s in cands if s.coarsen > 1]
    assert {s.coarsen for s in coarse} == {4, 8}  # 64 and 128 bytes of each weight row
    for s in coarse:
        cg = compile_graph(g, schedules={bg.key: s}, load=False)
        assert cg.kernels[0].grid[0] == bg.grid[0] // s.coarsen * s.split
    wide = _narrow_gated_mlp(cols=64)
    assert all(s.coarsen == 1 for s in candidate_schedules(launches(wide, 128)[0].graph))


def test_an_uncoarsened_schedule_keeps_its_key() -> None:
    assert "coarsen" not in Schedule(threads=256).key
    s = Schedule(coarsen=4, coarsen_axis=0, split=2)
    assert Schedule.from_dict(s.to_dict()) == s
    with pytest.raises(GraphError):
        Schedule(coarsen=0)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a GPU")
def test_coarsened_schedules_validate() -> None:
    from mirage_formal.codegen.validate import validate

    g = _narrow_gated_mlp(k=512, n=4096)
    bg = launches(g, 128)[0].graph
    for s in [s for s in candidate_schedules(bg) if s.coarsen > 1]:
        rep = validate(compile_graph(g, schedules={bg.key: s}), trials=2)
        assert rep.ok, f"{s.short()}: {rep}"


_GATED_WITH_BIAS = """ugraph {
  %0 = input() {name='X'} : f16[4, 512]
  %1 = input() {name='W'} : f16[512, 2048]
  %2 = input() {name='V'} : f16[512, 2048]
  %3 = input() {name='b'} : f16[1, 2048]
  %4 = kernel(%0, %1, %2, %3) {forloop=4, grid=(256, 1, 1), threads=128} {
    %b0 = iter() {fmap=1, imap=(-1, -1, -1), input=0} : f16[4, 128]
    %b1 = iter() {fmap=0, imap=(1, -1, -1), input=1} : f16[128, 8]
    %b2 = matmul(%b0, %b1) : f16[4, 8]
    %b3 = accum(%b2) {fold=None, kind='sum'} : f16[4, 8]
    %b4 = iter() {fmap=0, imap=(1, -1, -1), input=2} : f16[128, 8]
    %b5 = matmul(%b0, %b4) : f16[4, 8]
    %b6 = accum(%b5) {fold=None, kind='sum'} : f16[4, 8]
    %b7 = iter() {fmap=-1, imap=(1, -1, -1), input=3} : f16[1, 8]
    %b8 = accum(%b7) {fold=None, kind='mean'} : f16[1, 8]
    %b9 = add(%b3, %b8) : f16[4, 8]
    %b10 = relu(%b9) : f16[4, 8]
    %b11 = sigmoid(%b6) : f16[4, 8]
    %b12 = mul(%b10, %b11) : f16[4, 8]
    save %b12 {omap=(1, -1, -1)}
  }
  %5 = get(%4) {index=0} : f16[4, 2048]
  return %5
}"""

_BLOCK_SOFTMAX = """ugraph {
  %0 = input() {name='X'} : f16[4, 512]
  %1 = input() {name='W'} : f16[512, 2048]
  %2 = kernel(%0, %1) {forloop=4, grid=(256, 1, 1), threads=128} {
    %b0 = iter() {fmap=1, imap=(-1, -1, -1), input=0} : f16[4, 128]
    %b1 = iter() {fmap=0, imap=(1, -1, -1), input=1} : f16[128, 8]
    %b2 = matmul(%b0, %b1) : f16[4, 8]
    %b3 = accum(%b2) {fold=None, kind='sum'} : f16[4, 8]
    %b4 = exp(%b3) : f16[4, 8]
    %b5 = sum(%b4) {axis=1, keepdims=True} : f16[4, 1]
    %b6 = div(%b4, %b5) : f16[4, 8]
    save %b6 {omap=(1, -1, -1)}
  }
  %3 = get(%2) {index=0} : f16[4, 2048]
  return %3
}"""


def _unchecked(graph: KernelGraph, c: int) -> KernelGraph:
    """``graph``'s kernel rebuilt on grid x / c with wider tiles, without asking coarsenable."""
    from mirage_formal.ir.graph import resized_block

    (kn,) = [n for n in graph.nodes if n.op == KERNEL_OP]
    bg = kn.attr("graph")
    wide = resized_block(bg, (bg.grid[0] // c, bg.grid[1], bg.grid[2]), bg.forloop)
    return KernelGraph(graph.inputs, (make_kernel(wide, list(kn.src))[0],))


def test_a_program_outside_the_benchmarks_coarsens_and_a_block_softmax_does_not() -> None:
    """Written for this check: relu(X·W + b) ⊙ sigmoid(X·V) with 8-column tiles and the bias
    row split with them coarsens 2-8 times to the same function, and its coarsened candidate
    schedules compile; a softmax over each block's own 8 columns (a legal μGraph) is refused,
    and rightly: merging blocks would normalise over 16 columns instead."""
    g = parse_text(_GATED_WITH_BIAS)
    bg = launches(g, 128)[0].graph
    for c in (2, 4, 8):
        assert coarsenable(bg, 0, c) and _same_function(g, _with_coarsened(g, 0, c))
    coarse = [s for s in candidate_schedules(bg, sm_count=32) if s.coarsen > 1]
    assert coarse
    for s in coarse:
        compile_graph(g, schedules={bg.key: s}, load=False)
    soft = parse_text(_BLOCK_SOFTMAX)
    sbg = launches(soft, 128)[0].graph
    assert not coarsenable(sbg, 0, 2)
    assert not [s for s in candidate_schedules(sbg, sm_count=32) if s.coarsen > 1]
    assert not _same_function(soft, _unchecked(soft, 2))
