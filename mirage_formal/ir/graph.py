"""Kernel graphs and block graphs: the μGraph data IR, with its well-formedness checks.

- A *kernel graph* is a DAG of device tensors: ``input`` nodes, registry ops at the
  ``kernel`` level, ``kernel`` nodes (graph-defined kernels, one :class:`BlockGraph` each,
  sources = the kernel's inputs) and ``get`` nodes selecting one output of a kernel node.
- A *block graph* describes one thread block: ``iter`` nodes (input iterators: ``input``
  index, ``imap`` per grid axis, ``fmap``), registry ops at the ``block`` level (``accum``
  among them) and output savers (:class:`BlockOutput`: node and ``omap``).

Semantics are stated in docs/internals.md ("μGraph semantics"); ``semantics.reference`` executes
them. Every constructor here checks what it can (shapes, partitions, accumulators, maps) and
raises :class:`GraphError` naming the op, the shapes and what to change, so builders, text
and JSON loaders and the Mirage importer share one set of checks.

Imports ``ir.node``, ``ir.ops``, ``ir.dtypes`` and the errors.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mirage_formal.errors import GraphError
from mirage_formal.ir.dtypes import DType, promote
from mirage_formal.ir.node import Node, node
from mirage_formal.ir.ops import BLOCK, KERNEL, REGISTRY, get_op

GridT = tuple[int, int, int]
MapT = tuple[int, int, int]
AXES = "xyz"

# Structural (non-registry) node kinds.
INPUT, KERNEL_OP, GET, ITER = "input", "kernel", "get", "iter"
STRUCTURAL = frozenset({INPUT, KERNEL_OP, GET, ITER})


def as_map(m: Sequence[int] | Mapping[str, int] | None, what: str) -> MapT:
    """Normalise an imap/omap given as a 3-tuple, a shorter tuple or {'x':..,'y':..,'z':..}."""
    if m is None:
        return (-1, -1, -1)
    if isinstance(m, Mapping):
        extra = set(m) - set(AXES)
        if extra:
            raise GraphError(f"{what}: unknown grid axes {sorted(extra)}; use 'x', 'y', 'z'")
        return (int(m.get("x", -1)), int(m.get("y", -1)), int(m.get("z", -1)))
    t = tuple(int(v) for v in m)
    if len(t) > 3:
        raise GraphError(f"{what}: {list(t)} names more than three grid axes")
    return (*t, *(-1,) * (3 - len(t)))  # type: ignore[return-value]


def as_grid(g: Sequence[int] | Mapping[str, int] | int) -> GridT:
    if isinstance(g, int):
        g = (g,)
    if isinstance(g, Mapping):
        g = (g.get("x", 1), g.get("y", 1), g.get("z", 1))
    t = tuple(int(v) for v in g)
    if not 1 <= len(t) <= 3 or any(v < 1 for v in t):
        raise GraphError(f"grid {list(t)} must be 1 to 3 positive sizes (x, y, z)")
    return (*t, *(1,) * (3 - len(t)))  # type: ignore[return-value]


# ---------------------------------------------------------------- op nodes

def make_op(name: str, srcs: Sequence[Node], attrs: Mapping[str, Any], level: str) -> Node:
    """Build a registry-op node after checking level, arity, attributes and shapes."""
    d = get_op(name)
    if level not in d.levels:
        raise GraphError(f"{name} is not allowed at the {level} level (allowed: {sorted(d.levels)})")
    lo, hi = d.arity
    if not lo <= len(srcs) <= hi:
        want = str(lo) if lo == hi else f"{lo} to {hi}"
        raise GraphError(f"{name} takes {want} inputs, got {len(srcs)}")
    shapes = [s.shape for s in srcs]
    a = d.normalize_attrs(shapes, attrs)
    shape = d.shape(shapes, a)
    if not shape and level == KERNEL:
        # (kernels store tensors of at least one dimension, as inputs are: a 0-d value had no
        # layout in codegen, whose compile of a sum to a scalar raised an IndexError)
        raise GraphError(f"{name} of shape(s) {[list(x) for x in shapes]} gives a 0-d scalar, "
                         "which a kernel cannot store; keep a dimension of size 1 "
                         "(keepdims=True on the reduction)")
    dtype = srcs[0].dtype
    for s in srcs[1:]:
        dtype = promote(dtype, s.dtype)
    return node(name, tuple(srcs), tuple(a.items()), shape, dtype)


def make_input(name: str, shape: Sequence[int], dtype: DType) -> Node:
    shape = tuple(int(d) for d in shape)
    if not shape or any(d < 1 for d in shape):
        raise GraphError(f"input {name!r}: shape {list(shape)} must be non-empty with positive sizes")
    return node(INPUT, (), (("name", name),), shape, dtype)


# ---------------------------------------------------------------- block graphs

def iter_tile_shape(tshape: Sequence[int], imap: MapT, fmap: int, grid: GridT, forloop: int,
                    where: str) -> tuple[int, ...]:
    """Tile shape a block sees of a tensor of shape ``tshape``; checks divisibility."""
    rank = len(tshape)
    tile = list(tshape)
    used: dict[int, str] = {}
    for ax, d in enumerate(imap):
        if d == -1:
            continue
        if not 0 <= d < rank:
            raise GraphError(f"{where}: imap {AXES[ax]}->{d} is not a dimension of shape {list(tshape)}")
        if d in used:
            raise GraphError(
                f"{where}: grid axes {used[d]} and {AXES[ax]} both split dimension {d}; "
                "map each dimension from at most one grid axis"
            )
        used[d] = AXES[ax]
        if tile[d] % grid[ax]:
            raise GraphError(
                f"{where}: dimension {d} of shape {list(tshape)} (size {tile[d]}) is not divisible "
                f"by grid.{AXES[ax]}={grid[ax]}; choose a grid size that divides it"
            )
        tile[d] //= grid[ax]
    if fmap != -1:
        if not 0 <= fmap < rank:
            raise GraphError(f"{where}: fmap={fmap} is not a dimension of shape {list(tshape)}")
        if tile[fmap] % forloop:
            raise GraphError(
                f"{where}: dimension {fmap} of the block tile {tile} (size {tile[fmap]}) is not "
                f"divisible by the for-loop range {forloop}; choose a range that divides it"
            )
        tile[fmap] //= forloop
    return tuple(tile)


def _sources_first(first: Iterable[Node], tops: Iterable[Node]) -> tuple[Node, ...]:
    """``first`` in order, then every node ``tops`` depend on (``Node.walk``: sources before
    users), each once: a graph's node list."""
    seen: set[Node] = set()
    order: list[Node] = []
    for n in first:
        seen.add(n)
        order.append(n)
    for t in tops:
        for n in t.walk():
            if n not in seen:
                seen.add(n)
                order.append(n)
    return tuple(order)


