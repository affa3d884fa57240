"""Prime-field semantics of μGraphs: every registry op over Z_p and Z_q (q | p - 1).

A *side* is one of the two number systems a value can be evaluated in: ``"p"`` (Z_p, where
outputs are compared) or ``"q"`` (Z_q, where the arguments of ``exp`` live). One
:class:`FieldTrial` is one random point of the test: the primes, a random ω of order q, the
keys of the random functions and (lazily, by input name and side) uniform random inputs.

Op rules are read from the registry's ``field`` kind (``ir.ops.FIELD_KINDS``) with detail by
op name (``RULES``); a test fails if a registry op has none:

- ``ring``: the same polynomial mod m (m = p or q); matmul is exact through float64 BLAS
  with limb splitting (:func:`matmul_mod`);
- ``div`` / ``mean``: multiplication by the inverse (of the divisor, or of the count); a
  zero divisor raises :class:`ZeroDivisorInTrial` so that the caller resamples the trial;
  it is never treated as 1;
- ``exp``: ``ω^(x mod q) mod p``: the argument is taken on the q side, the result lives on
  the p side only, so ``exp(a+b) = exp(a)·exp(b)`` holds exactly;
- ``lax`` (silu, sigmoid): ``x / (1 + exp(-x))`` and ``1 / (1 + exp(-x))``;
- ``opaque`` (sqrt, gelu, relu, ...): a keyed pseudo-random function of the value, the same
  function for every node in the trial (rsqrt is 1 / the sqrt function, so rewrites between
  them are seen as equal);
- ``rms``: ``x · inverse(sqrt_fn(mean(x²) + eps))``; ``accum kind=rms`` is
  ``sqrt_fn(mean of squares)`` with the same function.

:class:`FieldEvaluator` walks kernel graphs and block graphs (reusing ``layout``'s iterate,
save and align, so it is the same vectorized scheme as the float64 interpreter). It
evaluates a node on the sides that are asked for: the p side of outputs, the q side of what
feeds an ``exp``. Its cache is keyed by (node, side); nodes are hash-consed, so shared
sub-graphs of different candidates are computed once per trial.

Imports ``ir``, ``semantics.layout`` and the errors (and numpy).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from mirage_formal.errors import MirageError
from mirage_formal.ir.graph import GET, INPUT, ITER, KERNEL_OP, BlockGraph, KernelGraph
from mirage_formal.ir.node import Node
from mirage_formal.ir.ops import FIELD_KINDS, REGISTRY
from mirage_formal.semantics.layout import LEAD, LOOP_AXIS, align, iterate, save

Array = np.ndarray
P_SIDE, Q_SIDE = "p", "q"
SIDES = (P_SIDE, Q_SIDE)

#: The default field: the largest safe prime below 2^31 (p = 2q + 1, q prime). Products of
#: two residues stay below 2^62, so elementwise arithmetic is exact in int64.
DEFAULT_P = 2147483579
DEFAULT_Q = 1073741789

#: ops whose p-side value needs the q side of their argument (exp and the LAX ops built on it)
EXP_OPS = frozenset({"exp", "silu", "sigmoid"})


class ZeroDivisorInTrial(Exception):
    """A divisor was zero at this random point: the caller draws a new trial."""


class FieldDomainError(MirageError):
    """A value was asked for on a side where it has no meaning (e.g. exp of an exp)."""


# ---------------------------------------------------------------- arithmetic helpers

def _i64(x: Any) -> Array:
    """Typed view of an int64 result (no copy)."""
    return np.asarray(x, dtype=np.int64)


def check_field(p: int, q: int) -> None:
    """Raise unless p and q are primes with q | p - 1, q odd and p < 2^31."""
    import galois

    if not (galois.is_prime(p) and galois.is_prime(q)):
        raise MirageError(f"field: p={p} and q={q} must both be prime")
    if (p - 1) % q or q == 2:
        raise MirageError(f"field: q={q} must be an odd prime dividing p - 1 = {p - 1}")
    if p >= 2**31:
        raise MirageError(f"field: p={p} must be below 2^31 so that products fit in int64")


def as_rational(x: float) -> Fraction:
    """The exact rational value of a float (a dyadic fraction), never an approximation."""
    if not math.isfinite(x):
        raise MirageError(f"field: the constant {x!r} has no value in a prime field; use a finite one")
    return Fraction(x)


def const_mod(c: Fraction, m: int) -> int:
    """The residue of an exact rational constant mod m (its denominator is a power of two)."""
    return c.numerator % m * pow(c.denominator % m, -1, m) % m


def inverse_mod(x: Array, m: int) -> Array:
    """Elementwise inverse mod prime m (Fermat); raises ZeroDivisorInTrial on a zero."""
    x = np.asarray(x, dtype=np.int64)
    if np.any(x == 0):
        raise ZeroDivisorInTrial
    result = np.ones_like(x)
    base = x.copy()
    e = m - 2
    while e:
        if e & 1:
            result = result * base % m
        e >>= 1
        if e:
            base = base * base % m
    return result


def _limb_plan(k: int, bits: int) -> tuple[str, int]:
    """How to split a K-term product of residues < 2^bits so float64 sums stay exact."""
    # One-sided split: limbs of w bits times full residues; K * 2^w * 2^bits <= 2^53.
    w = 53 - bits - max(k - 1, 1).bit_length()
    if w >= bits:
        return "direct", 1
    if w >= 1 and -(-bits // w) <= 2:
        return "split", w
    # Karatsuba on 16-bit-ish halves: K * (2^(h+1))^2 < 2^53.
    h = -(-bits // 2)
    if k * 4 ** (h + 1) <= 2**53:
        return "karatsuba", h
    return "chunk", h


def matmul_mod(a: Array, b: Array, m: int) -> Array:
    """Exact (a @ b) mod m for residues in [0, m), m < 2^31, via float64 BLAS GEMMs."""
    k = a.shape[-1]
    bits = max(int(m - 1).bit_length(), 1)
    plan, w = _limb_plan(k, bits)
    if plan == "direct":
        return _i64(np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(np.int64) % m)
    if plan == "split":
        bf = b.astype(np.float64)
        mask = (1 << w) - 1
        lo = np.matmul((a & mask).astype(np.float64), bf).astype(np.int64)  # < 2^53
        hi = np.matmul((a >> w).astype(np.float64), bf).astype(np.int64) % m
        hi *= (1 << w) % m  # < 2^62, and + lo stays below 2^63
        hi += lo
        return _i64(hi % m)
    if plan == "chunk":
        step = 2 ** (53 - 2 * (w + 1))  # the most terms one Karatsuba GEMM sums exactly
        acc = None
        for s in range(0, k, step):
            part = matmul_mod(a[..., s:s + step], b[..., s:s + step, :], m)
            acc = part if acc is None else (acc + part) % m
        assert acc is not None
        return acc
    mask = (1 << w) - 1
    a0, a1 = (a & mask).astype(np.float64), (a >> w).astype(np.float64)
    b0, b1 = (b & mask).astype(np.float64), (b >> w).astype(np.float64)
    p0 = np.matmul(a0, b0)
    p2 = np.matmul(a1, b1)
    a0 += a1
    b0 += b1
    p1 = np.matmul(a0, b0)
    # All three are integers below 2^53, so the middle term is exact in float64 too.
    p1 -= p0
    p1 -= p2
    mid = p1.astype(np.int64) % m
    mid *= (1 << w) % m  # < 2^47
    hi = p2.astype(np.int64) % m
    hi *= (1 << (2 * w)) % m  # < 2^62; the sum below stays under 2^63
    hi += mid
    hi += p0.astype(np.int64)
    p2 = hi
    return _i64(p2 % m)


_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _mix(z: Array) -> Array:
    """splitmix64's finalizer: a bijective avalanche mix of uint64 words."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return np.asarray(z ^ (z >> np.uint64(31)), dtype=np.uint64)


