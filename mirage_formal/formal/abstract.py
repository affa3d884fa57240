"""Abstract expressions of μGraph tensors, built from the op registry's ``abstract`` templates.

An abstract expression drops indices but keeps reduction sizes (DESIGN.md, "Pruning"):

- a kernel ``input`` is the variable named after it;
- a registry op instantiates its template (``ir.ops``: ``$0``/``$1`` are operands, ``{k}``
  the contraction size of a matmul (last dimension of the left operand), ``{n}`` the size of
  the reduced axis (``axis`` attribute, or the last axis for ops without one), ``{scalar}``
  and other names the op's attributes). An operand the template does not mention (the
  optional gain of ``rms_norm``) multiplies the result;
- an ``accum`` over a tile with last dimension L in a loop of F iterations sums
  ``S = F * (L / fold)`` terms (``S = F`` without a fold): kind sum is ``sum(S, x)``,
  mean ``div(sum(S, x), S)``, rms ``sqrt(div(sum(S, mul(x, x)), S))``;
- an ``iter`` is the expression of the kernel input it reads (indices are dropped), a
  graph-defined kernel's ``get`` the inlined expression of its saver's tile.

Sizes are concrete ints taken from the node shapes, so an expression is a ground term.
Imports ``ir`` and ``formal.term``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

from mirage_formal.errors import GraphError, UnsupportedOpError
from mirage_formal.formal.term import SIZED_OPS, Raw, Term, app, num, parse_raw, term, tsum
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
from mirage_formal.ir.ops import REGISTRY, accum_terms

_PLACE = re.compile(r"\$(\d+)")
_ATTR = re.compile(r"\{(\w+)\}")


@cache
def _template(op: str) -> tuple[Raw, frozenset[int]]:
    d = REGISTRY[op]
    text = _PLACE.sub(lambda m: f"__arg{m.group(1)}", d.abstract)
    text = _ATTR.sub(lambda m: f"__attr_{m.group(1)}", text)
    used = frozenset(int(m.group(1)) for m in _PLACE.finditer(d.abstract))
    return parse_raw(text), used


def _size_of(n: Node, name: str, attrs: Mapping[str, Any], srcs: Sequence[Node]) -> int | float:
    if name == "k":
        return srcs[0].shape[-1]
    if name == "n":
        ax = int(attrs.get("axis", -1))
        return srcs[0].shape[ax]
    if name in attrs and isinstance(attrs[name], (int, float)) and not isinstance(attrs[name], bool):
        v: int | float = attrs[name]
        return v
    raise UnsupportedOpError(
        f"{n.op}: its abstract template uses {{{name}}}, which is neither k, n nor a numeric "
        "attribute; fix the template in mirage_formal/ir/ops.py"
    )


def _instantiate(r: Raw, args: Sequence[Term], sizes: Mapping[str, int | float]) -> Term:
    if r.kind == "num":
        return num(r.value)
    if r.kind == "ident":
        if r.head.startswith("__arg"):
            return args[int(r.head[5:])]
        if r.head.startswith("__attr_"):
            return num(sizes[r.head[7:]])
        raise UnsupportedOpError(f"abstract template names an unknown identifier {r.head!r}")
    if r.kind == "prod":
        raise UnsupportedOpError(f"abstract template has a product {r} outside a sum size")
    if r.head in SIZED_OPS:
        s = r.args[0]
        if s.kind == "ident" and s.head.startswith("__attr_"):
            size = sizes[s.head[7:]]
        elif s.kind == "num":
            size = s.value
        else:
            raise UnsupportedOpError(f"abstract template: the size of {r} must be a number or {{name}}")
        return tsum(int(size), _instantiate(r.args[1], args, sizes))
    return app(r.head, *(_instantiate(a, args, sizes) for a in r.args))


def op_expr(n: Node, args: Sequence[Term]) -> Term:
    """The abstract expression of registry-op node ``n`` given its operands' expressions."""
    if n.op == "accum":
        raise GraphError("accum needs the for-loop range: use block_expr")
    raw, used = _template(n.op)
    attrs = n.attr_dict
    names = {m.group(1) for m in _ATTR.finditer(REGISTRY[n.op].abstract)}
    sizes = {name: _size_of(n, name, attrs, n.src) for name in names}
    t = _instantiate(raw, args, sizes)
    for i, a in enumerate(args):
        if i not in used:  # an optional operand the template leaves out (rms_norm's gain)
            t = app("mul", t, a)
    return t


