"""Search-like streams of oracle queries, for the benchmark, the ``explain`` command and tests.

A stream is what a depth-first μGraph search asks its pruner: every tensor of every small
partial graph over the program's inputs, in enumeration order, repeats included (so a
cache's hit rate means something). Kernel level: every op application (matmul, elementwise,
reductions, rms_norm) up to ``depth`` over the inputs. Block level: inside graph-defined
kernels whose launch shapes come from the given μGraphs (grid, for-loop), iterators with every
valid imap/fmap, op applications up to ``depth`` on tiles, accumulators, and ops after them.

Queries are ``(node, kernel_inputs, grid, forloop)`` tuples, the arguments of
``Pruner.keep``. Deterministic for a seed. Imports ``ir``.
"""

from __future__ import annotations

import contextlib
import itertools
import random
from collections.abc import Sequence
from typing import Any

from mirage_formal.errors import GraphError
from mirage_formal.ir.graph import ITER, KERNEL_OP, BlockGraph, KernelGraph, make_iter, make_op
from mirage_formal.ir.node import Node
from mirage_formal.ir.ops import BLOCK, KERNEL

Query = tuple[Node, tuple[Node, ...] | None, tuple[int, int, int] | None, int | None]

UNARY = ("exp", "sqrt", "silu")
BINARY = ("matmul", "add", "mul", "div")
REDUCE = ("sum",)


def _apply(level: str, pool: Sequence[Node], fresh: Sequence[Node], rng: random.Random,
           cap: int) -> list[Node]:
    """Every op application with at least one operand in ``fresh`` (sampled down to ``cap``)."""
    out: list[Node] = []
    cands: list[tuple[str, tuple[Node, ...], dict[str, Any]]] = []
    for a in fresh:
        cands.extend((op, (a,), {}) for op in UNARY)
        cands.append(("sum", (a,), {"axis": -1, "keepdims": True}))
        if level == KERNEL:
            cands.append(("rms_norm", (a,), {}))
    for a, b in itertools.product(pool, repeat=2):
        if a not in fresh and b not in fresh:
            continue
        cands.extend((op, (a, b), {}) for op in BINARY)
    rng.shuffle(cands)
    for op, srcs, attrs in cands:
        try:
            n = make_op(op, list(srcs), attrs, level)
        except GraphError:
            continue
        out.append(n)
        if len(out) >= cap:
            break
    return out


def kernel_stream(program: KernelGraph, depth: int = 2, cap: int = 60, seed: int = 0) -> list[Query]:
    """Kernel-level queries: op applications over the program inputs up to ``depth``."""
    rng = random.Random(seed)
    pool = list(program.inputs)
    fresh = list(pool)
    out: list[Query] = [(n, None, None, None) for n in pool]
    for _ in range(depth):
        new = _apply(KERNEL, pool, fresh, rng, cap)
        for n in new:
            # a search asks about the new tensor and, on backtracking, its operands again
            out.append((n, None, None, None))
            out.extend((s, None, None, None) for s in n.src)
        pool = pool + [n for n in new if n not in pool]
        fresh = new
    return out


def _iters(inputs: Sequence[Node], grid: tuple[int, int, int], forloop: int, cap: int) -> list[Node]:
    sig = [(n.shape, n.dtype) for n in inputs]
    out: list[Node] = []
    for i, n in enumerate(inputs):
        rank = len(n.shape)
        dims = [-1, *range(rank)]
        found = 0
        for imap in itertools.product(dims, repeat=3):
            for fmap in dims:
                try:
                    it = make_iter(sig, i, imap, fmap, grid, forloop)
                except GraphError:
                    continue
                out.append(it)
                found += 1
                if found >= cap:
                    break
            if found >= cap:
                break
    return out


