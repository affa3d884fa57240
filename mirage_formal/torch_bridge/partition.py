"""Split a Dynamo FX graph into the largest regions the registry can express.

A call is *supported* when :mod:`translate` maps it with its operands taken as region inputs
(the same code decides, on a one-node graph, so the partitioner and the translator never
disagree). Three calls depend on their neighbours:

- a transpose (``.T``, ``.mT``, ``transpose(-2, -1)``) and ``linear``'s weight are supported
  only when the transposed tensor comes from outside the region (a graph argument, or the
  output of an unsupported call): the transpose then happens once, outside the program;
- ``x * rsqrt(mean(x**2, -1, keepdim=True) + eps)`` is one ``rms_norm``: its inner calls
  (the ``+ eps`` has no registry op of its own) are supported when nothing else reads them.

torch's :class:`CapabilityBasedPartitioner` then grows maximal groups of supported calls that
create no cycle; groups with no arithmetic (only casts, copies or transposes) are dropped, and
the rest are fused into submodules ``region_0``, ``region_1``, ... of the graph module.

Imports torch and ``translate``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase
from torch.fx.passes.utils.fuser_utils import fuse_by_partitions

from mirage_formal.errors import GraphError, MirageError
from mirage_formal.ir.builder import Tensor
from mirage_formal.ir.graph import INPUT, KernelGraph
from mirage_formal.torch_bridge.torch_ops import describe, example_value, normalize, user_line
from mirage_formal.torch_bridge.translate import (
    TorchOpError,
    Translator,
    match_rms_norm,
    program_dtype,
    tensor_meta,
)

_NO_COMPUTE = frozenset({"cast", "identity", "t", "mT", "transpose"})
_TRANSPOSING = frozenset({"t", "mT", "transpose"})


class _Subgraph(Translator):
    """Translates the calls in ``inside`` with every other operand taken as a fresh input;
    ``outside`` holds the nodes a transpose may read (they are computed before the region)."""

    def __init__(
        self, gm: torch.fx.GraphModule, inside: set[torch.fx.Node], outside: set[torch.fx.Node]
    ) -> None:
        super().__init__(gm, [n.name for n in gm.graph.nodes if n.op == "placeholder"])
        self.inside = inside
        self.outside = outside

    def value(self, node: Any, user: torch.fx.Node) -> Tensor:
        if isinstance(node, torch.fx.Node) and node not in self.inside and node not in self.memo:
            shape, _ = tensor_meta(node)
            if not shape:
                raise TorchOpError(describe(user), "a 0-dimensional operand", user_line(user))
            self.memo[node] = self.g.input(shape, program_dtype(node), f"v{len(self.memo)}")
        return super().value(node, user)

    def transposed_input(self, operand: Any, node: torch.fx.Node) -> Tensor:
        if (
            not isinstance(operand, torch.fx.Node)
            or operand in self.inside
            or operand not in self.outside
        ):
            raise TorchOpError(
                describe(node), "it transposes a tensor computed in the region", user_line(node)
            )
        shape, _ = tensor_meta(operand)
        if len(shape) < 2:
            raise TorchOpError(describe(node), "a rank-1 transpose", user_line(node))
        t = self.transposed.get(operand)
        if t is None:  # (one input per transposed tensor, each named apart: two linears' weights)
            t = self.transposed[operand] = self.g.input(
                (*shape[:-2], shape[-1], shape[-2]), program_dtype(operand), f"vT{len(self.transposed)}")
        return t

    def program(self, nodes: Sequence[torch.fx.Node]) -> KernelGraph:
        """The program computing every node of ``nodes`` that is read outside it."""
        inside = set(nodes)
        for n in nodes:
            if not n.users or any(u not in inside for u in n.users):
                self.g.output(self.value(n, n))
        return self.g.build()


def rms_groups(gm: torch.fx.GraphModule) -> dict[torch.fx.Node, torch.fx.Node]:
    """Inner calls of each RMSNorm pattern (read by nothing else) -> the pattern's last call."""
    out: dict[torch.fx.Node, torch.fx.Node] = {}
    for n in gm.graph.nodes:
        c = normalize(n) if n.op in ("call_function", "call_method") else None
        m = match_rms_norm(n, c) if c is not None else None
        if m is not None:
            inner = set(m[2])
            if all(set(i.users) <= inner | {n} for i in inner):
                out |= dict.fromkeys(inner, n)
    return out


