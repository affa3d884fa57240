"""A small e-graph that chooses the ground axiom instances the oracle hands to Z3.

The oracle's encoding is *ground instantiation over the terms at hand*: the axioms are never
given to Z3 quantified. This module finds the instances: it holds the terms (e-nodes grouped
into classes by union-find), matches each equality's source pattern against them modulo the
equalities found so far (e-matching), adds the target side and records the instance
``(axiom, source instance, target instance)``. Rounds repeat until nothing new is found
(saturation) or a bound is hit. Z3 then decides, from exactly the recorded instances, whether
the candidate is a subexpression of the reference (``formal.oracle``); this module's classes
are bookkeeping for the matcher, not the verdict.

Invariants:
- every union is justified by a recorded instance or by congruence, so Z3 can re-derive every
  class from the recorded instances (each e-node's Z3 term is built from the *first* e-node of
  each child class, which never changes);
- every mutation is logged, so :meth:`EGraph.undo` restores a :meth:`EGraph.mark` exactly: the
  oracle saturates the reference once and, per query, adds the candidate, saturates locally
  and rolls back. No path compression (it would need logging too); union by size.

Each rule's source pattern is compiled to a Python function of nested loops
(:func:`compile_matcher`) and its target to straight-line code (:func:`compile_builder`),
generated from the parsed patterns (op names and constants as literals or bound values,
variables as validated identifiers). They find the same matches in the same order as the
generic recursive matcher (:meth:`EGraph._match_node`, kept as the fallback and the
reference the tests compare against), so the e-graph and its instances are unchanged; they
are only faster (~2x on ntrans's per-query saturation).

Imports ``formal.term`` and ``formal.axioms``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from mirage_formal.formal.axioms import (
    Axiom,
    PApp,
    Pattern,
    PNum,
    PVar,
    SizeExpr,
    SLit,
    SProd,
    SVar,
    eval_size,
    pattern_depth,
    pattern_text,
)
from mirage_formal.formal.term import Data, Term

#: how many extra passes of the shrinking rules a round may run
_SHRINK_PASSES = 8

Env = dict[str, int]  # tensor var -> class id; size var -> int (kept in one dict, names differ)


@dataclass(frozen=True)
class Rule:
    """One usable direction of an equality axiom."""

    axiom: Axiom
    src: PApp
    dst: Pattern
    enumerates: bool  # the source has a size product: matches enumerate sizes at hand
    shrinks: bool  # the target has fewer op applications than the source


@dataclass(frozen=True)
class Instance:
    """A recorded ground instance: rule applied with ``env`` (vars -> e-node ids of class reps)."""

    rule: Rule
    env: tuple[tuple[str, int], ...]


def rules_of(axioms: Iterable[Axiom]) -> list[Rule]:
    """Every usable direction of every equality; a direction that is the other one with its
    variables renamed (commutativity) is kept once."""
    out = []
    for a in axioms:
        seen: set[str] = set()
        for src, dst in a.directions:
            assert isinstance(src, PApp)
            canon = _canonical(src, dst)
            if canon in seen:
                continue
            seen.add(canon)
            out.append(Rule(a, src, dst, _has_prod(src), _apps(dst) < _apps(src)))
    return out


def _canonical(src: Pattern, dst: Pattern) -> str:
    """The text of (src, dst) with variables renamed in order of first occurrence in src."""
    order: dict[str, str] = {}

    def walk(p: Pattern) -> None:
        if isinstance(p, PVar):
            order.setdefault(p.name, f"v{len(order)}")
        elif isinstance(p, PApp):
            for a in p.args:
                walk(a)

    walk(src)
    walk(dst)
    text = f"{pattern_text(src)} -> {pattern_text(dst)}"
    return re.sub(r"\b[A-Za-z_]\w*\b", lambda m: order.get(m.group(0), m.group(0)), text)


def _apps(p: Pattern) -> int:
    return 1 + sum(_apps(a) for a in p.args) if isinstance(p, PApp) else 0


def _has_prod(p: Pattern) -> bool:
    if not isinstance(p, PApp):
        return False
    return isinstance(p.size, SProd) or any(_has_prod(a) for a in p.args)


class _Unsupported(Exception):
    """A source pattern the matcher compiler leaves to the generic matcher."""


Matcher = Callable[["EGraph", Sequence[int], list[tuple[int, Env]]], None]


def compile_matcher(src: PApp) -> Matcher | None:
    """A Python function matching ``src`` at candidate e-nodes, equivalent to
    :meth:`EGraph._match_node` with an empty environment: ``m(eg, cands, out)`` appends
    ``(e, env)`` to ``out`` for every match at every ``e`` of ``cands``, in the generic
    matcher's order (candidates, then e-nodes of each class in ``cnodes`` order, arguments
    left to right, size splits in :meth:`EGraph._size` order). The generic matcher pays a
    generator frame per pattern node per e-node it tries; the compiled one is nested loops
    over locals with ``find`` inlined (which variables are bound at each step is known
    statically). None for a pattern it does not handle (the generic matcher is used)."""
    lines: list[str] = []
    consts: dict[str, Any] = {}
    bound: list[str] = []  # binding order, tensor and size variables together
    tensor: set[str] = set()
    sizes: set[str] = set()
    counter = [0]

    def fresh(prefix: str) -> str:
        counter[0] += 1
        return f"{prefix}{counter[0]}"

    def const(v: Any) -> str:
        if type(v) in (str, int):
            return repr(v)
        name = fresh("K")
        consts[name] = v
        return name

    def line(ind: int, text: str) -> None:
        lines.append("    " * ind + text)

    def bind(name: str, kind: set[str], other: set[str]) -> None:
        if name in other or not name.isidentifier():
            raise _Unsupported(name)  # a name used as both a tensor and a size variable
        kind.add(name)
        bound.append(name)

    def var(prefix: str, name: str, value: str, kind: set[str], other: set[str], ind: int) -> int:
        """Variable ``name`` against ``value``: compared when already bound, else bound."""
        if name in kind:
            line(ind, f"if {prefix}_{name} == {value}:")
            return ind + 1
        line(ind, f"{prefix}_{name} = {value}")
        bind(name, kind, other)
        return ind

    def root(expr: str, ind: int) -> str:
        c = fresh("c")
        line(ind, f"{c} = {expr}")
        line(ind, f"while uf[{c}] != {c}: {c} = uf[{c}]")
        return c

    def size(s: SizeExpr, v: str, ind: int) -> int:
        if isinstance(s, SLit):
            line(ind, f"if {v} == {const(s.value)}:")
            return ind + 1
        if isinstance(s, SVar):
            return var("s", s.name, v, sizes, tensor, ind)
        known = ["1"]
        free: list[str] = []
        for f in s.factors:
            if isinstance(f, SLit):
                known.append(const(f.value))
            elif f.name in sizes:
                known.append(f"s_{f.name}")
            elif f.name in tensor:
                raise _Unsupported(f.name)
            elif f.name not in free:
                free.append(f.name)
        kn, rest = fresh("kn"), fresh("rest")
        line(ind, f"{kn} = {' * '.join(known)}")
        line(ind, f"if not {v} % {kn}:")
        ind += 1
        line(ind, f"{rest} = {v} // {kn}")
        if not free:
            line(ind, f"if {rest} == 1:")
            return ind + 1
        if len(free) == 1:
            line(ind, f"s_{free[0]} = {rest}")
            bind(free[0], sizes, tensor)
            return ind
        if len(free) == 2:
            line(ind, f"for s_{free[0]}, s_{free[1]} in eg._pairs({rest}):")
            bind(free[0], sizes, tensor)
            bind(free[1], sizes, tensor)
            return ind + 1
        raise _Unsupported("three unknown factors")

    def app(p: PApp, e: str, ind: int) -> int:
        line(ind, f"if en_op[{e}] == {const(p.op)} and len(en_kids[{e}]) == {len(p.args)}:")
        ind += 1
        if p.size is not None:
            d = fresh("d")
            line(ind, f"{d} = en_data[{e}]")
            line(ind, f"if isinstance({d}, int):")
            ind = size(p.size, d, ind + 1)
        k = fresh("k")
        line(ind, f"{k} = en_kids[{e}]")
        cs = [root(f"{k}[{i}]", ind) for i in range(len(p.args))]
        for a, c in zip(p.args, cs, strict=True):
            ind = arg(a, c, ind)
        return ind

    def arg(a: Pattern, c: str, ind: int) -> int:
        if isinstance(a, PVar):
            return var("v", a.name, c, tensor, sizes, ind)
        e = fresh("e")
        line(ind, f"for {e} in cnodes[{c}]:")
        if isinstance(a, PNum):
            line(ind + 1, f"if en_op[{e}] == 'num':")
            v = fresh("v")
            line(ind + 2, f"{v} = en_data[{e}]")
            if isinstance(a.value, SVar):
                line(ind + 2, f"if isinstance({v}, int):")
                return size(a.value, v, ind + 3)
            line(ind + 2, f"if {v} == {const(a.value)}:")
            return ind + 3
        return app(a, e, ind + 1)

    try:
        line(0, "def match(eg, cands, out):")
        line(1, "en_op, en_kids, en_data, cnodes, uf = eg.en_op, eg.en_kids, eg.en_data, eg.cnodes, eg.uf")
        line(1, "for e0 in cands:")
        ind = app(src, "e0", 2)
        env = ", ".join(f"{n!r}: {'v_' if n in tensor else 's_'}{n}" for n in bound)
        line(ind, f"out.append((e0, {{{env}}}))")
    except _Unsupported:
        return None
    ns: dict[str, Any] = dict(consts)
    exec("\n".join(lines), ns)  # source generated above from a parsed pattern
    fn: Matcher = ns["match"]
    return fn


Builder = Callable[["EGraph", Env], int]


def compile_builder(dst: Pattern) -> Builder:
    """A Python function equivalent to :meth:`EGraph.instantiate` for ``dst``: ``b(eg, env)``
    adds the e-nodes of ``dst`` under ``env`` in the same order (arguments left to right,
    depth first) and returns the class, without the recursion."""
    lines = ["def build(eg, env):", "    add = eg.add_enode"]
    counter = [0]
    ns: dict[str, Any] = {}

    def size(z: SizeExpr) -> str:
        if isinstance(z, SLit):
            return repr(z.value)
        if isinstance(z, SVar):
            return f"env[{z.name!r}]"
        return " * ".join(["1", *(size(f) for f in z.factors)])

    def gen(p: Pattern) -> str:
        if isinstance(p, PVar):
            return f"env[{p.name!r}]"  # add_enode finds its arguments' classes
        counter[0] += 1
        t = f"t{counter[0]}"
        if isinstance(p, PNum):
            if isinstance(p.value, SVar):
                v = f"env[{p.value.name!r}]"
            else:
                v = f"K{counter[0]}"
                ns[v] = p.value
            lines.append(f"    {t} = add('num', {v}, ())[0]")
            return t
        kids = [gen(a) for a in p.args]
        data = "None" if p.size is None else size(p.size)
        lines.append(f"    {t} = add({p.op!r}, {data}, ({''.join(k + ', ' for k in kids)}))[0]")
        return t

    top = gen(dst)
    lines.append(f"    return eg.find({top})")
    exec("\n".join(lines), ns)  # source generated above from a parsed pattern
    fn: Builder = ns["build"]
    return fn


class EGraph:
    """Hash-consed e-nodes in union-find classes, with an undo log (see module docstring)."""

    def __init__(self) -> None:
        self.en_op: list[str] = []
        self.en_data: list[Data] = []
        self.en_kids: list[tuple[int, ...]] = []
        self.en_cls: list[int] = []
        self.uf: list[int] = []
        self.cnodes: list[list[int]] = []
        self.cparents: list[list[int]] = []
        self.hashcons: dict[tuple[str, Data, tuple[int, ...]], int] = {}
        self.by_op: dict[str, list[int]] = {}
        self.trail: list[tuple[Any, ...]] = []
        self.pending: list[int] = []
        self.touched: set[int] = set()
        self.capped = False  # a pass of the last saturate() matched at capped roots
        self.instances: list[Instance] = []
        self.sizes: set[int] = set()
        self.term_class: dict[Term, int] = {}
        self.term_node: dict[Term, int] = {}
        #: match with patterns compiled to Python (:func:`compile_matcher`); False: the
        #: generic matcher (same matches, same order; tests compare the two)
        self.compiled = True
        self._matchers: dict[int, tuple[Rule, Matcher | None, Builder | None, int]] = {}

    # ------------------------------------------------------------ core operations

    def find(self, c: int) -> int:
        uf = self.uf
        while uf[c] != c:
            c = uf[c]
        return c

    def rep(self, c: int) -> int:
        """The e-node whose Z3 term stands for class ``c`` (its root's first e-node)."""
        return self.cnodes[self.find(c)][0]

    def add_node(self, op: str, data: Data, kids: Sequence[int]) -> tuple[int, bool]:
        c, created, _ = self.add_enode(op, data, kids)
        return c, created

    def add_enode(self, op: str, data: Data, kids: Sequence[int]) -> tuple[int, bool, int]:
        """Add (or find) an e-node: (its class, whether it is new, its id)."""
        uf = self.uf
        roots = []
        for k in kids:  # find, inlined
            while uf[k] != k:
                k = uf[k]
            roots.append(k)
        ck = tuple(roots)
        key = (op, data, ck)
        e = self.hashcons.get(key)
        if e is not None:
            return self.find(self.en_cls[e]), False, e
        c = len(self.uf)
        e = len(self.en_op)
        self.en_op.append(op)
        self.en_data.append(data)
        self.en_kids.append(ck)
        self.en_cls.append(c)
        self.uf.append(c)
        self.cnodes.append([e])
        self.cparents.append([])
        for k in set(ck):
            self.cparents[k].append(e)
            self.trail.append(("papp", k))
        self.hashcons[key] = e
        self.trail.append(("hc", key, None))
        self.by_op.setdefault(op, []).append(e)
        self.trail.append(("byop", op))
        if op == "sum" and data not in self.sizes:  # sizes at hand: of every sum term
            self.sizes.add(int(data))  # type: ignore[arg-type]
            self.trail.append(("size", data))
        self.touched.add(c)
        return c, True, e

    def add_term(self, t: Term) -> tuple[int, int]:
        """Add a term (and its subterms); returns its class and its own e-node."""
        for s in t.subterms():
            if s in self.term_class:
                continue
            kids = [self.term_class[a] for a in s.args]
            c, _, e = self.add_enode(s.op, s.data, kids)
            self.term_class[s] = c
            self.term_node[s] = e
            self.trail.append(("term", s))
        return self.find(self.term_class[t]), self.term_node[t]

    def union(self, a: int, b: int) -> bool:
        a, b = self.find(a), self.find(b)
        if a == b:
            return False
        if len(self.cnodes[a]) < len(self.cnodes[b]):
            a, b = b, a
        self.trail.append(("union", b, a, len(self.cnodes[a]), len(self.cparents[a])))
        self.uf[b] = a
        self.cnodes[a].extend(self.cnodes[b])
        self.cparents[a].extend(self.cparents[b])
        self.pending.append(a)
        self.touched.add(a)
        return True

    def rebuild(self) -> None:
        """Restore congruence: parents whose canonical forms now coincide are merged."""
        uf, en_op, en_data, en_kids, en_cls = self.uf, self.en_op, self.en_data, self.en_kids, self.en_cls
        cparents, hashcons, trail = self.cparents, self.hashcons, self.trail
        while self.pending:
            todo, self.pending = self.pending, []
            for c in todo:
                while uf[c] != c:  # find, inlined here and below (this loop is hot)
                    c = uf[c]
                for p in list(cparents[c]):
                    roots = []
                    for k in en_kids[p]:
                        while uf[k] != k:
                            k = uf[k]
                        roots.append(k)
                    key = (en_op[p], en_data[p], tuple(roots))
                    e = hashcons.get(key)
                    if e is None:
                        hashcons[key] = p
                        trail.append(("hc", key, None))
                    else:
                        a, b = en_cls[e], en_cls[p]
                        while uf[a] != a:
                            a = uf[a]
                        while uf[b] != b:
                            b = uf[b]
                        if a != b:
                            self.union(a, b)

    # ------------------------------------------------------------ undo

    def mark(self) -> tuple[int, int, int, int]:
        return (len(self.trail), len(self.en_op), len(self.uf), len(self.instances))

    def undo(self, m: tuple[int, int, int, int]) -> None:
        ntrail, nen, ncls, ninst = m
        tr = self.trail
        while len(tr) > ntrail:
            rec = tr.pop()
            kind = rec[0]
            if kind == "papp":
                self.cparents[rec[1]].pop()
            elif kind == "hc":
                del self.hashcons[rec[1]]
            elif kind == "byop":
                self.by_op[rec[1]].pop()
            elif kind == "union":
                _, b, a, ln, lp = rec
                self.uf[b] = b
                del self.cnodes[a][ln:]
                del self.cparents[a][lp:]
            elif kind == "term":
                del self.term_class[rec[1]]
                del self.term_node[rec[1]]
            elif kind == "size":
                self.sizes.discard(rec[1])
        del self.en_op[nen:], self.en_data[nen:], self.en_kids[nen:], self.en_cls[nen:]
        del self.uf[ncls:], self.cnodes[ncls:], self.cparents[ncls:]
        del self.instances[ninst:]
        self.pending.clear()
        self.touched.clear()

    # ------------------------------------------------------------ matching

    def _size(self, s: SizeExpr, value: int, env: Env) -> Iterator[Env]:
        if isinstance(s, SLit):
            if s.value == value:
                yield env
            return
        if isinstance(s, SVar):
            if s.name in env:
                if env[s.name] == value:
                    yield env
            else:
                yield {**env, s.name: value}
            return
        known = 1
        free: list[str] = []
        for f in s.factors:
            if isinstance(f, SLit):
                known *= f.value
            elif f.name in env:
                known *= env[f.name]
            elif f.name not in free:
                free.append(f.name)
        if value % known:
            return
        rest = value // known
        if not free:
            if rest == 1:
                yield env
        elif len(free) == 1:
            yield {**env, free[0]: rest}
        else:  # two unknowns: one of them is a size at hand
            a, b = free[0], free[1]
            for x, y in self._pairs(rest):
                yield {**env, a: x, b: y}

    def _match(self, p: Pattern, c: int, env: Env) -> Iterator[Env]:
        c = self.find(c)
        if isinstance(p, PVar):
            if p.name in env:
                if self.find(env[p.name]) == c:
                    yield env
            else:
                yield {**env, p.name: c}
            return
        if isinstance(p, PNum):
            for e in self.cnodes[c]:
                if self.en_op[e] != "num":
                    continue
                v = self.en_data[e]
                if isinstance(p.value, SVar):
                    if isinstance(v, int):
                        yield from self._size(p.value, v, env)
                elif v == p.value:
                    yield env
            return
        for e in self.cnodes[c]:
            yield from self._match_node(p, e, env)

    def _match_node(self, p: PApp, e: int, env: Env) -> Iterator[Env]:
        if self.en_op[e] != p.op or len(self.en_kids[e]) != len(p.args):
            return
        envs: Iterable[Env]
        if p.size is not None:
            d = self.en_data[e]
            if not isinstance(d, int):
                return
            envs = self._size(p.size, d, env)
        else:
            envs = (env,)
        for e0 in envs:
            yield from self._match_args(p.args, self.en_kids[e], 0, e0)

    def _match_args(self, ps: tuple[Pattern, ...], kids: tuple[int, ...], i: int, env: Env) -> Iterator[Env]:
        if i == len(ps):
            yield env
            return
        for e1 in self._match(ps[i], kids[i], env):
            yield from self._match_args(ps, kids, i + 1, e1)

    def _pairs(self, rest: int) -> list[tuple[int, int]]:
        """The (a, b) with a * b == rest and a or b a size at hand, in :meth:`_size`'s order."""
        out: list[tuple[int, int]] = []
        seen: set[tuple[int, int]] = set()
        for d in sorted(self.sizes):
            if rest % d:
                continue
            for pair in ((d, rest // d), (rest // d, d)):
                if pair not in seen:
                    seen.add(pair)
                    out.append(pair)
        return out

    def _compiled(self, r: Rule) -> tuple[Rule, Matcher | None, Builder | None, int]:
        """The compiled matcher of ``r``'s source and builder of its target (None: use the
        generic ones) and the source's depth, made once per rule (the entry holds ``r``, so
        its id is not reused while the entry exists)."""
        got = self._matchers.get(id(r))
        if got is None:
            depth = pattern_depth(r.src)
            got = self._matchers[id(r)] = (
                (r, compile_matcher(r.src), compile_builder(r.dst), depth) if self.compiled
                else (r, None, None, depth))
        return got

    def instantiate(self, p: Pattern, env: Env) -> int:
        if isinstance(p, PVar):
            return self.find(env[p.name])
        if isinstance(p, PNum):
            v = env[p.value.name] if isinstance(p.value, SVar) else p.value
            return self.add_node("num", v, ())[0]
        kids = [self.instantiate(a, env) for a in p.args]
        data: Data = eval_size(p.size, env) if p.size is not None else None
        return self.add_node(p.op, data, kids)[0]

    def lookup(self, p: Pattern, env: Env) -> int | None:
        """The class of ``p`` instantiated with ``env`` if every node of it exists, else None."""
        if isinstance(p, PVar):
            return self.find(env[p.name])
        if isinstance(p, PNum):
            v = env[p.value.name] if isinstance(p.value, SVar) else p.value
            e = self.hashcons.get(("num", v, ()))
            return None if e is None else self.find(self.en_cls[e])
        kids = []
        for a in p.args:
            k = self.lookup(a, env)
            if k is None:
                return None
            kids.append(k)
        data: Data = eval_size(p.size, env) if p.size is not None else None
        e = self.hashcons.get((p.op, data, tuple(kids)))
        return None if e is None else self.find(self.en_cls[e])

    def _guarded(self, p: Pattern, env: Env) -> bool:
        """For size-enumerating rules: every proper sub-application of the target exists
        already (a split is only made toward a sum that is a term at hand)."""
        if not isinstance(p, PApp):
            return True
        return all(self.lookup(a, env) is not None for a in p.args)

    # ------------------------------------------------------------ saturation

    def _roots(self, depth: int, wide: bool = True) -> tuple[set[int], set[int]]:
        """E-nodes where a match may have appeared: in or up to ``depth`` parents above a
        class touched since the last pass; and, for the guarded size-enumerating rules, also
        the siblings of touched e-nodes (other users of their arguments: a new inner
        ``sum(j, x)`` enables a split at an old ``sum(N, x)``). ``wide=False`` skips the
        siblings (no rule of the pass enumerates sizes): a class like ``H`` can have thousands
        of parents, and collecting them is most of a cheap pass's time."""
        uf, cnodes, cparents, en_cls = self.uf, self.cnodes, self.cparents, self.en_cls
        roots: set[int] = set()
        frontier: set[int] = set()
        for c in self.touched:
            while uf[c] != c:  # find, inlined here and below
                c = uf[c]
            frontier.add(c)
        siblings: set[int] = set()
        for c in frontier if wide else ():
            for e in cnodes[c]:
                for k in self.en_kids[e]:
                    while uf[k] != k:
                        k = uf[k]
                    siblings.update(cparents[k])
        seen = set(frontier)
        for c in frontier:
            roots.update(cnodes[c])
        for _ in range(depth):
            nxt: set[int] = set()
            for c in frontier:
                ps = cparents[c]
                roots.update(ps)
                for p in ps:
                    pc = en_cls[p]
                    while uf[pc] != pc:
                        pc = uf[pc]
                    if pc not in seen:
                        seen.add(pc)
                        nxt.add(pc)
                        roots.update(cnodes[pc])
            frontier = nxt
        return roots, siblings | roots

    def saturate(self, rules: Sequence[Rule], max_rounds: int, max_nodes: int,
                 everything: bool = False,
                 done: Callable[[], bool] | None = None,
                 max_roots: int | None = None,
                 shrink_passes: int = _SHRINK_PASSES) -> tuple[int, bool]:
        """Apply ``rules`` in rounds; returns (rounds run, saturated).

        A round applies every rule once at the roots that may have new matches, then the
        shrinking rules (target smaller than source: sum_nest read left to right, sum_one,
        exp_add, ...) again and again until they find nothing (at most ``shrink_passes``
        times), so normalising steps do not use up the round budget. ``everything`` matches at every
        e-node in the first round (the reference); otherwise only near classes touched since
        the last pass (see :meth:`_roots`). ``done`` is asked after
        each round and stops early when it says True.

        ``max_roots`` bounds the e-nodes one such pass matches at, newest first (the query's
        own terms and what they produced): in a large unsaturated reference e-graph a union
        with an old class makes thousands of its nodes and parents roots (ntrans: seconds a
        query). ``max_nodes`` also stops a pass from applying further matches. Both are
        deterministic, so answers (and caches) are reproducible; a capped round is never
        reported as saturated."""
        depth = max((self._compiled(r)[3] for r in rules), default=1)
        shrinking = [r for r in rules if r.shrinks]
        since_full = set(self.touched)  # classes touched since the last full pass
        self.capped = False
        for rnd in range(max_rounds):
            self.touched = since_full
            changed = self._pass(rules, depth, everything and rnd == 0, max_roots, max_nodes)
            since_full = set(self.touched)
            if changed and shrinking:
                for _ in range(shrink_passes):
                    if len(self.en_op) > max_nodes or not self._pass(
                            shrinking, depth, False, max_roots, max_nodes):
                        break
                    since_full |= self.touched
            if len(self.en_op) > max_nodes:
                self.touched = since_full
                return rnd + 1, False
            if not changed:
                self.touched = since_full
                return rnd + 1, not self.capped
            if done is not None and done():
                self.touched = since_full
                return rnd + 1, False
        self.touched = since_full
        return max_rounds, False

    def _pass(self, rules: Sequence[Rule], depth: int, everything: bool,
              max_roots: int | None = None, max_nodes: int | None = None) -> bool:
        """Match ``rules`` once at (at most ``max_roots``, newest first) roots, apply the
        matches until the e-graph holds ``max_nodes`` e-nodes, rebuild. True if anything
        changed."""
        roots: set[int] | None = None
        wide: set[int] | None = None
        enumerates = any(r.enumerates for r in rules)
        if not everything:
            roots, wide = self._roots(depth, enumerates)
        self.touched = set()
        found: list[tuple[Rule, Builder | None, int, Env]] = []
        by_root: dict[str, list[int]] = {}
        by_wide: dict[str, list[int]] = {}
        if roots is not None and wide is not None:
            # without an enumerating rule ``wide`` is ``roots`` and goes unused
            for nodes, index in ((roots, by_root), (wide, by_wide))[:2 if enumerates else 1]:
                order = sorted(nodes)
                if max_roots is not None and len(order) > max_roots:
                    order, self.capped = order[-max_roots:], True  # the newest e-nodes
                for e in order:
                    index.setdefault(self.en_op[e], []).append(e)
        for r in rules:
            if roots is None:
                cands = list(self.by_op.get(r.src.op, ()))
            else:
                cands = (by_wide if r.enumerates else by_root).get(r.src.op, [])
            if not cands:
                continue
            _, m, b, _ = self._compiled(r)
            if m is None:
                hits = [(e, env) for e in cands for env in self._match_node(r.src, e, {})]
            else:
                hits = []
                m(self, cands, hits)
            cond = r.axiom.condition if r.axiom.condition.clauses else None
            for e, env in hits:
                if (cond is None or cond.holds(env)) and (
                        not r.enumerates or self._guarded(r.dst, env)):
                    found.append((r, b, e, env))
        changed = False
        en_op, en_cls, cnodes = self.en_op, self.en_cls, self.cnodes
        for r, b, e, env in found:
            if max_nodes is not None and len(en_op) > max_nodes:
                break
            before = len(en_op)
            c = self.instantiate(r.dst, env) if b is None else b(self, env)
            merged = self.union(c, en_cls[e])
            if merged or len(en_op) != before:
                changed = True
                sizes = r.axiom.sizes
                self.instances.append(Instance(r, tuple(
                    (k, v if k in sizes else cnodes[self.find(v)][0])
                    for k, v in sorted(env.items()))))
        self.rebuild()
        return changed

    # ------------------------------------------------------------ queries

    def _walk(self, top: Iterable[int], sub_ops: dict[str, tuple[tuple[int, str], ...]]) -> Iterator[int]:
        """The classes (root ids) below a class of ``top`` through argument positions allowed
        by the sub rules, ``top`` included, each once, depth first."""
        stack = [self.find(c) for c in top]
        seen = set(stack)
        while stack:
            c = stack.pop()
            yield c
            for e in self.cnodes[c]:
                for pos, _ in sub_ops.get(self.en_op[e], ()):
                    k = self.find(self.en_kids[e][pos])
                    if k not in seen:
                        seen.add(k)
                        stack.append(k)

    def below(self, top: Iterable[int], sub_ops: dict[str, tuple[tuple[int, str], ...]]) -> frozenset[int]:
        """Every class below a class of ``top`` (see :meth:`_walk`)."""
        return frozenset(self._walk(top, sub_ops))

    def reaches(self, top: Iterable[int], target: int, sub_ops: dict[str, tuple[tuple[int, str], ...]]) -> bool:
        """Python-side reachability: is ``target`` below a class of ``top`` through argument
        positions allowed by the sub rules?"""
        target = self.find(target)
        return any(c == target for c in self._walk(top, sub_ops))


