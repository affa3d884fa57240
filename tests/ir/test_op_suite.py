"""The registry-parametrized suite: every declared op is checked without anyone writing a test.

For each op in the registry: its declaration passes the declaration checks; every operand
matters in its field and float64 rules; commutativity is as declared; field and float64
rules agree on exact inputs (ring kind); a one-op program has degrees and field values;
single-change mutants of it are rejected by the verifier; the oracle keeps each operand
(its sub axioms exist); the emitter writes its C expression. A deliberately unsound
declaration (a binary op whose random function ignores an operand) fails the suite, and
declarations lacking a facet are refused when declared.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
from op_checks import (
    all_problems,
    attrs_for,
    field_operand_problems,
    one_op_program,
    operand_shapes,
)

import mirage_formal as mf
from mirage_formal.ir.opdef import OpDeclarationError, check_declaration
from mirage_formal.ir.ops import REGISTRY, FieldRule, OpDef, declare, elementwise
from mirage_formal.semantics.evaluate import evaluate
from mirage_formal.semantics.field import FieldEvaluator, FieldTrial
from mirage_formal.semantics.reference import F64
from mirage_formal.verify import Verifier, analyze
from mirage_formal.verify.mutate import mutants
from mirage_formal.verify.verdict import ACCEPTED, NOT_APPLICABLE, REJECTED

OPS = sorted(n for n in REGISTRY if n != "accum")


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_declaration_is_complete(name: str) -> None:
    check_declaration(REGISTRY[name])


@pytest.mark.parametrize("name", OPS)
def test_rules_read_every_operand_and_agree(name: str) -> None:
    assert all_problems(REGISTRY[name]) == []


@pytest.mark.parametrize("name", OPS)
def test_one_op_program_has_degrees_and_field_values(name: str) -> None:
    prog = one_op_program(name)
    info = analyze(prog)
    assert info.in_class and prog.outputs[0] in info.degrees
    (out,) = FieldEvaluator(FieldTrial(1, 0)).outputs(prog)
    assert out.shape == prog.outputs[0].shape and out.dtype == np.int64


@pytest.mark.parametrize("name", OPS)
def test_single_change_mutants_are_rejected(name: str) -> None:
    """Every mutant of the one-op program that float64 tells apart is rejected; the
    program itself is accepted."""
    prog = one_op_program(name, wrap=True)
    v = Verifier(prog, seed=11)
    assert v.check(prog).status == ACCEPTED
    rng = np.random.default_rng(0)
    d = REGISTRY[name]
    lo, hi = (0.5, 2.0) if d.domain == "positive" else (-1.0, 1.0)
    xs = {n.attr("name"): rng.uniform(lo, hi, size=n.shape) for n in prog.inputs}
    with np.errstate(all="ignore"):
        want = evaluate(prog, xs, F64())[0]
    checked = 0
    for m in mutants(prog, kinds=frozenset({"op", "swap", "axis"})):
        with np.errstate(all="ignore"):
            got = evaluate(m.graph, xs, F64())[0]
        if got.shape == want.shape and np.allclose(got, want, equal_nan=True):
            continue  # an equivalent (or indistinguishable) mutant
        verdict = v.check(m.graph)
        if analyze(m.graph).problems:  # e.g. an exp put under an exp: outside the class
            assert verdict.status == NOT_APPLICABLE, (m.where, str(verdict))
            continue
        assert verdict.status == REJECTED, (m.where, str(verdict))
        checked += 1
    if d.arity[1] > 1 or name in ("exp", "neg", "sqrt", "gelu"):
        assert checked, f"{name}: no mutant was checked"


@pytest.mark.parametrize("name", OPS)
def test_oracle_keeps_every_operand(name: str) -> None:
    """The abstract expression of op(neg(x0), ...) has each neg(xi) as a subexpression under
    the op's declared axiom sets (a missing sub axiom would prune every μGraph using it)."""
    from mirage_formal.formal import Oracle

    prog = one_op_program(name, wrap=True)
    d = REGISTRY[name]
    oracle = Oracle(prog, axioms=sorted({"eq", "sub", *d.axioms}))
    negs = [n for n in prog.nodes if n.op == "neg" and n.src[0].op == "input"]
    assert len(negs) == d.arity[1]
    for n in negs:
        assert oracle.keep(n), f"{name}: the oracle prunes operand {n.src[0].attr('name')}"


@pytest.mark.parametrize("name", sorted(n for n in OPS if REGISTRY[n].elementwise))
def test_emitter_writes_the_c_expression(name: str) -> None:
    from mirage_formal.codegen import emit as emit_mod

    d = REGISTRY[name]
    assert d.c_expr is not None
    args = [f"v{i}" for i in range(d.arity[1])]
    attrs = attrs_for(d, operand_shapes(d))
    text = d.c_expr.format(*args, **attrs)
    assert all(a in text for a in args)
    assert hasattr(emit_mod, "REGISTRY")  # the emitter reads the same declarations