#: calls that compute a softmax; without ``capture_softmax`` they stay with torch
SOFTMAX_CALLS = frozenset({"softmax", "sdpa"})


def support(gm: torch.fx.GraphModule,
            capture_softmax: bool = True) -> dict[torch.fx.Node, str | None]:
    """For each call node: None when supported, else the reason it is not. Without
    ``capture_softmax``, softmax and scaled_dot_product_attention calls are left to torch
    (their programs divide exp(x) by its row sum with no row maximum subtracted: logits above
    ~11 overflow fp16 there)."""
    out: dict[torch.fx.Node, str | None] = {}
    absorbed = rms_groups(gm)
    outside: set[torch.fx.Node] = {n for n in gm.graph.nodes if n.op == "placeholder"}
    for n in gm.graph.nodes:
        if n.op not in ("call_function", "call_method", "call_module", "get_attr"):
            continue
        reason: str | None
        if n in absorbed:
            reason = None
        elif not isinstance(example_value(n), torch.Tensor):
            reason = "its value is not a tensor"
        elif not capture_softmax and (c := normalize(n)) is not None and c.name in SOFTMAX_CALLS:
            reason = ("a softmax, left to torch (capture_softmax=False; captured, it divides "
                      "exp(x) by its row sum with no row maximum subtracted)")
        else:
            try:
                _Subgraph(gm, {n}, outside).value(n, n)
                reason = None
            except (TorchOpError, GraphError) as e:
                reason = getattr(e, "why", str(e))
        out[n] = reason
        if reason is not None:
            outside.add(n)
    return out


class _Support(OperatorSupportBase):
    def __init__(self, supported: Mapping[torch.fx.Node, str | None]) -> None:
        self.supported = supported

    def is_node_supported(
        self, submodules: Mapping[str, torch.nn.Module], node: torch.fx.Node
    ) -> bool:
        return node in self.supported and self.supported[node] is None


@dataclass(frozen=True)
class Boundary:
    """A call left to torch, and why."""

    op: str
    where: str
    why: str


def _fits(
    gm: torch.fx.GraphModule,
    nodes: Sequence[torch.fx.Node],
    outside: set[torch.fx.Node],
    max_ops: int | None,
) -> bool:
    """Is the program of ``nodes`` in the class the verifier's bound covers, with at most
    ``max_ops`` registry ops? (A group that does not translate yet, e.g. half of an RMSNorm
    pattern, is judged by its call count alone.)"""
    from mirage_formal.verify.analysis import analyze

    try:
        prog = _Subgraph(gm, set(nodes), outside).program(nodes)
    except (TorchOpError, GraphError):
        return max_ops is None or len(nodes) <= max_ops
    if max_ops is not None and _op_count(prog, nodes) > max_ops:
        return False
    return not prog.outputs or analyze(prog).in_class


#: registry ops a layer_norm call adds beyond an rms_norm's one (mean, sub, square, mean,
#: add_scalar, rsqrt, mul against rms_norm): not counted against ``max_ops``
LAYER_NORM_EXTRA_OPS = 6


def _op_count(prog: KernelGraph, nodes: Sequence[torch.fx.Node]) -> int:
    """The registry ops ``max_ops`` caps: the program's, a layer norm counted as the one op an
    RMSNorm is (its centring is small row-wise work the search's seeds fuse at once; counted
    whole, a layer norm with its weight and bias, 9 ops, would fill a region alone and be cut
    off from the projection it feeds)."""
    norms = sum(1 for n in nodes if (c := normalize(n)) is not None and c.name == "layer_norm")
    return sum(1 for n in prog.nodes if n.op != INPUT) - LAYER_NORM_EXTRA_OPS * norms


