"""Static analysis behind the error bound: class check, degrees, zero-divisor and collision sites.

Each tensor element of a μGraph is, formally, a rational function N/D of

- *x-variables*: the inputs and the outputs of random (opaque) functions, all uniform over
  the field of the side they live on;
- *y-variables*: the outputs of ``exp`` (values ω^g in the order-q subgroup of Z_p^*).

:func:`analyze` bounds, for every kernel-level node, the degrees of N and D in each block of
variables (:class:`Deg`), by structural rules (a sum of n fractions with denominators D has
numerator degree <= max N + (n-1)·max D). It also lists

- the *division sites* (every divisor array, with its element count and degree), which give
  the probability δ that a trial meets a zero divisor and is resampled;
- the *random-function sites* (every opaque application, with its element count and the
  degree of its argument), which give the probability that two formally different arguments
  collide;
- *problems*: reasons the program is outside the class the bound covers (an exp whose
  argument depends on an exp: Mirage's LAX class allows at most one exp on any path).

It also records which side(s) each node is evaluated on (the q side for exp arguments).
Imports ``ir`` and ``semantics.field`` (for the op kinds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from mirage_formal.ir.graph import GET, INPUT, ITER, KERNEL_OP, BlockGraph, KernelGraph
from mirage_formal.ir.node import Node
from mirage_formal.ir.ops import REGISTRY, accum_terms
from mirage_formal.semantics.field import (
    P_SIDE,
    Q_SIDE,
    applies_exp,
    applies_random,
    dual_operands,
    node_purity,
)


@dataclass(frozen=True)
class Deg:
    """Degree bounds of numerator (nx, ny) and denominator (dx, dy) in x- and y-variables."""

    nx: int = 0
    ny: int = 0
    dx: int = 0
    dy: int = 0
    #: negative axes along which the denominator is the same for every element (None: the
    #: denominator is constant everywhere, e.g. 1). Sums along such an axis share it.
    const: frozenset[int] | None = None

    @property
    def has_exp(self) -> bool:
        return self.ny > 0 or self.dy > 0

    @property
    def polynomial(self) -> bool:
        return self.dx == 0 and self.dy == 0


ONE = Deg()
VAR = Deg(1, 0, 0, 0)
EXPV = Deg(0, 1, 0, 0)
EMPTY: frozenset[int] = frozenset()


Shape = tuple[int, ...]


def const_axes(d: Deg, shape: Shape, out_rank: int) -> frozenset[int] | None:
    """Axes (negative, for a result of rank ``out_rank``) along which d's denominator is fixed."""
    if d.polynomial or d.const is None:
        return None
    rank = len(shape)
    return frozenset(ax for ax in range(-out_rank, 0)
                     if ax < -rank or shape[ax] == 1 or ax in d.const)


def _meet(*cs: frozenset[int] | None) -> frozenset[int] | None:
    out: frozenset[int] | None = None
    for c in cs:
        if c is not None:
            out = c if out is None else out & c
    return out


def _bcast(shape: Shape, out_rank: int) -> frozenset[int]:
    """Axes along which an operand of ``shape`` is broadcast (so any part of it is fixed)."""
    rank = len(shape)
    return frozenset(ax for ax in range(-out_rank, 0) if ax < -rank or shape[ax] == 1)


def _with(d: Deg, const: frozenset[int] | None) -> Deg:
    return Deg(d.nx, d.ny, d.dx, d.dy, None if d.polynomial else const)


def d_add(a: Deg, b: Deg, ca: frozenset[int] | None = None, cb: frozenset[int] | None = None) -> Deg:
    d = Deg(max(a.nx + b.dx, b.nx + a.dx), max(a.ny + b.dy, b.ny + a.dy), a.dx + b.dx, a.dy + b.dy)
    return _with(d, _meet(ca, cb) if (ca is not None or cb is not None) else _meet(a.const, b.const))


def d_mul(a: Deg, b: Deg, ca: frozenset[int] | None = None, cb: frozenset[int] | None = None) -> Deg:
    d = Deg(a.nx + b.nx, a.ny + b.ny, a.dx + b.dx, a.dy + b.dy)
    return _with(d, _meet(ca, cb) if (ca is not None or cb is not None) else _meet(a.const, b.const))


