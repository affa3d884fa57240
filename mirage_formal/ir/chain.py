"""The structure of a register chain in a block graph: two matmuls joined by elementwise ops
(attention's exp(Q·K) as the A operand of its product with V), which codegen keeps in
registers between them (``codegen.layout.Chain``) and the search leaves out of a block's
shared memory (``search.cost.register_chain_tiles``). One definition, so the search admits
exactly the structures codegen can take; each caller adds its own conditions (tensor cores,
fusion, warps and registers: ``ir.occupancy``).

Imports ``ir.graph``, ``ir.node`` and ``ir.ops`` only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mirage_formal.ir.graph import ITER
from mirage_formal.ir.node import Node
from mirage_formal.ir.ops import REGISTRY


@dataclass(frozen=True)
class ChainParts:
    """A chain ending in matmul ``second``: its A operand ``tile`` is computed from matmul
    ``first`` alone through the elementwise ``inner`` nodes; ``sums`` are the row-sum
    accumulators (sum or mean, fold 1) that read chain nodes."""

    first: Node
    inner: tuple[Node, ...]
    tile: Node
    second: Node
    sums: tuple[Node, ...]


def _elementwise(n: Node) -> bool:
    return n.op != ITER and n.op in REGISTRY and REGISTRY[n.op].elementwise


def chain_parts(m2: Node, consumers: Mapping[Node, Sequence[Node]],
                outputs: set[Node]) -> ChainParts | None:
    """The chain ending in matmul ``m2``, or None: ``m2``'s A operand E (not also its B) is
    elementwise and computed, through elementwise nodes, from one matmul m1 alone; every
    chain node (m1, those nodes, E) has E's shape and is no output; their readers are each
    other, ``m2`` (E) or row-sum accumulators; ``m2`` has E's batch and rows. ``consumers``
    maps every node of the block graph to its readers."""
    if m2.op != "matmul":
        return None
    E, B = m2.src
    if E is B or not _elementwise(E):
        return None
    inner: list[Node] = []
    m1: Node | None = None
    stack, seen = [E], {E}
    while stack:
        for s in stack.pop().src:
            if s in seen:
                continue
            seen.add(s)
            if s.op == "matmul":
                if m1 is not None and s is not m1:
                    return None
                m1 = s
            elif _elementwise(s):
                inner.append(s)
                stack.append(s)
            else:
                return None
    if m1 is None:
        return None
    chain = {m1, *inner, E}
    if any(x.shape != E.shape for x in chain):
        return None
    sums: list[Node] = []
    for x in chain:
        if x in outputs:
            return None
        for c in consumers[x]:
            if c in chain or (c is m2 and x is E):
                continue
            if c.op == "accum" and c.attr("fold") == 1 and c.attr("kind") in ("sum", "mean"):
                sums.append(c)
            else:
                return None
    if m2.shape[:-2] != E.shape[:-2] or m2.shape[-2] != E.shape[-2]:
        return None
    return ChainParts(m1, tuple(inner), E, m2, tuple(dict.fromkeys(sums)))
