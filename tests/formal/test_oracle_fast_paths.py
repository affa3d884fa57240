"""The oracle's fast paths give the same answers as the plain ones they replace: compiled
e-matching and instantiation against the generic recursive matcher (same matches in the same
order, so the same e-graph and instances), and the Z3 term/fact caches and the unguarded
solver against the guarded solver alone with nothing cached."""

from __future__ import annotations

import random

import pytest

from mirage_formal import workloads
from mirage_formal.formal.axioms import (
    PApp,
    Pattern,
    PNum,
    PVar,
    SLit,
    SProd,
    SVar,
    load_axioms,
)
from mirage_formal.formal.egraph import EGraph, compile_builder, compile_matcher, rules_of
from mirage_formal.formal.oracle import Oracle
from mirage_formal.formal.samples import search_stream


def _random_egraph(seed: int) -> EGraph:
    """Random terms over add/mul/div/sum/exp and constants, some classes merged."""
    rng = random.Random(seed)
    g = EGraph()
    leaves = [g.add_node("var", n, ())[0] for n in ("X", "Y", "Z")]
    leaves += [g.add_node("num", v, ())[0] for v in (1, 2, 4, 0.5)]
    cls = list(leaves)
    for _ in range(120):
        op = rng.choice(["add", "mul", "div", "sum", "sum", "exp"])
        if op == "sum":
            c = g.add_node("sum", rng.choice([1, 2, 4, 8, 16]), (rng.choice(cls),))[0]
        elif op == "exp":
            c = g.add_node("exp", None, (rng.choice(cls),))[0]
        else:
            c = g.add_node(op, None, (rng.choice(cls), rng.choice(cls)))[0]
        cls.append(c)
    for _ in range(25):
        g.union(rng.choice(cls), rng.choice(cls))
    g.rebuild()
    return g


def _patterns() -> list[PApp]:
    x, y, i, j, n = PVar("x"), PVar("y"), SVar("i"), SVar("j"), SVar("n")
    ax = load_axioms(("eq", "sub", "ext_exp_sqrt"))
    pats = [r.src for r in rules_of(ax.eq)]
    pats += [
        PApp("mul", None, (x, x)),  # a repeated variable
        PApp("sum", SProd((SLit(2), i)), (x,)),  # a literal factor
        PApp("sum", SProd((i, j)), (PApp("sum", j, (x,)),)),  # two unknowns, then bound
        PApp("sum", i, (PApp("sum", SProd((i, j)), (x,)),)),  # a bound factor
        PApp("sum", SProd((i, i)), (x,)),  # a repeated unknown factor
        PApp("div", None, (x, PNum(n))),  # a size variable used as a tensor
        PApp("sum", n, (PApp("div", None, (x, PNum(n))),)),  # ... already bound
        PApp("add", None, (x, PNum(0.5))),  # a float constant
        PApp("mul", None, (PNum(2), PApp("exp", None, (y,)))),
        PApp("sum", SLit(4), (PApp("add", None, (x, y)),)),
    ]
    return pats


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_compiled_matcher_equals_generic(seed: int) -> None:
    g = _random_egraph(seed)
    g.sizes |= {3, 5}
    total = 0
    for p in _patterns():
        m = compile_matcher(p)
        assert m is not None
        cands = list(range(len(g.en_op)))
        got: list[tuple[int, dict[str, int]]] = []
        m(g, cands, got)
        want = [(e, env) for e in cands for env in g._match_node(p, e, {})]
        assert got == want, p
        total += len(got)
    assert total > 50


def test_compiled_matcher_declines_three_unknown_factors() -> None:
    i, j, k = SVar("i"), SVar("j"), SVar("k")
    assert compile_matcher(PApp("sum", SProd((i, j, k)), (PVar("x"),))) is None
    assert compile_matcher(PApp("mul", None, (PVar("n"), PApp("sum", SVar("n"), (PVar("y"),))))) is None


def test_compiled_builder_equals_instantiate() -> None:
    pats: list[Pattern] = [r.dst for r in rules_of(load_axioms(("eq", "ext_exp_sqrt")).eq)]
    pats.append(PApp("div", None, (PVar("x"), PNum(SVar("i")))))
    for p in pats:
        a, b = _random_egraph(3), _random_egraph(3)
        env = {"x": 7, "y": 9, "z": 11, "i": 4, "j": 2, "n": 8}
        assert compile_builder(p)(a, env) == b.instantiate(p, env)
        assert (a.en_op, a.en_data, a.en_kids, a.uf, a.trail) == \
            (b.en_op, b.en_data, b.en_kids, b.uf, b.trail)


def _state(o: Oracle) -> tuple[object, ...]:
    eg = o.eg
    return (eg.en_op, eg.en_data, eg.en_kids, eg.uf, [(i.rule.axiom.name, i.env) for i in eg.instances])


@pytest.mark.parametrize("name", ["rmsnorm", "gqa"])
def test_compiled_saturation_equals_generic(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole pipeline, reference and per-query saturation: the same e-graph, the same
    instances in the same order, the same decisions."""
    prog = workloads.program(name)
    fast = Oracle(prog)
    orig_init = EGraph.__init__

    def generic_init(self: EGraph) -> None:
        orig_init(self)
        self.compiled = False

    monkeypatch.setattr(EGraph, "__init__", generic_init)
    slow = Oracle(prog)
    assert not slow.eg.compiled and fast.eg.compiled
    assert _state(fast) == _state(slow)
    stream = search_stream(prog, [workloads.handwritten(name)], depth=1, cap=12)
    exprs = list(dict.fromkeys(fast.expr_of(*q) for q in stream))
    assert len(exprs) > 20
    for e in exprs:
        states = []
        for o in (fast, slow):
            mark = o.eg.mark()
            o.eg.add_term(e)
            o._saturate_query()
            states.append(_state(o))
            o.eg.undo(mark)
        assert states[0] == states[1], e.text
        a, b = fast.decide_expr(e), slow.decide_expr(e)
        assert (a.keep, a.reason, a.axioms) == (b.keep, b.reason, b.axioms), e.text


@pytest.mark.parametrize("name", ["rmsnorm", "gqa"])
def test_z3_caches_and_unguarded_solver_agree(name: str) -> None:
    """Decisions with the term/fact caches and the unguarded solver equal those of an
    oracle that empties its caches before every query and asks the guarded solver on every
    query too (``cross_check`` raises when the two solvers disagree)."""
    prog = workloads.program(name)
    cached = Oracle(prog)
    plain = Oracle(prog)
    plain.cross_check = True
    plain.z.CACHE_LIMIT = -1  # cleared before every query
    stream = search_stream(prog, [workloads.handwritten(name)], depth=2, cap=15)
    exprs = list(dict.fromkeys(cached.expr_of(*q) for q in stream))
    random.Random(0).shuffle(exprs)
    keeps = 0
    for e in exprs[:150]:
        a, b = cached.decide_expr(e), plain.decide_expr(e)
        assert (a.keep, a.tier, a.reason, a.axioms) == (b.keep, b.tier, b.reason, b.axioms), e.text
        keeps += a.keep and a.tier == "z3"
    assert cached.stats.z3_prunes > 10 and keeps > 10
    assert cached.z.cache_size() > 0
    assert cached.stats.z3_unknown == 0 == plain.stats.z3_unknown