def d_div(a: Deg, b: Deg, ca: frozenset[int] | None = None, b_fixed: frozenset[int] = frozenset()) -> Deg:
    """a / b: b's numerator joins the denominator, fixed only where b is broadcast."""
    d = Deg(a.nx + b.dx, a.ny + b.dy, a.dx + b.nx, a.dy + b.ny)
    num_b_fixed: frozenset[int] | None = None if (b.nx == 0 and b.ny == 0) else b_fixed
    return _with(d, _meet(ca if ca is not None else a.const, num_b_fixed))


def d_sum(a: Deg, n: int, axis_fixed: bool = False) -> Deg:
    """A sum of n terms of degree a; their denominators differ unless ``axis_fixed``."""
    if a.polynomial or n <= 1 or axis_fixed:
        return a
    return Deg(a.nx + (n - 1) * a.dx, a.ny + (n - 1) * a.dy, n * a.dx, n * a.dy, a.const)


def d_inv(a: Deg) -> Deg:
    return Deg(a.dx, a.dy, a.nx, a.ny, frozenset())


@dataclass(frozen=True)
class Site:
    """Where an opaque function or a division is applied: element count and degree."""

    key: tuple[Any, ...]
    elements: int
    deg: Deg
    side: str
    fid: str = ""
    #: the random function takes the argument in both fields (it is free of exp) ...
    dual: bool = False
    #: ... and the argument is also free of random functions: p and q values independent
    pure: bool = False


@dataclass
class ProgramInfo:
    """What :func:`analyze` found about one kernel graph."""

    degrees: dict[Node, Deg] = field(default_factory=dict)
    sides: dict[Node, set[str]] = field(default_factory=dict)
    divisions: dict[tuple[Any, ...], Site] = field(default_factory=dict)
    opaque: dict[tuple[Any, ...], Site] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    #: numerators of the float constants (mul_scalar scalars, rms_norm eps), as exact rationals
    constants: set[int] = field(default_factory=set)
    exp_count: int = 0
    #: an exp-kind op reads a value that already depends on one (one of ``problems``)
    nested_exp: bool = False
    purity: dict[tuple[Node, Node | None], tuple[bool, bool]] = field(default_factory=dict)
    #: per kernel-level node, an upper bound on the random-function applications one of its
    #: elements depends on (its *cone*: :func:`pair_bound`'s collision pairs)
    cones: dict[Node, int] = field(default_factory=dict)

    @property
    def in_class(self) -> bool:
        return not self.problems

    def field_problems(self, p: int, q: int) -> list[str]:
        """Constants that vanish in Z_p or Z_q would hide terms: the bound does not cover them."""
        return [f"the constant with numerator {c} is a multiple of p={p} or q={q}"
                for c in sorted(self.constants) if c and (c % p == 0 or c % q == 0)]

    def output_degrees(self, graph: KernelGraph) -> list[Deg]:
        return [self.degrees[o] for o in graph.outputs]

    def output_cones(self, graph: KernelGraph) -> list[int]:
        return [self.cones[o] for o in graph.outputs]


def _reduce_const(c: frozenset[int] | None, axis: int, rank: int, keepdims: bool) -> frozenset[int] | None:
    if c is None:
        return None
    if keepdims:
        return c | {axis}
    # Dropping dimension ``axis`` moves the dimensions before it one step towards the end.
    return frozenset(ax + 1 if ax < axis else ax for ax in c if ax != axis)


class _DV:
    """A degree bound with the shape of the value it bounds (the degree algebra's values)."""

    def __init__(self, deg: Deg, shape: Shape, cone: int = 0) -> None:
        self.deg, self.shape, self.cone = deg, tuple(shape), cone
        self.p = self.q = self  # exp-kind rules read operands by side; degrees are the same


