"""The prime-field semantics: a rule for every registry op, each rule against the float rule,
exact matmul, exp as a homomorphism, random functions, zero divisors, exact constants."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from graph_strategies import block_programs, kernel_programs
from hypothesis import assume, given
from hypothesis import strategies as st

import mirage_formal as mf
from mirage_formal.ir.ops import REGISTRY
from mirage_formal.semantics import run_reference
from mirage_formal.semantics.field import (
    DEFAULT_P,
    DEFAULT_Q,
    FieldEvaluator,
    FieldTrial,
    ZeroDivisorInTrial,
    _limb_plan,
    as_rational,
    batched_matmul,
    check_field,
    const_mod,
    has_field_rule,
    inverse_mod,
    loop_sum_of_products,
    matmul_mod,
    same_side_op,
)
from mirage_formal.verify.analysis import analyze

P = DEFAULT_P


def test_default_field_is_a_safe_prime_pair() -> None:
    check_field(DEFAULT_P, DEFAULT_Q)
    assert DEFAULT_P == 2 * DEFAULT_Q + 1 and DEFAULT_P < 2**31


def test_bad_fields_are_rejected() -> None:
    with pytest.raises(mf.MirageError, match="prime"):
        check_field(1021, 15)
    with pytest.raises(mf.MirageError, match="dividing"):
        check_field(1019, 7)


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_registry_op_has_a_field_rule(name: str) -> None:
    assert has_field_rule(name), f"{name} (kind {REGISTRY[name].field.kind}) has no field rule"


@pytest.mark.parametrize("name", sorted(n for n in REGISTRY if n != "accum"))
def test_every_op_evaluates_and_has_a_degree(name: str) -> None:
    g = mf.Graph()
    x = g.input((4, 4), "f32", "x")
    y = g.input((4, 4), "f32", "y")
    d = REGISTRY[name]
    attrs = {a.name: 0.75 for a in d.attrs if a.default is None and not a.optional}  # (a scalar)
    out = g.op(name, *([x, y] if d.arity[0] == 2 else [x]), **attrs)
    g.output(out)
    prog = g.build()
    info = analyze(prog)
    assert prog.outputs[0] in info.degrees
    outs = FieldEvaluator(FieldTrial(1, 0)).outputs(prog)
    assert outs[0].shape == out.shape and outs[0].dtype == np.int64
    assert np.all((outs[0] >= 0) & (outs[0] < P))


def _small_ints(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.integers(-3, 4, size=shape).astype(np.float64)


def _to_field(x: np.ndarray, m: int) -> np.ndarray:
    return np.vectorize(lambda v: const_mod(Fraction(float(v)), m), otypes=[np.int64])(x)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "neg", "square", "mul_scalar", "add_scalar",
                                  "sum", "matmul", "div", "mean"])
@pytest.mark.parametrize("side", ["p", "q"])
def test_field_rule_matches_float_rule_on_exact_inputs(name: str, side: str) -> None:
    """On small integers (divisors powers of two) float64 is exact: both rules must agree."""
    rng = np.random.default_rng(hash(name) % 1000)
    t = FieldTrial(3, 0)
    m = t.modulus(side)
    a = _small_ints(rng, (2, 4, 4))
    b = _small_ints(rng, (2, 4, 4))
    if name == "div":
        b = rng.choice([-4.0, -2.0, -1.0, 1.0, 2.0, 4.0], size=(2, 4, 4))
    d = REGISTRY[name]
    attrs = d.normalize_attrs([a.shape], {"scalar": -0.375} if name.endswith("_scalar") else {})
    args = [a, b] if d.arity[0] == 2 else [a]
    want = _to_field(d.f64(args, attrs), m)
    got = same_side_op(t, name, [_to_field(v, m) for v in args], attrs, side)
    np.testing.assert_array_equal(got, want)


@given(block_programs(), st.integers(0, 2**32))
def test_block_programs_in_the_field_match_exact_float(g: mf.KernelGraph, seed: int) -> None:
    """Ring-only μGraphs on small integers: the field evaluator agrees with float64 exactly."""
    ring = {"add", "sub", "mul", "neg", "square", "matmul", "sum", "mul_scalar", "add_scalar", "accum",
            "mean"}
    nodes = [b for k in g.kernels if k.op == "kernel" for b in k.attr("graph").nodes]
    assume(all(b.op in ring | {"iter"} for b in nodes))
    assume(all(b.attr("kind") != "rms" for b in nodes if b.op == "accum"))
    rng = np.random.default_rng(seed)
    xs = {n.attr("name"): _small_ints(rng, n.shape) for n in g.inputs}
    want = run_reference(g, xs)
    assume(all(np.all(np.abs(w) < 2**40) for w in want))
    t = FieldTrial(seed, 0)
    for n in g.inputs:  # plant the integer inputs as this trial's p-side inputs
        t._inputs[(n.attr("name"), n.shape, "p")] = _to_field(xs[n.attr("name")], P)
    got = FieldEvaluator(t).outputs(g)
    for w, v in zip(want, got, strict=True):
        np.testing.assert_array_equal(v, _to_field(w, P))


@pytest.mark.parametrize("m", [DEFAULT_P, DEFAULT_Q, 1019])
@pytest.mark.parametrize("k", [1, 3, 64, 4097])
def test_matmul_mod_is_exact(m: int, k: int) -> None:
    rng = np.random.default_rng(k)
    a = rng.integers(0, m, size=(2, 3, k))
    b = rng.integers(0, m, size=(1, k, 2))
    a[0, 0, :] = m - 1  # the worst case for float64 sums
    b[0, :, 0] = m - 1
    got = matmul_mod(a, b, m)
    ao, bo = a.astype(object), b.astype(object)
    want = np.matmul(ao, bo) % m
    assert (got == want.astype(np.int64)).all()


def test_matmul_mod_chunks_very_long_sums() -> None:
    m = DEFAULT_P
    k = 2**19 + 5
    assert _limb_plan(k, 31)[0] == "chunk"
    a = np.full((1, k), m - 1, dtype=np.int64)
    b = np.full((k, 1), m - 2, dtype=np.int64)
    assert int(matmul_mod(a, b, m)[0, 0]) == (k * (m - 1) * (m - 2)) % m


def test_exp_is_a_homomorphism_and_lax_ops_follow() -> None:
    t = FieldTrial(11, 2)
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, t.q, 1000), rng.integers(0, t.q, 1000)
    assert (t.exp((a + b) % t.q) == t.exp(a) * t.exp(b) % t.p).all()
    assert pow(t.omega, t.q, t.p) == 1 and t.omega != 1
    assert (t.exp(np.zeros(3, dtype=np.int64)) == 1).all()
    g = mf.Graph()
    x = g.input((8, 8), "f32", "x")
    g.output(g.silu(x), g.mul(x, g.sigmoid(x)), g.sigmoid(x),
             g.div(g.exp(g.neg(x)), g.exp(g.neg(x))))
    ev = FieldEvaluator(t)
    silu, xs, sig, one = ev.outputs(g.build())
    assert (silu == xs).all()
    assert (one == 1).all()
    xq = t.input("x", (8, 8), "q")
    assert (sig * (1 + t.exp((-xq) % t.q)) % t.p == 1).all()


def test_random_functions_are_consistent_within_a_trial_and_differ_across() -> None:
    t1, t2 = FieldTrial(5, 0), FieldTrial(5, 1)
    x = np.arange(1000, dtype=np.int64)
    a = t1.random_function("gelu", [x], "p")
    assert (a == t1.random_function("gelu", [x.copy()], "p")).all()
    assert (a == t1.random_function("gelu", [x[::-1]], "p")[::-1]).all()
    assert not (a == t2.random_function("gelu", [x], "p")).all()
    assert not (a == t1.random_function("relu", [x], "p")).all()
    assert len(set(a.tolist())) > 990  # looks like a random function, not a constant
    g = mf.Graph()
    v = g.input((4, 16), "f32", "v")
    g.output(g.sqrt(g.mean(g.square(v), axis=-1)), g.rsqrt(g.mean(g.square(v), axis=-1)))
    s, r = FieldEvaluator(t1).outputs(g.build())
    assert (s * r % P == 1).all()  # rsqrt is 1 / the same random sqrt


@given(st.integers(0, 5000), st.sampled_from([DEFAULT_P, DEFAULT_Q, 7]), st.integers(0, 2**32 - 1))
def test_batch_inversion_agrees_with_fermat(n: int, m: int, seed: int) -> None:
    """The tree of pairwise products (``inverse_mod``) gives every element's inverse, for any
    length (odd levels padded) and modulus, in the input's shape."""
    from mirage_formal.semantics.field import _fermat_inverse

    x = np.random.default_rng(seed).integers(1, m, size=n, dtype=np.int64)
    inv = inverse_mod(x.reshape(1, n), m)
    assert inv.shape == (1, n)
    assert (inv.reshape(-1) == _fermat_inverse(x, m)).all()
    assert (inv.reshape(-1) * x % m == 1).all()


