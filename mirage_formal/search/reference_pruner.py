"""``ExprPruner``: a development stand-in for ``formal.Oracle``, without Z3.

It decides Mirage's pruning question — is this tensor's abstract expression a subexpression of
the reference output's, modulo the equivalence axioms? — by normal forms instead of a solver.
An abstract expression drops indices and keeps reduction sizes. Its normal form here is a sum
of monomials; a monomial is a reduction size (``sum(i, sum(j, x)) = sum(i·j, x)``; sums commute
with factors and distribute over add, so a sum is a size attached to a product) and a multiset
of atoms with integer exponents (add/mul associative and commutative, mul distributes over add,
division by a product is multiplication by negative exponents). Atoms are inputs, constants,
``exp(T)`` (``exp(a)·exp(b)`` merges into ``exp(a + b)``), ``sqrt(T)``, ``recip(T)`` (division by a
sum) and opaque ops.

``C`` is a subexpression of ``R`` when ``C == R``; or when a common cofactor ``q`` maps every
monomial of ``C`` onto a distinct monomial of ``R`` (a sub-sum of a factored form), with reduction
sizes dividing; or when ``C`` is a subexpression of an atom's argument. This over-approximates
the axioms' subexpression relation on the workloads' expressions (it keeps at least what the
axioms keep there; tests check that every expert μGraph passes), and it is not the oracle the
product uses: ``formal.Oracle`` replaces it.

Imports ``ir`` only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mirage_formal.ir.graph import (
    GET,
    INPUT,
    ITER,
    KERNEL_OP,
    BlockGraph,
    KernelGraph,
    invariant_mean,
)
from mirage_formal.ir.node import Node

Atom = tuple[Any, ...]
Mono = tuple[int, frozenset[tuple[Atom, int]]]
Term = frozenset[tuple[Mono, int]]

ONE_MONO: Mono = (1, frozenset())


def _term(monos: dict[Mono, int]) -> Term:
    return frozenset((m, c) for m, c in monos.items() if c != 0)


def t_add(a: Term, b: Term, sign: int = 1) -> Term:
    d: dict[Mono, int] = dict(a)
    for m, c in b:
        d[m] = d.get(m, 0) + sign * c
    return _term(d)


def t_scale(a: Term, k: int) -> Term:
    return _term({m: c * k for m, c in a})


def _mono_mul(x: Mono, y: Mono) -> Mono:
    atoms: dict[Atom, int] = dict(x[1])
    for a, e in y[1]:
        atoms[a] = atoms.get(a, 0) + e
    exps = [(a, e) for a, e in atoms.items() if a[0] == "exp" and e != 0]
    if len(exps) > 1 or any(e != 1 for _, e in exps):
        arg: Term = frozenset()
        for a, e in exps:
            del atoms[a]
            arg = t_add(arg, t_scale(a[1], e))
        if arg:
            atoms[("exp", arg)] = 1
    return (x[0] * y[0], frozenset((a, e) for a, e in atoms.items() if e != 0))


def t_mul(a: Term, b: Term) -> Term:
    d: dict[Mono, int] = {}
    for m1, c1 in a:
        for m2, c2 in b:
            m = _mono_mul(m1, m2)
            d[m] = d.get(m, 0) + c1 * c2
    return _term(d)


def atom(a: Atom, e: int = 1) -> Term:
    return frozenset({((1, frozenset({(a, e)})), 1)})


def const(v: float) -> Term:
    return ONE if v == 1 else atom(("const", float(v)))


ONE: Term = frozenset({(ONE_MONO, 1)})


def t_sum(n: int, a: Term) -> Term:
    return a if n == 1 else _term({(m[0] * n, m[1]): c for m, c in a})


def t_div(a: Term, b: Term) -> Term:
    if len(b) == 1:
        (m, c), = b
        if c == 1 and m[0] == 1:
            inv = (1, frozenset((x, -e) for x, e in m[1]))
            return t_mul(a, frozenset({(inv, 1)}))
    return t_mul(a, atom(("recip", b)))


def t_mean(n: int, a: Term) -> Term:
    return t_mul(t_sum(n, a), atom(("const", float(n)), -1))


def t_sqrt(a: Term) -> Term:
    return atom(("sqrt", a))


# ---------------------------------------------------------------- subexpressions

def _divides(c: Mono, r: Mono) -> Mono | None:
    """The cofactor q with c·q = r when c is a sub-product of r (sizes dividing), else None."""
    if r[0] % c[0]:
        return None
    ra = dict(r[1])
    for a, e in c[1]:
        f = ra.get(a)
        if f is None and a[0] == "exp":
            hit = next((x for x in ra if x[0] == "exp" and all(m in dict(x[1]) for m, _ in a[1])), None)
            if hit is None:
                return None
            continue
        if f is None or (f > 0) != (e > 0) or abs(e) > abs(f):
            return None
        ra[a] = f - e
    return (r[0] // c[0], frozenset((a, e) for a, e in ra.items() if e != 0))


def _args(t: Term) -> list[Term]:
    out: list[Term] = []
    for m, _ in t:
        for a, _ in m[1]:
            if a[0] in ("exp", "sqrt", "recip", "op"):
                out.append(a[-1])
    return out


class Subexpr:
    """Memoised subexpression tests against one reference term."""

    def __init__(self, ref: Term) -> None:
        self.ref = ref
        self.memo: dict[tuple[Term, Term], bool] = {}

    def __call__(self, c: Term) -> bool:
        return self.sub(c, self.ref)

    def sub(self, c: Term, r: Term) -> bool:
        k = (c, r)
        v = self.memo.get(k)
        if v is None:
            v = self._sub(c, r)
            self.memo[k] = v
        return v

    def _sub(self, c: Term, r: Term) -> bool:
        if c == r or not c:
            return True
        cm = sorted((m for m, _ in c), key=lambda m: (-len(m[1]), m[0]))
        rm = [m for m, _ in r]
        rset = set(rm)
        if len(cm) == 1:  # a divisor is a subterm: sub-products of a denominator
            for r0 in rm:
                den: Mono = (1, frozenset((a, -e) for a, e in r0[1] if e < 0))
                if den[1] and _divides(cm[0], den) is not None:
                    return True
        if len(cm) <= len(rm):
            for r0 in rm:
                q = _divides(cm[0], r0)
                if q is None:
                    continue
                used = {r0}
                ok = True
                for m in cm[1:]:
                    t = _mono_mul(m, q)
                    if t not in rset or t in used:
                        ok = False
                        break
                    used.add(t)
                if ok:
                    return True
        return any(self.sub(c, a) for a in _args(r))


# ---------------------------------------------------------------- abstract expressions of nodes

class Abstract:
    """Abstract expressions of kernel-level and block-level nodes (memoised)."""

    def __init__(self) -> None:
        self.memo: dict[Any, Term] = {}

    def kernel(self, n: Node) -> Term:
        v = self.memo.get(n)
        if v is None:
            v = self._kernel(n)
            self.memo[n] = v
        return v

    def _kernel(self, n: Node) -> Term:
        if n.op == INPUT:
            return atom(("var", n.attr("name")))
        if n.op == GET:
            kn = n.src[0]
            bg: BlockGraph = kn.attr("graph")
            return self.block(bg.outputs[n.attr("index")].node, tuple(kn.src), bg.forloop)
        if n.op == KERNEL_OP:
            raise ValueError("a kernel node has no single expression; ask about its get nodes")
        return self._op(n, [self.kernel(s) for s in n.src], 1)

    def block(self, n: Node, kin: tuple[Node, ...], forloop: int) -> Term:
        k = (n, kin, forloop)
        v = self.memo.get(k)
        if v is None:
            if n.op == ITER:
                v = self.kernel(kin[n.attr("input")])
            else:
                v = self._op(n, [self.block(s, kin, forloop) for s in n.src], forloop)
            self.memo[k] = v
        return v

    def _op(self, n: Node, a: Sequence[Term], forloop: int) -> Term:
        op = n.op
        if op == "add":
            return t_add(a[0], a[1])
        if op == "sub":
            return t_add(a[0], a[1], -1)
        if op == "mul":
            return t_mul(a[0], a[1])
        if op == "div":
            return t_div(a[0], a[1])
        if op == "neg":
            return t_scale(a[0], -1)
        if op == "square":
            return t_mul(a[0], a[0])
        if op == "mul_scalar":
            return t_mul(a[0], const(n.attr("scalar")))
        if op == "add_scalar":
            return t_add(a[0], const(n.attr("scalar")))
        if op == "exp":
            return atom(("exp", a[0]))
        if op == "sqrt":
            return t_sqrt(a[0])
        if op == "rsqrt":
            return atom(("sqrt", a[0]), -1)
        if op == "sigmoid":
            return atom(("recip", t_add(ONE, atom(("exp", t_scale(a[0], -1))))))
        if op == "silu":
            return t_mul(a[0], atom(("recip", t_add(ONE, atom(("exp", t_scale(a[0], -1)))))))
        if op == "matmul":
            return t_sum(n.src[0].shape[-1], t_mul(a[0], a[1]))
        if op in ("sum", "mean"):
            size = n.src[0].shape[n.attr("axis")]
            return t_sum(size, a[0]) if op == "sum" else t_mean(size, a[0])
        if op == "rms_norm":
            size = n.src[0].shape[-1]
            r = t_div(a[0], t_sqrt(t_mean(size, t_mul(a[0], a[0]))))
            return t_mul(r, a[1]) if len(a) == 2 else r
        if op == "accum":
            fold = n.attr("fold")
            if invariant_mean(n):
                return a[0]  # (every iteration adds the same tile: the mean is the tile)
            count = forloop * (n.src[0].shape[-1] // fold if fold is not None else 1)
            kind = n.attr("kind")
            if kind == "sum":
                return t_sum(count, a[0])
            if kind == "mean":
                return t_mean(count, a[0])
            return t_sqrt(t_mean(count, t_mul(a[0], a[0])))
        return atom(("op", op, a[0] if len(a) == 1 else frozenset().union(*a)))


class ExprPruner:
    """Keeps a tensor iff its abstract expression is a subexpression of the reference's
    (see the module docstring). A stand-in for ``formal.Oracle`` during development."""

    def __init__(self, reference: KernelGraph) -> None:
        self.abs = Abstract()
        ref: Term = frozenset()
        for o in reference.outputs:
            ref = t_add(ref, atom(("out", self.abs.kernel(o))))  # keep outputs apart
        self.refs = [Subexpr(self.abs.kernel(o)) for o in reference.outputs]

    def keep(self, node: Node, kernel_inputs: Sequence[Node] | None = None,
             grid: tuple[int, int, int] | None = None, forloop: int | None = None) -> bool:
        if node.op == KERNEL_OP:
            return True
        if kernel_inputs is None:
            t = self.abs.kernel(node)
        else:
            t = self.abs.block(node, tuple(kernel_inputs), forloop or 1)
        return any(s(t) for s in self.refs)

    def __repr__(self) -> str:
        return "ExprPruner()"