@dataclass(frozen=True)
class BlockOutput:
    """An output saver: block results concatenated along ``omap`` dimensions."""

    node: Node
    omap: MapT


@dataclass(frozen=True, eq=False)
class BlockGraph:
    """What one thread block of a graph-defined kernel computes (see module docstring)."""

    grid: GridT
    threads: int
    forloop: int
    inputs: tuple[tuple[tuple[int, ...], DType], ...]
    outputs: tuple[BlockOutput, ...]
    key: str = field(init=False, repr=False)
    #: :attr:`nodes`, walked once (the graph is immutable); the search's cost model asks for
    #: it tens of thousands of times a second
    _nodes: tuple[Node, ...] = field(init=False, repr=False, compare=False, default=())
    #: :attr:`phases`, computed once (by :func:`check_block_graph`, which needs them too)
    _phases: dict[Node, bool] = field(init=False, repr=False, compare=False,
                                      default_factory=dict)

    def __post_init__(self) -> None:
        text = "|".join([
            "x".join(map(str, self.grid)), str(self.threads), str(self.forloop),
            ";".join(f"{'x'.join(map(str, s))}:{d.value}" for s, d in self.inputs),
            ";".join(f"{o.node.key}@{o.omap}" for o in self.outputs),
        ])
        object.__setattr__(self, "key", hashlib.sha256(text.encode()).hexdigest()[:32])
        check_block_graph(self)

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BlockGraph) and other.key == self.key

    @property
    def nodes(self) -> list[Node]:
        """Every block node, sources before users (deterministic order; a fresh list)."""
        if not self._nodes:
            object.__setattr__(self, "_nodes", _sources_first((), [o.node for o in self.outputs]))
        return list(self._nodes)

    @property
    def phases(self) -> dict[Node, bool]:
        """:func:`block_phases` of :attr:`nodes`: for each node, whether it is computed after
        the for-loop (a fresh dict)."""
        if not self._phases:
            object.__setattr__(self, "_phases", block_phases(self.nodes))
        return dict(self._phases)

    def output_shape(self, o: BlockOutput) -> tuple[int, ...]:
        s = list(o.node.shape)
        for ax, d in enumerate(o.omap):
            if d != -1:
                s[d] *= self.grid[ax]
        return tuple(s)

    def output_types(self) -> list[tuple[tuple[int, ...], DType]]:
        return [(self.output_shape(o), o.node.dtype) for o in self.outputs]