@pytest.mark.parametrize("name", sorted(n for n in OPS if REGISTRY[n].elementwise
                                        and not REGISTRY[n].attrs))
def test_one_kernel_search_finds_a_fused_ugraph_that_compiles(name: str, tmp_path: Path) -> None:
    """A search of one graph-defined kernel, pruned by the oracle and checked by the field
    verifier, finds the op fused into a kernel; NVRTC compiles it for sm_90."""
    from mirage_formal.codegen import compile_graph
    from mirage_formal.formal import Oracle
    from mirage_formal.search import SearchConfig, run_search

    d = REGISTRY[name]
    g = mf.Graph()
    xs = [g.input((16, 16), "f16", f"x{i}") for i in range(d.arity[1])]
    g.output(g.op(name, *xs))
    prog = g.build()
    cfg = SearchConfig(kernel_ops=(), block_ops=(name,), accums=("sum",), max_kernel_ops=2,
                       max_graph_kernels=1, max_block_ops=6, max_kernel_inputs=3,
                       max_kernel_outputs=1, max_grid_axes=1, grid_sizes=(2,), forloop=(1,),
                       verify_variants=1, max_variants=4, cost_ceiling=math.inf)
    r = run_search(prog, cfg, Oracle(prog, axioms=sorted({"eq", "sub", *d.axioms})),
                   Verifier(prog, seed=1, float_check=False), progress=False)
    fused = [a.graph for a in r.accepted if [k.op for k in a.graph.kernels] == ["kernel"]]
    assert fused, f"{name}: the one-kernel search found no fused μGraph"
    cg = compile_graph(fused[0], arch="sm_90", load=False, cache=tmp_path)
    assert cg.cubin[:4] == b"\x7fELF"


# ---------------------------------------------------------------- unsound declarations

def _bad_max(ignore_second: bool, registry: dict[str, OpDef]) -> OpDef:
    """A binary maximum whose random function, when ``ignore_second``, hashes only x."""
    rule = (lambda F, a, x, y: (x,)) if ignore_second else (lambda F, a, x, y: (x, y))
    return elementwise("bad_max", 2, np.maximum, "fmaxf({0}, {1})",
                       FieldRule("random", rule, fid="bad_max"), "random", "bad_max($0, $1)",
                       "max(x, y)", commutative=True, registry=registry)


def test_unsound_declaration_fails_the_suite() -> None:
    """A binary op whose field rule ignores an operand passes the declaration check (its
    rule has the right arity) but the suite's operand check catches it; the sound one passes."""
    scratch: dict[str, OpDef] = {}
    bad = _bad_max(True, scratch)
    problems = field_operand_problems(bad)
    assert problems and all("operand 1" in p for p in problems)
    assert all_problems(_bad_max(False, {})) == []
    assert "bad_max" not in REGISTRY


@pytest.mark.parametrize("change,facet", [
    (dict(field=FieldRule("random", None, fid="f")), "field"),
    (dict(field=FieldRule("random", lambda F, a, x: (x,), fid="f")), "field"),  # unary rule
    (dict(field=FieldRule("ring", lambda F, a, x, y: x)), "degree"),  # ring with degree random
    (dict(field=FieldRule("random", lambda F, a, x, y: (x, y))), "field"),  # no fid
    (dict(label="elementwise"), "label"),
    (dict(abstract="m($0)"), "abstract"),
    (dict(c_expr="fmaxf({0}, 0)"), "c_expr"),
    (dict(cost=0.0), "cost"),
    (dict(degree="bogus"), "degree"),
    (dict(axioms=()), "axioms"),
    (dict(domain="complex"), "domain"),
])
def test_incomplete_declarations_are_refused_naming_the_facet(change: dict[str, object],
                                                              facet: str) -> None:
    good = _bad_max(False, {})
    bad = dataclasses.replace(good, **change)  # type: ignore[arg-type]
    with pytest.raises(OpDeclarationError, match=f"facet '{facet}'"):
        declare(bad, {})


def test_commutative_is_only_for_binary_ops() -> None:
    neg = dataclasses.replace(REGISTRY["neg"], name="neg2", commutative=True)
    with pytest.raises(OpDeclarationError, match="facet 'commutative'"):
        declare(neg, {})


def test_an_op_is_declared_once() -> None:
    with pytest.raises(OpDeclarationError, match="twice"):
        declare(REGISTRY["add"], {"add": REGISTRY["add"]})
