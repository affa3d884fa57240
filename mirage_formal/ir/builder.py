"""The builder API people write by hand.

    g = mf.Graph()
    x = g.input((2, 4096), "f16", name="X")
    w = g.input((4096, 6144), "f16", name="W")
    y = g.matmul(g.rms_norm(x), w)
    g.output(y)
    program = g.build()                  # a KernelGraph

Graph-defined kernels are written with a :class:`KernelBuilder`:

    k = g.kernel([x, w], grid=(24, 1, 1), forloop=32)
    xt = k.iter(x, imap=(-1, -1, -1), fmap=1)
    wt = k.iter(w, imap=(1, -1, -1), fmap=0)
    o = k.div(k.accum(k.matmul(xt, wt)), k.accum(xt, kind="rms", fold=1))
    k.output(o, omap=(1, -1, -1))
    (y,) = k.build()

Every registry op is a method (``g.exp(x)``) and ``g.op(name, ...)`` takes any name;
tensors support ``+ - * / @`` and unary ``-``. Handles remember their graph, so a tensor
from another graph is caught at once. The data IR (``ir.graph``) is separate from this.

Imports ``ir.graph``, ``ir.node``, ``ir.ops``, ``ir.dtypes`` and the errors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mirage_formal.errors import GraphError
from mirage_formal.ir.dtypes import DType, as_dtype
from mirage_formal.ir.graph import (
    BlockGraph,
    BlockOutput,
    KernelGraph,
    MapT,
    as_grid,
    as_map,
    block_phases,
    make_input,
    make_iter,
    make_kernel,
    make_op,
)
from mirage_formal.ir.node import Node
from mirage_formal.ir.ops import BLOCK, KERNEL, REGISTRY


class Tensor:
    """A handle on a node of one particular graph (kernel graph or block graph)."""

    __slots__ = ("graph", "node")

    def __init__(self, graph: _Builder, node: Node) -> None:
        self.graph = graph
        self.node = node

    @property
    def shape(self) -> tuple[int, ...]:
        return self.node.shape

    @property
    def dtype(self) -> DType:
        return self.node.dtype

    def __repr__(self) -> str:
        return f"Tensor({self.node.op}, {self.dtype}{list(self.shape)})"

    def _bin(self, name: str, other: Tensor, swap: bool = False) -> Tensor:
        a, b = (other, self) if swap else (self, other)
        return self.graph.op(name, a, b)

    def __add__(self, o: Tensor) -> Tensor:
        return self._bin("add", o)

    def __sub__(self, o: Tensor) -> Tensor:
        return self._bin("sub", o)

    def __mul__(self, o: Tensor | float) -> Tensor:
        if isinstance(o, (int, float)):
            return self.graph.op("mul_scalar", self, scalar=float(o))
        return self._bin("mul", o)

    def __rmul__(self, o: float) -> Tensor:
        return self.graph.op("mul_scalar", self, scalar=float(o))

    def __truediv__(self, o: Tensor) -> Tensor:
        return self._bin("div", o)

    def __matmul__(self, o: Tensor) -> Tensor:
        return self._bin("matmul", o)

    def __neg__(self) -> Tensor:
        return self.graph.op("neg", self)


#: what to write instead of an elementwise op of a tensor and a number
_SCALAR_FORMS = {
    "add": "; for a number c write g.add_scalar(x, c)",
    "sub": "; for a number c write g.add_scalar(x, -c)",
    "mul": "; for a number c write g.mul_scalar(x, c)",
    "div": "; for a number c write g.mul_scalar(x, 1 / c)",
}


class _Builder:
    level: str

    def _node(self, t: Tensor, what: str) -> Node:
        if not isinstance(t, Tensor):
            raise GraphError(f"{what}: expected a Tensor of this graph, got {type(t).__name__}")
        if t.graph is not self:
            raise GraphError(
                f"{what}: tensor {t!r} belongs to another graph; build it in this graph "
                "(a kernel's block tiles come from its own iter(), kernel tensors from g)"
            )
        return t.node

    def op(self, name: str, *args: Any, **attrs: Any) -> Tensor:
        """Apply registry op ``name`` to tensors of this graph: its tensor operands first, then
        (positionally or by keyword) its attributes in the registry's order, e.g.
        ``g.add_scalar(x, 1e-6)`` or ``g.sum(x, -1, True)``."""
        n = next((i for i, a in enumerate(args) if not isinstance(a, Tensor)), len(args))
        srcs = [self._node(a, name) for a in args[:n]]
        extra = args[n:]
        if extra:
            d = REGISTRY.get(name)
            names = [a.name for a in d.attrs] if d is not None else []
            usage = (f"its tensor operands first, then its attributes {names} in that order "
                     f"(e.g. g.{name}(x, {names[0]}=...))" if names else
                     "tensor operands only (it has no attributes)")
            if len(extra) > len(names) or any(isinstance(a, Tensor) for a in extra):
                hint = _SCALAR_FORMS.get(name, "") if not names else ""
                raise GraphError(f"{name}: got {len(srcs)} tensor(s) and then {extra!r}; it takes "
                                 + usage + hint)
            for k, v in zip(names, extra, strict=False):
                if k in attrs:
                    raise GraphError(f"{name}: attribute {k!r} given twice (positionally and "
                                     "by keyword)")
                attrs[k] = v
        return Tensor(self, make_op(name, srcs, attrs, self.level))

    def __getattr__(self, name: str) -> Callable[..., Tensor]:
        if name.startswith("_") or name not in REGISTRY:
            raise AttributeError(name)

        def apply(*args: Any, **attrs: Any) -> Tensor:
            return self.op(name, *args, **attrs)

        apply.__name__ = name
        apply.__doc__ = REGISTRY[name].doc
        return apply


class Graph(_Builder):
    """Builds a kernel graph (a program, or a μGraph with graph-defined kernels)."""

    level = KERNEL

    def __init__(self) -> None:
        self._inputs: list[Node] = []
        self._outputs: list[Node] = []

    def input(self, shape: Sequence[int], dtype: DType | str = "f16", name: str | None = None) -> Tensor:
        name = name or f"in{len(self._inputs)}"
        if any(n.attr("name") == name for n in self._inputs):
            raise GraphError(f"input name {name!r} is already used in this graph; pick another")
        n = make_input(name, shape, as_dtype(dtype))
        self._inputs.append(n)
        return Tensor(self, n)

    def kernel(self, inputs: Sequence[Tensor], grid: Sequence[int] | Mapping[str, int] | int,
               threads: int = 128, forloop: int = 1) -> KernelBuilder:
        """Start a graph-defined kernel over ``inputs`` (tensors of this graph)."""
        return KernelBuilder(self, [self._node(t, "kernel") for t in inputs], as_grid(grid),
                             threads, forloop)

    def output(self, *ts: Tensor) -> None:
        for t in ts:
            self._outputs.append(self._node(t, "output"))

    def build(self) -> KernelGraph:
        return KernelGraph(tuple(self._inputs), tuple(self._outputs))

    def wrap(self, n: Node) -> Tensor:
        """A handle for a node built by this graph's own calls (used by loaders)."""
        return Tensor(self, n)