def _name_id(name: str) -> int:
    return zlib.crc32(name.encode())


# ---------------------------------------------------------------- one random point

class FieldTrial:
    """One random trial: primes, ω of order q, random-function keys, lazily drawn inputs.

    Everything is derived from ``(seed, index)`` through numpy SeedSequences keyed by what is
    drawn, so the order in which inputs are requested does not change their values.
    """

    def __init__(self, seed: int, index: int, p: int = DEFAULT_P, q: int = DEFAULT_Q) -> None:
        self.seed, self.index, self.p, self.q = seed, index, p, q
        rng = self._rng(1)
        while True:
            g = int(rng.integers(2, p - 1))
            omega = pow(g, (p - 1) // q, p)
            if omega != 1:
                break
        self.omega = omega
        # exp by two table look-ups: e = hi * 2^s + lo.
        self._shift = max((q - 1).bit_length() // 2, 1)
        self._lo = self._powers(omega, 1 << self._shift)
        self._hi = self._powers(pow(omega, 1 << self._shift, p), ((q - 1) >> self._shift) + 1)
        self._inputs: dict[tuple[str, tuple[int, ...], str], Array] = {}
        self._keys: dict[tuple[str, str], tuple[np.uint64, np.uint64]] = {}

    def _rng(self, *key: int) -> np.random.Generator:
        return np.random.default_rng(np.random.SeedSequence(self.seed, spawn_key=(self.index, *key)))

    def _powers(self, base: int, n: int) -> Array:
        t = np.ones(1, dtype=np.int64)
        while len(t) < n:
            t = np.concatenate([t, t * pow(base, len(t), self.p) % self.p])
        return t[:n]

    def modulus(self, side: str) -> int:
        return self.p if side == P_SIDE else self.q

    def input(self, name: str, shape: tuple[int, ...], side: str) -> Array:
        """Uniform random residues for input ``name`` on ``side`` (the same on every call)."""
        key = (name, shape, side)
        if key not in self._inputs:
            rng = self._rng(2, SIDES.index(side), _name_id(name))
            self._inputs[key] = rng.integers(0, self.modulus(side), size=shape, dtype=np.int64)
        return self._inputs[key]

    def exp(self, arg_q: Array) -> Array:
        """ω^e mod p for exponents e in [0, q): a p-side value."""
        e = np.asarray(arg_q, dtype=np.int64)
        return _i64(self._hi[e >> self._shift] * self._lo[e & ((1 << self._shift) - 1)] % self.p)

    def random_function(self, fid: str, x: Array, side: str) -> Array:
        """A pseudo-random function ``fid`` of the value, fixed for this trial and side."""
        if (fid, side) not in self._keys:
            k = self._rng(3, SIDES.index(side), _name_id(fid)).integers(0, 2**63, size=2, dtype=np.int64)
            self._keys[(fid, side)] = (np.uint64(k[0]), np.uint64(k[1]))
        k1, k2 = self._keys[(fid, side)]
        z = _mix(_mix(np.asarray(x, dtype=np.int64).astype(np.uint64) + k1) ^ k2)
        return (z % np.uint64(self.modulus(side))).astype(np.int64)


# ---------------------------------------------------------------- op rules

def _ring(name: str, xs: Sequence[Array], attrs: Mapping[str, Any], m: int) -> Array:
    if name == "add":
        return _i64((xs[0] + xs[1]) % m)
    if name == "sub":
        return _i64((xs[0] - xs[1]) % m)
    if name == "mul":
        return _i64(xs[0] * xs[1] % m)
    if name == "neg":
        return (-xs[0]) % m
    if name == "square":
        return _i64(xs[0] * xs[0] % m)
    if name == "mul_scalar":
        return xs[0] * const_mod(as_rational(attrs["scalar"]), m) % m
    if name == "sum":
        return _i64(np.sum(xs[0], axis=attrs["axis"], keepdims=attrs["keepdims"]) % m)
    if name == "matmul":
        return matmul_mod(xs[0], xs[1], m)
    raise MirageError(f"field: no ring rule for {name!r}; add one to semantics/field.py")


def _mean(x: Array, axis: int, keepdims: bool, m: int) -> Array:
    n = x.shape[axis]
    return _i64(np.sum(x, axis=axis, keepdims=keepdims) % m * pow(n % m, -1, m) % m)


#: Field rules by kind, then by op name (see the module docstring). ``None`` marks an op the
#: evaluator handles itself because it crosses sides (exp and the LAX ops).
RULES: dict[str, frozenset[str] | None] = {
    "ring": frozenset({"add", "sub", "mul", "neg", "square", "mul_scalar", "sum", "matmul"}),
    "div": frozenset({"div"}),
    "exp": frozenset({"exp"}),
    "lax": frozenset({"silu", "sigmoid"}),
    "mean": frozenset({"mean", "accum"}),
    "opaque": None,  # any op name: a random function named after the op (rsqrt: 1/sqrt)
    "rms": frozenset({"rms_norm"}),
}
assert set(RULES) == set(FIELD_KINDS)


def has_field_rule(name: str) -> bool:
    """True when the registry op ``name`` has a field rule here (tests check every op)."""
    kind = REGISTRY[name].field
    names = RULES.get(kind, frozenset())
    return names is None or name in names


SQRT_FN = "sqrt"


def same_side_op(trial: FieldTrial, name: str, xs: Sequence[Array], attrs: Mapping[str, Any],
                 side: str) -> Array:
    """Apply a registry op whose operands and result are all on ``side`` (not exp/LAX)."""
    m = trial.modulus(side)
    kind = REGISTRY[name].field
    if not has_field_rule(name):
        raise MirageError(f"field: op {name!r} (kind {kind}) has no field rule")
    if kind == "ring":
        return _ring(name, xs, attrs, m)
    if kind == "div":
        return _i64(xs[0] * inverse_mod(xs[1], m) % m)
    if kind == "mean":
        return _mean(xs[0], attrs["axis"], attrs["keepdims"], m)
    if kind == "opaque":
        if name == "rsqrt":
            return inverse_mod(trial.random_function(SQRT_FN, xs[0], side), m)
        return trial.random_function(name, xs[0], side)
    if kind == "rms":
        x = xs[0]
        ms = (_mean(x * x % m, -1, True, m) + const_mod(as_rational(attrs["eps"]), m)) % m
        r = x * inverse_mod(trial.random_function(SQRT_FN, ms, side), m) % m
        return _i64(r * xs[1] % m if len(xs) == 2 else r)
    raise FieldDomainError(f"field: {name} crosses sides and is applied by the evaluator")


def exp_op(trial: FieldTrial, name: str, arg_p: Array | None, arg_q: Array) -> Array:
    """exp, silu, sigmoid: the p-side value from the argument's q side (and p side for silu)."""
    p, q = trial.p, trial.q
    if name == "exp":
        return trial.exp(arg_q)
    y = trial.exp((-arg_q) % q)  # exp(-x)
    inv = inverse_mod((1 + y) % p, p)
    if name == "sigmoid":
        return inv
    if name == "silu":
        assert arg_p is not None
        return _i64(arg_p * inv % p)
    raise MirageError(f"field: no rule for the exp-kind op {name!r}")


def accum_op(trial: FieldTrial, x: Array, attrs: Mapping[str, Any], loop_axis: int, side: str) -> Array:
    """Fold a tile over loop iterations (and the last dimension for fold), in the field."""
    m = trial.modulus(side)
    kind, fold = attrs["kind"], attrs["fold"]
    count = x.shape[loop_axis]
    xx = x * x % m if kind == "rms" else x
    if fold is not None:
        last = x.shape[-1]
        count *= last // fold
        xx = xx.reshape(*x.shape[:-1], last // fold, fold).sum(axis=-2)
    s = xx.sum(axis=loop_axis, keepdims=True) % m
    if kind == "sum":
        return _i64(s)
    mean = s * pow(count % m, -1, m) % m
    return trial.random_function(SQRT_FN, mean, side) if kind == "rms" else mean


# ---------------------------------------------------------------- evaluation

Key = tuple[Node, str]


class FieldEvaluator:
    """Evaluates kernel graphs in one trial; ``cache`` maps (node, side) to values.

    The cache may be shared by many graphs evaluated in the same trial (the verifier keeps
    one per trial), and may be any mutable mapping (for instance one that evicts).
    """

    def __init__(self, trial: FieldTrial, cache: MutableMapping[Key, Any] | None = None,
                 on_store: Callable[[Key, Any], None] | None = None) -> None:
        self.trial = trial
        self.cache: MutableMapping[Key, Any] = cache if cache is not None else {}
        self.on_store = on_store

    def _store(self, key: Key, value: Any) -> Any:
        self.cache[key] = value
        if self.on_store is not None:
            self.on_store(key, value)
        return value

    def outputs(self, graph: KernelGraph) -> list[Array]:
        """The p-side value of every output of ``graph``."""
        return [self.value(o, P_SIDE) for o in graph.outputs]

    def value(self, n: Node, side: str) -> Any:
        key = (n, side)
        found = self.cache.get(key)
        if found is not None:
            return found
        t = self.trial
        if n.op == INPUT:
            return self._store(key, t.input(n.attr("name"), n.shape, side))
        if n.op == GET:
            return self._store(key, self.value(n.src[0], side)[n.attr("index")])
        if n.op == KERNEL_OP:
            ins = [_Lazy(self, s) for s in n.src]
            return self._store(key, evaluate_block_field(n.attr("graph"), ins, t, side))
        if n.op in EXP_OPS:
            if side != P_SIDE:
                raise FieldDomainError(
                    f"{n.op} is needed inside the argument of another exp; programs with an exp "
                    "under an exp are outside the LAX class the field test covers")
            arg_q = self.value(n.src[0], Q_SIDE)
            arg_p = self.value(n.src[0], P_SIDE) if n.op == "silu" else None
            return self._store(key, exp_op(t, n.op, arg_p, arg_q))
        xs = [self.value(s, side) for s in n.src]
        return self._store(key, same_side_op(t, n.op, xs, n.attr_dict, side))


class _Lazy:
    """A kernel input of a graph-defined kernel, fetched on the side a block op asks for."""

    def __init__(self, ev: FieldEvaluator, n: Node) -> None:
        self.ev, self.n = ev, n

    def get(self, side: str) -> Array:
        return np.asarray(self.ev.value(self.n, side))


def evaluate_block_field(bg: BlockGraph, inputs: Sequence[_Lazy], trial: FieldTrial,
                         side: str) -> list[Array]:
    """All outputs of one graph-defined kernel on ``side``, for every block and iteration."""
    vals: dict[Key, Array] = {}

    def val(n: Node, s: str) -> Array:
        key = (n, s)
        if key in vals:
            return vals[key]
        if n.op == ITER:
            v = iterate(inputs[n.attr("input")].get(s), n.attr("imap"), n.attr("fmap"),
                        bg.grid, bg.forloop)
        elif n.op == "accum":
            x = val(n.src[0], s)
            if x.shape[LOOP_AXIS] != bg.forloop:  # a loop-invariant tile is added F times
                full = list(x.shape)
                full[LOOP_AXIS] = bg.forloop
                x = np.broadcast_to(x, full)
            v = accum_op(trial, x, n.attr_dict, LOOP_AXIS, s)
        elif n.op in EXP_OPS:
            if s != P_SIDE:
                raise FieldDomainError(
                    f"block {n.op} is needed inside the argument of another exp; programs with "
                    "an exp under an exp are outside the LAX class the field test covers")
            arg_q = val(n.src[0], Q_SIDE)
            arg_p = val(n.src[0], P_SIDE) if n.op == "silu" else None
            v = exp_op(trial, n.op, arg_p, arg_q)
        else:
            args = align([val(x, s) for x in n.src], LEAD)
            v = same_side_op(trial, n.op, args, n.attr_dict, s)
        vals[key] = v
        return v

    return [save(val(o.node, side), o.omap, bg.grid, o.node.shape) for o in bg.outputs]
