"""Prime-field semantics of μGraphs: every registry op over Z_p and Z_q (q | p - 1).

A *side* is one of the two number systems a value can be evaluated in: ``"p"`` (Z_p, where
outputs are compared) or ``"q"`` (Z_q, where the arguments of ``exp`` live). One
:class:`FieldTrial` is one random point of the test: the primes, a random ω of order q, the
keys of the random functions and (lazily, by input name and side) uniform random inputs.

Op rules are read from each op's declaration (``ir.ops``, facet ``field``, a
``FieldRule``); this module keeps no table of op names. A rule is written against the
arithmetic interface :class:`SideOps` (``F``), exact int64 arithmetic mod the side's modulus:

- ``ring``: ``rule(F, attrs, *xs)``, rational arithmetic on one side; matmul is exact through
  float64 BLAS with limb splitting (:func:`matmul_mod`); a zero divisor raises
  :class:`ZeroDivisorInTrial` so that the caller resamples the trial, never treated as 1;
- ``exp``: ``ω^(x mod q) mod p`` through ``F.exp``: the argument is taken on the q side, the
  result lives on the p side only, so ``exp(a+b) = exp(a)·exp(b)`` holds exactly; operands
  are pairs read on the sides the declaration's ``reads`` names (silu reads both);
- ``random`` (sqrt, gelu, relu, rms_norm, ...): a keyed pseudo-random function ``fid`` of
  *every* argument the rule returns (symmetric exactly for ops declared commutative), then
  the rule's ``post`` (rsqrt is 1 / the sqrt function, rms_norm is x · inverse(sqrt_fn(mean
  of squares + eps)), so rewrites between ops sharing a function are seen as equal);
- ``accum``: the for-loop accumulator (:func:`accum_op`); ``kind=rms`` is the sqrt function
  of the mean of squares, over ``accum_terms`` terms. A sum or mean of a product of tiles
  (times or over loop-invariant tiles) is taken as one GEMM over the joined iterations
  (:func:`loop_sum_of_products`), the same residues without the per-iteration products.

:class:`FieldEvaluator` walks kernel graphs and block graphs (reusing ``layout``'s iterate,
save and align, so it is the same vectorized scheme as the float64 interpreter). It
evaluates a node on the sides that are asked for, by need: the p side of outputs, the q side
of what feeds an ``exp``, both sides of exp-free operands of a random function; a kernel's
outputs one by one, so a kernel saving exp(A) beside a plain tensor needed on q evaluates
only that tensor there. Its cache is keyed by (node, side); nodes are hash-consed, so shared
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
from mirage_formal.ir.graph import (
    GET,
    INPUT,
    ITER,
    KERNEL_OP,
    BlockGraph,
    KernelGraph,
    loop_invariant,
)
from mirage_formal.ir.node import Node
from mirage_formal.ir.ops import FIELD_KINDS, REGISTRY, OpDef, accum_terms
from mirage_formal.semantics.layout import LEAD, LOOP_AXIS, align, iterate, save

Array = np.ndarray
P_SIDE, Q_SIDE = "p", "q"
SIDES = (P_SIDE, Q_SIDE)

#: The default field: the largest safe prime below 2^31 (p = 2q + 1, q prime). Products of
#: two residues stay below 2^62, so elementwise arithmetic is exact in int64.
DEFAULT_P = 2147483579
DEFAULT_Q = 1073741789

#: exponents :meth:`FieldTrial.exp` evaluates at once (its temporaries stay small)
EXP_CHUNK = 1 << 20

#: sum a loop's products without their per-iteration tiles where linearity allows
#: (``evaluate_block_field``'s ``loop_sum``); off, every accumulator sums its operand's tiles
#: (the definition, which the tests compare it against)
LOOP_SUMS = True

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


#: :func:`inverse_mod` inverts arrays of at most this many elements by Fermat directly
FERMAT_MAX = 1024


def _fermat_inverse(x: Array, m: int) -> Array:
    """x^(m-2) mod m elementwise: the inverse of every (nonzero) element, ~60 products each."""
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


def inverse_mod(x: Array, m: int) -> Array:
    """Elementwise inverse mod prime m; raises ZeroDivisorInTrial on a zero.

    Batch inversion (Montgomery's trick, as a tree so that every level is one vectorised
    product): multiply neighbours pairwise up to at most :data:`FERMAT_MAX` values, invert
    those by Fermat, and walk back down (the inverse of ``a`` is ``inv(a·b)·b``). About three
    modular products per element instead of Fermat's ~60 (a sigmoid over 16M elements: 5.4 s
    a trial side on 2 cores before). Exact: every value is a residue below 2^31, every product
    below 2^62."""
    x = np.asarray(x, dtype=np.int64)
    if np.any(x == 0):
        raise ZeroDivisorInTrial
    flat = x.reshape(-1)
    levels: list[Array] = []
    cur = flat
    while cur.size > FERMAT_MAX:
        if cur.size % 2:
            cur = np.concatenate([cur, np.ones(1, dtype=np.int64)])
        levels.append(cur)
        cur = cur[0::2] * cur[1::2] % m
    inv = _fermat_inverse(cur, m)
    while levels:
        level = levels.pop()
        inv = inv[:level.size // 2]  # (less the 1 that padded the level above, if any)
        down = np.empty_like(level)
        down[0::2] = inv * level[1::2] % m
        down[1::2] = inv * level[0::2] % m
        inv = down
    return inv[:flat.size].reshape(x.shape)


#: ``_fold_batches`` leaves a product to numpy's own batch loop when it has at most this many
#: GEMMs, each of at least ``FOLD_GEMM_MIN`` multiply-adds (exact either way: every partial
#: sum is an integer below 2^53, so the grouping does not change a bit)
FOLD_GEMMS_MAX = 256
FOLD_GEMM_MIN = 1 << 16


def _fold_batches(a: Array, b: Array) -> Array:
    """``a @ b`` in float64 with every batch axis on which one operand is broadcast folded
    into the other's rows (``a``) or columns (``b``): one GEMM per shared batch index.

    Block-level operands often repeat one tile for every block of a grid axis (a weight tile
    for every row block, the query tile of one head for every key block); numpy would run one
    small GEMM per block pair, through its slow broadcast loop. Folding gives large GEMMs with
    the same result (each output element is the same sum of the same products).
    """
    nd = max(a.ndim, b.ndim)
    a = a.reshape((1,) * (nd - a.ndim) + a.shape)
    b = b.reshape((1,) * (nd - b.ndim) + b.shape)
    batch = range(nd - 2)
    rows = [i for i in batch if a.shape[i] > 1 and b.shape[i] == 1]  # a's only: a's rows
    cols = [i for i in batch if b.shape[i] > 1 and a.shape[i] == 1]  # b's only: b's columns
    if not rows and not cols:
        return np.asarray(np.matmul(a, b))
    gemms = math.prod(max(a.shape[i], b.shape[i]) for i in batch)
    if gemms <= FOLD_GEMMS_MAX and a.shape[-2] * a.shape[-1] * b.shape[-1] >= FOLD_GEMM_MIN:
        # few large GEMMs: numpy's loop over them costs nothing, and folding would copy the
        # broadcast-against operand whole (a decoder's per-head weights, 128 MB as float64,
        # once per limb and side: 5.5 of a 9.6 s verification)
        return np.asarray(np.matmul(a, b))
    keep = [i for i in batch if i not in rows and i not in cols]  # equal sizes
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    ksh = [a.shape[i] for i in keep]
    rsh = [a.shape[i] for i in rows]
    csh = [b.shape[i] for i in cols]
    at = a.transpose([*keep, *cols, *rows, nd - 2, nd - 1]).reshape(*ksh, math.prod(rsh) * m, k)
    bt = b.transpose([*keep, *rows, nd - 2, *cols, nd - 1]).reshape(*ksh, k, math.prod(csh) * n)
    c = np.matmul(at, bt).reshape(*ksh, *rsh, m, *csh, n)
    here = [*keep, *rows, -2, *cols, -1]  # (-2, -1: the rows and columns of the product)
    return np.asarray(c.transpose([here.index(i) for i in [*batch, -2, -1]]))


def batched_matmul(a: Array, b: Array) -> Array:
    """Float64 batched matmul, folding broadcast batch axes into one GEMM where it can."""
    return _fold_batches(a, b)


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


def _split_small(a: Array, b: Array, m: int, w: int, bits: int) -> Array:
    """Limbs of the smaller operand times the other one whole: one GEMM per limb.

    When one operand is much larger (a weight matrix against a few rows), this reads the
    large one once per limb and never splits it; every partial sum is below 2^53.
    """
    split_a = a.size <= b.size
    small, big = (a, b) if split_a else (b, a)
    bigf = big.astype(np.float64)
    mask = (1 << w) - 1
    acc: Array | None = None
    # in place wherever it can be: these arrays run to hundreds of MB, and every fresh one
    # costs page faults on top of the pass itself
    for i in range(-(-bits // w)):
        limb = small >> (w * i)  # a new array (i = 0 too), masked in place
        limb &= mask
        limbf = limb.astype(np.float64)
        del limb
        prod = batched_matmul(limbf, bigf) if split_a else batched_matmul(bigf, limbf)
        del limbf
        part = prod.astype(np.int64)
        del prod
        part %= m
        if i:
            part *= (1 << (w * i)) % m  # < 2^62
            part %= m
        if acc is None:
            acc = part
        else:
            acc += part
            acc %= m
    assert acc is not None
    return acc


def matmul_mod(a: Array, b: Array, m: int) -> Array:
    """Exact (a @ b) mod m for residues in [0, m), m < 2^31, via float64 BLAS GEMMs."""
    k = a.shape[-1]
    bits = max(int(m - 1).bit_length(), 1)
    plan, w = _limb_plan(k, bits)
    if plan == "direct":
        return _i64(batched_matmul(a.astype(np.float64), b.astype(np.float64)).astype(np.int64) % m)
    # Split only the smaller operand into limbs (one GEMM per limb, the larger one converted
    # once) when that moves fewer elements than Karatsuba, which splits and converts both
    # operands and makes three products: always for two limbs, and for lopsided products
    # (attention's K and V against a few query rows) up to more. These arrays are large and
    # the work is memory-bound, so elements touched is the cost.
    w1 = 53 - bits - max(k - 1, 1).bit_length()
    if w1 >= 1:
        limbs = -(-bits // w1)
        out = math.prod(np.broadcast_shapes(a.shape[:-2], b.shape[:-2])) * a.shape[-2] * b.shape[-1]
        small, big = sorted((a.size, b.size))
        one_sided = big + limbs * (small + out)
        karatsuba = 2 * (a.size + b.size) + 3 * out
        if limbs <= 2 or (limbs <= 6 and one_sided <= karatsuba):
            return _i64(_split_small(a, b, m, w1, bits))
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
    p0 = batched_matmul(a0, b0)
    p2 = batched_matmul(a1, b1)
    a0 += a1
    b0 += b1
    p1 = batched_matmul(a0, b0)
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
        self._keys: dict[tuple[str, str], tuple[np.uint64, np.uint64, np.uint64]] = {}

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
        out = np.empty(e.shape, dtype=np.int64)
        flat_e, flat_out = e.reshape(-1), out.reshape(-1)  # (a copy of e only if strided)
        mask = (1 << self._shift) - 1
        # in chunks of EXP_CHUNK: the temporaries of a whole attention score tensor (33.5M
        # exponents at mqa b=8) were four fresh 268 MB arrays, whose first touch cost more
        # than the arithmetic (2.7 s an exp on this project's 2-core CPU); and indexing, not
        # np.take, whose index checks took 0.85 s per look-up against 0.09
        for i in range(0, flat_e.size, EXP_CHUNK):
            c = flat_e[i:i + EXP_CHUNK]
            hi = self._hi[c >> self._shift]
            hi *= self._lo[c & mask]
            np.remainder(hi, self.p, out=flat_out[i:i + EXP_CHUNK])
        return out

    def _key(self, fid: str, side: str) -> tuple[np.uint64, np.uint64, np.uint64]:
        if (fid, side) not in self._keys:
            k = self._rng(3, SIDES.index(side), _name_id(fid)).integers(0, 2**63, size=3, dtype=np.int64)
            self._keys[(fid, side)] = (np.uint64(k[0]), np.uint64(k[1]), np.uint64(k[2]))
        return self._keys[(fid, side)]

    def random_function(self, fid: str, args: Sequence[Array], side: str,
                        others: Sequence[Array] | None = None, symmetric: bool = False) -> Array:
        """A pseudo-random function ``fid`` of *every* argument, fixed for this trial and side.

        Each argument is hashed with a key of its position (one key for all when
        ``symmetric``: the function of a commutative op) and the hashes are combined in
        order (summed when ``symmetric``), so a change in any argument changes the value.
        With ``others`` (the arguments' values on the q side) each argument is hashed as the
        pair (x mod p, x mod q): the verifier uses this for arguments free of exp, so that
        two different arguments must collide in both fields at once to collide at all.
        """
        k1, k2, k3 = self._key(fid, side)
        parts = []
        for i, x in enumerate(args):
            kpos = k1 if symmetric else k1 ^ np.uint64((i + 1) * 0x9E3779B97F4A7C15 % 2**64)
            z = _mix(np.asarray(x, dtype=np.int64).astype(np.uint64) + kpos)
            if others is not None:
                z = _mix(z ^ (np.asarray(others[i], dtype=np.int64).astype(np.uint64) + k3))
            parts.append(z)
        acc = parts[0]
        for z in parts[1:]:
            acc = acc + z if symmetric else _mix(acc ^ z)
        out = _mix(acc ^ k2)
        return (out % np.uint64(self.modulus(side))).astype(np.int64)


# ---------------------------------------------------------------- op rules

class SideOps:
    """The arithmetic interface ``F`` the registry's field rules are written against (see
    ``ir.opdef.FieldRule``): exact int64 arithmetic mod the modulus of one side."""

    def __init__(self, trial: FieldTrial, side: str) -> None:
        self.trial, self.side, self.m = trial, side, trial.modulus(side)

    @property
    def q(self) -> SideOps:
        return SideOps(self.trial, Q_SIDE)

    def add(self, a: Array, b: Array) -> Array:
        return _i64((np.asarray(a) + b) % self.m)

    def sub(self, a: Array, b: Array) -> Array:
        return _i64((np.asarray(a) - b) % self.m)

    def mul(self, a: Array, b: Array) -> Array:
        return _i64(np.asarray(a) * b % self.m)

    def neg(self, a: Array) -> Array:
        return _i64((-np.asarray(a)) % self.m)

    def inv(self, a: Array) -> Array:
        return inverse_mod(a, self.m)

    def const(self, c: float | int | Fraction) -> Array:
        f = c if isinstance(c, Fraction) else as_rational(float(c))
        if f.denominator % self.m == 0:
            raise MirageError(f"field: the constant {c} has no value mod {self.m}")
        return _i64(const_mod(f, self.m))

    def sum(self, a: Array, axis: int, keepdims: bool) -> Array:
        return _i64(np.sum(a, axis=axis, keepdims=keepdims) % self.m)

    def matmul(self, a: Array, b: Array) -> Array:
        return matmul_mod(np.asarray(a), np.asarray(b), self.m)

    def exp(self, a_q: Array) -> Array:
        if self.side != P_SIDE:
            raise FieldDomainError("exp gives a p-side value; it was asked for on the q side")
        return self.trial.exp(a_q)


class _Pair:
    """An operand of an exp-kind rule: its value on the sides the declaration reads."""

    def __init__(self, op: str, index: int, reads: str, get: Callable[[str], Array]) -> None:
        self.op, self.index, self.reads, self._get = op, index, reads, get

    def _side(self, side: str) -> Array:
        if side not in self.reads:
            raise FieldDomainError(
                f"the field rule of {self.op} reads operand {self.index} on side {side}, but its "
                f"declaration says reads={self.reads!r}; fix the declaration in ir/ops.py")
        return self._get(side)

    @property
    def p(self) -> Array:
        return self._side(P_SIDE)

    @property
    def q(self) -> Array:
        return self._side(Q_SIDE)


def has_field_rule(name: str) -> bool:
    """True when the registry op ``name`` has a field rule this interpreter applies."""
    f = REGISTRY[name].field
    return f.kind in FIELD_KINDS and (f.rule is not None or f.kind == "accum")


def same_side_op(trial: FieldTrial, name: str, xs: Sequence[Array], attrs: Mapping[str, Any],
                 side: str) -> Array:
    """Apply a ring-kind or random-kind registry op whose operands are all on ``side``."""
    return apply_same_side(trial, REGISTRY[name], xs, attrs, side)


def apply_same_side(trial: FieldTrial, d: OpDef, xs: Sequence[Array], attrs: Mapping[str, Any],
                    side: str, other: Sequence[Array] | None = None) -> Array:
    """The field rule of declaration ``d`` (ring or random kind) on operands on ``side``
    (``other``: the operands on the other side, see :func:`random_op`). Takes the
    declaration itself, so a test can check one that is not in the registry."""
    if d.field.kind == "ring":
        assert d.field.rule is not None
        return _i64(d.field.rule(SideOps(trial, side), attrs, *xs))
    if d.field.kind == "random":
        return _random_rule(trial, d, xs, attrs, side, other)
    raise FieldDomainError(f"field: {d.name} (kind {d.field.kind}) crosses sides and is applied "
                           "by the evaluator")


def random_op(trial: FieldTrial, name: str, xs: Sequence[Array], attrs: Mapping[str, Any],
              side: str, other: Sequence[Array] | None = None) -> Array:
    """A random-kind op on ``side``: the random function of the rule's arguments, then post.

    With ``other`` (every operand on the other side) the function takes each argument in
    both fields: the verifier does this when all operands are free of exp.
    """
    return _random_rule(trial, REGISTRY[name], xs, attrs, side, other)


def _random_rule(trial: FieldTrial, d: OpDef, xs: Sequence[Array], attrs: Mapping[str, Any],
                 side: str, other: Sequence[Array] | None) -> Array:
    f = d.field
    assert f.rule is not None
    here = SideOps(trial, side)
    args = [np.asarray(a) for a in f.rule(here, attrs, *xs)]
    others = None
    if other is not None:
        o_side = Q_SIDE if side == P_SIDE else P_SIDE
        o_args = [np.asarray(a) for a in f.rule(SideOps(trial, o_side), attrs, *other)]
        by_side = {side: args, o_side: o_args}
        args, others = by_side[P_SIDE], by_side[Q_SIDE]
    r = trial.random_function(f.fid, args, side, others, symmetric=d.commutative)
    if f.post is None:
        return r
    return _i64(f.post(here, attrs, r, *xs))


def exp_op(trial: FieldTrial, name: str, get: Sequence[Callable[[str], Array]],
           attrs: Mapping[str, Any]) -> Array:
    """An exp-kind op (exp, silu, sigmoid): its p-side value, operands fetched by side."""
    return apply_exp(trial, REGISTRY[name], get, attrs)


def apply_exp(trial: FieldTrial, d: OpDef, get: Sequence[Callable[[str], Array]],
              attrs: Mapping[str, Any]) -> Array:
    """The exp-kind field rule of declaration ``d``; ``get[i](side)`` gives operand i."""
    f = d.field
    name = d.name
    assert f.rule is not None
    pairs = [_Pair(name, i, f.reads[i], g) for i, g in enumerate(get)]
    return _i64(f.rule(SideOps(trial, P_SIDE), attrs, *pairs))


def _accum_sum(x: Array, attrs: Mapping[str, Any], loop_axis: int, m: int) -> tuple[Array, int]:
    kind, fold = attrs["kind"], attrs["fold"]
    count = accum_terms(x.shape[loop_axis], x.shape[-1], fold)
    xx = x * x % m if kind == "rms" else x
    if fold is not None:
        last = x.shape[-1]
        xx = xx.reshape(*x.shape[:-1], last // fold, fold).sum(axis=-2)
    return _i64(xx.sum(axis=loop_axis, keepdims=True) % m), count


def loop_sum_of_products(a: Array, b: Array, forloop: int, m: int) -> Array:
    """The sum over the loop axis of ``a @ b`` mod m (loop axis kept, size 1), for block-level
    operands aligned by :func:`align` whose loop axes are ``forloop`` or 1 (invariant, so
    counted ``forloop`` times), without the per-iteration products: the iterations' tiles
    joined along the contraction (one GEMM of K = forloop x the tile's k). The per-iteration
    products are forloop times the output's size, which made verifying a long-loop μGraph of
    a large product take seconds per trial (the fp32 prefill gated MLP's sizes: 15 s)."""
    fa, fb = a.shape[LOOP_AXIS], b.shape[LOOP_AXIS]
    if fa == 1 and fb == 1:
        return _i64(matmul_mod(a, b, m) * (forloop % m) % m)
    if fa == 1:
        return matmul_mod(a, _i64(b.sum(axis=LOOP_AXIS, keepdims=True) % m), m)
    if fb == 1:
        return matmul_mod(_i64(a.sum(axis=LOOP_AXIS, keepdims=True) % m), b, m)
    # a (g3, F, *batch, tm, tk) -> (g3, 1, *batch, tm, F*tk); b (g3, F, *batch, tk, tn) ->
    # (g3, 1, *batch, F*tk, tn): column f*tk + j of one meets row f*tk + j of the other
    a2 = np.moveaxis(a, LOOP_AXIS, -2)
    a2 = a2.reshape(*a2.shape[:-2], a2.shape[-2] * a2.shape[-1])
    b2 = np.moveaxis(b, LOOP_AXIS, -3)
    b2 = b2.reshape(*b2.shape[:-3], b2.shape[-3] * b2.shape[-2], b2.shape[-1])
    return matmul_mod(np.expand_dims(a2, LOOP_AXIS), np.expand_dims(b2, LOOP_AXIS), m)


def accum_from_loop_sum(trial: FieldTrial, total: Array, attrs: Mapping[str, Any],
                        forloop: int, side: str) -> Array:
    """``accum`` (kind sum or mean, no fold) from ``total``, the sum of its operand over the
    loop (what :func:`accum_op` computes from the per-iteration tiles)."""
    assert attrs["fold"] is None and attrs["kind"] in ("sum", "mean")
    if attrs["kind"] == "sum":
        return total
    return _mean(total, accum_terms(forloop, total.shape[-1], None), trial.modulus(side))


def _mean(total: Array, count: int, m: int) -> Array:
    """``total`` / ``count`` mod m (an accumulator's mean of ``count`` terms)."""
    return _i64(total * pow(count % m, -1, m) % m)


def accum_op(trial: FieldTrial, x: Array, attrs: Mapping[str, Any], loop_axis: int, side: str,
             x_other: Array | None = None) -> Array:
    """Fold a tile over loop iterations (and the last dimension for fold), in the field.

    For kind rms with ``x_other`` (the tile on the other side) the square root's random
    function takes the mean of squares in both fields (see :func:`random_op`).
    """
    m = trial.modulus(side)
    s, count = _accum_sum(x, attrs, loop_axis, m)
    if attrs["kind"] == "sum":
        return s
    mean = _mean(s, count, m)
    if attrs["kind"] != "rms":
        return mean
    fid = REGISTRY["accum"].field.fid
    if x_other is None:
        return trial.random_function(fid, [mean], side)
    other = Q_SIDE if side == P_SIDE else P_SIDE
    mo = trial.modulus(other)
    so, _ = _accum_sum(x_other, attrs, loop_axis, mo)
    mean_o = _mean(so, count, mo)
    means = {side: mean, other: mean_o}
    return trial.random_function(fid, [means[P_SIDE]], side, [means[Q_SIDE]])


def applies_exp(n: Node) -> bool:
    """Whether node ``n`` is a registry op that applies an exp (its field kind is exp)."""
    d = REGISTRY.get(n.op)
    return d is not None and d.field.kind == "exp"


def applies_random(n: Node) -> bool:
    """Whether node ``n`` is a registry op applying a random function (accum: kind rms)."""
    d = REGISTRY.get(n.op)
    if d is None:
        return False
    return d.field.kind == "random" or (d.field.kind == "accum" and n.attr("kind") == "rms")


def node_purity(n: Node, kernel: Node | None, memo: dict[tuple[Node, Node | None], tuple[bool, bool]]
                ) -> tuple[bool, bool]:
    """(exp-free, random-function-free) for a kernel node (kernel=None) or a block node of
    the graph-defined kernel ``kernel``: whether any exp, or any random function, feeds it."""
    key = (n, kernel)
    if key in memo:
        return memo[key]
    if n.op == INPUT:
        out = (True, True)
    elif n.op == GET:
        kn = n.src[0]
        out = node_purity(kn.attr("graph").outputs[n.attr("index")].node, kn, memo)
    elif n.op == ITER:
        assert kernel is not None
        out = node_purity(kernel.src[n.attr("input")], None, memo)
    else:
        parts = [node_purity(s, kernel, memo) for s in n.src]
        ef = all(p[0] for p in parts) and not applies_exp(n)
        rf = all(p[1] for p in parts) and not applies_random(n)
        out = (ef, rf)
    memo[key] = out
    return out


def dual_operands(n: Node, kernel: Node | None,
                  memo: dict[tuple[Node, Node | None], tuple[bool, bool]]) -> bool:
    """A random function at ``n`` takes its arguments in both fields when every operand is
    free of exp (an exp value has no meaning on the q side)."""
    return all(node_purity(s, kernel, memo)[0] for s in n.src)


def _other(side: str) -> str:
    return Q_SIDE if side == P_SIDE else P_SIDE


# ---------------------------------------------------------------- evaluation

Key = tuple[Node, str]


class FieldEvaluator:
    """Evaluates kernel graphs in one trial; ``cache`` maps (node, side) to values.

    Values are computed by need: a node is evaluated on a side only when a consumer asks for
    it there, and a graph-defined kernel's outputs one by one (a kernel saving exp(A) beside
    a plain tensor whose consumer needs the q side evaluates only that tensor on q).
    The cache may be shared by many graphs evaluated in the same trial (the verifier keeps
    one per trial), and may be any mutable mapping (for instance one that evicts).
    """

    def __init__(self, trial: FieldTrial, cache: MutableMapping[Key, Any] | None = None,
                 on_store: Callable[[Key, Any], None] | None = None) -> None:
        self.trial = trial
        self.cache: MutableMapping[Key, Any] = cache if cache is not None else {}
        self.on_store = on_store
        self.purity: dict[tuple[Node, Node | None], tuple[bool, bool]] = {}
        self._blocks: dict[Node, dict[Key, Array]] = {}

    def _store(self, key: Key, value: Any) -> Any:
        self.cache[key] = value
        if self.on_store is not None:
            self.on_store(key, value)
        return value

    def outputs(self, graph: KernelGraph) -> list[Array]:
        """The p-side value of every output of ``graph``."""
        return [self.value(o, P_SIDE) for o in graph.outputs]

    def _kernel_outputs(self, kn: Node, which: Sequence[int], side: str) -> list[Array]:
        ins = [_Lazy(self, s) for s in kn.src]
        return evaluate_block_field(kn.attr("graph"), ins, self.trial, side, kn, self.purity,
                                    which, self._blocks.setdefault(kn, {}))

    def value(self, n: Node, side: str) -> Any:
        key = (n, side)
        found = self.cache.get(key)
        if found is not None:
            return found
        t = self.trial
        if n.op == INPUT:
            return self._store(key, t.input(n.attr("name"), n.shape, side))
        if n.op == GET:
            kn = n.src[0]
            return self._store(key, self._kernel_outputs(kn, [n.attr("index")], side)[0])
        if n.op == KERNEL_OP:
            bg: BlockGraph = n.attr("graph")
            return self._kernel_outputs(n, range(len(bg.outputs)), side)
        if applies_exp(n):
            if side != P_SIDE:
                raise FieldDomainError(
                    f"{n.op} is needed inside the argument of another exp; programs with an exp "
                    "under an exp are outside the LAX class the field test covers")
            gets = [lambda s_, src=src: self.value(src, s_) for src in n.src]
            return self._store(key, exp_op(t, n.op, gets, n.attr_dict))
        xs = [self.value(s, side) for s in n.src]
        if applies_random(n) and dual_operands(n, None, self.purity):
            other = [self.value(s, _other(side)) for s in n.src]
            return self._store(key, random_op(t, n.op, xs, n.attr_dict, side, other))
        return self._store(key, same_side_op(t, n.op, xs, n.attr_dict, side))


class _Lazy:
    """A kernel input of a graph-defined kernel, fetched on the side a block op asks for."""

    def __init__(self, ev: FieldEvaluator, n: Node) -> None:
        self.ev, self.n = ev, n

    def get(self, side: str) -> Array:
        return np.asarray(self.ev.value(self.n, side))


def evaluate_block_field(bg: BlockGraph, inputs: Sequence[_Lazy], trial: FieldTrial,
                         side: str, kernel: Node,
                         purity: dict[tuple[Node, Node | None], tuple[bool, bool]],
                         which: Sequence[int] | None = None,
                         vals: dict[Key, Array] | None = None) -> list[Array]:
    """Outputs ``which`` (default: all) of one graph-defined kernel on ``side``, for every
    block and iteration. Block values are computed by need; ``vals`` may carry them between
    calls for the same kernel in the same trial."""
    vals = {} if vals is None else vals
    hoisted = loop_invariant(bg)

    def full_loop(x: Array) -> Array:
        if x.shape[LOOP_AXIS] != bg.forloop:  # a loop-invariant tile is added F times
            full = list(x.shape)
            full[LOOP_AXIS] = bg.forloop
            x = np.broadcast_to(x, full)
        return x

    def invariant(n: Node) -> bool:
        return (n.op == ITER and n.attr("fmap") == -1) or n in hoisted

    def loop_sum(n: Node, s: str) -> Array | None:
        """The sum of ``n`` over the loop without its per-iteration tiles, where linearity
        gives it: a product of two tiles (one GEMM over the joined iterations), a tile times
        or over a loop-invariant one (the invariant factor applied to the operand's sum);
        None otherwise. Exact: the same residues as summing the tiles."""
        if not LOOP_SUMS or invariant(n):
            return None
        if n.op == "matmul":
            a, b = align([val(x, s) for x in n.src], LEAD)
            return loop_sum_of_products(a, b, bg.forloop, trial.modulus(s))
        linear = {"mul": (0, 1), "div": (0,)}.get(n.op, ())
        for i in linear:
            rest = [x for j, x in enumerate(n.src) if j != i]
            if all(invariant(x) for x in rest) and (inner := loop_sum(n.src[i], s)) is not None:
                args = [inner if j == i else val(x, s) for j, x in enumerate(n.src)]
                return same_side_op(trial, n.op, align(args, LEAD), n.attr_dict, s)
        return None

    def val(n: Node, s: str) -> Array:
        key = (n, s)
        if key in vals:
            return vals[key]
        if n.op == ITER:
            v = iterate(inputs[n.attr("input")].get(s), n.attr("imap"), n.attr("fmap"),
                        bg.grid, bg.forloop)
        elif (n.op == "accum" and n.attr("fold") is None and n.attr("kind") in ("sum", "mean")
              and (total := loop_sum(n.src[0], s)) is not None):
            v = accum_from_loop_sum(trial, total, n.attr_dict, bg.forloop, s)
        elif n.op == "accum":
            x = full_loop(val(n.src[0], s))
            x_other = None
            if n.attr("kind") == "rms" and node_purity(n.src[0], kernel, purity)[0]:
                x_other = full_loop(val(n.src[0], _other(s)))
            v = accum_op(trial, x, n.attr_dict, LOOP_AXIS, s, x_other)
        elif applies_exp(n):
            if s != P_SIDE:
                raise FieldDomainError(
                    f"block {n.op} is needed inside the argument of another exp; programs with "
                    "an exp under an exp are outside the LAX class the field test covers")
            gets = [lambda s_, x=x: val(x, s_) for x in n.src]
            v = exp_op(trial, n.op, gets, n.attr_dict)
        else:
            args = align([val(x, s) for x in n.src], LEAD)
            if applies_random(n) and dual_operands(n, kernel, purity):
                other = align([val(x, _other(s)) for x in n.src], LEAD)
                v = random_op(trial, n.op, args, n.attr_dict, s, other)
            else:
                v = same_side_op(trial, n.op, args, n.attr_dict, s)
        vals[key] = v
        return v

    idx = range(len(bg.outputs)) if which is None else which
    return [save(val(bg.outputs[i].node, side), bg.outputs[i].omap, bg.grid,
                 bg.outputs[i].node.shape) for i in idx]
