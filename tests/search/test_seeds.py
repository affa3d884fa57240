"""Lifted seed candidates (search/seeds.py): every lift computes the program, the analysis
refuses to split reduced or shared dimensions, and the search finds a lift at once."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import mirage_formal as mf
from mirage_formal.ir.graph import KERNEL_OP
from mirage_formal.search.seeds import DimVars, lifted_candidates, splittable
from mirage_formal.workloads import PROGRAMS
from mirage_formal.workloads import program as build
from tests.graph_strategies import SEED_GRIDS as GRIDS
from tests.graph_strategies import assert_computes_program, kernel_programs, seed_size_variants


@settings(max_examples=40, deadline=None)
@given(kernel_programs(max_ops=5), st.integers(0, 2**31 - 1))
def test_every_lift_and_grid_variant_computes_the_program(program: mf.KernelGraph, seed: int) -> None:
    for cand in lifted_candidates(program, GRIDS):
        (k,) = [n for n in cand.nodes if n.op == KERNEL_OP]
        assert k.attr("graph").forloop == 1
        for v in seed_size_variants(program, cand)[:6]:
            assert_computes_program(program, v, seed)


def test_ntrans_lift_splits_rows_only() -> None:
    program = build("ntrans", 1)
    dv = DimVars(program)
    classes = splittable(program, dv)
    assert [dv.size[r] for r in classes] == [8]  # rows; the normalised 4096 is reduced
    (cand,) = lifted_candidates(program, GRIDS)
    assert_computes_program(program, cand, 0)


def test_contracted_and_reduced_dimensions_are_never_split() -> None:
    g = mf.Graph()
    x = g.input((8, 16), name="X")
    w = g.input((16, 32), name="W")
    y = g.op("sum", x @ w, axis=0, keepdims=True)  # rows reduced, k contracted
    g.output(y)
    program = g.build()
    dv = DimVars(program)
    assert [dv.size[r] for r in splittable(program, dv)] == [32]
    for cand in lifted_candidates(program, GRIDS):
        assert_computes_program(program, cand, 1)


def test_a_dimension_an_output_lacks_is_not_split() -> None:
    g = mf.Graph()
    x = g.input((8, 16), name="X")
    g.output(g.op("sum", x, axis=1, keepdims=True), g.op("sum", x, axis=0, keepdims=True))
    program = g.build()
    assert splittable(program, DimVars(program)) == []
    # (no dimension splits: the only lift is the whole program on one block)
    (cand,) = lifted_candidates(program, GRIDS)
    (k,) = [n for n in cand.nodes if n.op == KERNEL_OP]
    assert k.attr("graph").grid == (1, 1, 1)
    assert_computes_program(program, cand, 3)


def _one_row_layer_norm(shape: tuple[int, ...]) -> mf.KernelGraph:
    g = mf.Graph()
    x = g.input(shape, "f16", "X")
    c = g.sub(x, g.mean(x, axis=-1, keepdims=True))
    v = g.mean(g.square(c), axis=-1, keepdims=True)
    xn = g.div(c, g.sqrt(g.add_scalar(v, scalar=1e-5)))
    g.output(xn, g.matmul(xn, g.input((shape[-1], 256), "f16", "W")))
    return g.build()


def test_a_program_nothing_splits_is_fused_on_one_block() -> None:
    """A one-row layer norm (a decode step's activations) reduces its only split-able axis:
    its one seed is the one-block lift, which the search accepts (it had returned the unfused
    program: a random-program campaign, s52)."""
    for shape in ((1, 128), (1, 1, 96)):
        program = _one_row_layer_norm(shape)
        assert splittable(program, DimVars(program)) == []
        (cand,) = lifted_candidates(program, GRIDS)
        assert_computes_program(program, cand, 4)
    res = mf.superoptimize(_one_row_layer_norm((1, 128)), budget_s=30, workers=1, gpu=False,
                           compile_best=False)
    fused = [a for a in res.accepted if any(n.op == KERNEL_OP for n in a.graph.nodes)]
    assert fused and fused[0].verdict.accepted and fused[0].float64_error <= 1e-6
    assert res.accepted[0] is fused[0]  # (the cost model ranks it above 8 library launches)


def test_search_accepts_the_ntrans_lift_before_any_unit() -> None:
    program = build("ntrans", 1)
    res = mf.superoptimize(program, budget_s=20, workers=1, gpu=False, compile_best=False)
    one = [a for a in res.accepted if len(a.graph.kernels) == 1]
    assert one, "the one-kernel lift of ntrans was not accepted"
    assert one[0].verdict.accepted and one[0].float64_error <= 1e-6


def test_workload_lifts_compute_their_programs() -> None:
    for name in PROGRAMS:
        program = build(name, 1)
        for cand in lifted_candidates(program, GRIDS)[:1]:
            if max(n.shape[-1] * n.shape[-2] if len(n.shape) > 1 else 1 for n in program.nodes) > 1 << 16:
                continue  # too large for a quick float64 run; the property test covers the rule
            assert_computes_program(program, cand, 2)
