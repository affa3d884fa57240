"""Differential check of axioms against float64 evaluation on random tensors.

Model: a tensor variable is a random float64 vector (entries in [0.5, 2], so sqrt and div are
defined); ``sum(n, t)`` reshapes t to (n, -1) and sums the first axis, so it sums over a
real index and nested sums sum over pairs of indices; elementwise ops act entry by entry
through the registry's float64 rules (``ir.ops``), with numpy broadcasting (a scalar constant broadcasts; vectors of different lengths do not).
Variable lengths are inferred from the left side (then from the right side, for the other
direction) so that side is well formed. An axiom is *true of tensors* when both sides agree
in both directions for random sizes satisfying its condition; otherwise the check reports why
(a side that does not type, or different values). The sum-factor rules fail: their factor
would have to be constant along the summed index, which an abstract sum forgets.

Imports ``ir.ops`` and ``formal.axioms`` (and numpy).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mirage_formal.formal.axioms import (
    Axiom,
    PApp,
    Pattern,
    PNum,
    PVar,
    SVar,
    eval_size,
    pattern_sizes,
)
from mirage_formal.ir.ops import REGISTRY


def _registry_rule(op: str, n_args: int) -> Callable[[list[np.ndarray]], np.ndarray] | None:
    """The registry's float64 rule of ``op`` for ``n_args`` operands (attributes at their
    defaults), or None when the registry has no such elementwise op."""
    d = REGISTRY.get(op)
    if d is None or not d.elementwise or not d.arity[0] <= n_args <= d.arity[1]:
        return None
    if any(a.default is None and not a.optional for a in d.attrs):
        return None
    attrs = {a.name: a.default for a in d.attrs}
    return lambda xs: np.asarray(d.f64(xs, attrs))


class _Ill(Exception):
    """A side does not type under the model."""


def _lengths(p: Pattern, out: int, env: dict[str, int], lens: dict[str, int]) -> None:
    if isinstance(p, PVar):
        if p.name in lens and lens[p.name] != out:
            raise _Ill(f"{p.name} would need lengths {lens[p.name]} and {out}")
        lens[p.name] = out
    elif isinstance(p, PApp):
        inner = out * eval_size(p.size, env) if p.size is not None else out
        for a in p.args:
            _lengths(a, inner, env, lens)


def _eval(p: Pattern, env: dict[str, int], vals: dict[str, np.ndarray]) -> np.ndarray:
    if isinstance(p, PVar):
        return vals[p.name]
    if isinstance(p, PNum):
        v = env[p.value.name] if isinstance(p.value, SVar) else p.value
        return np.asarray(float(v))
    args = [_eval(a, env, vals) for a in p.args]
    if p.op == "sum":
        assert p.size is not None
        n = eval_size(p.size, env)
        x = args[0]
        if x.ndim == 0 or x.size % n:
            raise _Ill(f"sum({n}, .) of a value of length {x.size}")
        return np.asarray(x.reshape(n, -1).sum(axis=0))
    rule = _registry_rule(p.op, len(args))
    if rule is None:
        raise _Ill(f"no float64 model for op {p.op!r} of {len(args)} operands")
    sized = [a for a in args if a.ndim]
    if any(a.shape != sized[0].shape for a in sized):
        raise _Ill(f"{p.op} of lengths {[a.size for a in args]}")
    return rule(args)


@dataclass(frozen=True)
class CheckResult:
    axiom: str
    holds: bool
    detail: str


def check_axiom(ax: Axiom, rng: np.random.Generator, trials: int = 4, out_len: int = 3) -> CheckResult:
    """Evaluate both sides of an equality on random tensors (see module docstring)."""
    sizes = sorted(pattern_sizes(ax.lhs) | pattern_sizes(ax.rhs))
    tried = 0
    for combo in itertools.product(range(1, 5), repeat=len(sizes)):
        env = dict(zip(sizes, combo, strict=True))
        if not ax.condition.holds(env):
            continue
        for first, second in ((ax.lhs, ax.rhs), (ax.rhs, ax.lhs)):
            lens: dict[str, int] = {}
            try:
                _lengths(first, out_len, env, lens)
            except _Ill:
                continue  # this side does not fix consistent lengths; the other one may
            for _ in range(trials):
                vals = {v: rng.uniform(0.5, 2.0, size=n) for v, n in lens.items()}
                try:
                    a = _eval(first, env, vals)
                    b = _eval(second, env, vals)
                except _Ill as e:
                    return CheckResult(ax.name, False, f"sizes {env}: {e}")
                if a.shape != b.shape or not np.allclose(a, b, rtol=1e-9, atol=1e-12):
                    return CheckResult(ax.name, False, f"sizes {env}: values differ")
                tried += 1
        if tried >= 3 * trials:
            break
    if not tried:
        return CheckResult(ax.name, False, "no size assignment makes either side well formed")
    return CheckResult(ax.name, True, f"{tried} random evaluations agree")
