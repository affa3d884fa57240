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
        ck = tuple(self.find(k) for k in kids)
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
        while self.pending:
            todo, self.pending = self.pending, []
            for c in todo:
                for p in list(self.cparents[self.find(c)]):
                    key = (self.en_op[p], self.en_data[p], tuple(self.find(k) for k in self.en_kids[p]))
                    e = self.hashcons.get(key)
                    if e is None:
                        self.hashcons[key] = p
                        self.trail.append(("hc", key, None))
                    elif self.find(self.en_cls[e]) != self.find(self.en_cls[p]):
                        self.union(self.en_cls[e], self.en_cls[p])

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
            seen: set[tuple[int, int]] = set()
            for d in sorted(self.sizes):
                if rest % d:
                    continue
                for pair in ((d, rest // d), (rest // d, d)):
                    if pair not in seen:
                        seen.add(pair)
                        yield {**env, a: pair[0], b: pair[1]}

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
        roots: set[int] = set()
        frontier = {self.find(c) for c in self.touched}
        siblings: set[int] = set()
        for c in frontier if wide else ():
            for e in self.cnodes[c]:
                for k in self.en_kids[e]:
                    siblings.update(self.cparents[self.find(k)])
        seen = set(frontier)
        for c in frontier:
            roots.update(self.cnodes[c])
        for _ in range(depth):
            nxt: set[int] = set()
            for c in frontier:
                for p in self.cparents[c]:
                    roots.add(p)
                    pc = self.find(self.en_cls[p])
                    if pc not in seen:
                        seen.add(pc)
                        nxt.add(pc)
                        roots.update(self.cnodes[pc])
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
        depth = max((pattern_depth(r.src) for r in rules), default=1)
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
        if not everything:
            roots, wide = self._roots(depth, any(r.enumerates for r in rules))
        self.touched = set()
        found: list[tuple[Rule, int, Env]] = []
        by_root: dict[str, list[int]] = {}
        by_wide: dict[str, list[int]] = {}
        if roots is not None and wide is not None:
            for nodes, index in ((roots, by_root), (wide, by_wide)):
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
            for e in cands:
                for env in self._match_node(r.src, e, {}):
                    if r.axiom.condition.holds(env) and (
                            not r.enumerates or self._guarded(r.dst, env)):
                        found.append((r, e, env))
        changed = False
        for r, e, env in found:
            if max_nodes is not None and len(self.en_op) > max_nodes:
                break
            before = len(self.en_op)
            c = self.instantiate(r.dst, env)
            merged = self.union(c, self.en_cls[e])
            if merged or len(self.en_op) != before:
                changed = True
                self.instances.append(Instance(r, tuple(
                    (k, v if k in r.axiom.sizes else self.rep(v)) for k, v in sorted(env.items()))))
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