def block_phases(nodes: Iterable[Node], after: dict[Node, bool] | None = None) -> dict[Node, bool]:
    """For each block node: True if it is computed after the for-loop (past an accumulator).

    Raises if an op mixes loop and post-loop operands or an accumulator is applied twice.
    ``after`` may hold the phases of earlier nodes (incremental use by the builder); it is
    updated in place and returned.
    """
    after = {} if after is None else after
    for n in nodes:
        if n in after:
            continue
        if n.op == ITER:
            after[n] = False
            continue
        srcs = [after[s] for s in n.src]
        if n.op == "accum":
            if srcs[0]:
                raise GraphError(
                    "accum: its input is already accumulated; every path from an input "
                    "iterator to an output passes through exactly one accumulator"
                )
            after[n] = True
            continue
        if len(set(srcs)) > 1:
            raise GraphError(
                f"{n.op}: mixes a per-iteration tile with an accumulated one; accumulate both "
                "operands (or neither) before combining them"
            )
        after[n] = srcs[0]
    return after


def loop_invariant(bg: BlockGraph) -> set[Node]:
    """The computed (non-iterator, non-accumulator) nodes of ``bg`` whose value is the same in
    every iteration of its for-loop: each operand is an iterator with fmap -1 or such a node.
    Empty when the loop has one iteration (nothing to hoist). Codegen computes them once
    before the loop; the cost model charges them once."""
    out: set[Node] = set()
    if bg.forloop <= 1:
        return out
    for n in bg.nodes:
        if n.op in (ITER, "accum"):
            continue
        if all((s.op == ITER and s.attr("fmap") == -1) or s in out for s in n.src):
            out.add(n)
    return out


def invariant_mean(n: Node) -> bool:
    """``n`` is a plain mean accumulator (no fold) of a loop-invariant iterator tile (``fmap``
    -1): every iteration adds the same tile, so its value is that tile (an epilogue operand,
    such as a bias added after the loop)."""
    x = n.src[0] if n.src else None
    return (n.op == "accum" and n.attr("kind") == "mean" and n.attr("fold") is None
            and x is not None and x.op == ITER and x.attr("fmap") == -1)


def elementwise_tree(bg: BlockGraph, n: Node) -> tuple[list[Node], list[Node]] | None:
    """The expression of elementwise ops (each with a C expression) rooted at block node
    ``n``, every node of ``n``'s shape and, below ``n``, read only inside the expression: its
    iterator leaves (in node order) and inner ops; None when anything else is below ``n``
    or ``n`` is no such op."""
    readers: dict[Node, set[Node]] = {}
    for x in bg.nodes:
        for s in x.src:
            readers.setdefault(s, set()).add(x)
    outs = {o.node for o in bg.outputs}
    leaves: set[Node] = set()
    inner: list[Node] = []
    stack, seen = [n], {n}
    while stack:
        x = stack.pop()
        if x.op == ITER:
            leaves.add(x)
            continue
        d = REGISTRY.get(x.op)
        if d is None or not d.elementwise or d.c_expr is None or x.shape != n.shape \
                or (x is not n and x in outs):
            return None
        if x is not n:
            inner.append(x)
        for s in x.src:
            if s not in seen:
                seen.add(s)
                stack.append(s)
    tree = {n, *inner}
    if any(not readers.get(x, set()) <= tree for x in (*inner, *leaves)):
        return None
    order = {x: i for i, x in enumerate(bg.nodes)}
    return sorted(leaves, key=order.__getitem__), inner


