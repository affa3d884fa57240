"""Terms parse back to themselves; abstract expressions follow the registry templates and the
accumulator rules; every op the templates use has subexpression rules."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mirage_formal import workloads
from mirage_formal.errors import FormatError
from mirage_formal.formal.abstract import expr_of, program_exprs
from mirage_formal.formal.axioms import load_axioms
from mirage_formal.formal.term import Term, app, num, parse_term, tsum, var
from mirage_formal.ir.graph import KERNEL_OP
from mirage_formal.ir.ops import REGISTRY

terms = st.recursive(
    st.sampled_from([var("X"), var("W"), num(4096), num(0.5)]),
    lambda kids: st.one_of(
        st.tuples(st.sampled_from(["add", "mul", "div"]), kids, kids).map(lambda t: app(t[0], t[1], t[2])),
        st.tuples(st.sampled_from(["exp", "sqrt"]), kids).map(lambda t: app(t[0], t[1])),
        st.tuples(st.integers(1, 64), kids).map(lambda t: tsum(t[0], t[1])),
    ),
    max_leaves=8,
)


@given(terms)
def test_text_round_trip(t: Term) -> None:
    assert parse_term(str(t)) is t
    assert parse_term(t.text).key == t.key


def test_hash_consing() -> None:
    assert app("mul", var("X"), var("W")) is parse_term("mul(X, W)")
    assert tsum(4, var("X")) is not tsum(8, var("X"))


@pytest.mark.parametrize("bad", ["mul(X", "sum(X, Y)", "mul(X,, Y)", "sum(2*3, X)", "f()"])
def test_parse_errors(bad: str) -> None:
    with pytest.raises(FormatError):
        parse_term(bad)


def test_reference_expressions() -> None:
    (r,) = program_exprs(workloads.program("rmsnorm"))
    assert r is parse_term("sum(4096, mul(div(X, sqrt(div(sum(4096, mul(X, X)), 4096))), W))")
    (g,) = program_exprs(workloads.program("gqa", kv=256))
    e = "exp(sum(64, mul(Q, K)))"
    assert g is parse_term(f"sum(256, mul(div({e}, sum(256, {e})), V))")


def test_fused_rmsnorm_block_expressions() -> None:
    h = workloads.handwritten("rmsnorm")
    kn = next(n for n in h.nodes if n.op == KERNEL_OP)
    bg = kn.attr("graph")
    exprs = {str(expr_of(b, list(kn.src), bg.forloop)) for b in bg.nodes}
    # F = 4096/128 = 32 iterations; the rms accumulator sums F * 128 squares
    assert "sum(32, sum(128, mul(X, W)))" in exprs
    assert "sqrt(div(sum(4096, mul(X, X)), 4096))" in exprs
    (out,) = program_exprs(h)
    assert str(out) == "div(sum(32, sum(128, mul(X, W))), sqrt(div(sum(4096, mul(X, X)), 4096)))"


def test_flashdecoding_partial_sums_fold() -> None:
    (out,) = program_exprs(workloads.handwritten("gqa"))
    e = "exp(sum(64, mul(Q, K)))"
    # kernel 2 folds the 8 key splits (fold=64 of a 512-wide tile) and sums them (fold=1)
    assert str(out) == f"div(sum(8, sum(4, sum(128, mul({e}, V)))), sum(8, sum(512, {e})))"


def test_every_template_op_has_sub_rules() -> None:
    sub_ops = set(load_axioms(["eq", "sub"]).sub_positions())
    for d in REGISTRY.values():
        for op in re.findall(r"([a-z_]+)\(", d.abstract):
            assert op in sub_ops, f"{d.name}'s template uses {op}, which axioms/sub.toml lacks"
