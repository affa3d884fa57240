"""Checks of one op declaration, for the registry-parametrized suite (tests/ir/test_op_suite.py).

Each check takes an :class:`OpDef` (not a name), so a test can run it on a declaration that
was built in a scratch registry and never entered the real one, and returns a list of
problems (empty: the check passes). They evaluate the declaration's own rules directly:

- :func:`field_operand_problems`: every operand changes the field rule's result, on both
  sides where the rule lives (a random function that ignores an operand is caught here);
- :func:`f64_operand_problems`: every operand changes the float64 rule's result;
- :func:`commutativity_problems`: an op declared commutative has symmetric float64 and
  field rules; a binary op not declared commutative has an asymmetric float64 rule;
- :func:`exact_agreement_problems`: on small integers (float64 exact) the field rule of a
  ring-kind op equals the float64 rule mapped into the field.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

import mirage_formal as mf
from mirage_formal.errors import GraphError
from mirage_formal.ir.ops import REGISTRY, OpDef
from mirage_formal.semantics.field import (
    P_SIDE,
    Q_SIDE,
    FieldTrial,
    ZeroDivisorInTrial,
    apply_exp,
    apply_same_side,
    const_mod,
)

N = 8


def attrs_for(d: OpDef, shapes: Sequence[tuple[int, ...]]) -> dict[str, Any]:
    """Attributes with every required one given a plain value."""
    given: dict[str, Any] = {}
    for a in d.attrs:
        if a.default is None and not a.optional:
            given[a.name] = 0.75 if a.kind is float else 1
    return d.normalize_attrs(shapes, given)


def operand_shapes(d: OpDef) -> list[tuple[int, ...]]:
    """Shapes for all ``arity[1]`` operands that the op's shape rule accepts."""
    k = d.arity[1]
    for shapes in ([(N, N)] * k, [(N, N)] + [(N,)] * (k - 1)):
        try:
            d.shape(shapes, attrs_for(d, shapes))
            return shapes
        except GraphError:
            continue
    raise AssertionError(f"{d.name}: no test shapes fit its shape rule")


def field_value(d: OpDef, trial: FieldTrial, xs: dict[str, list[np.ndarray]],
                attrs: dict[str, Any], side: str) -> np.ndarray:
    """The declaration's field rule on operands given per side."""
    if d.field.kind == "exp":
        gets: list[Callable[[str], np.ndarray]] = [
            (lambda s, i=i: xs[s][i]) for i in range(len(xs[P_SIDE]))]
        return apply_exp(trial, d, gets, attrs)
    return apply_same_side(trial, d, xs[side], attrs, side)


def _sides(d: OpDef) -> list[str]:
    return [P_SIDE] if d.field.kind == "exp" else [P_SIDE, Q_SIDE]


def field_operand_problems(d: OpDef, seed: int = 0) -> list[str]:
    """Operands whose value does not change the field rule's result."""
    if d.field.kind == "accum":
        return []
    shapes = operand_shapes(d)
    attrs = attrs_for(d, shapes)
    problems = []
    for side in _sides(d):
        for tries in range(4):
            t = FieldTrial(seed, tries)
            rng = np.random.default_rng([seed, tries])
            xs = {s: [rng.integers(1, t.modulus(s), size=sh) for sh in shapes] for s in (P_SIDE, Q_SIDE)}
            try:
                base = field_value(d, t, xs, attrs, side)
                for i in range(len(shapes)):
                    ys = {s: list(v) for s, v in xs.items()}
                    for s in ys:
                        ys[s][i] = rng.integers(1, t.modulus(s), size=shapes[i])
                    changed = field_value(d, t, ys, attrs, side)
                    if np.mean(changed != base) < 0.5:
                        problems.append(f"{d.name}: operand {i} does not change the field rule's "
                                        f"result on side {side}")
            except ZeroDivisorInTrial:
                continue
            break
    return problems


