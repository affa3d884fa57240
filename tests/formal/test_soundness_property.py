"""Property: subterms of terms A_eq-equal to the reference are kept (Theorem 1, sampled).

Hypothesis draws a short chain of axiom rewrites applied at random positions of the reference
expression (any direction the axiom allows, splits with random divisors), then a random
subterm of the result. The oracle must keep that subterm. Rewriting here is plain syntactic
term rewriting, independent of the oracle's e-graph.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mirage_formal import workloads
from mirage_formal.formal.axioms import (
    PApp,
    Pattern,
    PNum,
    PVar,
    SLit,
    SProd,
    SVar,
    eval_size,
    load_axioms,
)
from mirage_formal.formal.egraph import rules_of
from mirage_formal.formal.oracle import Oracle
from mirage_formal.formal.term import Term, num, term

RULES = rules_of(load_axioms(["eq", "sub"]).eq)


def _match(p: Pattern, t: Term, env: dict[str, Any], divisor: int) -> dict[str, Any] | None:
    if isinstance(p, PVar):
        if p.name in env:
            return env if env[p.name] is t else None
        return {**env, p.name: t}
    if isinstance(p, PNum):
        if t.op != "num":
            return None
        if isinstance(p.value, SVar):
            return {**env, p.value.name: t.data} if p.value.name not in env else (
                env if env[p.value.name] == t.data else None)
        return env if t.data == p.value else None
    if t.op != p.op or len(t.args) != len(p.args):
        return None
    if p.size is not None:
        n = int(t.data)  # type: ignore[arg-type]
        s = p.size
        if isinstance(s, SLit):
            if s.value != n:
                return None
        elif isinstance(s, SVar):
            if s.name in env and env[s.name] != n:
                return None
            env = {**env, s.name: n}
        else:
            assert isinstance(s, SProd) and len(s.factors) == 2
            a, b = s.factors
            assert isinstance(a, SVar) and isinstance(b, SVar)
            if n % divisor:
                return None
            env = {**env, a.name: n // divisor, b.name: divisor}
    for pa, ta in zip(p.args, t.args, strict=True):
        r = _match(pa, ta, env, divisor)
        if r is None:
            return None
        env = r
    return env


def _build(p: Pattern, env: dict[str, Any]) -> Term:
    if isinstance(p, PVar):
        return env[p.name]  # type: ignore[no-any-return]
    if isinstance(p, PNum):
        return num(env[p.value.name] if isinstance(p.value, SVar) else p.value)
    assert isinstance(p, PApp)
    data = eval_size(p.size, env) if p.size is not None else None
    return term(p.op, data, tuple(_build(a, env) for a in p.args))


def _rewrite_at(t: Term, path: list[int], rule_i: int, divisor: int) -> Term | None:
    if path:
        i = path[0] % len(t.args) if t.args else 0
        if not t.args:
            return None
        new = _rewrite_at(t.args[i], path[1:], rule_i, divisor)
        if new is None:
            return None
        args = list(t.args)
        args[i] = new
        return term(t.op, t.data, tuple(args))
    for k in range(len(RULES)):  # the first rule, from rule_i on, that applies here
        r = RULES[(rule_i + k) % len(RULES)]
        env = _match(r.src, t, {}, divisor)
        sizes = {n: v for n, v in (env or {}).items() if isinstance(v, int)}
        if env is not None and r.axiom.condition.holds(sizes):
            return _build(r.dst, env)
    return None


steps = st.lists(st.tuples(st.lists(st.integers(0, 3), max_size=5), st.integers(0, 200),
                           st.sampled_from([2, 4, 8, 16, 64])), min_size=1, max_size=4)

_ORACLES: dict[str, Oracle] = {}
REWRITES: list[int] = []


@pytest.mark.parametrize("name", ["rmsnorm", "gqa"])
@settings(max_examples=int(os.environ.get("FORMAL_PROPERTY_EXAMPLES", "40")), deadline=None)
@given(chain=steps, pick=st.integers(0, 10_000))
def test_subterms_of_equal_terms_are_kept(name: str, chain: list[tuple[list[int], int, int]],
                                          pick: int) -> None:
    if name not in _ORACLES:
        _ORACLES[name] = Oracle(workloads.program(name, **({"kv": 512} if name == "gqa" else {"h": 512, "n": 256})))
    o = _ORACLES[name]
    t = o.outputs[0]
    applied = 0
    for path, ri, div in chain:
        new = _rewrite_at(t, path, ri, div)
        if new is not None:
            t, applied = new, applied + 1
    REWRITES.append(applied)
    subs = [s for s in t.subterms() if s.op != "num"]
    s = subs[pick % len(subs)]
    d = o.decide_expr(s)
    assert d.keep, f"pruned {s} (a subterm of {t}, equal to the reference): {d.reason}"


def test_chains_actually_rewrite() -> None:
    """Guard against a vacuous property: most drawn chains must change the reference."""
    if not REWRITES:
        pytest.skip("run together with the property test")
    assert sum(1 for r in REWRITES if r > 0) > len(REWRITES) // 2