class KernelBuilder(_Builder):
    """Builds the block graph of one graph-defined kernel; ``build()`` returns its outputs."""

    level = BLOCK

    def __init__(self, parent: Graph, inputs: list[Node], grid: tuple[int, int, int],
                 threads: int, forloop: int) -> None:
        if forloop < 1:
            raise GraphError(f"kernel: forloop={forloop} must be >= 1")
        self.parent = parent
        self.inputs = inputs
        self.grid = grid
        self.threads = threads
        self.forloop = forloop
        self._outputs: list[BlockOutput] = []
        self._built: list[Tensor] | None = None
        self._phase: dict[Node, bool] = {}

    def op(self, name: str, *args: Tensor, **attrs: Any) -> Tensor:
        t = super().op(name, *args, **attrs)
        block_phases([t.node], self._phase)  # loop/accumulator errors surface at once
        return t

    def iter(self, x: Tensor | int, imap: Sequence[int] | Mapping[str, int] | None = None,
             fmap: int = -1) -> Tensor:
        """The tile of kernel input ``x`` (a tensor or its position) each block sees per iteration."""
        if isinstance(x, Tensor):
            n = self.parent._node(x, "iter")
            if n not in self.inputs:
                raise GraphError(f"iter: {x!r} is not an input of this kernel; pass it to g.kernel([...])")
            i = self.inputs.index(n)
        else:
            i = int(x)
        sig = [(n.shape, n.dtype) for n in self.inputs]
        n = make_iter(sig, i, as_map(imap, "imap"), int(fmap), self.grid, self.forloop)
        self._phase[n] = False
        return Tensor(self, n)

    def accum(self, t: Tensor, kind: str = "sum", fold: int | None = None) -> Tensor:
        return self.op("accum", t, kind=kind, fold=fold)

    def output(self, t: Tensor, omap: Sequence[int] | Mapping[str, int] | None = None) -> None:
        om: MapT = as_map(omap, "omap")
        self._outputs.append(BlockOutput(self._node(t, "output"), om))

    def block_graph(self) -> BlockGraph:
        return BlockGraph(self.grid, self.threads, self.forloop,
                          tuple((n.shape, n.dtype) for n in self.inputs), tuple(self._outputs))

    def build(self) -> list[Tensor]:
        """Close the kernel; returns one kernel-level tensor per output saver, in order."""
        if self._built is None:
            outs = make_kernel(self.block_graph(), self.inputs)
            self._built = [Tensor(self.parent, n) for n in outs]
        return list(self._built)