def accum_expr(n: Node, x: Term, forloop: int) -> Term:
    """``accum`` node ``n`` over a tile whose expression is ``x``, in a loop of ``forloop``.

    A plain mean (no fold) of a loop-invariant iterator tile (``fmap`` -1) is that tile's own
    expression: every iteration adds the same tile, so the mean is the identity (an epilogue
    operand such as a bias; ``sum(F, x) / F`` would need a cancellation axiom that the
    pruning must not have, see axioms/eq.toml)."""
    if invariant_mean(n):
        return x
    count = accum_terms(forloop, n.src[0].shape[-1], n.attr("fold"))
    kind = n.attr("kind")
    if kind == "rms":
        x = app("mul", x, x)
    s = tsum(count, x)
    if kind == "sum":
        return s
    m = app("div", s, num(count))
    return app("sqrt", m) if kind == "rms" else m


def block_expr(n: Node, kernel_inputs: Sequence[Term], forloop: int,
               memo: dict[Node, Term] | None = None) -> Term:
    """Expression of block-level node ``n`` whose kernel inputs have ``kernel_inputs``."""
    memo = {} if memo is None else memo
    if n in memo:  # the search asks again for the same tiles: skip the walk
        return memo[n]
    for m in n.walk():
        if m in memo:
            continue
        if m.op == ITER:
            i = m.attr("input")
            if not 0 <= i < len(kernel_inputs):
                raise GraphError(f"iter reads kernel input {i} but only {len(kernel_inputs)} are given")
            memo[m] = kernel_inputs[i]
        elif m.op == "accum":
            memo[m] = accum_expr(m, memo[m.src[0]], forloop)
        elif m.op in REGISTRY:
            memo[m] = op_expr(m, [memo[s] for s in m.src])
        else:
            raise GraphError(f"{m.op} nodes do not belong in a block graph")
    return memo[n]


def kernel_expr(n: Node, memo: dict[Node, Term] | None = None) -> Term:
    """Expression of kernel-level node ``n`` (inputs are variables; kernels are inlined)."""
    memo = {} if memo is None else memo
    if n in memo:
        return memo[n]
    for m in n.walk():
        if m in memo or m.op == KERNEL_OP:
            continue
        if m.op == INPUT:
            memo[m] = term("var", str(m.attr("name")), ())
        elif m.op == GET:
            kn = m.src[0]
            bg: BlockGraph = kn.attr("graph")
            ins = [memo[s] for s in kn.src]
            memo[m] = block_expr(bg.outputs[m.attr("index")].node, ins, bg.forloop, {})
        elif m.op in REGISTRY:
            memo[m] = op_expr(m, [memo[s] for s in m.src])
        else:
            raise GraphError(f"{m.op} nodes do not belong in a kernel graph")
    return memo[n]


def expr_of(n: Node, kernel_inputs: Sequence[Node] | None = None, forloop: int | None = None,
            memo: dict[Node, Term] | None = None) -> Term:
    """Expression of a kernel-level node, or of a block-level node over ``kernel_inputs``."""
    if kernel_inputs is None:
        return kernel_expr(n, memo)
    ins = [kernel_expr(k, memo) for k in kernel_inputs]
    return block_expr(n, ins, forloop or 1)


def program_exprs(program: KernelGraph) -> list[Term]:
    """The expression of every output of ``program``."""
    memo: dict[Node, Term] = {}
    return [kernel_expr(o, memo) for o in program.outputs]
