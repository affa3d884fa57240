"""Single-change mutants of μGraphs, for measuring the verifier's soundness.

:func:`mutants` rebuilds a kernel graph once per mutation site with exactly one change:

- ``imap`` / ``fmap``: an input iterator splits another dimension (or none);
- ``omap``: an output saver concatenates along another dimension;
- ``forloop``: the loop range off by one (F-1, F+1, where the shapes still divide);
- ``swap``: the operands of a binary op not declared commutative exchanged;
- ``axis``: a reduction over another axis;
- ``accum``: an accumulator of another kind or fold (dropping or adding a reduction);
- ``op``: an op replaced by another with the same arity, label rule and attributes
  (:func:`replacements`, read from the registry);
- ``drop``: a unary op or accumulator's effect removed where the shapes allow.

Every mutant goes through the same checked constructors as user graphs; one the builder
rejects as ill-formed is skipped (it is not a μGraph). Some mutants are equivalent to the
original (replacing max(x, 0) by a function equal to it on the inputs at hand): callers
classify them with the float64 interpreter. Imports ``ir`` only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from mirage_formal.errors import GraphError
from mirage_formal.ir.graph import (
    GET,
    INPUT,
    ITER,
    KERNEL_OP,
    BlockGraph,
    BlockOutput,
    KernelGraph,
    make_iter,
    make_kernel,
    make_op,
)
from mirage_formal.ir.node import Node
from mirage_formal.ir.ops import BLOCK, KERNEL, REGISTRY

#: what a node edit returns: (op name, sources, attributes), or None to keep the node
Edit = Callable[[Node, list[Node]], "tuple[str, list[Node], dict[str, Any]] | None"]


@dataclass(frozen=True)
class Mutant:
    kind: str
    where: str
    graph: KernelGraph


@dataclass(frozen=True)
class _Change:
    kind: str
    where: str
    target: Node  # a kernel-level node, or a block node
    kernel: Node | None  # the kernel node a block target belongs to
    edit: Edit | None = None
    forloop: int | None = None
    omap: tuple[int, tuple[int, int, int]] | None = None


def _rebuild_block(bg: BlockGraph, srcs: list[Node], ch: _Change | None) -> list[Node]:
    forloop = ch.forloop if ch is not None and ch.forloop is not None else bg.forloop
    sig = [(s.shape, s.dtype) for s in srcs]
    new: dict[Node, Node] = {}
    for b in bg.nodes:
        args = [new[s] for s in b.src]
        spec: tuple[str, list[Node], dict[str, Any]] | None = None
        if ch is not None and ch.target is b and ch.edit is not None:
            spec = ch.edit(b, args)
        if b.op == ITER and spec is None:
            new[b] = make_iter(sig, b.attr("input"), b.attr("imap"), b.attr("fmap"), bg.grid, forloop)
        elif spec is not None and spec[0] == ITER:
            a = spec[2]
            new[b] = make_iter(sig, a["input"], a["imap"], a["fmap"], bg.grid, forloop)
        elif spec is not None and spec[0] == "=":
            new[b] = spec[1][0]
        else:
            op, s, attrs = spec if spec is not None else (b.op, args, b.attr_dict)
            new[b] = make_op(op, s, attrs, BLOCK)
    outs = []
    for k, o in enumerate(bg.outputs):
        omap = o.omap
        if ch is not None and ch.omap is not None and ch.omap[0] == k:
            omap = ch.omap[1]
        outs.append(BlockOutput(new[o.node], omap))
    block = BlockGraph(bg.grid, bg.threads, forloop, tuple(sig), tuple(outs))
    return make_kernel(block, srcs)


def _rebuild(g: KernelGraph, ch: _Change) -> KernelGraph:
    new: dict[Node, Node] = {}
    kernels: dict[Node, list[Node]] = {}
    for n in g.nodes:
        if n.op == INPUT:
            new[n] = n
        elif n.op == GET:
            new[n] = kernels[n.src[0]][n.attr("index")]
        elif n.op == KERNEL_OP:
            mine = ch if ch.kernel is n else None
            kernels[n] = _rebuild_block(n.attr("graph"), [new[s] for s in n.src], mine)
        else:
            args = [new[s] for s in n.src]
            spec = ch.edit(n, args) if ch.kernel is None and ch.target is n and ch.edit else None
            if spec is not None and spec[0] == "=":
                new[n] = spec[1][0]
            else:
                op, s, attrs = spec if spec is not None else (n.op, args, n.attr_dict)
                new[n] = make_op(op, s, attrs, KERNEL)
    return KernelGraph(g.inputs, tuple(new[o] for o in g.outputs))


#: at most this many replacement ops per node (``replacements``)
MAX_REPLACEMENTS = 3


def replacements(op: str) -> tuple[str, ...]:
    """Ops that may replace ``op`` in a mutant, read from the registry: the same arity,
    label rule and attribute names, at a level ``op`` has; those of the same field kind first
    (sigmoid for exp, say), then by name; at most ``MAX_REPLACEMENTS``."""
    d = REGISTRY.get(op)
    if d is None:
        return ()
    names = {a.name for a in d.attrs}
    same = [o for o in REGISTRY.values() if o.name != op and o.arity == d.arity
            and o.label == d.label and {a.name for a in o.attrs} == names and o.levels & d.levels]
    same.sort(key=lambda o: (o.field.kind != d.field.kind, o.name))
    return tuple(o.name for o in same[:MAX_REPLACEMENTS])


def _node_changes(n: Node, kernel: Node | None, where: str) -> Iterator[_Change]:
    """Every single-node change that may give a well-formed mutant."""
    op = n.op
    if op == ITER:
        rank = len(n.shape)
        imap, fmap = n.attr("imap"), n.attr("fmap")
        for ax in range(3):
            for d in range(-1, rank):
                if d != imap[ax]:
                    m = list(imap)
                    m[ax] = d
                    yield _Change("imap", f"{where} imap {tuple(m)}", n, kernel,
                                  _set_iter(tuple(m), fmap))
        for d in range(-1, rank):
            if d != fmap:
                yield _Change("fmap", f"{where} fmap {d}", n, kernel, _set_iter(imap, d))
        return
    if len(n.src) == 2 and op in REGISTRY and not REGISTRY[op].commutative:
        yield _Change("swap", f"{where} swap", n, kernel, _swap)
    for other in replacements(op):
        yield _Change("op", f"{where} -> {other}", n, kernel, _replace(other, None))
    if op in REGISTRY and REGISTRY[op].label == "reduce":
        for ax in range(-len(n.src[0].shape), 0):
            if ax != n.attr("axis"):
                yield _Change("axis", f"{where} axis {ax}", n, kernel, _replace(None, {"axis": ax}))
    if op == "accum":
        kind, fold = n.attr("kind"), n.attr("fold")
        for k in ("sum", "mean", "rms"):
            if k != kind:
                yield _Change("accum", f"{where} kind {k}", n, kernel, _replace(None, {"kind": k}))
        last = n.src[0].shape[-1]
        folds: list[int | None] = [None, 1, *[d for d in range(2, last) if last % d == 0][:3]]
        for f in folds:
            if f != fold:
                yield _Change("accum", f"{where} fold {f}", n, kernel, _replace(None, {"fold": f}))
    if len(n.src) == 1 and op not in (ITER,) and n.src[0].shape == n.shape:
        yield _Change("drop", f"{where} dropped", n, kernel, _drop)


def _swap(b: Node, a: list[Node]) -> tuple[str, list[Node], dict[str, Any]]:
    return (b.op, [a[1], a[0]], b.attr_dict)


def _drop(b: Node, a: list[Node]) -> tuple[str, list[Node], dict[str, Any]]:
    return ("=", [a[0]], {})


def _replace(op: str | None, attrs: dict[str, Any] | None) -> Edit:
    """An edit that renames the op (dropping its attributes) or overrides some attributes."""
    def edit(b: Node, a: list[Node]) -> tuple[str, list[Node], dict[str, Any]]:
        if op is not None:
            return (op, a, {})
        return (b.op, a, {**b.attr_dict, **(attrs or {})})
    return edit


def _set_iter(imap: tuple[int, ...], fmap: int) -> Edit:
    def edit(b: Node, a: list[Node]) -> tuple[str, list[Node], dict[str, Any]]:
        return (ITER, [], {"input": b.attr("input"), "imap": imap, "fmap": fmap})
    return edit


def _changes(g: KernelGraph) -> Iterator[_Change]:
    for i, n in enumerate(g.nodes):
        if n.op in (INPUT, GET):
            continue
        if n.op != KERNEL_OP:
            yield from _node_changes(n, None, f"kernel node {i} ({n.op})")
            continue
        bg: BlockGraph = n.attr("graph")
        for f in (bg.forloop - 1, bg.forloop + 1):
            if f >= 1:
                yield _Change("forloop", f"kernel {i} forloop {bg.forloop}->{f}", n, n, forloop=f)
        for k, o in enumerate(bg.outputs):
            rank = len(o.node.shape)
            for ax in range(3):
                if bg.grid[ax] > 1:
                    for d in range(rank):
                        if d != o.omap[ax]:
                            m = list(o.omap)
                            m[ax] = d
                            yield _Change("omap", f"kernel {i} output {k} omap {tuple(m)}", n, n,
                                          omap=(k, (m[0], m[1], m[2])))
        for j, b in enumerate(bg.nodes):
            yield from _node_changes(b, n, f"kernel {i} block node {j} ({b.op})")


def mutants(g: KernelGraph, kinds: frozenset[str] | None = None,
            same_outputs: bool = True) -> list[Mutant]:
    """All well-formed single-change mutants of ``g`` (of the given kinds), in a fixed order.

    With ``same_outputs`` only mutants whose output shapes equal ``g``'s are kept (the others
    cannot be compared with the same reference).
    """
    out: list[Mutant] = []
    seen = {g.key}
    for ch in _changes(g):
        if kinds is not None and ch.kind not in kinds:
            continue
        try:
            m = _rebuild(g, ch)
        except GraphError:
            continue
        if m.key in seen:
            continue
        if same_outputs and [o.shape for o in m.outputs] != [o.shape for o in g.outputs]:
            continue
        seen.add(m.key)
        out.append(Mutant(ch.kind, ch.where, m))
    return out