def test_zero_divisor_is_never_treated_as_one() -> None:
    with pytest.raises(ZeroDivisorInTrial):
        inverse_mod(np.array([3, 0, 5]), P)
    g = mf.Graph()
    x = g.input((4, 4), "f32", "x")
    g.output(g.div(x, g.sub(x, x)))
    with pytest.raises(ZeroDivisorInTrial):
        FieldEvaluator(FieldTrial(0, 0)).outputs(g.build())


def test_constants_are_exact_rationals() -> None:
    c = as_rational(0.1)
    assert c == Fraction(3602879701896397, 2**55)  # the float's exact value, not 1/10
    assert const_mod(c, P) * pow(2, 55, P) % P == 3602879701896397 % P
    assert const_mod(as_rational(0.1), P) != pow(10, -1, P)
    with pytest.raises(mf.MirageError, match="finite"):
        as_rational(float("inf"))


def test_inputs_do_not_depend_on_request_order() -> None:
    t1, t2 = FieldTrial(9, 4), FieldTrial(9, 4)
    a1 = t1.input("A", (3, 3), "p")
    t2.input("B", (3, 3), "q")
    assert (t2.input("A", (3, 3), "p") == a1).all()
    assert not (t1.input("A", (3, 3), "p") == FieldTrial(10, 4).input("A", (3, 3), "p")).all()