def _reals(d: OpDef, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    if d.domain == "positive":
        return rng.uniform(0.5, 2.0, size=shape)
    return rng.uniform(-1.0, 1.0, size=shape)


def f64_operand_problems(d: OpDef, seed: int = 0) -> list[str]:
    if d.field.kind == "accum":
        return []
    shapes = operand_shapes(d)
    attrs = attrs_for(d, shapes)
    rng = np.random.default_rng(seed)
    xs = [_reals(d, rng, s) for s in shapes]
    base = d.f64(xs, attrs)
    problems = []
    for i, s in enumerate(shapes):
        ys = list(xs)
        ys[i] = _reals(d, rng, s)
        if np.allclose(d.f64(ys, attrs), base):
            problems.append(f"{d.name}: operand {i} does not change the float64 rule's result")
    return problems


def commutativity_problems(d: OpDef, seed: int = 0) -> list[str]:
    if d.arity != (2, 2):
        return []
    shapes = operand_shapes(d)
    if shapes[0] != shapes[1]:
        return []
    attrs = attrs_for(d, shapes)
    rng = np.random.default_rng(seed)
    x, y = (_reals(d, rng, s) for s in shapes)
    sym = bool(np.allclose(d.f64([x, y], attrs), d.f64([y, x], attrs)))
    if sym != d.commutative:
        return [f"{d.name}: the float64 rule is {'' if sym else 'not '}symmetric but the "
                f"declaration says commutative={d.commutative}"]
    if d.commutative:
        t = FieldTrial(seed, 0)
        xs = {s: [rng.integers(1, t.modulus(s), size=sh) for sh in shapes] for s in (P_SIDE, Q_SIDE)}
        swapped = {s: v[::-1] for s, v in xs.items()}
        for side in _sides(d):
            a = field_value(d, t, xs, attrs, side)
            b = field_value(d, t, swapped, attrs, side)
            if not np.array_equal(a, b):
                return [f"{d.name}: declared commutative but its field rule is not symmetric"]
    return []


def exact_agreement_problems(d: OpDef, seed: int = 0) -> list[str]:
    """Ring-kind ops: the field rule equals the float64 rule on small integers."""
    if d.field.kind != "ring":
        return []
    shapes = operand_shapes(d)
    attrs = attrs_for(d, shapes)
    rng = np.random.default_rng(seed)
    xs = [rng.integers(-3, 4, size=s).astype(np.float64) for s in shapes]
    if d.degree == "div":  # divisors that keep the quotient a dyadic rational
        xs[1] = rng.choice([-4.0, -2.0, -1.0, 1.0, 2.0, 4.0], size=shapes[1])
    want = d.f64(xs, attrs)
    t = FieldTrial(seed, 0)
    problems = []
    for side in (P_SIDE, Q_SIDE):
        m = t.modulus(side)

        def to_field(v: np.ndarray, m: int = m) -> np.ndarray:
            return np.vectorize(lambda e: const_mod(Fraction(float(e)), m), otypes=[np.int64])(v)

        got = apply_same_side(t, d, [to_field(x) for x in xs], attrs, side)
        if not np.array_equal(got, to_field(np.asarray(want))):
            problems.append(f"{d.name}: field and float64 rules disagree on exact inputs ({side})")
    return problems


def all_problems(d: OpDef) -> list[str]:
    return [*field_operand_problems(d), *f64_operand_problems(d), *commutativity_problems(d),
            *exact_agreement_problems(d)]


def one_op_program(name: str, wrap: bool = False, dtype: str = "f32") -> mf.KernelGraph:
    """``name`` applied to fresh ``dtype`` inputs (each first negated when ``wrap``), with
    every required attribute given a plain value."""
    d = REGISTRY[name]
    shapes = operand_shapes(d)
    g = mf.Graph()
    xs = [g.input(s, dtype, f"x{i}") for i, s in enumerate(shapes)]
    if wrap:
        xs = [g.neg(x) for x in xs]
    given = {a.name: v for a in d.attrs if a.default is None and not a.optional
             for v in [attrs_for(d, shapes)[a.name]]}
    g.output(g.op(name, *xs, **given))
    return g.build()