def block_stream(kernel_inputs: Sequence[Node], grid: tuple[int, int, int], forloop: int,
                 depth: int = 2, cap: int = 40, iters_per_input: int = 3, seed: int = 0,
                 extra_iters: Sequence[Node] = ()) -> list[Query]:
    """Block-level queries inside one kernel: iterators, ops, accumulators, ops after them."""
    rng = random.Random(seed)
    ins = tuple(kernel_inputs)
    pool = list(dict.fromkeys([*extra_iters, *_iters(ins, grid, forloop, iters_per_input)]))
    out: list[Query] = [(n, ins, grid, forloop) for n in pool]
    fresh = list(pool)
    tiles = list(pool)
    for _ in range(depth):
        new = _apply(BLOCK, tiles, fresh, rng, cap)
        out.extend((n, ins, grid, forloop) for n in new)
        tiles += [n for n in new if n not in tiles]
        fresh = new
    accs: list[Node] = []
    for t in tiles:
        for kind, fold in (("sum", None), ("sum", 1), ("rms", 1)):
            try:
                accs.append(make_op("accum", [t], {"kind": kind, "fold": fold}, BLOCK))
            except GraphError:
                continue
    rng.shuffle(accs)
    accs = accs[:cap]
    out.extend((n, ins, grid, forloop) for n in accs)
    post = _apply(BLOCK, accs, accs, rng, cap)
    out.extend((n, ins, grid, forloop) for n in post)
    return out


def launches(graphs: Sequence[KernelGraph]) -> list[tuple[tuple[Node, ...], BlockGraph]]:
    """(kernel inputs, block graph) of every graph-defined kernel in ``graphs``."""
    out = []
    for g in graphs:
        for n in g.nodes:
            if n.op == KERNEL_OP:
                out.append((tuple(n.src), n.attr("graph")))
    return out


def search_stream(program: KernelGraph, mugraphs: Sequence[KernelGraph], depth: int = 2,
                  cap: int = 40, seed: int = 0) -> list[Query]:
    """Kernel-level queries, then block-level ones in the launch shapes of ``mugraphs``
    (over the program inputs and over the μGraphs' own kernel inputs)."""
    out = kernel_stream(program, depth, cap, seed)
    for k, (ins, bg) in enumerate(launches(mugraphs)):
        own = [n for n in bg.nodes if n.op == ITER]
        out.extend(block_stream(ins, bg.grid, bg.forloop, depth, cap, seed=seed + k, extra_iters=own))
    return out


def mugraph_queries(graph: KernelGraph) -> list[Query]:
    """Every tensor of a μGraph at both levels (the positives of the tests)."""
    out: list[Query] = []
    for n in graph.nodes:
        if n.op == KERNEL_OP:
            bg: BlockGraph = n.attr("graph")
            out.extend((b, tuple(n.src), bg.grid, bg.forloop) for b in bg.nodes)
        else:
            out.append((n, None, None, None))
    return out


def wrong_tensors(program: KernelGraph) -> list[Node]:
    """Kernel-level tensors that cannot lead to the outputs of the attention or rmsnorm
    programs: exp of a value input, matmuls with the wrong operand, sqrt of the weights."""
    by = {n.attr("name"): n for n in program.inputs}
    out: list[Node] = []

    def tryop(op: str, *srcs: Node) -> None:
        with contextlib.suppress(GraphError):
            out.append(make_op(op, list(srcs), {}, KERNEL))

    if {"Q", "K", "V"} <= set(by):
        Q, K, V = by["Q"], by["K"], by["V"]
        tryop("exp", V)
        tryop("matmul", K, V)
        tryop("sqrt", K)
        tryop("exp", make_op("matmul", [K, V], {}, KERNEL))
        tryop("mul", Q, Q)
    if {"X", "W"} <= set(by):
        X, W = by["X"], by["W"]
        tryop("exp", X)
        tryop("sqrt", W)
        tryop("exp", make_op("matmul", [X, W], {}, KERNEL))
        tryop("mul", W, W)
    return out
