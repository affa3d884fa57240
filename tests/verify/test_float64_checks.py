"""The float64 screen and re-check beside the field verifier: differential agreement with the
verifier on mutants, permuted outputs, and the re-check's error on correct μGraphs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mirage_formal import workloads
from mirage_formal.ir.builder import Graph
from mirage_formal.verify import Verifier
from mirage_formal.verify.float64 import FloatRecheck, FloatScreen, recheck_float64
from mirage_formal.verify.mutate import mutants

PROG = {"rmsnorm": {"h": 256, "n": 128}, "gqa": {"kv": 512, "q": 32}}
HAND = {"rmsnorm": {"h": 256, "n": 128, "k_tile": 32},
        "gqa": {"kv": 512, "q": 32, "splits": 2, "row_blocks": 2, "kv_tile": 64, "combine_rows": 8}}


@pytest.mark.parametrize("name", sorted(PROG))
def test_screen_agrees_with_field_verifier_on_mutants(name: str) -> None:
    prog = workloads.program(name, 1, **PROG[name])
    hw = workloads.handwritten(name, 1, **HAND[name])
    screen, field = FloatScreen(prog, seed=3), Verifier(prog, bound=2.0**-40, seed=3, float_check=False)
    assert screen.check(hw).accepted
    assert recheck_float64(prog, hw) < 1e-12
    ms = mutants(hw)
    assert len(ms) >= 5
    rc = FloatRecheck(prog)
    for m in ms:
        fv = field.check(m.graph)
        sv = screen.check(m.graph)
        assert sv.accepted == fv.accepted, (m.kind, m.where, sv, fv.status)
        if not fv.accepted:
            assert rc.error(m.graph) > 1e-6, (m.kind, m.where)


def test_screen_matches_permuted_outputs() -> None:
    g = Graph()
    x, y = g.input((4, 8), "f32", "X"), g.input((4, 8), "f32", "Y")
    g.output(x + y, x * y)
    ref = g.build()
    h = Graph()
    x2, y2 = h.input((4, 8), "f32", "X"), h.input((4, 8), "f32", "Y")
    h.output(y2 * x2, y2 + x2)
    cand = h.build()
    assert FloatScreen(ref).check(cand).accepted
    assert recheck_float64(ref, cand, [1, 0]) < 1e-15
    assert recheck_float64(ref, cand) > 1e-3
    k = Graph()
    x3, y3 = k.input((4, 8), "f32", "X"), k.input((4, 8), "f32", "Y")
    k.output(x3 - y3, x3 * y3)
    v = FloatScreen(ref).check(k.build())
    assert not v.accepted and "output 0" in v.reason and math.isfinite(v.max_rel_error)


def test_float_check_draws_inside_each_ops_domain_and_matches_nan_patterns() -> None:
    """rsqrt(X) against itself is numerically fine: X reaches rsqrt, so it is drawn positive;
    and outputs that are NaN/inf at the same places agree."""
    import mirage_formal as mf
    from mirage_formal.semantics.reference import positive_inputs
    from mirage_formal.verify import verify
    from mirage_formal.verify.verifier import compare_float64

    g = mf.Graph()
    x = g.input((4, 8), "f16", "X")
    y = g.input((4, 8), "f16", "Y")
    g.output(g.add(g.rsqrt(x), y))
    prog = g.build()
    assert positive_inputs(prog) == {"X"}
    v = verify(prog, prog, seed=3)
    assert v.float64_ok and v.float64_max_rel_error == 0.0, str(v)
    nan = np.array([1.0, np.nan, np.inf, 2.0])
    assert compare_float64([nan], [nan.copy()], [0]) == 0.0
    assert compare_float64([nan], [np.array([1.0, 1.0, np.inf, 2.0])], [0]) == math.inf
    assert compare_float64([nan], [np.array([1.0, np.nan, -np.inf, 2.0])], [0]) == math.inf


def test_a_candidate_undefined_on_the_draws_is_rejected_without_numpy_warnings() -> None:
    """A wrong candidate that takes the root of a negative value (the search meets such ones)
    gets NaN, which fails the screen and the re-check; numpy's warnings about it must not reach
    the user's console."""
    import warnings

    g = Graph()
    x = g.input((4, 8), "f32", "X")
    g.output(x * x)
    ref = g.build()
    h = Graph()
    x2 = h.input((4, 8), "f32", "X")
    h.output(h.sqrt(x2 - 2.0 * x2))  # sqrt(-x): NaN wherever x > 0
    cand = h.build()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not FloatScreen(ref).check(cand).accepted
        assert not recheck_float64(ref, cand) < 1e-6