class _DegreeAlgebra:
    """The arithmetic interface ``F`` of field rules (``ir.opdef.FieldRule``), computing
    degree bounds instead of values: a registry op's field rule, run here, gives its degree
    and records its division sites and exp applications. Used for the exp and random kinds,
    so a new op of those kinds needs no degree rule of its own."""

    def __init__(self, info: ProgramInfo, where: str, lead: int, side_key: tuple[Any, ...],
                 sides: set[str], exp_side: bool = False) -> None:
        self.info, self.where, self.lead = info, where, lead
        self.side_key, self.sides, self.exp_side = side_key, sides, exp_side
        self.divisions = 0

    @property
    def q(self) -> _DegreeAlgebra:
        return self

    @staticmethod
    def _shape(a: _DV, b: _DV) -> Shape:
        n = max(len(a.shape), len(b.shape))
        pa = (1,) * (n - len(a.shape)) + a.shape
        pb = (1,) * (n - len(b.shape)) + b.shape
        return tuple(max(x, y) for x, y in zip(pa, pb, strict=True))

    @staticmethod
    def _consts(a: _DV, b: _DV, shape: Shape) -> tuple[frozenset[int] | None, frozenset[int] | None]:
        r = len(shape)
        return const_axes(a.deg, a.shape, r), const_axes(b.deg, b.shape, r)

    def add(self, a: _DV, b: _DV) -> _DV:
        shape = self._shape(a, b)
        return _DV(d_add(a.deg, b.deg, *self._consts(a, b, shape)), shape, a.cone + b.cone)

    sub = add

    def mul(self, a: _DV, b: _DV) -> _DV:
        shape = self._shape(a, b)
        return _DV(d_mul(a.deg, b.deg, *self._consts(a, b, shape)), shape, a.cone + b.cone)

    def neg(self, a: _DV) -> _DV:
        return a

    def inv(self, a: _DV) -> _DV:
        sides = {P_SIDE} if self.exp_side else self.sides
        self.divisions += 1
        for s in sides:
            k = (*self.side_key, "inv", self.divisions, s)
            self.info.divisions[k] = Site(k, self.lead * math.prod(a.shape), a.deg, s)
        # the new denominator is a's numerator: fixed along the axes where a is broadcast
        return _DV(_with(d_inv(a.deg), _bcast(a.shape, len(a.shape))), a.shape, a.cone)

    def const(self, c: Any) -> _DV:
        if isinstance(c, float) and math.isfinite(c):
            self.info.constants.add(Fraction(c).numerator)
        return _DV(ONE, ())

    def sum(self, a: _DV, axis: int, keepdims: bool) -> _DV:
        shape = list(a.shape)
        axis = axis - len(shape) if axis >= 0 else axis
        n = shape[axis]
        if keepdims:
            shape[axis] = 1
        else:
            del shape[axis]
        k = const_axes(a.deg, a.shape, len(a.shape))
        out = d_sum(a.deg, n, k is None or axis in k)
        return _DV(_with(out, _reduce_const(k, axis, len(a.shape), keepdims)), tuple(shape),
                   n * a.cone)

    def matmul(self, a: _DV, b: _DV) -> _DV:
        batch = self._shape(_DV(ONE, a.shape[:-2]), _DV(ONE, b.shape[:-2]))
        return _DV(d_sum(d_mul(a.deg, b.deg), a.shape[-1]), (*batch, a.shape[-2], b.shape[-1]),
                   a.shape[-1] * (a.cone + b.cone))

    def exp(self, a: _DV) -> _DV:
        self.info.exp_count += 1
        if a.deg.has_exp:
            self.info.nested_exp = True
            self.info.problems.append(
                f"{self.where}: an exp is applied to a value that already depends on an exp; "
                "the LAX class allows at most one exp on any path (the bound does not apply)")
        return _DV(EXPV, a.shape, a.cone)


def _generic_degree(n: Node, args: list[Deg], cones: list[int], info: ProgramInfo, where: str,
                    elements: int, side_key: tuple[Any, ...], sides: set[str]) -> tuple[Deg, int]:
    """Degree and cone (:func:`_op_degree`) of an exp-kind or random-kind op, by running its
    field rule on degrees."""
    d = REGISTRY[n.op]
    f = d.field
    assert f.rule is not None
    lead = elements // max(math.prod(n.shape), 1)
    dvs = [_DV(a, s.shape, c) for a, s, c in zip(args, n.src, cones, strict=True)]
    if f.kind == "exp":
        alg = _DegreeAlgebra(info, where, lead, side_key, sides, exp_side=True)
        out: _DV = f.rule(alg, n.attr_dict, *dvs)
        return out.deg, out.cone
    alg = _DegreeAlgebra(info, where, lead, side_key, sides)
    rf_args = list(f.rule(alg, n.attr_dict, *dvs))
    arg_deg = Deg(max(a.deg.nx + a.deg.dx for a in rf_args), max(a.deg.ny + a.deg.dy for a in rf_args))
    arg_elems = lead * max(math.prod(a.shape) for a in rf_args)
    for s in sides:
        info.opaque[(*side_key, s)] = Site((*side_key, s), arg_elems, arg_deg, s, f.fid,
                                           *_rf_mode(n, side_key, info))
    # this application and every one its arguments depend on
    own = 1 + sum(a.cone for a in rf_args)
    if f.post is None:
        return VAR, own
    r = _DV(VAR, max((a.shape for a in rf_args), key=len), own)
    res: _DV = f.post(alg, n.attr_dict, r, *dvs)
    return res.deg, res.cone


