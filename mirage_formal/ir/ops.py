"""The op registry: every op is declared exactly once, here.

An :class:`OpDef` holds the op's name (one lowercase name used everywhere: builder, text
form, axioms, codegen), the levels it may appear at, its arity, its attributes, its shape
rule and its float64 semantics, plus the data other layers read:

- ``elementwise`` and ``c_expr``: the CUDA C expression template of an elementwise op
  (operands ``{0}``, ``{1}``, attributes ``{name}``, all in fp32), read by codegen;
- ``field``: the kind of its prime-field rule (``FIELD_KINDS``), read by the field
  interpreter;
- ``abstract``: its abstract-expression template, read by the formal layer; ``$0``/``$1``
  are operands, ``{k}`` the contraction size of a matmul, ``{n}`` the size of a reduced
  axis, other ``{name}`` attributes.

Float64 rules are rank-polymorphic: they act on the trailing dimensions of arrays that may
carry extra leading (grid and loop) axes, which is how block graphs are evaluated without a
Python loop over blocks. Reduction axes are therefore stored as negative numbers.

Imports only ``ir.dtypes`` and the errors (and numpy).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from mirage_formal.errors import GraphError, UnsupportedOpError

Shape = tuple[int, ...]
F64 = NDArray[np.float64]

KERNEL = "kernel"
BLOCK = "block"
LEVELS = (KERNEL, BLOCK)

#: Field-rule kinds. ring: the same polynomial in Z_p; div: multiply by the inverse;
#: exp: w^(x mod q) in Z_p; lax: built from exp, add and div (silu, sigmoid);
#: mean: a sum times the inverse of a count; opaque: a random function per trial;
#: rms: x times the inverse of an opaque square root of a mean of squares.
FIELD_KINDS = ("ring", "div", "exp", "lax", "mean", "opaque", "rms")

ACCUM_KINDS = ("sum", "mean", "rms")


@dataclass(frozen=True)
class AttrSpec:
    name: str
    kind: type
    default: Any = None
    choices: tuple[Any, ...] | None = None
    optional: bool = False


@dataclass(frozen=True)
class OpDef:
    name: str
    levels: frozenset[str]
    arity: tuple[int, int]
    attrs: tuple[AttrSpec, ...]
    shape: Callable[[Sequence[Shape], Mapping[str, Any]], Shape]
    f64: Callable[[Sequence[F64], Mapping[str, Any]], F64]
    field: str
    abstract: str
    elementwise: bool = False
    c_expr: str | None = None
    doc: str = ""

    def normalize_attrs(self, shapes: Sequence[Shape], given: Mapping[str, Any]) -> dict[str, Any]:
        """Check attribute names, types and choices; fill defaults; make axes negative."""
        known = {a.name: a for a in self.attrs}
        for k in given:
            if k not in known:
                raise GraphError(
                    f"{self.name}: unknown attribute {k!r}; it takes "
                    f"{sorted(known) or 'no attributes'}"
                )
        out: dict[str, Any] = {}
        for a in self.attrs:
            v = given.get(a.name, a.default)
            if v is None:
                if not a.optional:
                    raise GraphError(f"{self.name}: attribute {a.name!r} is required")
                out[a.name] = None
                continue
            if a.kind is float and isinstance(v, int) and not isinstance(v, bool):
                v = float(v)
            if (a.kind is int and isinstance(v, bool)) or not isinstance(v, a.kind):
                raise GraphError(
                    f"{self.name}: attribute {a.name}={v!r} must be of type {a.kind.__name__}"
                )
            if a.choices is not None and v not in a.choices:
                raise GraphError(f"{self.name}: {a.name}={v!r} must be one of {list(a.choices)}")
            out[a.name] = v
        if "axis" in out and shapes:
            rank = len(shapes[0])
            ax = out["axis"]
            if not -rank <= ax < rank:
                raise GraphError(
                    f"{self.name}: axis={ax} is out of range for an input of shape "
                    f"{list(shapes[0])}; use -{rank}..{rank - 1}"
                )
            out["axis"] = ax - rank if ax >= 0 else ax
        return out


REGISTRY: dict[str, OpDef] = {}


def get_op(name: str) -> OpDef:
    try:
        return REGISTRY[name]
    except KeyError:
        raise UnsupportedOpError(
            f"unknown op {name!r}; known ops: {', '.join(sorted(REGISTRY))}"
        ) from None


def _declare(op: OpDef) -> None:
    assert op.name not in REGISTRY, op.name
    assert op.field in FIELD_KINDS, op.name
    REGISTRY[op.name] = op


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


def _same(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> Shape:
    return tuple(shapes[0])


def _binary(name: str) -> Callable[[Sequence[Shape], Mapping[str, Any]], Shape]:
    def rule(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> Shape:
        return broadcast_shapes(name, shapes[0], shapes[1])
    return rule


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


def accum_f64(x: F64, attrs: Mapping[str, Any], loop_axis: int) -> F64:
    """Fold a tile over loop iterations (axis ``loop_axis``), see ``accum``."""
    fold = attrs["fold"]
    count = x.shape[loop_axis] if x.shape[loop_axis] else 1
    if fold is not None:
        last = x.shape[-1]
        count *= last // fold
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


# ---------------------------------------------------------------- declarations

_BOTH = frozenset(LEVELS)


def _elementwise_unary(name: str, f: Callable[[F64], F64], c: str, field: str, abstract: str,
                       doc: str) -> None:
    _declare(OpDef(name, _BOTH, (1, 1), (), _same,
                   lambda xs, a, f=f: np.asarray(f(xs[0]), dtype=np.float64),  # type: ignore[misc]
                   field, abstract, True, c, doc))


def _elementwise_binary(name: str, f: Callable[[F64, F64], F64], c: str, field: str,
                        abstract: str, doc: str) -> None:
    _declare(OpDef(name, _BOTH, (2, 2), (), _binary(name),
                   lambda xs, a, f=f: np.asarray(f(xs[0], xs[1]), dtype=np.float64),  # type: ignore[misc]
                   field, abstract, True, c, doc))


_declare(OpDef(
    "matmul", _BOTH, (2, 2), (), _matmul_shape, lambda xs, a: np.asarray(np.matmul(xs[0], xs[1])),
    "ring", "sum({k}, mul($0, $1))", doc="batched matrix product over the last two dimensions"))

_elementwise_binary("add", np.add, "({0} + {1})", "ring", "add($0, $1)", "x + y, broadcasting")
_elementwise_binary("sub", np.subtract, "({0} - {1})", "ring", "add($0, neg($1))", "x - y, broadcasting")
_elementwise_binary("mul", np.multiply, "({0} * {1})", "ring", "mul($0, $1)", "x * y, broadcasting")
_elementwise_binary("div", np.divide, "({0} / {1})", "div", "div($0, $1)", "x / y, broadcasting")

_elementwise_unary("neg", np.negative, "(-{0})", "ring", "neg($0)", "-x")
_elementwise_unary("exp", np.exp, "__expf({0})", "exp", "exp($0)", "e^x")
_elementwise_unary("square", np.square, "({0} * {0})", "ring", "mul($0, $0)", "x^2")
_elementwise_unary("sqrt", np.sqrt, "sqrtf({0})", "opaque", "sqrt($0)", "square root")
_elementwise_unary("rsqrt", lambda x: 1.0 / np.sqrt(x), "rsqrtf({0})", "opaque",
                   "div(1, sqrt($0))", "1 / sqrt(x)")
_elementwise_unary("silu", lambda x: x / (1.0 + np.exp(-x)), "({0} / (1.0f + __expf(-{0})))",
                   "lax", "div($0, add(1, exp(neg($0))))", "x * sigmoid(x)")
_elementwise_unary("sigmoid", lambda x: 1.0 / (1.0 + np.exp(-x)), "(1.0f / (1.0f + __expf(-{0})))",
                   "lax", "div(1, add(1, exp(neg($0))))", "1 / (1 + e^-x)")
_elementwise_unary(
    "gelu", _gelu,
    "(0.5f * {0} * (1.0f + tanhf(0.7978845608028654f * ({0} + 0.044715f * {0} * {0} * {0}))))",
    "opaque", "gelu($0)", "GELU, tanh approximation")
_elementwise_unary("relu", lambda x: np.maximum(x, 0.0), "fmaxf({0}, 0.0f)", "opaque", "relu($0)",
                   "max(x, 0)")

_declare(OpDef(
    "mul_scalar", _BOTH, (1, 1), (AttrSpec("scalar", float),), _same,
    lambda xs, a: np.asarray(xs[0] * a["scalar"]), "ring", "mul($0, {scalar})", True,
    "({0} * {scalar}f)", "x * scalar"))

_REDUCE_ATTRS = (AttrSpec("axis", int, -1), AttrSpec("keepdims", bool, True))
_declare(OpDef(
    "sum", _BOTH, (1, 1), _REDUCE_ATTRS, _reduce_shape,
    lambda xs, a: np.asarray(np.sum(xs[0], axis=a["axis"], keepdims=a["keepdims"])),
    "ring", "sum({n}, $0)", doc="sum over one axis"))
_declare(OpDef(
    "mean", _BOTH, (1, 1), _REDUCE_ATTRS, _reduce_shape,
    lambda xs, a: np.asarray(np.mean(xs[0], axis=a["axis"], keepdims=a["keepdims"])),
    "mean", "div(sum({n}, $0), {n})", doc="mean over one axis"))
_declare(OpDef(
    "rms_norm", _BOTH, (1, 2), (AttrSpec("eps", float, 0.0),), _rms_norm_shape, _rms_norm,
    "rms", "div($0, sqrt(div(sum({n}, mul($0, $0)), {n})))",
    doc="x / sqrt(mean(x^2, last axis) + eps), times an optional gain of the last dimension"))
_declare(OpDef(
    "accum", frozenset({BLOCK}), (1, 1),
    (AttrSpec("kind", str, "sum", ACCUM_KINDS), AttrSpec("fold", int, None, optional=True)),
    _accum_shape, _accum_direct, "mean", "sum({F}, $0)",
    doc=("for-loop accumulator: folds a tile over the loop iterations. fold=None keeps the "
         "tile; fold=x also folds the last dimension L to x (output j sums inputs k*x+j), "
         "fold=1 reduces it. kind: sum, mean (divide by the number of terms) or rms "
         "(sqrt of the mean of squares)")))


def op_names(level: str | None = None) -> list[str]:
    return sorted(n for n, d in REGISTRY.items() if level is None or level in d.levels)
