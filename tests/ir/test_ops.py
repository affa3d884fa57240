"""Every registry op: float64 rule against an independent numpy expression, and completeness
of its declaration (shape rule, float rule, field kind, abstract template, C expression)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import mirage_formal as mf
from mirage_formal.ir.opdef import check_declaration
from mirage_formal.ir.ops import FIELD_KINDS, REGISTRY
from mirage_formal.semantics import run_reference

rng = np.random.default_rng(1234)


def _x(*shape: int, positive: bool = False) -> np.ndarray:
    a = rng.uniform(0.1, 2.0, shape) if positive else rng.uniform(-2.0, 2.0, shape)
    return a


def _run1(name: str, x: np.ndarray, **attrs: object) -> np.ndarray:
    g = mf.Graph()
    t = g.input(x.shape, "f32", "x")
    g.output(g.op(name, t, **attrs))
    return run_reference(g.build(), {"x": x})[0]


def _run2(name: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    g = mf.Graph()
    a = g.input(x.shape, "f32", "x")
    b = g.input(y.shape, "f32", "y")
    g.output(g.op(name, a, b))
    return run_reference(g.build(), {"x": x, "y": y})[0]


UNARY = {
    "neg": lambda x: -x,
    "exp": lambda x: np.e ** x,
    "square": lambda x: x * x,
    "sqrt": lambda x: x ** 0.5,
    "rsqrt": lambda x: x ** -0.5,
    "silu": lambda x: x * (1 / (1 + np.e ** (-x))),
    "sigmoid": lambda x: 1 / (1 + np.e ** (-x)),
    "relu": lambda x: np.where(x > 0, x, 0.0),
    "gelu": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x))),
}
POSITIVE = {"sqrt", "rsqrt"}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_rules(name: str) -> None:
    x = _x(3, 5, positive=name in POSITIVE)
    np.testing.assert_allclose(_run1(name, x), UNARY[name](x), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(("name", "f"), [("add", lambda a, b: a + b), ("sub", lambda a, b: a + (-b)),
                                         ("mul", lambda a, b: a * b), ("div", lambda a, b: a * (1 / b))])
@pytest.mark.parametrize(("sa", "sb"), [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((2, 3, 4), (3, 1))])
def test_binary_rules_broadcast(name: str, f, sa, sb) -> None:  # type: ignore[no-untyped-def]
    a, b = _x(*sa), _x(*sb, positive=True)
    np.testing.assert_allclose(_run2(name, a, b), f(np.broadcast_to(a, np.broadcast_shapes(sa, sb)), b),
                               rtol=1e-12)


def test_matmul_batched() -> None:
    a, b = _x(2, 3, 5), _x(2, 5, 4)
    want = np.stack([[[sum(a[i, r, k] * b[i, k, c] for k in range(5)) for c in range(4)]
                      for r in range(3)] for i in range(2)])
    np.testing.assert_allclose(_run2("matmul", a, b), want, rtol=1e-12)


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("keepdims", [True, False])
def test_sum_mean(axis: int, keepdims: bool) -> None:
    x = _x(3, 4, 5)
    s = np.add.reduce(x, axis=axis, keepdims=keepdims)
    np.testing.assert_allclose(_run1("sum", x, axis=axis, keepdims=keepdims), s, rtol=1e-12)
    np.testing.assert_allclose(_run1("mean", x, axis=axis, keepdims=keepdims), s / x.shape[axis], rtol=1e-12)


def test_mul_scalar() -> None:
    x = _x(4, 4)
    np.testing.assert_allclose(_run1("mul_scalar", x, scalar=0.125), x / 8, rtol=1e-15)


def test_rms_norm_with_and_without_gain() -> None:
    x, w = _x(3, 8), _x(8)
    r = np.array([[x[i, j] / math.sqrt(sum(v * v for v in x[i]) / 8) for j in range(8)] for i in range(3)])
    np.testing.assert_allclose(_run1("rms_norm", x), r, rtol=1e-12)
    np.testing.assert_allclose(_run2("rms_norm", x, w), r * w, rtol=1e-12)
    np.testing.assert_allclose(_run1("rms_norm", x, eps=0.5),
                               x / np.sqrt((x * x).mean(-1, keepdims=True) + 0.5), rtol=1e-12)


def test_every_op_is_complete() -> None:
    """The ops DESIGN.md names are declared, each declaration passes the facet checks
    (``check_declaration``; tests/ir/test_op_suite.py checks each op's rules semantically)."""
    needed = {"matmul", "add", "sub", "mul", "div", "neg", "mul_scalar", "exp", "square", "sqrt",
              "rsqrt", "silu", "sigmoid", "gelu", "relu", "sum", "mean", "rms_norm", "accum"}
    assert needed <= set(REGISTRY)
    for name, d in REGISTRY.items():
        assert d.name == name
        check_declaration(d)
        assert d.field.kind in FIELD_KINDS, name
        assert d.doc, name


def test_unknown_op_and_attr() -> None:
    g = mf.Graph()
    x = g.input((2, 2), "f16", "x")
    with pytest.raises(mf.UnsupportedOpError, match="unknown op 'softmax'"):
        g.op("softmax", x)
    with pytest.raises(mf.GraphError, match="unknown attribute 'dim'"):
        g.sum(x, dim=0)
    with pytest.raises(mf.GraphError, match="axis=2 is out of range"):
        g.sum(x, axis=2)