#: a loop streams weights when it runs at least this many iterations
STREAM_MIN_ITERATIONS = 4


def streams_weights(bg: BlockGraph) -> bool:
    """``bg`` loops at least :data:`STREAM_MIN_ITERATIONS` times and a matmul reads a tile
    that changes every iteration as its B operand: weights streamed through the block, whose
    time is DRAM's. The autotuner gives such a loop its streaming candidates and the GPU
    stage measures its sizes' fullest wave first."""
    return bg.forloop >= STREAM_MIN_ITERATIONS and any(
        n.op == "matmul" and n.src[1].op == ITER and n.src[1].attr("fmap") != -1
        for n in bg.nodes)


def check_block_graph(bg: BlockGraph) -> None:
    if any(v < 1 for v in bg.grid) or len(bg.grid) != 3:
        raise GraphError(f"block graph: grid {list(bg.grid)} must be three positive sizes")
    if bg.forloop < 1:
        raise GraphError(f"block graph: for-loop range {bg.forloop} must be >= 1")
    if not 1 <= bg.threads <= 1024:
        raise GraphError(f"block graph: threads={bg.threads} must be in 1..1024")
    if not bg.outputs:
        raise GraphError("block graph: no output saver; add one with output(tile, omap=...)")
    nodes = bg.nodes
    for n in nodes:
        if n.op == ITER:
            i = n.attr("input")
            if not 0 <= i < len(bg.inputs):
                raise GraphError(f"iter: input index {i} out of range ({len(bg.inputs)} kernel inputs)")
            shape, dtype = bg.inputs[i]
            tile = iter_tile_shape(shape, n.attr("imap"), n.attr("fmap"), bg.grid, bg.forloop,
                                   f"iter of input {i}")
            if tile != n.shape or dtype != n.dtype:
                raise GraphError(f"iter of input {i}: declared tile {n.dtype}{list(n.shape)} but "
                                 f"the maps give {dtype}{list(tile)}")
        elif n.op in STRUCTURAL:
            raise GraphError(f"{n.op} nodes are not allowed inside a block graph")
        elif BLOCK not in get_op(n.op).levels:
            raise GraphError(f"{n.op} is not allowed at the block level")
    phases = block_phases(nodes)
    object.__setattr__(bg, "_phases", phases)  # (BlockGraph.phases: kept, never handed out)
    for k, o in enumerate(bg.outputs):
        if not phases[o.node]:
            raise GraphError(
                f"output saver {k}: its tile ({o.node.op}) is not accumulated; every path from an "
                "input iterator to an output needs exactly one accum"
            )
        rank = len(o.node.shape)
        used: set[int] = set()
        for ax, d in enumerate(o.omap):
            if d == -1:
                if bg.grid[ax] > 1:
                    raise GraphError(
                        f"output saver {k}: grid.{AXES[ax]}={bg.grid[ax]} > 1 but omap leaves it "
                        "unmapped, so blocks would overwrite each other; map it to an output dimension"
                    )
                continue
            if not 0 <= d < rank:
                raise GraphError(f"output saver {k}: omap {AXES[ax]}->{d} is not a dimension of the "
                                 f"tile {list(o.node.shape)}")
            if d in used:
                raise GraphError(f"output saver {k}: two grid axes map to output dimension {d}")
            used.add(d)


def make_iter(bg_inputs: Sequence[tuple[tuple[int, ...], DType]], i: int, imap: MapT, fmap: int,
              grid: GridT, forloop: int) -> Node:
    if not 0 <= i < len(bg_inputs):
        raise GraphError(f"iter: input index {i} out of range ({len(bg_inputs)} kernel inputs)")
    shape, dtype = bg_inputs[i]
    tile = iter_tile_shape(shape, imap, fmap, grid, forloop, f"iter of input {i} {list(shape)}")
    return node(ITER, (), (("input", i), ("imap", imap), ("fmap", fmap)), tile, dtype)