def _op_degree(n: Node, args: list[Deg], cones: list[int], info: ProgramInfo, where: str,
               elements: int, side_key: tuple[Any, ...], sides: set[str]) -> tuple[Deg, int]:
    """Degree of a registry-op node from its operands' degrees; records sites and problems.
    Also its *cone*: an upper bound on the random-function applications one element of it
    depends on (``cones``: its operands'), for the collision bound of :func:`pair_bound`.

    Ring-kind ops use the structural rule their declaration names (``degree``), which also
    tracks the axes along which a denominator is constant; exp- and random-kind ops run
    their field rule on degrees (:class:`_DegreeAlgebra`), reading every operand."""
    d = REGISTRY[n.op]
    a = n.attr_dict
    rank = len(n.shape)
    cs = [const_axes(dg, s.shape, rank) for dg, s in zip(args, n.src, strict=True)]
    for v in a.values():
        if isinstance(v, float) and math.isfinite(v):
            info.constants.add(Fraction(v).numerator)
    rule = d.degree
    if rule in ("exp", "random"):
        return _generic_degree(n, args, cones, info, where, elements, side_key, sides)
    # one element of each operand an element reads (broadcasting), or a reduced run of them
    each = sum(cones)
    if rule == "add":
        return d_add(args[0], args[1], cs[0], cs[1]), each
    if rule == "mul":
        return d_mul(args[0], args[1], cs[0], cs[1]), each
    if rule == "same":
        return args[0], each
    if rule == "add_const":  # x + c: c's degree is that of a constant
        return d_add(args[0], ONE, cs[0]), each
    if rule == "square":
        return d_mul(args[0], args[0], cs[0], cs[0]), each
    if rule == "matmul":
        ka, kb = (const_axes(dg, s.shape, max(len(s.shape), rank)) for dg, s in zip(args, n.src, strict=True))
        fixed = (ka is None or -1 in ka) and (kb is None or -2 in kb)
        ca = None if ka is None else frozenset({ax for ax in ka if ax <= -2} | {-1})
        cb = None if kb is None else frozenset({ax for ax in kb if ax <= -3 or ax == -1} | {-2})
        return d_sum(d_mul(args[0], args[1], ca, cb), n.src[0].shape[-1], fixed), \
            n.src[0].shape[-1] * each
    if rule == "reduce":
        x, ax = args[0], a["axis"]
        k = const_axes(x, n.src[0].shape, len(n.src[0].shape))
        fixed = k is None or ax in k
        out = d_sum(x, n.src[0].shape[ax], fixed)
        return (_with(out, _reduce_const(k, ax, len(n.src[0].shape), a["keepdims"])),
                n.src[0].shape[ax] * each)
    if rule == "div":
        divisor_elems = elements // max(math.prod(n.shape), 1) * math.prod(n.src[1].shape)
        for s in sides:
            info.divisions[(*side_key, s)] = Site((*side_key, s), divisor_elems, args[1], s)
        return d_div(args[0], args[1], cs[0], _bcast(n.src[1].shape, rank)), each
    raise AssertionError(f"no degree rule {rule!r} for {n.op!r}")  # pragma: no cover


def _accum_degree(n: Node, x: Deg, cone: int, forloop: int, info: ProgramInfo, elements: int,
                  side_key: tuple[Any, ...], sides: set[str]) -> tuple[Deg, int]:
    # Whether a denominator changes across loop iterations is not tracked: a rational tile
    # is summed as if every term had its own denominator (a valid, loose bound).
    kind = n.attr("kind")
    count = accum_terms(forloop, n.src[0].shape[-1], n.attr("fold"))
    if kind != "rms":
        return d_sum(x, count), count * cone
    ms = d_sum(d_mul(x, x), count)
    for s in sides:
        info.opaque[(*side_key, s)] = Site((*side_key, s), elements, ms, s,
                                           REGISTRY["accum"].field.fid, *_rf_mode(n, side_key, info))
    return VAR, count * cone + 1


def _rf_mode(n: Node, side_key: tuple[Any, ...], info: ProgramInfo) -> tuple[bool, bool]:
    """(dual, pure) for the random-function application at node n (see Site)."""
    kernel = side_key[0] if len(side_key) == 2 else None
    dual = dual_operands(n, kernel, info.purity)
    return dual, dual and all(node_purity(s, kernel, info.purity)[1] for s in n.src)