@given(st.one_of(block_programs(), kernel_programs()), st.integers(0, 2**32))
def test_evaluator_uses_only_the_sides_the_analysis_counts(g: mf.KernelGraph, seed: int) -> None:
    """The bound counts divisors and random functions per side from the analysis; the
    evaluator must never compute a kernel-level value on a side the analysis did not list."""
    info = analyze(g)
    assume(info.in_class)
    ev = FieldEvaluator(FieldTrial(seed, 0))
    try:
        ev.outputs(g)
    except ZeroDivisorInTrial:
        assume(False)
    for (n, side) in ev.cache:
        assert side in info.sides[n], (n, side, info.sides[n])


@pytest.mark.parametrize("m", [DEFAULT_P, DEFAULT_Q])
@pytest.mark.parametrize("shapes", [((1, 2, 300), (300, 90)), ((40, 300), (1, 300, 2)),
                                    ((2, 1, 4100), (1, 4100, 30))])
def test_matmul_mod_lopsided_products_are_exact(m: int, shapes: tuple[tuple[int, ...], ...]) -> None:
    rng = np.random.default_rng(len(shapes[0]) + m % 7)
    a = rng.integers(0, m, size=shapes[0])
    b = rng.integers(0, m, size=shapes[1])
    a[..., 0, :] = m - 1
    b[..., :, 0] = m - 1
    want = (np.matmul(a.astype(object), b.astype(object)) % m).astype(np.int64)
    assert (matmul_mod(a, b, m) == want).all()


