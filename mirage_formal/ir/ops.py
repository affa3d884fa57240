"""The op registry: every op is declared exactly once, here, with every fact about it.

A declaration (:class:`~mirage_formal.ir.opdef.OpDef`, whose docstring lists the facets and
which layer reads each) names the op (one lowercase name used everywhere: builder, text
form, axioms, codegen), the levels it may appear at, its arity and attributes, and its
shape rule, float64 rule, prime-field rule, degree rule, abstract-expression template
(``$0``/``$1`` operands, ``{k}`` the contraction size of a matmul, ``{n}`` the size of a
reduced axis, other ``{name}`` attributes), search label rule, cost weight, CUDA C
expression (elementwise ops), commutativity, float64 input domain and default axiom sets.
:func:`declare` checks a declaration (:func:`~mirage_formal.ir.opdef.check_declaration`)
before it enters the registry; ``docs/extending.md`` walks through adding an op.

Float64 rules are rank-polymorphic: they act on the trailing dimensions of arrays that may
carry extra leading (grid and loop) axes, which is how block graphs are evaluated without a
Python loop over blocks. Reduction axes are therefore stored as negative numbers.

Imports ``ir.opdef`` and the errors (and numpy).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from mirage_formal.errors import GraphError, UnsupportedOpError
from mirage_formal.ir.opdef import (
    BLOCK,
    DEGREE_RULES,
    DOMAINS,
    FIELD_KINDS,
    KERNEL,
    LABEL_RULES,
    LEVELS,
    AttrSpec,
    FieldRule,
    OpDeclarationError,
    OpDef,
    Shape,
    check_declaration,
)

F64 = NDArray[np.float64]

__all__ = ["BLOCK", "DEGREE_RULES", "DOMAINS", "FIELD_KINDS", "KERNEL", "LABEL_RULES", "LEVELS",
           "REGISTRY", "AttrSpec", "FieldRule", "OpDeclarationError", "OpDef", "accum_f64",
           "accum_terms", "broadcast_shapes", "declare", "get_op", "op_names"]

ACCUM_KINDS = ("sum", "mean", "rms")

REGISTRY: dict[str, OpDef] = {}


def get_op(name: str) -> OpDef:
    try:
        return REGISTRY[name]
    except KeyError:
        raise UnsupportedOpError(
            f"unknown op {name!r}; known ops: {', '.join(sorted(REGISTRY))}"
        ) from None


def declare(op: OpDef, registry: dict[str, OpDef] | None = None) -> OpDef:
    """Check ``op`` and add it to ``registry`` (the global one by default)."""
    reg = REGISTRY if registry is None else registry
    if op.name in reg:
        raise OpDeclarationError(f"op {op.name!r} is declared twice; keep one declaration")
    check_declaration(op)
    reg[op.name] = op
    return op


# ---------------------------------------------------------------- shape rules

def broadcast_shapes(name: str, a: Shape, b: Shape) -> Shape:
    """numpy broadcasting (right-aligned), with an error that names the op."""
    n = max(len(a), len(b))
    pa = (1,) * (n - len(a)) + tuple(a)
    pb = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(pa, pb, strict=True):
        if x != y and x != 1 and y != 1:
            raise GraphError(
                f"{name}: shapes {list(a)} and {list(b)} do not broadcast (dimension {x} vs {y}); "
                "make the sizes equal or 1 in each aligned dimension"
            )
        out.append(max(x, y))
    return tuple(out)


def _matmul_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> Shape:
    a, b = shapes
    if len(a) < 2 or len(b) < 2:
        raise GraphError(f"matmul: operands need rank >= 2, got shapes {list(a)} and {list(b)}")
    if a[-1] != b[-2]:
        raise GraphError(
            f"matmul: inner dimensions differ: {list(a)} @ {list(b)} ({a[-1]} vs {b[-2]}); "
            "the last dimension of the left operand must equal the second-to-last of the right"
        )
    batch = broadcast_shapes("matmul", a[:-2], b[:-2])
    return (*batch, a[-2], b[-1])


def _reduce_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> Shape:
    s = list(shapes[0])
    ax = attrs["axis"] % len(s)
    if attrs["keepdims"]:
        s[ax] = 1
    else:
        del s[ax]
    return tuple(s)


def _rms_norm_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> Shape:
    x = shapes[0]
    if len(shapes) == 2 and tuple(shapes[1]) != (x[-1],):
        raise GraphError(
            f"rms_norm: the gain must have shape [{x[-1]}] (the last dimension of the input), "
            f"got {list(shapes[1])}"
        )
    return tuple(x)


def _accum_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> Shape:
    s = list(shapes[0])
    fold = attrs["fold"]
    if fold is not None:
        if fold < 1 or s[-1] % fold:
            raise GraphError(
                f"accum: fold={fold} must divide the last dimension {s[-1]} of the tile {list(s)}; "
                "pick a divisor (fold=1 reduces the last dimension to 1)"
            )
        s[-1] = fold
    return tuple(s)


# ---------------------------------------------------------------- float64 rules

def _gelu(x: F64) -> F64:
    c = math.sqrt(2.0 / math.pi)
    return np.asarray(0.5 * x * (1.0 + np.tanh(c * (x + 0.044715 * x**3))), dtype=np.float64)


def _rms_norm(xs: Sequence[F64], attrs: Mapping[str, Any]) -> F64:
    x = xs[0]
    r = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + attrs["eps"])
    if len(xs) == 2:
        r = r * xs[1]
    return np.asarray(r)


def accum_terms(forloop: int, last: int, fold: int | None) -> int:
    """How many terms one output element of ``accum`` adds up: the loop iterations, times
    the parts of the last dimension it folds (L / fold). The one place this count lives."""
    return max(forloop, 1) * (last // fold if fold is not None else 1)


def accum_f64(x: F64, attrs: Mapping[str, Any], loop_axis: int) -> F64:
    """Fold a tile over loop iterations (axis ``loop_axis``), see ``accum``."""
    fold = attrs["fold"]
    count = accum_terms(x.shape[loop_axis], x.shape[-1], fold)
    if fold is not None:
        last = x.shape[-1]
        kind = attrs["kind"]
        xx = x * x if kind == "rms" else x
        xx = xx.reshape(*x.shape[:-1], last // fold, fold).sum(axis=-2)
    else:
        xx = x * x if attrs["kind"] == "rms" else x
    s = xx.sum(axis=loop_axis, keepdims=True)
    if attrs["kind"] == "sum":
        return np.asarray(s)
    m = s / count
    return np.asarray(np.sqrt(m) if attrs["kind"] == "rms" else m)


def _accum_direct(xs: Sequence[F64], attrs: Mapping[str, Any]) -> F64:
    raise GraphError("accum is evaluated by the block-graph interpreter, not directly")


# ---------------------------------------------------------------- field rules
# Written against the arithmetic interface F of one side (see FieldRule).

def _f_mean(F: Any, x: Any, axis: int, keepdims: bool) -> Any:
    return F.mul(F.sum(x, axis, keepdims), F.const(Fraction(1, x.shape[axis])))


def _f_sigmoid(F: Any, x: Any) -> Any:
    return F.inv(F.add(F.const(1), F.exp(F.q.neg(x.q))))


def _f_rms_arg(F: Any, a: Mapping[str, Any], x: Any, g: Any = None) -> tuple[Any, ...]:
    return (F.add(_f_mean(F, F.mul(x, x), -1, True), F.const(a["eps"])),)


def _f_rms_post(F: Any, a: Mapping[str, Any], r: Any, x: Any, g: Any = None) -> Any:
    y = F.mul(x, F.inv(r))
    return y if g is None else F.mul(y, g)


RING = "ring"


def _ring(rule: Callable[..., Any]) -> FieldRule:
    return FieldRule(RING, rule)


def _random(fid: str, post: Callable[..., Any] | None = None) -> FieldRule:
    return FieldRule("random", lambda F, a, x: (x,), post, fid)


# ---------------------------------------------------------------- declarations

_BOTH = frozenset(LEVELS)


def elementwise(name: str, arity: int, f: Callable[..., F64], c: str, field: FieldRule,
                degree: str, abstract: str, doc: str, *, cost: float = 1.0,
                commutative: bool = False, domain: str = "real",
                axioms: tuple[str, ...] = ("sub",), attrs: tuple[AttrSpec, ...] = (),
                registry: dict[str, OpDef] | None = None) -> OpDef:
    """Declare an elementwise op of ``arity`` operands (broadcasting) at both levels.

    ``f`` is its float64 rule on the operand arrays (and ``attrs`` as keywords, if any).
    """
    def shape(shapes: Sequence[Shape], at: Mapping[str, Any]) -> Shape:
        out = tuple(shapes[0])
        for s in shapes[1:]:
            out = broadcast_shapes(name, out, s)
        return out

    def f64(xs: Sequence[F64], at: Mapping[str, Any]) -> F64:
        return np.asarray(f(*xs, **at), dtype=np.float64)

    return declare(OpDef(name, _BOTH, (arity, arity), attrs, shape, f64, field, degree, abstract,
                         "same" if arity == 1 else "broadcast", cost, commutative, True, c,
                         domain, axioms, doc), registry)


declare(OpDef(
    "matmul", _BOTH, (2, 2), (), _matmul_shape, lambda xs, a: np.asarray(np.matmul(xs[0], xs[1])),
    _ring(lambda F, a, x, y: F.matmul(x, y)), "matmul", "sum({k}, mul($0, $1))", "matmul", 1.0,
    doc="batched matrix product over the last two dimensions"))

elementwise("add", 2, np.add, "({0} + {1})", _ring(lambda F, a, x, y: F.add(x, y)), "add",
            "add($0, $1)", "x + y, broadcasting", commutative=True)
elementwise("sub", 2, np.subtract, "({0} - {1})", _ring(lambda F, a, x, y: F.sub(x, y)), "add",
            "add($0, neg($1))", "x - y, broadcasting")
elementwise("mul", 2, np.multiply, "({0} * {1})", _ring(lambda F, a, x, y: F.mul(x, y)), "mul",
            "mul($0, $1)", "x * y, broadcasting", commutative=True)
elementwise("div", 2, np.divide, "mf::div_fast({0}, {1})",
            _ring(lambda F, a, x, y: F.mul(x, F.inv(y))), "div", "div($0, $1)",
            "x / y, broadcasting", domain="positive")

elementwise("neg", 1, np.negative, "(-{0})", _ring(lambda F, a, x: F.neg(x)), "same", "neg($0)",
            "-x")
elementwise("exp", 1, np.exp, "mf::exp_fast({0})", FieldRule("exp", lambda F, a, x: F.exp(x.q),
                                                       reads=("q",)),
            "exp", "exp($0)", "e^x", cost=4.0)
elementwise("square", 1, np.square, "({0} * {0})", _ring(lambda F, a, x: F.mul(x, x)), "square",
            "mul($0, $0)", "x^2")
elementwise("sqrt", 1, np.sqrt, "sqrtf({0})", _random("sqrt"), "random", "sqrt($0)",
            "square root", cost=4.0, domain="positive")
elementwise("rsqrt", 1, lambda x: 1.0 / np.sqrt(x), "rsqrtf({0})",
            _random("sqrt", lambda F, a, r, x: F.inv(r)), "random", "div(1, sqrt($0))",
            "1 / sqrt(x)", cost=4.0, domain="positive")
elementwise("silu", 1, lambda x: x / (1.0 + np.exp(-x)), "({0} / (1.0f + mf::exp_fast(-{0})))",
            FieldRule("exp", lambda F, a, x: F.mul(x.p, _f_sigmoid(F, x)), reads=("pq",)),
            "exp", "div($0, add(1, exp(neg($0))))", "x * sigmoid(x)", cost=4.0)
elementwise("sigmoid", 1, lambda x: 1.0 / (1.0 + np.exp(-x)), "(1.0f / (1.0f + mf::exp_fast(-{0})))",
            FieldRule("exp", lambda F, a, x: _f_sigmoid(F, x), reads=("q",)),
            "exp", "div(1, add(1, exp(neg($0))))", "1 / (1 + e^-x)", cost=4.0)
elementwise(
    "gelu", 1, _gelu,
    "(0.5f * {0} * (1.0f + tanhf(0.7978845608028654f * ({0} + 0.044715f * {0} * {0} * {0}))))",
    _random("gelu"), "random", "gelu($0)", "GELU, tanh approximation", cost=4.0)
elementwise("relu", 1, lambda x: np.maximum(x, 0.0), "fmaxf({0}, 0.0f)", _random("relu"),
            "random", "relu($0)", "max(x, 0)")
elementwise("tanh", 1, np.tanh, "tanhf({0})", _random("tanh"), "random", "tanh($0)",
            "hyperbolic tangent", cost=4.0)
elementwise("maximum", 2, np.maximum, "fmaxf({0}, {1})",
            FieldRule("random", lambda F, a, x, y: (x, y), fid="maximum"), "random",
            "maximum($0, $1)", "elementwise max(x, y), broadcasting", commutative=True)
elementwise("mul_scalar", 1, lambda x, scalar: x * scalar, "({0} * {scalar}f)",
            _ring(lambda F, a, x: F.mul(x, F.const(a["scalar"]))), "same", "mul($0, {scalar})",
            "x * scalar", attrs=(AttrSpec("scalar", float),))
elementwise("add_scalar", 1, lambda x, scalar: x + scalar, "({0} + {scalar}f)",
            _ring(lambda F, a, x: F.add(x, F.const(a["scalar"]))), "add_const", "add($0, {scalar})",
            "x + scalar (a norm's eps under its square root)", attrs=(AttrSpec("scalar", float),))

_REDUCE_ATTRS = (AttrSpec("axis", int, -1), AttrSpec("keepdims", bool, True))
declare(OpDef(
    "sum", _BOTH, (1, 1), _REDUCE_ATTRS, _reduce_shape,
    lambda xs, a: np.asarray(np.sum(xs[0], axis=a["axis"], keepdims=a["keepdims"])),
    _ring(lambda F, a, x: F.sum(x, a["axis"], a["keepdims"])), "reduce", "sum({n}, $0)",
    "reduce", 1.0, doc="sum over one axis"))
declare(OpDef(
    "mean", _BOTH, (1, 1), _REDUCE_ATTRS, _reduce_shape,
    lambda xs, a: np.asarray(np.mean(xs[0], axis=a["axis"], keepdims=a["keepdims"])),
    _ring(lambda F, a, x: _f_mean(F, x, a["axis"], a["keepdims"])), "reduce",
    "div(sum({n}, $0), {n})", "reduce", 1.0, doc="mean over one axis"))
declare(OpDef(
    "rms_norm", _BOTH, (1, 2), (AttrSpec("eps", float, 0.0),), _rms_norm_shape, _rms_norm,
    FieldRule("random", _f_rms_arg, _f_rms_post, "sqrt"), "random",
    "div($0, sqrt(div(sum({n}, mul($0, $0)), {n})))", "norm", 4.0, domain="real",
    doc="x / sqrt(mean(x^2, last axis) + eps), times an optional gain of the last dimension"))
declare(OpDef(
    "accum", frozenset({BLOCK}), (1, 1),
    (AttrSpec("kind", str, "sum", ACCUM_KINDS), AttrSpec("fold", int, None, optional=True)),
    _accum_shape, _accum_direct, FieldRule("accum", fid="sqrt"), "accum", "sum({F}, $0)",
    "accum", 1.0,
    doc=("for-loop accumulator: folds a tile over the loop iterations. fold=None keeps the "
         "tile; fold=x also folds the last dimension L to x (output j sums inputs k*x+j), "
         "fold=1 reduces it. kind: sum, mean (divide by the number of terms) or rms "
         "(sqrt of the mean of squares). Its term count is accum_terms()")))


def op_names(level: str | None = None) -> list[str]:
    return sorted(n for n, d in REGISTRY.items() if level is None or level in d.levels)