def _block_sides(bg: BlockGraph, out_sides: list[set[str]], kn: Node,
                 info: ProgramInfo) -> dict[Node, set[str]]:
    """Sides each block node is evaluated on, from the sides its outputs are needed on."""
    nodes = bg.nodes
    need: dict[Node, set[str]] = {n: set() for n in nodes}
    for o, s in zip(bg.outputs, out_sides, strict=True):
        need[o.node] |= s
    for n in reversed(nodes):
        _propagate(n, need, kn, info)
    return need


def _propagate(n: Node, need: dict[Node, set[str]], kernel: Node | None, info: ProgramInfo) -> None:
    s = need[n]
    if not s:
        return
    if applies_exp(n):
        reads = REGISTRY[n.op].field.reads
        for i, src in enumerate(n.src):
            if P_SIDE in s:
                need[src] |= set(reads[i])
        return
    # A random function of exp-free operands reads every operand in both fields.
    both = applies_random(n) and dual_operands(n, kernel, info.purity)
    for src in n.src:
        need[src] |= {P_SIDE, Q_SIDE} if both else s


def analyze(graph: KernelGraph) -> ProgramInfo:
    """Degrees, sides, sites and class problems of every node of ``graph``."""
    info = ProgramInfo()
    nodes = graph.nodes
    need: dict[Node, set[str]] = {n: set() for n in nodes}
    for o in graph.outputs:
        need[o].add(P_SIDE)
    block_need: dict[Node, dict[Node, set[str]]] = {}
    for n in reversed(nodes):
        if n.op == KERNEL_OP:
            bg: BlockGraph = n.attr("graph")
            gets = [m for m in nodes if m.op == GET and m.src[0] is n]
            out_sides: list[set[str]] = [set() for _ in bg.outputs]
            for g in gets:
                out_sides[g.attr("index")] |= need[g]
            bn = _block_sides(bg, out_sides, n, info)
            block_need[n] = bn
            for b in bg.nodes:
                if b.op == ITER:
                    need[n.src[b.attr("input")]] |= bn[b]
        elif n.op == GET:
            need[n.src[0]] |= need[n]
        else:
            _propagate(n, need, None, info)
    info.sides = need
    for n in nodes:
        if n.op == INPUT:
            info.degrees[n] = VAR
            info.cones[n] = 0
        elif n.op == GET:
            continue
        elif n.op == KERNEL_OP:
            bg = n.attr("graph")
            outs = _block_degrees(n, bg, [info.degrees[s] for s in n.src],
                                  [info.cones[s] for s in n.src], info, block_need[n])
            for m in nodes:
                if m.op == GET and m.src[0] is n:
                    info.degrees[m], info.cones[m] = outs[m.attr("index")]
        else:
            info.degrees[n], info.cones[n] = _op_degree(
                n, [info.degrees[s] for s in n.src], [info.cones[s] for s in n.src], info,
                f"{n.op} node", math.prod(n.shape), (n,), need[n] or {P_SIDE})
    return info


def _block_degrees(kn: Node, bg: BlockGraph, ins: list[Deg], in_cones: list[int],
                   info: ProgramInfo, need: dict[Node, set[str]]) -> list[tuple[Deg, int]]:
    """Degree and cone of each block output (an element of a tile is one element of the
    kernel input it iterates over: the same cone)."""
    deg: dict[Node, Deg] = {}
    cone: dict[Node, int] = {}
    # Lead extent of each block value: the grid axes and loop iterations it actually varies
    # over (as the evaluator's broadcast arrays). Blocks that read the same data compute the
    # same formal terms, so only these many elements are distinct.
    lead: dict[Node, tuple[int, ...]] = {}
    for b in bg.nodes:
        sides = need.get(b) or {P_SIDE}
        if b.op == ITER:
            imap, fmap = b.attr("imap"), b.attr("fmap")
            lead[b] = (*(bg.grid[a] if imap[a] != -1 else 1 for a in range(3)),
                       bg.forloop if fmap != -1 else 1)
            deg[b] = ins[b.attr("input")]
            cone[b] = in_cones[b.attr("input")]
            continue
        srcl = [lead[s] for s in b.src]
        lead[b] = tuple(max(v) for v in zip(*srcl, strict=True))
        if b.op == "accum":
            lead[b] = (*lead[b][:3], 1)
            deg[b], cone[b] = _accum_degree(b, deg[b.src[0]], cone[b.src[0]], bg.forloop, info,
                                            math.prod(lead[b]) * math.prod(b.shape), (kn, b), sides)
        else:
            deg[b], cone[b] = _op_degree(b, [deg[s] for s in b.src], [cone[s] for s in b.src],
                                         info, f"block {b.op} node",
                                         math.prod(lead[b]) * math.prod(b.shape), (kn, b), sides)
    outs = []
    for o in bg.outputs:
        d = deg[o.node]
        # Blocks have their own denominators: fixed only along dimensions no grid axis splits.
        split = {dim - len(o.node.shape) for ax, dim in enumerate(o.omap) if dim != -1 and bg.grid[ax] > 1}
        outs.append((_with(d, None if d.const is None else d.const - split), cone[o.node]))
    return outs


