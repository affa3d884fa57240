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
        # (one iteration where no loop range divides the walked size: 2 and 3 are not in LOOPS)
        walked = [n.shape[n.attr("fmap")] for n in _block(cand).nodes
                  if n.op == ITER and n.attr("fmap") != -1]
        assert walked and (_block(cand).forloop > 1 or all(
            x % f for x in walked for f in LOOPS if f > 1))
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


def test_output_dimensions_are_never_walked_and_an_rms_norm_defers_its_rms() -> None:
    """ntrans normalises dimensions its output carries: nothing to walk. rmsnorm's product
    contracts the dimension rms_norm normalises: walked, the rms accumulated beside the
    product (``rms`` with eps 0) and dividing it after the loop, as the hand-written fused
    kernel does."""
    program = build("ntrans", 1)
    assert loop_classes(program, DimVars(program)) == []
    program = build("rmsnorm", 1)
    assert loop_classes(program, DimVars(program)) != []
    for cand in loop_lifted_candidates(program, GRIDS, LOOPS):
        accs = [b for b in _block(cand).nodes if b.op == "accum"]
        assert {(a.attr("kind"), a.attr("fold")) for a in accs} == {("sum", None), ("rms", 1)}
        assert_computes_program(program, cand, 4)
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


def _norm_projection(eps: float, gain: bool, heads: int | None) -> mf.KernelGraph:
    """rms_norm(x[, gain]) · W, W 2-D or per head (x (1, 1, 1, h) against (heads, h, n): a
    decoder's q projection as the PyTorch bridge captures it)."""
    g = mf.Graph()
    x = g.input((1, 1, 1, 64) if heads else (2, 64), "f16", "X")
    w = g.input((heads, 64, 48) if heads else (64, 48), "f16", "W")
    args = [x, g.input((64,), "f16", "G")] if gain else [x]
    g.output(g.matmul(g.rms_norm(*args, eps=eps), w))
    return g.build()


@pytest.mark.parametrize("eps", [0.0, 1e-6])
@pytest.mark.parametrize("gain", [False, True])
@pytest.mark.parametrize("heads", [None, 4])
def test_an_rms_norm_before_a_product_is_walked_with_its_eps(eps: float, gain: bool,
                                                              heads: int | None) -> None:
    """The dimension rms_norm normalises and the product contracts is walked: the product of
    x (times the gain) accumulates, and the row's sqrt(mean(x²) + eps) divides it after the
    loop (the ``rms`` accumulator for eps 0; a mean of squares, ``add_scalar`` and ``sqrt``
    otherwise). Every loop lift and each of its size variants computes the program."""
    program = _norm_projection(eps, gain, heads)
    cands = loop_lifted_candidates(program, GRIDS, LOOPS)
    assert cands
    for cand in cands:
        ops = [b.op for b in _block(cand).nodes]
        assert ("add_scalar" in ops and "sqrt" in ops) == (eps != 0.0)
        assert _block(cand).forloop > 1
        for v in seed_size_variants(program, cand)[:12]:
            assert_computes_program(program, v, 5)


def test_search_accepts_an_rms_norm_projection_loop_seed_with_eps() -> None:
    """The verifier accepts the deferred rms with an eps (the prime field's sqrt of the same
    mean plus eps as rms_norm's own rule), and the one-kernel seed is the best result."""
    res = mf.superoptimize(_norm_projection(1e-6, True, 4), budget_s=20, gpu=False, workers=1)
    seeds = [a for a in res.accepted if any(b.op == "add_scalar" for k in a.graph.kernels
                                            if k.op == KERNEL_OP for b in k.attr("graph").nodes)]
    assert seeds and all(a.verdict.accepted for a in seeds)
    assert res.best is not None and len(res.best.kernels) == 1


