"""Loop seeds (search/loop_seeds.py): every loop lift and each of its size variants computes
the program, deferred factors go after the loop only where that is exact, the analysis
refuses what a for-loop cannot walk, and the search accepts a loop seed of a deep program at
once."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mirage_formal as mf
from mirage_formal.ir.graph import ITER, KERNEL_OP
from mirage_formal.search.loop_seeds import loop_classes, loop_lifted_candidates
from mirage_formal.search.seeds import DimVars
from mirage_formal.workloads import PROGRAMS
from mirage_formal.workloads import program as build
from tests.graph_strategies import SEED_GRIDS as GRIDS
from tests.graph_strategies import assert_computes_program, kernel_programs, seed_size_variants

LOOPS = (1, 4, 8, 16, 32, 64)


def _block(cand: mf.KernelGraph) -> Any:
    (k,) = [n for n in cand.nodes if n.op == KERNEL_OP]
    return k.attr("graph")


@st.composite
def normalised_products(draw: Any) -> mf.KernelGraph:
    """softmax-like programs: exp(f(A·B)) (f a random chain of bounded unary and scalar ops), its row sums
    over B's columns R, a random scaling of the rows by them (divide, multiply by a function
    of them, or none), a product with C over R, and a random op after it."""
    g = mf.Graph()
    batch = draw(st.sampled_from([(), (2,)]))
    rows, k, r, cols = (draw(st.sampled_from([2, 4])) for _ in range(4))
    r *= 4
    a = g.input((*batch, rows, k), "f16", "A")
    b = g.input((*batch, k, r), "f16", "B")
    c = g.input((*batch, r, cols), "f16", "C")
    e = g.matmul(a, b)
    for op in draw(st.lists(st.sampled_from(["tanh", "sigmoid", "scale", "neg"]), max_size=3)):
        e = g.mul_scalar(e, scalar=0.5) if op == "scale" else g.op(op, e)
    e = g.exp(e)
    s = g.op(draw(st.sampled_from(["sum", "mean"])), e, axis=-1, keepdims=True)
    how = draw(st.sampled_from(["div", "mul_sqrt", "div_twice", "none"]))
    if how == "div":
        e = g.div(e, s)
    elif how == "mul_sqrt":
        e = g.mul(g.sqrt(s), g.neg(e))
    elif how == "div_twice":
        e = g.mul_scalar(g.div(g.div(e, s), s), scalar=2.0)
    out = g.matmul(e, c)
    if draw(st.booleans()):
        out = g.op(draw(st.sampled_from(["silu", "square", "relu"])), out)
    g.output(out)
    return g.build()


@settings(max_examples=40, deadline=None)
@given(normalised_products(), st.integers(0, 2**31 - 1))
def test_every_loop_lift_of_a_normalised_product_computes_it(program: mf.KernelGraph, seed: int) -> None:
    cands = loop_lifted_candidates(program, GRIDS, LOOPS)
    assert cands  # R (B's columns) can always be walked
    for cand in cands:
        assert _block(cand).forloop > 1
        for v in seed_size_variants(program, cand)[:4]:
            assert_computes_program(program, v, seed)


@settings(max_examples=60, deadline=None)
@given(kernel_programs(max_ops=5), st.integers(0, 2**31 - 1))
def test_every_loop_lift_of_a_random_program_computes_it(program: mf.KernelGraph, seed: int) -> None:
    for cand in loop_lifted_candidates(program, GRIDS, LOOPS):
        for v in seed_size_variants(program, cand)[:4]:
            assert_computes_program(program, v, seed)


def _attention(scaling: str) -> mf.KernelGraph:
    g = mf.Graph()
    q = g.input((2, 8, 16), "f16", "Q")
    k = g.input((2, 16, 64), "f16", "K")
    v = g.input((2, 64, 16), "f16", "V")
    e = g.exp(g.mul_scalar(g.tanh(g.mul_scalar(g.matmul(q, k), scalar=0.1)), scalar=5.0))
    s = g.sum(e, axis=-1, keepdims=True)
    if scaling == "div":
        p = g.div(e, s)
    elif scaling == "exp_of_quotient":  # not a scaling: the factor cannot leave the loop
        p = g.exp(g.div(e, s))
    elif scaling == "shift":  # an added after-loop value: not a scaling either
        p = g.sub(e, s)
    else:  # the row sums without keepdims cannot line up with the product's rows
        p = g.div(e, g.sum(e, axis=-1, keepdims=True))
        g.output(g.sum(p, axis=-1, keepdims=False))
        return g.build()
    g.output(g.matmul(p, v))
    return g.build()


def test_softcapped_attention_divides_after_the_loop() -> None:
    program = _attention("div")
    cands = loop_lifted_candidates(program, GRIDS, LOOPS)
    assert cands
    for cand in cands:
        bg = _block(cand)
        (kv_iter,) = [n for n in bg.nodes if n.op == ITER and n.attr("input") == 1]
        assert kv_iter.attr("fmap") == 2  # K's columns walked by the loop
        div = [n for n in bg.nodes if n.op == "div"]
        assert len(div) == 1 and all(s.op == "accum" for s in div[0].src)  # after the loop
        assert_computes_program(program, cand, 1)


@pytest.mark.parametrize("scaling", ["exp_of_quotient", "shift", "unkept_sum"])
def test_an_after_loop_value_the_loop_needs_leaves_its_dimension_unwalked(scaling: str) -> None:
    program = _attention(scaling)
    dv = DimVars(program)
    kv = dv.find(dv.of[program.inputs[1]][2])
    assert kv in loop_classes(program, dv)  # a candidate class, refused while building
    for cand in loop_lifted_candidates(program, GRIDS, LOOPS):
        bg = _block(cand)
        (kv_iter,) = [n for n in bg.nodes if n.op == ITER and n.attr("input") == 1]
        assert kv_iter.attr("fmap") != 2
        assert_computes_program(program, cand, 2)


def test_norms_and_output_dimensions_are_never_walked() -> None:
    for name in ("rmsnorm", "ntrans"):
        program = build(name, 1)
        assert loop_classes(program, DimVars(program)) == []
    g = mf.Graph()
    x = g.input((4, 64), "f16", "X")
    g.output(g.exp(x))
    program = g.build()
    assert loop_lifted_candidates(program, GRIDS, LOOPS) == []


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_workload_loop_lifts_compute_their_programs(name: str) -> None:
    program = build(name, 1)
    for cand in loop_lifted_candidates(program, GRIDS, LOOPS):
        assert_computes_program(program, cand, 3)


def test_search_accepts_a_softcapped_attention_kernel_at_once() -> None:
    """The enumeration does not reach a one-kernel softcapped attention in minutes (13 block
    ops); its loop seed is a unit right after the direct lowering, verified like any other."""
    res = mf.superoptimize(_attention("div"), budget_s=20, gpu=False, workers=1)
    one = [a for a in res.accepted if len(a.graph.kernels) == 1]
    assert one and min(a.found_at_s for a in one) < 10
    assert res.best is not None and len(res.best.kernels) == 1