def split_region(
    gm: torch.fx.GraphModule,
    nodes: Sequence[torch.fx.Node],
    outside: set[torch.fx.Node],
    max_ops: int | None = None,
) -> list[list[torch.fx.Node]]:
    """Split a region (in topological order) into consecutive parts the search can take.

    The verifier's field test covers programs with at most one exp on any path (Mirage's LAX
    class): ``silu`` after a softmax is outside it. The search completes only on programs of a
    few ops, so a part also holds at most ``max_ops`` registry ops (None: no limit). Each call
    joins the earliest part, no earlier than its operands' parts, that still fits; parts are
    then convex (no path leaves a part and comes back) and ordered.
    """
    groups = rms_groups(gm)
    members: dict[torch.fx.Node, list[torch.fx.Node]] = {}
    for inner, top in groups.items():
        members.setdefault(top, []).append(inner)
    parts: list[list[torch.fx.Node]] = []
    part_of: dict[torch.fx.Node, int] = {}
    for n in nodes:
        if n in groups:
            continue  # placed with the RMSNorm pattern it belongs to
        group = [*sorted(members.get(n, []), key=list(nodes).index), n]
        k = max((part_of[a] for m in group for a in m.all_input_nodes if a in part_of), default=0)
        while True:
            if k == len(parts):
                parts.append([])
            if not parts[k] or _fits(gm, [*parts[k], *group], outside, max_ops):
                break
            k += 1
        parts[k] += group
        part_of |= dict.fromkeys(group, k)
    return parts


def partition(
    gm: torch.fx.GraphModule, max_ops: int | None = None, prefix: str = "region_",
    capture_softmax: bool = True,
) -> tuple[torch.fx.GraphModule, list[str], list[Boundary]]:
    """Fuse the largest supported regions of ``gm`` into submodules (in place), each split
    into parts the verifier covers of at most ``max_ops`` registry ops (:func:`split_region`);
    ``capture_softmax``: see :func:`support`.

    Returns the graph module, the region submodule names (in graph order) and the calls left
    to torch with their reasons.
    """
    sup = support(gm, capture_softmax)
    meta = {n.name: dict(n.meta) for n in gm.graph.nodes}
    parts = CapabilityBasedPartitioner(
        gm, _Support(sup), allows_single_node_partition=True
    ).propose_partitions()
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    outside = {n for n, r in sup.items() if r is not None} | {
        n for n in gm.graph.nodes if n.op == "placeholder"
    }
    keep = []
    for p in parts:
        for nodes in split_region(gm, sorted(p.nodes, key=order.__getitem__), outside, max_ops):
            if any((c := normalize(n)) is not None and c.name not in _NO_COMPUTE for n in nodes):
                keep.append(nodes)
    keep.sort(key=lambda ns: order[ns[0]])
    boundaries = [Boundary(describe(n), user_line(n), r) for n, r in sup.items() if r is not None]
    if not keep:
        return gm, [], boundaries
    try:
        fused = fuse_by_partitions(gm, [dict.fromkeys(ns) for ns in keep], prefix=prefix)
    except Exception as e:  # pragma: no cover - torch internals
        raise MirageError(f"partitioning the FX graph failed: {e}") from e
    names = [
        str(n.target)
        for n in fused.graph.nodes
        if n.op == "call_module" and str(n.target).startswith(prefix)
    ]
    for name in names:
        sub = fused.get_submodule(name)
        assert isinstance(sub, torch.fx.GraphModule)
        for n in sub.graph.nodes:  # placeholders of a fused submodule may lack Dynamo's meta
            if example_value(n) is None and n.name in meta:
                n.meta.update(meta[n.name])
    return fused, names, boundaries