def test_the_verifier_tells_an_rms_without_the_programs_eps() -> None:
    """The eps-0 loop lift (the plain ``rms`` accumulator) of rms_norm(x) · W checked against
    the same program with eps 1e-6: float64 barely tells them apart on small inputs, the
    prime-field verifier must reject it; the program's own lift is accepted."""
    from mirage_formal.verify import Verifier

    program = _norm_projection(1e-6, True, None)
    no_eps = loop_lifted_candidates(_norm_projection(0.0, True, None), GRIDS, LOOPS)[0]
    # (the same inputs: the lift of the eps-0 program is a candidate for the eps program)
    wrong = mf.KernelGraph(program.inputs, no_eps.outputs)
    assert not Verifier(program, seed=3).check(wrong).accepted
    right = loop_lifted_candidates(program, GRIDS, LOOPS)[0]
    assert Verifier(program, seed=3).check(right).accepted


def test_a_key_count_no_loop_range_divides_is_walked_in_one_iteration() -> None:
    """ViT-Base's 197 keys (prime): the keys' loop seed runs one iteration, its row sums a
    folding accumulator of exp(S) itself (the form codegen's register chain keeps in
    registers) and the softmax's division after the products; it computes the program."""
    g = mf.Graph()
    q = g.input((2, 197, 64), "f16", "Q")
    k = g.input((2, 64, 197), "f16", "K")
    v = g.input((2, 197, 64), "f16", "V")
    e = g.exp(g.mul_scalar(g.matmul(q, k), scalar=0.125))
    g.output(g.matmul(g.div(e, g.sum(e, axis=-1, keepdims=True)), v))
    program = g.build()
    cands = loop_lifted_candidates(program, (1, 2, 197), LOOPS)
    walked = [c for c in cands if _block(c).forloop == 1
              and any(n.op == "accum" and n.attr("fold") == 1 for n in _block(c).nodes)]
    assert walked
    for cand in walked:
        div = [n for n in _block(cand).nodes if n.op == "div"]
        assert len(div) == 1 and all(s.op == "accum" for s in div[0].src)
        assert_computes_program(program, cand, 1)


def _attention_of_prime_rows(batch: int) -> mf.KernelGraph:
    """exp(Q·K)·V / rowsum over 13 query rows and keys (a prime: the grid splits the rows only
    into single rows), 3 heads, ``batch`` images."""
    g = mf.Graph()
    q = g.input((batch, 3, 13, 16), "f16", "Q")
    k = g.input((batch, 3, 16, 13), "f16", "K")
    v = g.input((batch, 3, 13, 16), "f16", "V")
    e = g.exp(g.mul_scalar(g.matmul(q, k), scalar=0.25))
    g.output(g.div(g.matmul(e, v), g.sum(e, axis=-1, keepdims=True)))
    return g.build()


def _split_dims(cand: mf.KernelGraph) -> set[int]:
    """The dimensions of the output the candidate's grid splits."""
    bg = _block(cand)
    return {d for ax, d in enumerate(bg.outputs[0].omap) if d >= 0 and bg.grid[ax] > 1}


def test_seeds_prefer_choices_that_keep_a_products_prime_rows_whole() -> None:
    """With more choices of split classes than seeds (13 rows, V's columns, heads, images),
    the ones that cut the products' rows into single rows are left out first: the choice of
    heads and images alone (each score computed once) is seeded, and every seed computes the
    program. With fewer choices than seeds nothing is left out."""
    program = _attention_of_prime_rows(2)
    cands = loop_lifted_candidates(program, (2, 3, 4, 13), LOOPS)
    assert len(cands) == 4
    splits = [_split_dims(c) for c in cands]
    assert {0, 1} in splits, splits
    assert sum(2 in s for s in splits) <= 1, splits
    for cand in cands:
        assert_computes_program(program, cand, 1)
    one_image = _attention_of_prime_rows(1)
    everything = [c.key for c in loop_lifted_candidates(one_image, (2, 3, 4, 13), LOOPS, limit=100)]
    assert [c.key for c in loop_lifted_candidates(one_image, (2, 3, 4, 13), LOOPS,
                                                  limit=len(everything))] == everything