def resized_block(bg: BlockGraph, grid: GridT, forloop: int,
                  inputs: Sequence[tuple[tuple[int, ...], DType]] | None = None) -> BlockGraph:
    """``bg``'s ops on another grid and loop range (and, with ``inputs``, other kernel input
    shapes): every iterator's tile recomputed from its maps, every op rebuilt on the new
    tiles, the savers' maps kept. Raises :class:`GraphError` when a size does not divide or
    an op refuses the new tiles. (The search's size variants and codegen's block coarsening.)"""
    sig = tuple(inputs) if inputs is not None else bg.inputs
    new: dict[Node, Node] = {}
    for b in bg.nodes:
        if b.op == ITER:
            new[b] = make_iter(sig, b.attr("input"), b.attr("imap"), b.attr("fmap"), grid, forloop)
        else:
            new[b] = make_op(b.op, [new[s] for s in b.src], b.attr_dict, BLOCK)
    return BlockGraph(grid, bg.threads, forloop, sig,
                      tuple(BlockOutput(new[o.node], o.omap) for o in bg.outputs))


# ---------------------------------------------------------------- kernel graphs

def make_kernel(bg: BlockGraph, srcs: Sequence[Node]) -> list[Node]:
    """A graph-defined kernel node over ``srcs``; returns one ``get`` node per output."""
    sig = tuple((s.shape, s.dtype) for s in srcs)
    if sig != bg.inputs:
        raise GraphError(
            "graph-defined kernel: its inputs "
            f"{[f'{d}{list(s)}' for s, d in sig]} differ from the block graph's signature "
            f"{[f'{d}{list(s)}' for s, d in bg.inputs]}"
        )
    kn = node(KERNEL_OP, tuple(srcs), (("graph", bg),), (), bg.outputs[0].node.dtype)
    return [node(GET, (kn,), (("index", i),), s, d) for i, (s, d) in enumerate(bg.output_types())]


@dataclass(frozen=True, eq=False)
class KernelGraph:
    """A μGraph at the kernel level: named inputs and an ordered tuple of outputs."""

    inputs: tuple[Node, ...]
    outputs: tuple[Node, ...]
    key: str = field(init=False, repr=False)
    #: :attr:`nodes`, walked once (the graph is immutable)
    _nodes: tuple[Node, ...] = field(init=False, repr=False, compare=False, default=())

    def __post_init__(self) -> None:
        if not self.outputs:
            raise GraphError("kernel graph has no outputs; mark results with g.output(...)")
        names = [n.attr("name") for n in self.inputs]
        if len(set(names)) != len(names):
            raise GraphError(f"kernel graph: input names must be unique, got {names}")
        allowed = set(self.inputs)
        for n in self.nodes:
            if n.op == INPUT and n not in allowed:
                raise GraphError(f"kernel graph: input {n.attr('name')!r} is used but not declared")
            if n.op == ITER:
                raise GraphError("kernel graph: iter nodes belong inside block graphs")
        text = "|".join([",".join(n.key for n in self.inputs), ",".join(n.key for n in self.outputs)])
        object.__setattr__(self, "key", hashlib.sha256(text.encode()).hexdigest()[:32])

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KernelGraph) and other.key == self.key

    @property
    def nodes(self) -> list[Node]:
        """Every kernel-level node reachable from the outputs (plus unused inputs), sources
        first (a fresh list)."""
        if not self._nodes:
            object.__setattr__(self, "_nodes", _sources_first(self.inputs, self.outputs))
        return list(self._nodes)

    @property
    def kernels(self) -> list[Node]:
        """Kernel-level compute nodes (registry ops and graph-defined kernels), in order."""
        return [n for n in self.nodes if n.op not in (INPUT, GET)]

    def __str__(self) -> str:
        from mirage_formal.ir.text import to_text

        return to_text(self)


def rebuilt(graph: KernelGraph, bind: Mapping[Node, Node]) -> tuple[Node, ...]:
    """``graph``'s outputs rebuilt with each of its inputs replaced by ``bind[input]`` (every
    input must be bound); graph-defined kernels keep their block graphs."""
    memo: dict[Node, Node] = {}
    gets: dict[Node, list[Node]] = {}
    for n in graph.nodes:
        if n.op == INPUT:
            memo[n] = bind[n]
        elif n.op == KERNEL_OP:
            gets[n] = make_kernel(n.attr("graph"), [memo[s] for s in n.src])
        elif n.op == GET:
            memo[n] = gets[n.src[0]][n.attr("index")]
        else:
            memo[n] = make_op(n.op, [memo[s] for s in n.src], n.attr_dict, KERNEL)
    return tuple(memo[o] for o in graph.outputs)