# ---------------------------------------------------------------- the bound for a pair

@dataclass(frozen=True)
class PairBound:
    """The per-trial false-accept bound for one (reference, candidate) pair, with its parts."""

    per_trial: float
    outputs: float          # max over outputs of deg_x/p + deg_y/q of the difference
    collisions: float       # random-function argument collisions (union bound)
    zero_divisor: float     # δ: probability a trial is resampled (bounds the conditioning)
    degree: tuple[int, int]  # (x, y) degree of the worst output difference
    uses_exp: bool
    uses_opaque: bool


def pair_bound(ref: KernelGraph, ri: ProgramInfo, cand: KernelGraph, ci: ProgramInfo,
               mapping: list[int], p: int, q: int) -> PairBound:
    """Bound for comparing candidate output ``mapping[i]`` with reference output ``i``."""
    rd, cd = ri.output_degrees(ref), ci.output_degrees(cand)
    worst, deg = 0.0, (0, 0)
    for i, j in enumerate(mapping):
        a, b = rd[i], cd[j]
        dx = max(a.nx + b.dx, b.nx + a.dx)
        dy = max(a.ny + b.dy, b.ny + a.dy)
        e = dx / p + dy / q
        if e >= worst:
            worst, deg = e, (dx, dy)
    # Random-function sites: pairs of applications whose arguments collide. A function of
    # (x mod p, x mod q) (dual) is a different function from one of x mod p alone, so the
    # two kinds of application are counted apart. For pure arguments (rational functions of
    # the inputs) the p and q values are independent, so a collision needs both at once.
    groups: dict[tuple[str, str, bool], tuple[int, int, int, bool]] = {}
    for site in {**ri.opaque, **ci.opaque}.values():
        key = (site.fid, site.side, site.dual)
        m, ax, ay, pure = groups.get(key, (0, 0, 0, True))
        groups[key] = (m + site.elements, max(ax, site.deg.nx + site.deg.dx),
                       max(ay, site.deg.ny + site.deg.dy), pure and site.pure)
    # Two ways to count the pairs, the smaller bound taken. All pairs of each group's
    # applications (ref's and the candidate's). Or: a wrong candidate differs from the
    # reference at some output element as a formal expression, and a trial accepts it only if
    # that element agrees; the element's value on either side depends only on the inputs and
    # the applications in its cone (``ProgramInfo.cones``), so only collisions among those can
    # make it agree (with the random function's values at formally different arguments
    # replaced by independent variables, the two experiments differ only on such a collision).
    # Hence the pairs of one element's two cones, the largest over the outputs, each at the
    # worst group's per-pair probability.
    coll = worst_pair = 0.0
    for (_, side, dual), (m, ax, ay, pure) in groups.items():
        mod = p if side == P_SIDE else q
        pair = (max(ax, 1) / p) * (max(ax, 1) / q) if dual and pure else max(ax, 1) / mod + ay / q
        coll += m * (m - 1) / 2 * pair
        worst_pair = max(worst_pair, pair)
    rc, cc = ri.output_cones(ref), ci.output_cones(cand)
    cone = max((rc[i] + cc[j] for i, j in enumerate(mapping)), default=0)
    coll = min(coll, cone * (cone - 1) / 2 * worst_pair)
    delta = 0.0
    for site in {**ri.divisions, **ci.divisions}.values():
        mod = p if site.side == P_SIDE else q
        delta += site.elements * (site.deg.nx / mod + site.deg.ny / q)
    raw = worst + coll
    per_trial = 1.0 if delta >= 1 else min(1.0, raw / (1.0 - delta))
    return PairBound(per_trial, worst, coll, delta, deg, ri.exp_count + ci.exp_count > 0,
                     bool(ri.opaque or ci.opaque))
