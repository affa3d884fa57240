"""Canonical structure of a μGraph, for deduplicating accepted results, and the copy-only test.

Two accepted μGraphs are the *same structure* when they differ only in grid sizes, loop
ranges (the search's size variants of one structure) or in the operand order of a commutative
op. :func:`structure_key` prints a μGraph with those choices abstracted (grid axes kept as
"split" or not, the loop as present or not, commutative operands sorted) and hashes the text.

A *copy-only* output is a block output that only moves an input tile to device memory: an
``accum`` of kind ``sum`` or ``mean`` with no fold, applied to an input iterator, in a block
graph without a loop (one iteration: the accumulator is the identity). A kernel whose outputs
include one does no work for that output that the consumer could not do by reading the input.

Imports ``ir`` only (commutativity from the op registry).
"""

from __future__ import annotations

import hashlib

from mirage_formal.ir.graph import GET, INPUT, ITER, KERNEL_OP, BlockGraph, KernelGraph
from mirage_formal.ir.node import Node
from mirage_formal.ir.ops import REGISTRY


def _op_text(n: Node, args: list[str]) -> str:
    """An op applied to its operands' texts; operands of a declared-commutative op sorted."""
    d = REGISTRY.get(n.op)
    if d is not None and d.commutative:
        args = sorted(args)
    attrs = ",".join(f"{k}={v!r}" for k, v in n.attrs)
    return f"{n.op}{{{attrs}}}({';'.join(args)})"


def _block_text(bg: BlockGraph) -> str:
    memo: dict[Node, str] = {}

    def rec(n: Node) -> str:
        got = memo.get(n)
        if got is not None:
            return got
        if n.op == ITER:
            imap = tuple(n.attr("imap"))
            t = f"it{n.attr('input')}[{imap}|{n.attr('fmap') if bg.forloop > 1 else -1}]"
        else:
            t = _op_text(n, [rec(s) for s in n.src])
        memo[n] = t
        return t

    grid = "".join("s" if g > 1 else "." for g in bg.grid)
    outs = sorted(f"{rec(o.node)}@{o.omap}" for o in bg.outputs)
    return (
        f"block[{grid}|{'loop' if bg.forloop > 1 else 'noloop'}|{bg.threads}]({' & '.join(outs)})"
    )


def structure_text(graph: KernelGraph) -> str:
    """The μGraph printed with sizes and commutative operand orders abstracted."""
    memo: dict[Node, str] = {}

    def rec(n: Node) -> str:
        got = memo.get(n)
        if got is not None:
            return got
        if n.op == INPUT:
            t = f"in:{n.attr('name')}"
        elif n.op == GET:
            t = f"get{n.attr('index')}({rec(n.src[0])})"
        elif n.op == KERNEL_OP:
            t = f"{_block_text(n.attr('graph'))}<{';'.join(rec(s) for s in n.src)}>"
        else:
            t = _op_text(n, [rec(s) for s in n.src])
        memo[n] = t
        return t

    return " , ".join(rec(o) for o in graph.outputs)


def structure_key(graph: KernelGraph) -> str:
    """A hash of :func:`structure_text`: equal for size variants of one structure."""
    return hashlib.sha256(structure_text(graph).encode()).hexdigest()[:32]


def copy_only(node: Node, forloop: int) -> bool:
    """Whether block output ``node`` merely copies an input tile (see the module docstring)."""
    return (
        forloop == 1
        and node.op == "accum"
        and node.attr("fold") is None
        and node.attr("kind") in ("sum", "mean")
        and node.src[0].op == ITER
    )


def has_copy_only_kernel(graph: KernelGraph) -> bool:
    """Whether some graph-defined kernel of ``graph`` saves a copy-only output."""
    for k in graph.kernels:
        if k.op == KERNEL_OP:
            bg: BlockGraph = k.attr("graph")
            if any(copy_only(o.node, bg.forloop) for o in bg.outputs):
                return True
    return False
