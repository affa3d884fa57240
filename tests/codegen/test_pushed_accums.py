"""Loop-free kernels launch with their plain accumulators moved below a matmul.

Over one iteration a sum or mean accumulator (no fold) is the identity, so the lowering runs
``matmul(accum(X), accum(W))`` as ``accum(matmul(X, W))`` (Mirage's published rmsnorm μGraph
#14 has that form): the product then reads iterator tiles, and the emitter streams W through
registers instead of copying both whole tiles first.
- on any machine: the rewrite keeps the float64 function (the μGraph above, and random
  loop-free μGraphs), leaves kernels with a loop alone, and gives the kernel gemv and
  coarsened candidate schedules that compile for sm_90;
- on the GPU: the kernel validates under every candidate schedule.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from graph_strategies import block_programs
from hypothesis import given, settings

from mirage_formal.codegen import candidate_schedules, compile_graph, gpu_available, launches
from mirage_formal.codegen.lower import accums_pushed_down
from mirage_formal.ir.graph import GET, KERNEL_OP, KernelGraph, make_kernel
from mirage_formal.ir.text import parse_text
from mirage_formal.semantics import F64, evaluate, random_inputs


def _accumulated_operands(rows: int = 2, k: int = 1024, n: int = 2048, cols: int = 8) -> KernelGraph:
    """(X·W) / rms(X) per row in one loop-free kernel whose matmul multiplies accum(X) by
    accum(W), ``cols`` columns of W per block (the form of Mirage's rmsnorm μGraph #14)."""
    return parse_text(
        "ugraph {\n"
        f"  %0 = input() {{name='X'}} : f16[{rows}, {k}]\n"
        f"  %1 = input() {{name='W'}} : f16[{k}, {n}]\n"
        f"  %2 = kernel(%0, %1) {{forloop=1, grid=({n // cols}, 1, 1), threads=128}} {{\n"
        f"    %b0 = iter() {{fmap=-1, imap=(-1, -1, -1), input=0}} : f16[{rows}, {k}]\n"
        f"    %b1 = accum(%b0) {{fold=None, kind='sum'}} : f16[{rows}, {k}]\n"
        f"    %b2 = iter() {{fmap=-1, imap=(1, -1, -1), input=1}} : f16[{k}, {cols}]\n"
        f"    %b3 = accum(%b2) {{fold=None, kind='sum'}} : f16[{k}, {cols}]\n"
        f"    %b4 = matmul(%b1, %b3) : f16[{rows}, {cols}]\n"
        f"    %b5 = accum(%b0) {{fold=1, kind='rms'}} : f16[{rows}, 1]\n"
        f"    %b6 = div(%b4, %b5) : f16[{rows}, {cols}]\n"
        "    save %b6 {omap=(1, -1, -1)}\n"
        "  }\n"
        f"  %3 = get(%2) {{index=0}} : f16[{rows}, {n}]\n"
        "  return %3\n"
        "}\n")


def _pushed(graph: KernelGraph) -> KernelGraph:
    """``graph`` with each kernel's block graph as :func:`launches` runs it."""
    memo: dict = {}
    for n in graph.nodes:
        if n.op == KERNEL_OP:
            gets = make_kernel(accums_pushed_down(n.attr("graph")), [memo.get(s, s) for s in n.src])
            for o in graph.nodes:
                if o.op == GET and o.src[0] is n:
                    memo[o] = gets[o.attr("index")]
    return KernelGraph(graph.inputs, tuple(memo.get(o, o) for o in graph.outputs))


def _same_function(a: KernelGraph, b: KernelGraph) -> bool:
    xs = random_inputs(a, np.random.default_rng(3))
    return all(np.allclose(x, y, rtol=1e-9, atol=1e-12)
               for x, y in zip(evaluate(a, xs, F64()), evaluate(b, xs, F64()), strict=True))


def test_the_matmul_reads_iterator_tiles_and_the_function_is_kept() -> None:
    g = _accumulated_operands()
    (kn,) = [n for n in g.nodes if n.op == KERNEL_OP]
    bg = launches(g, 128)[0].graph
    assert bg is not kn.attr("graph")
    (mm,) = [n for n in bg.nodes if n.op == "matmul"]
    assert [s.op for s in mm.src] == ["iter", "iter"]
    assert _same_function(g, _pushed(g))
    cands = candidate_schedules(bg)
    assert any(s.gemv for s in cands) and any(s.coarsen > 1 for s in cands)
    for s in cands[:6]:
        compile_graph(g, schedules={bg.key: s}, load=False)


def _normalized_operand(also_save_norm: bool = False) -> KernelGraph:
    """A layer norm of X's rows (mean, difference, square, mean, square root, quotient) times
    a column slice of W in one loop-free kernel: the matmul's A is an op of accum(X), its B
    accum(W) (the outside layernorm_matmul's fused μGraph). ``also_save_norm``: the
    normalized rows are a second output."""
    gx = 1 if also_save_norm else 128  # (a saved norm: no grid axis over W's columns)
    extra = "    save %b7 {omap=(-1, 0, -1)}\n" if also_save_norm else ""
    ret = ("  %4 = get(%2) {index=1} : f16[8, 1024]\n  return %3, %4\n" if also_save_norm
           else "  return %3\n")
    return parse_text(
        "ugraph {\n"
        "  %0 = input() {name='X'} : f16[8, 1024]\n"
        "  %1 = input() {name='W'} : f16[1024, 2048]\n"
        f"  %2 = kernel(%0, %1) {{forloop=1, grid=({gx}, 2, 1), threads=128}} {{\n"
        "    %b0 = iter() {fmap=-1, imap=(-1, 0, -1), input=0} : f16[4, 1024]\n"
        "    %b1 = accum(%b0) {fold=None, kind='sum'} : f16[4, 1024]\n"
        "    %b2 = mean(%b1) {axis=-1, keepdims=True} : f16[4, 1]\n"
        "    %b3 = sub(%b1, %b2) : f16[4, 1024]\n"
        "    %b4 = square(%b3) : f16[4, 1024]\n"
        "    %b5 = mean(%b4) {axis=-1, keepdims=True} : f16[4, 1]\n"
        "    %b6 = sqrt(%b5) : f16[4, 1]\n"
        "    %b7 = div(%b3, %b6) : f16[4, 1024]\n"
        f"    %b8 = iter() {{fmap=-1, imap=(1, -1, -1), input=1}} : f16[1024, {2048 // gx}]\n"
        f"    %b9 = accum(%b8) {{fold=None, kind='sum'}} : f16[1024, {2048 // gx}]\n"
        f"    %b10 = matmul(%b7, %b9) : f16[4, {2048 // gx}]\n"
        "    save %b10 {omap=(1, 0, -1)}\n"
        f"{extra}"
        "  }\n"
        "  %3 = get(%2) {index=0} : f16[8, 2048]\n"
        f"{ret}"
        "}\n")


def test_a_matmul_of_ops_of_accumulators_reads_them_computed_from_the_iterators() -> None:
    """The matmul's A, an op chain over accum(X), is computed from X's iterator tile and its
    B is W's iterator tile; the product is accumulated once; the function is kept. A gemv
    schedule then loads its W slice into registers before anything else, so the copy is in
    flight while the norm runs. Where the chain's accumulated form is also saved, moving the
    accumulator would compute the chain twice, and the kernel is left as it is."""
    g = _normalized_operand()
    bg = launches(g, 128)[0].graph
    (mm,) = [n for n in bg.nodes if n.op == "matmul"]
    assert [s.op for s in mm.src] == ["div", "iter"]
    assert not any(n.op == "accum" for n in mm.src[0].walk())
    assert [n.op for n in bg.nodes if n.op == "accum"] == ["accum"]
    assert _same_function(g, _pushed(g))
    gemv = next(s for s in candidate_schedules(bg) if s.gemv and s.coarsen == 1)
    (k,) = compile_graph(g, schedules={bg.key: gemv}, load=False).kernels
    w_load, x_load = k.source.index("&in1["), k.source.index("&in0[")
    assert w_load < x_load
    both = _normalized_operand(also_save_norm=True)
    (kn,) = [n for n in both.nodes if n.op == KERNEL_OP]
    assert launches(both, 128)[0].graph is kn.attr("graph")


@settings(max_examples=60, deadline=None)
@given(block_programs())
def test_the_rewrite_keeps_every_loop_free_kernels_function(graph: KernelGraph) -> None:
    (kn,) = [n for n in graph.nodes if n.op == KERNEL_OP]
    if kn.attr("graph").forloop > 1:
        assert accums_pushed_down(kn.attr("graph")) is kn.attr("graph")
        return
    assert _same_function(graph, _pushed(graph))


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a GPU")
def test_pushed_kernels_validate() -> None:
    from mirage_formal.codegen.validate import validate

    g = _accumulated_operands(k=512, n=4096)
    bg = launches(g, 128)[0].graph
    for s in candidate_schedules(bg):
        rep = validate(compile_graph(g, schedules={bg.key: s}), trials=2)
        assert rep.ok, f"{s.short()}: {rep}"


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a GPU")
def test_searched_ugraphs_whose_lowering_moves_accumulators_validate() -> None:
    """The μGraphs of the recorded searches whose loop-free kernels the rewrite changes (82
    of 590 when it was written), the first two of each program, under the default schedule."""
    from pathlib import Path

    from mirage_formal.codegen.validate import validate
    from mirage_formal.ir.serialize import load_ugraphs

    root = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    checked = 0
    for p in sorted(root.glob("search_workloads*_ugraphs/*/ugraphs.json")):
        changed = [g for g in load_ugraphs(p) if any(
            accums_pushed_down(n.attr("graph")) is not n.attr("graph")
            for n in g.nodes if n.op == KERNEL_OP)][:2]
        for g in changed:
            rep = validate(compile_graph(g), trials=1)
            assert rep.ok, f"{p}: {rep}"
            checked += 1
    assert checked > 0


def test_an_op_read_only_by_row_sums_is_computed_inside_them() -> None:
    """The layer norm's squared differences (an elementwise op whose only reader is a mean
    over the row) are inlined: summed term by term where they are computed, never stored,
    with no barrier of their own; the difference, read by that square and by the quotient, is
    inlined into both. Every candidate schedule compiles for sm_90."""
    from mirage_formal.codegen.layout import KernelLayout

    g = _normalized_operand()
    bg = launches(g, 128)[0].graph
    lay = KernelLayout(bg, "k", 227 * 1024, candidate_schedules(bg)[0])
    (sq,) = [n for n in bg.nodes if n.op == "square"]
    (diff,) = [n for n in bg.nodes if n.op == "sub"]
    assert sq in lay.inline and diff in lay.inline and sq not in lay.buf
    for s in candidate_schedules(bg):
        (k,) = compile_graph(g, schedules={bg.key: s}, arch="sm_90", load=False).kernels
        assert re.search(r"const float (v\d+) = \(v\d+ \* v\d+\);\n\s*s \+= \1;", k.source), s.short()