@st.composite
def _loop_sum_programs(draw: Any) -> mf.KernelGraph:
    """One graph-defined kernel accumulating a product of tiles, possibly times or over a
    loop-invariant tile: each operand's tile varying with the loop or not, on random grids."""
    m, k, n = (draw(st.sampled_from([1, 2, 3, 4])) for _ in range(3))
    forloop = draw(st.sampled_from([1, 2, 3, 5]))
    gx, gy = draw(st.sampled_from([1, 2])), draw(st.sampled_from([1, 2]))
    a_loops, b_loops = draw(st.booleans()), draw(st.booleans())
    g = mf.Graph()
    x = g.input((m * gx, k * (forloop if a_loops else 1)), "f32", "X")
    w = g.input((k * (forloop if b_loops else 1), n * gy), "f32", "W")
    s = g.input((m * gx, n * gy if draw(st.booleans()) else 1), "f32", "S")
    kern = g.kernel([x, w, s], grid=(gx, gy, 1), forloop=forloop)
    xt = kern.iter(x, imap=(0 if gx > 1 else -1, -1, -1), fmap=1 if a_loops else -1)
    wt = kern.iter(w, imap=(-1, 1 if gy > 1 else -1, -1), fmap=0 if b_loops else -1)
    y = kern.op("matmul", xt, wt)
    st_ = kern.iter(s, imap=(0 if gx > 1 else -1, 1 if gy > 1 and s.shape[1] > 1 else -1, -1),
                    fmap=-1)
    how = draw(st.sampled_from(["none", "mul", "mul_left", "div", "twice"]))
    if how == "mul":
        y = kern.op("mul", y, st_)
    elif how == "mul_left":
        y = kern.op("mul", st_, y)
    elif how == "div":
        y = kern.op("div", y, st_)
    elif how == "twice":
        y = kern.op("mul", kern.op("div", y, st_), st_)
    acc = kern.accum(y, kind=draw(st.sampled_from(["sum", "mean"])))
    kern.output(acc, omap=(0 if gx > 1 else -1, 1 if gy > 1 else -1, -1))
    (out,) = kern.build()
    g.output(out)
    return g.build()


@given(_loop_sum_programs(), st.integers(0, 2**32))
def test_loop_sums_of_products_equal_the_summed_tiles(g: mf.KernelGraph, seed: int,
                                                      ) -> None:
    """The evaluator's loop sums (one GEMM over the joined iterations, invariant factors
    applied after) give exactly the residues of summing every iteration's tile, on random
    field inputs, in both fields."""
    import mirage_formal.semantics.field as field

    def outputs(fused: bool) -> list[np.ndarray]:
        old = field.LOOP_SUMS
        field.LOOP_SUMS = fused
        try:
            ev = FieldEvaluator(FieldTrial(seed, 0))
            return [np.asarray(ev.value(g.outputs[0], side)) for side in ("p", "q")]
        except ZeroDivisorInTrial:
            return []
        finally:
            field.LOOP_SUMS = old

    want, got = outputs(False), outputs(True)
    assert len(want) == len(got)
    for w, v in zip(want, got, strict=True):
        np.testing.assert_array_equal(v, w)


@pytest.mark.parametrize("fa, fb", [(3, 3), (1, 3), (3, 1), (1, 1)])
def test_loop_sum_of_products_counts_invariant_tiles_every_iteration(fa: int, fb: int) -> None:
    """Block-level operands (grid x, y, z, loop, tile): the loop sum of their products, an
    invariant operand (loop axis 1) counted in each of the loop's 3 iterations."""
    rng = np.random.default_rng(fa * 10 + fb)
    m = DEFAULT_P
    a = rng.integers(0, m, size=(2, 1, 1, fa, 4, 5))
    b = rng.integers(0, m, size=(1, 3, 1, fb, 5, 2))
    full_a, full_b = np.broadcast_to(a, (2, 1, 1, 3, 4, 5)), np.broadcast_to(b, (1, 3, 1, 3, 5, 2))
    want = matmul_mod(full_a, full_b, m).sum(axis=3, keepdims=True) % m
    np.testing.assert_array_equal(loop_sum_of_products(a, b, 3, m), want)


