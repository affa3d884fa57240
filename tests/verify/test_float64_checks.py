"""The float64 screen and re-check beside the field verifier: differential agreement with the
verifier on mutants, permuted outputs, and the re-check's error on correct μGraphs."""

from __future__ import annotations

import math

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