@st.composite
def _broadcast_operands(draw: Any) -> tuple[np.ndarray, np.ndarray]:
    """Two batched matmul operands whose batch axes are equal, or 1 on either side."""
    nb = draw(st.integers(0, 4))
    sa, sb = [], []
    for _ in range(nb):
        size = draw(st.integers(2, 3))
        kind = draw(st.sampled_from(["both", "a", "b", "none"]))
        sa.append(size if kind in ("both", "a") else 1)
        sb.append(size if kind in ("both", "b") else 1)
    m, k, n = (draw(st.integers(1, 5)) for _ in range(3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32)))
    a = rng.integers(-50, 50, size=(*sa, m, k)).astype(np.float64)
    b = rng.integers(-50, 50, size=(*sb[draw(st.integers(0, nb)):], k, n)).astype(np.float64)
    return a, b


@given(_broadcast_operands())
def test_batched_matmul_folds_broadcast_axes_without_changing_the_product(
        ab: tuple[np.ndarray, np.ndarray]) -> None:
    """Batch axes broadcast on one side fold into the other's rows or columns; the product
    is numpy's, shape and values (integers: exact in float64 in any order)."""
    a, b = ab
    np.testing.assert_array_equal(batched_matmul(a, b), np.matmul(a, b))


@pytest.mark.parametrize("chunk", [1, 7, 1 << 20])
def test_exp_in_chunks_is_omega_to_the_power(chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``FieldTrial.exp`` is ω^e mod p element by element, whatever its chunk size and the
    exponents' layout (a transposed view)."""
    import mirage_formal.semantics.field as field

    monkeypatch.setattr(field, "EXP_CHUNK", chunk)
    t = FieldTrial(5, 0)
    e = np.random.default_rng(chunk).integers(0, t.q, size=(3, 5, 4)).transpose(2, 0, 1)
    got = t.exp(e)
    assert got.shape == e.shape and got.dtype == np.int64
    want = np.vectorize(lambda x: pow(t.omega, int(x), t.p), otypes=[np.int64])(e)
    np.testing.assert_array_equal(got, want)


@given(st.lists(st.sampled_from([(1, 1), (1, 3), (3, 1), (2, 2)]), min_size=0, max_size=2),
       st.integers(1, 5), st.integers(1, 6), st.integers(1, 5), st.booleans(), st.integers(0, 2**32))
def test_batched_matmul_is_numpys_whichever_way_it_groups(batch: list[tuple[int, int]], m: int, k: int,
                                                          n: int, fold: bool, seed: int) -> None:
    """``field.batched_matmul`` folds broadcast batch axes into one GEMM, or leaves few large
    GEMMs to numpy (``FOLD_GEMMS_MAX``, ``FOLD_GEMM_MIN``); on integer-valued operands either
    way is exactly numpy's product."""
    import mirage_formal.semantics.field as fm

    rng = np.random.default_rng(seed)
    a = rng.integers(-50, 50, size=(*[x for x, _ in batch], m, k)).astype(np.float64)
    b = rng.integers(-50, 50, size=(*[y for _, y in batch], k, n)).astype(np.float64)
    old = fm.FOLD_GEMM_MIN
    try:
        fm.FOLD_GEMM_MIN = 2**62 if fold else 0  # (fold always, or never for few GEMMs)
        np.testing.assert_array_equal(fm.batched_matmul(a, b), np.matmul(a, b))
    finally:
        fm.FOLD_GEMM_MIN = old
