"""Enumeration of μGraphs: kernel graphs, and block graphs inside graph-defined kernels.

Depth-first and deterministic. At both levels an op is added only if its key
``(input positions sorted descending, op type, detail)`` is larger than the previous op's
key; every DAG has exactly one topological order with increasing keys (the greedy order), so
each DAG is produced once and permutations are never visited (docs/search.md, "Internals").

Kernel level: a move is a pre-defined kernel op on existing tensors, or a graph-defined kernel
over a *subset* of existing tensors (subsets of size 1..max_kernel_inputs, in increasing
position order). A kernel graph is complete when the dangling tensors it produced are exactly
the program's outputs (shapes, dtypes and index labels), or all but some of those the
program's own ops also read (which may be tensors its other kernels read), and every input the
program uses is consumed.

Block level, for one kernel: a *map configuration* binds up to ``max_grid_axes`` grid axes and
the for-loop to index labels (``labels.py``); that fixes every ``imap`` and ``fmap``. Axes are
assigned to x, y, z in label order, so permuted grids are not revisited. Grid sizes and loop
ranges are *factored out*: the block-op structure is enumerated once per map configuration on
a representative size, and a complete candidate is expanded into its size variants (the
preset's grid sizes and ranges that divide), which are ranked by cost and verified best-first
(``state.py``). Block ops follow the canonical order after the iterators; an accumulator ends
the loop phase of its operand; when F = 1 accumulators apply to iterators only (moving an
identity accumulator along a chain gives the same function), and when F > 1 only to tiles that
vary with the loop. A block graph is complete when no loop-phase tensor dangles and 1 to
``max_kernel_outputs`` accumulated tensors dangle; each is saved with every omap that maps each
grid axis to the tile dimension carrying its label (or, for a label the block reduced away, to a
free dimension: a concatenation of partial results).

Pruning tiers on every new tensor, in order: shape (the op's shape rule or label consistency
fails), dedup (the hash-consed node already exists in this graph), bound (the dangling tensors
cannot be consumed in the ops left), oracle (the pruner says no). Calls to the pruner are
memoised by the searcher (``state.py``).

Imports ``ir`` and the rest of ``search`` only.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
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
    resized_block,
)
from mirage_formal.ir.node import Node
from mirage_formal.ir.ops import BLOCK, KERNEL, REGISTRY
from mirage_formal.search.canon import copy_only
from mirage_formal.search.cone_seeds import cone_joined_candidates, cut_joined_candidates
from mirage_formal.search.config import SearchConfig
from mirage_formal.search.labels import (
    UNIT,
    Label,
    Labels,
    fold_choices,
    infer,
    output_labels,
    precheck,
    program_labels,
)
from mirage_formal.search.loop_seeds import loop_lifted_candidates

KeepFn = Callable[[Node, "tuple[Node, ...] | None", "tuple[int, int, int] | None", "int | None"], bool]


class Stop(Exception):
    """Raised inside the enumeration when a budget is spent."""


@dataclass
class Stats:
    """Counters per pruning tier (see the module docstring)."""

    visited: int = 0
    pruned_shape: int = 0
    pruned_dedup: int = 0
    pruned_bound: int = 0
    pruned_oracle: int = 0
    pruned_copy: int = 0
    #: map configurations whose iterator tiles alone, at the smallest tiles any size variant
    #: gives them, exceed shared memory (every block graph of them would be dropped)
    pruned_smem: int = 0
    #: complete candidates not verified: estimated slower than the input program's own lowering
    pruned_cost: int = 0
    candidates: int = 0
    variants: int = 0
    verified: int = 0
    accepted: int = 0
    rejected: int = 0
    oracle_calls: int = 0
    oracle_cache_hits: int = 0
    by_level: dict[str, int] = field(default_factory=dict)
    pruner_tiers: dict[str, int] = field(default_factory=dict)
    """The pruner's own per-tier counters (``tier_counts()``, when it has one), summed over units."""

    def add(self, other: Stats) -> None:
        for k, v in vars(other).items():
            if isinstance(v, int):
                setattr(self, k, getattr(self, k) + v)
        for k, v in other.by_level.items():
            self.by_level[k] = self.by_level.get(k, 0) + v
        for k, v in other.pruner_tiers.items():
            self.pruner_tiers[k] = self.pruner_tiers.get(k, 0) + v

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass(frozen=True)
class MapConfig:
    """Grid axes (label, size, imap dim per input) and the loop (label, range, fmaps)."""

    axes: tuple[tuple[Label, int, tuple[int, ...]], ...]
    loop: tuple[Label, int, tuple[int, ...]] | None

    @property
    def grid(self) -> tuple[int, int, int]:
        g = [a[1] for a in self.axes] + [1] * (3 - len(self.axes))
        return (g[0], g[1], g[2])

    @property
    def forloop(self) -> int:
        return self.loop[1] if self.loop else 1

    def imap(self, i: int) -> tuple[int, int, int]:
        m = [a[2][i] for a in self.axes] + [-1] * (3 - len(self.axes))
        return (m[0], m[1], m[2])

    def fmap(self, i: int) -> int:
        return self.loop[2][i] if self.loop else -1


#: parts a unit whose first move is a pre-defined op is split into (Move.part)
OP_UNIT_PARTS = 3
#: parts a graph-defined kernel's unit is split into when the space has one kernel op: its
#: work is the kernel's own block search (nothing follows the kernel), so the parts take its
#: second block ops round robin (BlockSearch.part) and repeat only the first level. ntrans
#: b=1 (one kernel op) had two units of more than 78 s each on 16 cores (2026-11-24). On two
#: cores (its whole space; longest unit, total unit seconds): unsplit 118 s; split 4 ways by
#: the first block op 95 s (90 s, 190 s); by the second, 4 parts 85 s (46, 169), 8 parts 65 s
#: (45, 129); by the third, 8 parts 76 s (29, 151): more repeated work for a shorter longest
#: unit. The second level, 8 parts: the least total work, and a longest unit inside the 90 s
#: that 16 cores are given
ONE_KERNEL_UNIT_PARTS = 8
#: block ops above the level at which such a unit's parts divide the block search
ONE_KERNEL_SPLIT_DEPTH = 1
#: the seeds (loop lifts and cone joins, :meth:`Enumerator.loop_seeds`) of the last program
#: and space this process enumerated: a worker builds an enumerator per unit, and the cone
#: joins rank their cones' size variants (~0.1-1 s)
_SEEDS: dict[tuple[str, str], list[KernelGraph]] = {}
#: registry labels of row-local ops (norms over the last dimension, unary elementwise ops):
#: applied by the program to its inputs, they are its prologue, whose units go first
#: (Enumerator.moves). Measured on qknorm_gqa b=1, 2 cores, 240 s (benchmarks/results/
#: search_order_qknorm.md): with them first the search accepts a two-kernel μGraph (rms_norm(Q),
#: then one kernel fusing rms_norm(V) into the attention loop) after 36 s; after the
#: graph-defined kernels it does not reach them within the budget
PROLOGUE_LABELS = ("norm", "same")


@dataclass(frozen=True)
class Move:
    """A top-level (first) kernel-level move: the unit of parallel work and of checkpoints."""

    kind: str                       # "op", "kernel", "direct" (the program's own lowering) or
    #                                 "seed" (a loop lift, search.loop_seeds)
    args: tuple[int, ...]
    op: str = ""
    attrs: tuple[tuple[str, Any], ...] = ()
    config: MapConfig | None = None
    #: a graph-defined kernel's unit is split into ``parts`` units by the kernel's own block
    #: graphs: every part enumerates them (cheap), and part p explores, after the kernel, only
    #: the completions k with k % parts == p (round robin in enumeration order). Every μGraph
    #: of the unit starts with exactly one of them, so the parts partition the unit's space.
    #: The work of a unit lies almost all after its first kernel (on gqa b=1's heaviest unit,
    #: 61k block searches of later kernels against one of the first), which is why splitting by
    #: the first kernel's first block op (as before 2026-11-23) left one part with nearly all
    #: of it: 56 s of a 610 s space in one unit, the bound for 14 workers (now 22.6 s). Every
    #: part repeats the kernel's enumeration, hence n parts, not more
    #: A pre-defined op's unit is split the same way over the moves that follow the op (part p
    #: runs the moves with index j % parts == p; only part 0 completes the op alone).
    #: In a space of one kernel op nothing follows the kernel: there part p takes the kernel's
    #: second block ops with index j % parts == p (ONE_KERNEL_UNIT_PARTS, BlockSearch.part).
    part: int = 0
    parts: int = 1

    def describe(self) -> str:
        if self.kind == "direct":
            return "direct lowering"
        if self.kind == "seed":
            return f"loop seed {self.args[0]}"
        sp = f" part {self.part + 1}/{self.parts}" if self.parts > 1 else ""
        if self.kind == "op":
            return f"{self.op}{self.args}{sp}"
        assert self.config is not None
        ax = ",".join(f"{lab}:{s}" for lab, s, _ in self.config.axes)
        lp = f"{self.config.loop[0]}:{self.config.loop[1]}" if self.config.loop else "-"
        return f"kernel{self.args} grid[{ax}] loop[{lp}]{sp}"


_UNSEEN: Any = object()


def _desc(args: tuple[int, ...]) -> tuple[int, ...]:
    """Operand positions in descending order (the first element of a move's canonical key)."""
    if len(args) == 1:
        return args
    if len(args) == 2:
        return args if args[0] >= args[1] else (args[1], args[0])
    return tuple(sorted(args, reverse=True))


def _need(loop_d: int, post_d: int, kout: int) -> int:
    """Fewest block ops that leave no loop-phase tensor and at most ``kout`` accumulated ones
    dangling: each op consumes at most one net dangling tensor, and consuming the loop-phase
    ones ends in an accumulator that adds one accumulated tensor."""
    return loop_d + max(0, post_d + 1 - kout) if loop_d else max(0, post_d - kout)


_ATTR_KEYS: dict[tuple[tuple[str, Any], ...], str] = {}


def _attr_key(attrs: dict[str, Any]) -> str:
    t = tuple(sorted(attrs.items()))
    k = _ATTR_KEYS.get(t)
    if k is None:
        k = _ATTR_KEYS[t] = repr(t)
    return k


def _canonical_args(n: int, k: int, m0: int) -> Iterator[tuple[int, ...]]:
    """Operand position tuples of length ``k`` over ``range(n)`` whose largest entry is >= m0,
    in the lexicographic order of ``itertools.product(range(n), repeat=k)``."""
    if k == 1:
        for i in range(m0, n):
            yield (i,)
    elif k == 2:
        for i in range(n):
            for j in range(0 if i >= m0 else m0, n):
                yield (i, j)
    else:
        for args in itertools.product(range(n), repeat=k):
            if max(args) >= m0:
                yield args


def _mid(xs: Sequence[int]) -> int:
    return xs[len(xs) // 2]


def _dim_with(labels: Labels, lab: Label) -> int:
    for d, x in enumerate(labels):
        if x == lab:
            return d
    return -1


def _attr_choices(program: KernelGraph, level: str) -> dict[str, list[dict[str, Any]]]:
    """Attribute sets each registry op may take: those the program uses, or the defaults."""
    seen: dict[str, list[dict[str, Any]]] = {}
    for n in program.nodes:
        if n.op in REGISTRY:
            d = n.attr_dict
            lst = seen.setdefault(n.op, [])
            if d not in lst:
                lst.append(d)
    return seen


class Enumerator:
    """The depth-first enumeration of one program's μGraph space (see the module docstring)."""

    def __init__(self, program: KernelGraph, config: SearchConfig, keep: KeepFn,
                 on_candidate: Callable[[KernelGraph, bool], None], tick: Callable[[], None],
                 stats: Stats) -> None:
        self.program = program
        self.cfg = config
        self.keep = keep
        self.on_candidate = on_candidate
        self.tick = tick
        self.stats = stats
        #: block ops built so far, by (op, operands, attributes): the same op on the same tiles
        #: recurs across DFS branches; nodes are immutable and interned, so a hit is that node
        #: (None: the op's shape rule refused these operands)
        self.block_nodes: dict[tuple[str, tuple[Node, ...], str], Node | None] = {}
        labs = program_labels(program)
        self.in_labels = [labs[n] for n in program.inputs]
        self.out_labels = [labs[n] for n in program.outputs]
        # dimensions the program normalises whole rows over: no block can finish such a row when
        # a grid axis splits it (there is no cross-block rms), so those units go last
        self.norm_labels = {labs[n.src[0]][-1] for n in program.nodes if n.op == "rms_norm"}
        self.out_types = [(n.shape, n.dtype) for n in program.outputs]
        #: how many of the program's outputs other ops of it also read (a decoder region's q,
        #: returned and multiplied by the key cache): a candidate's tensor for such an output
        #: may be read by its other kernels too, so it need not dangle
        consumed = {s for n in program.nodes for s in n.src}
        self.inner_outputs = sum(1 for o in set(program.outputs) if o in consumed)
        used: set[Node] = set()
        for o in program.outputs:
            used.update(x for x in o.walk() if x.op == INPUT)
        self.used_inputs = [i for i, n in enumerate(program.inputs) if n in used]
        self.attrs = _attr_choices(program, KERNEL)
        self._keyed_attrs: dict[tuple[str, int], list[tuple[dict[str, Any], str]]] = {}
        self.kernel_ops = sorted(config.kernel_ops)
        self.block_ops = sorted(config.block_ops)
        self.ktype = {name: i for i, name in enumerate(self.kernel_ops)}
        self.ktype["kernel"] = len(self.kernel_ops)
        self.btype = {name: i for i, name in enumerate(self.block_ops)}
        self.btype["accum"] = len(self.block_ops)
        # kernel-level state (push/pop)
        self.t: list[Node] = list(program.inputs)
        self.lab: list[Labels] = list(self.in_labels)
        self.produced: list[bool] = [False] * len(self.t)
        self.uses: list[int] = [0] * len(self.t)
        self.last: tuple[Any, ...] = ()
        self.n_ops = 0
        self.n_gk = 0
        self._direct: KernelGraph | None = None
        self._direct_done = False
        self._loop_seeds: list[KernelGraph] | None = None

    # ------------------------------------------------------------ attribute choices

    def op_attrs_keyed(self, name: str, first: Node) -> list[tuple[dict[str, Any], str]]:
        """:meth:`_op_attrs` with each choice's attribute key, for an op whose first operand is
        ``first`` (cached: the choices depend only on the op and, for reductions, that
        operand's rank)."""
        ck = (name, len(first.shape) if REGISTRY[name].label == "reduce" else -1)
        got = self._keyed_attrs.get(ck)
        if got is None:
            got = self._keyed_attrs[ck] = [(at, _attr_key(at)) for at in self._op_attrs(name, [first])]
        return got

    def _op_attrs(self, name: str, srcs: Sequence[Node]) -> list[dict[str, Any]]:
        if name in self.attrs:
            return self.attrs[name]
        spec = REGISTRY[name]
        if spec.label == "reduce":
            return [{"axis": -1 - a, "keepdims": True} for a in range(len(srcs[0].shape))]
        if any(a.default is None and not a.optional for a in spec.attrs):
            return []  # e.g. mul_scalar with no scalar in the program
        return [{}]

    # ------------------------------------------------------------ kernel level

    def moves(self) -> list[Move]:
        """The first-move choices from the empty kernel graph (units of work), most promising
        first: the direct lowering; the loop seeds (:meth:`loop_seeds`); the program's own
        *prologue* ops as pre-defined kernels (a row-local op — a norm or a unary elementwise
        op — that the program applies to its inputs, with the same attributes: what follows it
        is the rest of the program, often a
        familiar fused kernel, e.g. attention after QK-norm's rms_norm(Q)); then graph-defined
        kernels whose grid splits no normalised row, over more inputs and with more grid axes
        before smaller ones; then the other pre-defined ops (a deterministic order, so resume can
        skip by index)."""
        ms = list(self._kernel_moves())
        direct = [Move("direct", ())] if self.direct_lowering() is not None else []
        norm = self.norm_labels
        inputs = list(self.program.inputs)
        prologue = {(n.op, tuple(inputs.index(s) for s in n.src), _attr_key(n.attr_dict))
                    for n in self.program.nodes
                    if n.op in REGISTRY and REGISTRY[n.op].label in PROLOGUE_LABELS
                    and n.src and all(s.op == INPUT for s in n.src)}

        def promise(im: tuple[int, Move]) -> tuple[int, ...]:
            i, m = im
            if m.kind == "op" and (m.op, m.args, _attr_key(dict(m.attrs))) in prologue:
                return (0, -1, 0, 0, 0, i)
            if m.kind != "kernel" or m.config is None:
                return (1, 0, 0, 0, 0, i)
            splits_norm = sum(1 for lab, _, _ in m.config.axes if lab in norm)
            return (0, splits_norm, -len(m.args), -len(m.config.axes), int(m.config.loop is None), i)

        ordered = [m for _, m in sorted(enumerate(ms), key=promise)]
        split = []
        for m in ordered:
            # kernels over more inputs have many more block graphs: split them into more parts;
            # only when later kernels can follow (a space of one kernel op has no work after the
            # kernel to divide: every part would repeat the whole unit's enumeration, its
            # pruner queries included, for a 1/n share of its candidates; on ntrans, whose
            # units are bound by the pruner's ~60 ms queries, neither finishes more units on 2
            # cores: 1/28 in 180 s split, 1/20 in 158 s unsplit)
            # A pre-defined op first: everything else of the program follows it, split round
            # robin over the moves after it (on 16 cores mha b=1, gqa b=8 and mqa b=8 each had
            # one unit of 1195 still running at the budget; these units come last in the
            # order, so likely one of them — not yet confirmed).
            n = 1
            if self.cfg.max_kernel_ops > 1:
                n = len(m.args) if m.kind == "kernel" else OP_UNIT_PARTS if m.kind == "op" else 1
            elif m.kind == "kernel":
                n = ONE_KERNEL_UNIT_PARTS
            split += ([dataclasses.replace(m, part=j, parts=n) for j in range(n)]
                      if n > 1 else [m])
        seeds = [Move("seed", (j,)) for j in range(len(self.loop_seeds()))]
        return direct + seeds + split

    def loop_seeds(self) -> list[KernelGraph]:
        """The program's loop lifts (``search.loop_seeds``: one kernel whose for-loop walks a
        contracted or summed dimension), one unit each right after the direct lowering: they
        reach deep fusions (softcapped attention's 13 block ops) that the enumeration finds
        late or not at all within a budget, and each costs a verification (up to ~15 s on the
        attention rows at b=8 on 2 cores), so they run in parallel with the other units rather
        than before them. A program of several outputs also gets its cone joins
        (``search.cone_seeds``: each output's cone lifted alone, the cheapest choice per cone
        joined), after the loop lifts, and a chain of products its cut joins where they are
        estimated cheaper than every other seed (:meth:`_cut_seeds`)."""
        if self._loop_seeds is None:
            key = (self.program.key, repr(self.cfg))
            seeds = _SEEDS.get(key)
            if seeds is None:
                seeds = (loop_lifted_candidates(self.program, self.cfg.grid_sizes,
                                                self.cfg.forloop, self.cfg.max_grid_axes,
                                                self.cfg.threads)
                         + cone_joined_candidates(self.program, self.cfg, self._cheapest)
                         if self.cfg.max_graph_kernels > 0 else [])
                seeds += self._cut_seeds(seeds) if self.cfg.max_graph_kernels > 0 else []
                _SEEDS.clear()  # (one program's at a time: a process searches one job)
                _SEEDS[key] = seeds
            self._loop_seeds = seeds
        return self._loop_seeds

    def _cut_seeds(self, seeds: list[KernelGraph]) -> list[KernelGraph]:
        """The program's cut joins (``search.cone_seeds.cut_joined_candidates``) estimated
        cheaper than every other seed: an attention cut at its scores (materialised between
        two kernels) is far behind its loop lift, and each seed costs a verification (seconds
        at b=8), so only a chain no other seed fuses (a decoder's MLP down projection) gets
        them."""
        cuts = cut_joined_candidates(self.program, self.cfg, self._cheapest)
        if not cuts:
            return []
        bar = min((c[1] for g in seeds if (c := self._cheapest(g)) is not None),
                  default=math.inf)
        return [g for g in cuts if (c := self._cheapest(g)) is not None and c[1] < bar]

    def _cheapest(self, graph: KernelGraph) -> tuple[KernelGraph, float] | None:
        """``graph``'s cheapest size variant in this space that fits in shared memory, and its
        estimate (the search's own ranking of a candidate, ``state.ranked_variants``)."""
        from mirage_formal.search.state import ranked_variants  # (state imports this module)

        ranked = ranked_variants(self.cfg, graph)
        return (ranked[0][0], ranked[0][1].seconds) if ranked else None

    def direct_lowering(self) -> KernelGraph | None:
        """The program with each of its ops as one pre-defined kernel, when the space's
        ``kernel_ops`` hold all of them (a derived space always does), else None."""
        if self._direct_done:
            return self._direct
        self._direct_done = True
        ops = {n.op for n in self.program.nodes if n.op != INPUT}
        if not ops <= set(self.cfg.kernel_ops):
            return None
        memo: dict[Node, Node] = {}
        for n in self.program.nodes:
            memo[n] = n if n.op == INPUT else make_op(n.op, [memo[s] for s in n.src], n.attr_dict, KERNEL)
        self._direct = KernelGraph(self.program.inputs, tuple(memo[o] for o in self.program.outputs))
        return self._direct

    @property
    def direct_key(self) -> str | None:
        d = self.direct_lowering()
        return None if d is None else d.key

    def _kernel_moves(self) -> Iterator[Move]:
        n = len(self.t)
        cfg = self.cfg
        if self.n_ops >= cfg.max_kernel_ops:
            return
        for name in self.kernel_ops:
            spec = REGISTRY[name]
            lo, hi = spec.arity
            for k in range(lo, hi + 1):
                for args in itertools.product(range(n), repeat=k):
                    if k == 2 and (args[0] == args[1] or (spec.commutative and args[0] > args[1])):
                        continue
                    for a in self._op_attrs(name, [self.t[i] for i in args]):
                        yield Move("op", args, name, tuple(sorted(a.items())))
        if self.n_gk >= cfg.max_graph_kernels:
            return
        # the last kernel op must consume every tensor still waiting to be consumed
        need: set[int] = set()
        if self.n_ops + 1 == cfg.max_kernel_ops:
            need = {i for i in self.used_inputs if self.uses[i] == 0}
            need |= {i for i, (p, u) in enumerate(zip(self.produced, self.uses, strict=True)) if p and u == 0}
        for k in range(1, min(cfg.max_kernel_inputs, n) + 1):
            for args in itertools.combinations(range(n), k):
                if not need <= set(args):
                    continue
                for mc in self._map_configs(args):
                    yield Move("kernel", args, config=mc)

    def _key_prefix(self, args: Sequence[int], typ: str) -> tuple[Any, ...]:
        return (tuple(sorted(args, reverse=True)), self.ktype[typ])

    def run_move(self, mv: Move) -> None:
        """Apply ``mv`` (if canonical here) and explore everything after it."""
        if mv.kind == "direct":
            g = self.direct_lowering()
            if g is not None:
                self.stats.candidates += 1
                self.on_candidate(g, False)
        elif mv.kind == "seed":
            seeds = self.loop_seeds()
            if mv.args[0] < len(seeds):
                self.stats.candidates += 1
                self.on_candidate(seeds[mv.args[0]], True)
        elif mv.kind == "op":
            self._apply_op(mv)
        else:
            self._apply_kernel(mv)

    def explore(self, part: int = 0, parts: int = 1) -> None:
        """Run every move from here; with ``parts`` > 1 only the moves whose index is
        ``part`` modulo ``parts`` (a split unit's share, Move.part)."""
        for j, mv in enumerate(self._kernel_moves()):
            if j % parts == part:
                self.run_move(mv)

    def _push(self, nodes: Sequence[Node], labs: Sequence[Labels], srcs: Sequence[int],
              key: tuple[Any, ...], gk: bool) -> tuple[Any, ...]:
        for i in srcs:
            self.uses[i] += 1
        self.t.extend(nodes)
        self.lab.extend(labs)
        self.produced.extend([True] * len(nodes))
        self.uses.extend([0] * len(nodes))
        saved = (self.last, len(nodes), tuple(srcs), gk)
        self.last = key
        self.n_ops += 1
        self.n_gk += int(gk)
        return saved

    def _pop(self, saved: tuple[Any, ...]) -> None:
        last, k, srcs, gk = saved
        del self.t[-k:], self.lab[-k:], self.produced[-k:], self.uses[-k:]
        for i in srcs:
            self.uses[i] -= 1
        self.last = last
        self.n_ops -= 1
        self.n_gk -= int(gk)

    def _kernel_bound_ok(self) -> bool:
        dangling = sum(1 for p, u in zip(self.produced, self.uses, strict=True) if p and u == 0)
        unused = sum(1 for i in self.used_inputs if self.uses[i] == 0)
        left = self.cfg.max_kernel_ops - self.n_ops
        per = max(1, max(2, self.cfg.max_kernel_inputs) - 1)
        return dangling + unused - len(self.out_types) <= left * per

    def _after_push(self, part: int = 0, parts: int = 1) -> None:
        self.stats.visited += 1
        self.tick()
        if not self._kernel_bound_ok():
            self.stats.pruned_bound += 1
            return
        if part == 0:  # a split unit completes its first op in one part only
            self._maybe_complete()
        self.explore(part, parts)

    def _apply_op(self, mv: Move) -> None:
        key = (*self._key_prefix(mv.args, mv.op), (mv.args, mv.attrs))
        if key <= self.last:
            return
        srcs = [self.t[i] for i in mv.args]
        try:
            n = make_op(mv.op, srcs, dict(mv.attrs), KERNEL)
        except GraphError:
            self.stats.pruned_shape += 1
            return
        if n in self.t:
            self.stats.pruned_dedup += 1
            return
        lab = infer(n, [self.lab[i] for i in mv.args])
        if lab is None:
            self.stats.pruned_shape += 1
            return
        if not self.keep(n, None, None, None):
            self.stats.pruned_oracle += 1
            return
        saved = self._push([n], [lab], mv.args, key, False)
        try:
            self._after_push(mv.part, mv.parts)
        finally:
            self._pop(saved)

    def _apply_kernel(self, mv: Move) -> None:
        prefix = self._key_prefix(mv.args, "kernel")
        if prefix < self.last[:2]:
            return
        assert mv.config is not None
        kin = tuple(self.t[i] for i in mv.args)
        final = self.n_ops + 1 == self.cfg.max_kernel_ops
        # in a one-kernel space a part is a share of the kernel's second block ops; otherwise
        # of its block graphs (Move.part)
        inner = self.cfg.max_kernel_ops == 1 and self.n_ops == 0
        bs = BlockSearch(self, kin, [self.lab[i] for i in mv.args], mv.config,
                         len(self.out_types) if final else self.cfg.max_kernel_outputs,
                         *((mv.part, mv.parts) if inner else (0, 1)))
        for k, (bg, labs) in enumerate(bs.run()):
            if not inner and k % mv.parts != mv.part:
                continue  # another part's share of this kernel's block graphs (Move.part)
            key = (*prefix, bg.key)
            if key <= self.last:
                continue
            gets = make_kernel(bg, kin)
            if any(g in self.t for g in gets):
                self.stats.pruned_dedup += 1
                continue
            if not all(self.keep(g, None, None, None) for g in gets):
                self.stats.pruned_oracle += 1
                continue
            saved = self._push(gets, labs, mv.args, key, True)
            try:
                self._after_push()
            finally:
                self._pop(saved)

    def _maybe_complete(self) -> None:
        dang = [i for i, (p, u) in enumerate(zip(self.produced, self.uses, strict=True)) if p and u == 0]
        n_out = len(self.out_types)
        if not n_out - self.inner_outputs <= len(dang) <= n_out:
            return
        if any(self.uses[i] == 0 for i in self.used_inputs):
            return
        # every dangling tensor is an output; the program's outputs that its own ops read may
        # be tensors other kernels read (``inner_outputs``): those come from the produced ones
        # that match some output's type and labels
        extra = n_out - len(dang)
        read = [i for i, (p, u) in enumerate(zip(self.produced, self.uses, strict=True))
                if p and u > 0 and any(
                    (self.t[i].shape, self.t[i].dtype) == ty and self.lab[i] == lab
                    for ty, lab in zip(self.out_types, self.out_labels, strict=True))] if extra else []
        for more in itertools.combinations(read, extra):
            for perm in itertools.permutations((*dang, *more)):
                if all((self.t[i].shape, self.t[i].dtype) == ty and self.lab[i] == lab
                       for i, ty, lab in zip(perm, self.out_types, self.out_labels, strict=True)):
                    g = KernelGraph(self.program.inputs, tuple(self.t[i] for i in perm))
                    if g.key == self.direct_key:
                        return  # the first unit ("direct") produces it
                    self.stats.candidates += 1
                    self.on_candidate(g, False)
                    return
        self.stats.pruned_shape += 1

    # ------------------------------------------------------------ map configurations

    def _map_configs(self, args: Sequence[int]) -> Iterator[MapConfig]:
        cfg = self.cfg
        shapes = [self.t[i].shape for i in args]
        labs = [self.lab[i] for i in args]
        cand: list[Label] = sorted({x for lab in labs for x in lab if x != UNIT}, key=repr)
        # per label: the dim of each input that carries it, and the grid sizes that divide
        dims = {lab: tuple(_dim_with(lb, lab) for lb in labs) for lab in cand}

        def sizes_for(lab: Label, chunk: Sequence[Sequence[int]], pool: Sequence[int]) -> list[int]:
            ds = dims[lab]
            return [s for s in pool if s > 1 and all(d == -1 or chunk_i[d] % s == 0
                                                     for d, chunk_i in zip(ds, chunk, strict=True))]

        def most_chunks(lab: Label, on_grid: bool) -> int:
            """The most chunks any size variant cuts ``lab``'s dimension into when it is also
            the loop's: a grid size of its axis (1 off the grid) times the largest loop range
            that divides what is left of it."""
            best = 1
            for g in sizes_for(lab, shapes, cfg.grid_sizes) if on_grid else [1]:
                loops = [f for f in cfg.forloop if f > 1 and all(
                    d == -1 or (shp[d] // g) % f == 0 for d, shp in zip(dims[lab], shapes, strict=True))]
                best = max(best, g * max(loops, default=1))
            return best

        for k in range(0, cfg.max_grid_axes + 1):
            for combo in itertools.combinations(cand, k):
                axes: list[tuple[Label, int, tuple[int, ...]]] = []
                ok = True
                for lab in combo:
                    vs = sizes_for(lab, shapes, cfg.grid_sizes)
                    if not vs:
                        ok = False
                        break
                    axes.append((lab, _mid(vs), dims[lab]))
                if not ok:
                    continue
                chunks = [list(s) for s in shapes]
                for _lab, size, ds in axes:
                    for i, d in enumerate(ds):
                        if d != -1:
                            chunks[i][d] //= size
                # the most each label's dimension can be divided by any size variant (grid
                # sizes of its axis times loop ranges that still divide): the smallest tiles
                gmax = {lab: max(sizes_for(lab, shapes, cfg.grid_sizes)) for lab in combo}
                if self._iter_bytes_floor(args, gmax) > cfg.smem_limit:
                    self.stats.pruned_smem += 1
                else:
                    yield MapConfig(tuple(axes), None)
                for lab in cand:
                    fs = sizes_for(lab, [tuple(c) for c in chunks], cfg.forloop)
                    if not fs:
                        continue
                    div = {**gmax, lab: most_chunks(lab, lab in gmax)}
                    if self._iter_bytes_floor(args, div) > cfg.smem_limit:
                        self.stats.pruned_smem += 1
                        continue
                    yield MapConfig(tuple(axes), (lab, _mid(fs), dims[lab]))

    def _iter_bytes_floor(self, args: Sequence[int], div: dict[Label, int]) -> float:
        """A lower bound on the shared memory of the iterator tiles of a kernel over tensors
        ``args`` whose label ``lab`` is cut into at most ``div[lab]`` chunks by grid and loop, in
        every size variant (``size_variants``): each tile is counted at its smallest. Every tile
        of a block graph counts toward ``cost.smem_bytes`` and the iterators are in every block
        graph of a map configuration, so above the limit none of them has a variant that fits.
        A dimension that an earlier kernel's grid sizes (a concatenation of partial results,
        "cat"/"part" labels) makes vary across variants counts as zero."""
        total = 0.0
        for i in args:
            shape, lab = self.t[i].shape, self.lab[i]
            if any(x[0] in ("cat", "part") for x in lab):
                continue
            size = float(self.t[i].dtype.itemsize)
            for d, x in zip(shape, lab, strict=True):
                size *= d / div.get(x, 1)
            total += size
        return total

    # ------------------------------------------------------------ size variants

    def variants(self, graph: KernelGraph) -> Iterator[KernelGraph]:
        """:func:`size_variants` of ``graph`` in this enumerator's space."""
        return size_variants(self.cfg, graph)


def size_distance(own: tuple[Sequence[int], int], other: tuple[Sequence[int], int]) -> float:
    """How far apart two sizes (grid, loop range) of one kernel are: the sum over the grid
    axes and the loop range of |log2(new / old)|. Halving the query tiles' rows is 1; moving a
    factor of two from the loop range to a grid axis (twice the KV splits, each half as long)
    is 2."""
    (g0, f0), (g1, f1) = own, other
    return sum(abs(math.log2(b / a)) for a, b in zip(g0, g1, strict=True)) + abs(math.log2(f1 / f0))


def size_variants(cfg: SearchConfig, graph: KernelGraph,
                  radius: float | None = None, vary: int | None = None) -> Iterator[KernelGraph]:
    """``graph`` rebuilt with every choice of grid sizes and loop ranges from the space
    ``cfg`` (the axes and loops it uses stay used), at most ``cfg.max_variants``: ``graph``
    itself first, then in a fixed pseudo-random order per kernel (seeded by the graph's key),
    so a cut-off list samples every kernel's every axis (a nested product cut at 256 kept the
    first kernel's first sizes: gqa's cheapest size of a structure estimated 25.1 µs instead of
    22.9).

    With ``radius``, only the sizes near ``graph``'s own: the :func:`size_distance` of every
    kernel's size from its own, summed over the kernels, at most ``radius``, and ``graph``
    itself left out (the neighbourhood a measured walk over sizes steps through; a cut-off list
    of every variant can miss it whole).

    With ``vary``, only graph-defined kernel number ``vary`` (in node order) changes size; the
    others keep their own (the nested product cut at ``max_variants`` varies the last
    kernel's sizes only: a two-kernel MLP's first kernel kept its one size in all 43)."""
    kernels = [n for n in graph.nodes if n.op not in (INPUT, GET)]
    numbers = {n: i for i, n in enumerate(n for n in kernels if n.op == KERNEL_OP)}
    budget = math.inf if radius is None else radius

    def rec(j: int, memo: dict[Node, Node], left: float = budget) -> Iterator[dict[Node, Node]]:
        if j == len(kernels):
            yield memo
            return
        n = kernels[j]
        srcs = [memo.get(s, s) for s in n.src]
        if n.op != KERNEL_OP:
            try:
                memo2 = dict(memo)
                memo2[n] = make_op(n.op, srcs, n.attr_dict, KERNEL)
            except GraphError:
                return
            yield from rec(j + 1, memo2, left)
            return
        bg: BlockGraph = n.attr("graph")
        iters = [b for b in bg.nodes if b.op == ITER]
        axis_opts: list[list[int]] = []
        for ax in range(3):
            if bg.grid[ax] == 1:
                axis_opts.append([1])
                continue
            opts = []
            for s in cfg.grid_sizes:
                if all(it.attr("imap")[ax] == -1 or srcs[it.attr("input")].shape[it.attr("imap")[ax]] % s == 0
                       for it in iters):
                    opts.append(s)
            axis_opts.append(opts)
        f_opts = [f for f in cfg.forloop if f > 1] if bg.forloop > 1 else [1]
        combos = [(g3, f) for g3 in itertools.product(*axis_opts) for f in f_opts]
        if vary is not None and numbers[n] != vary:
            combos = [(tuple(bg.grid), bg.forloop)]
        # the graph's own sizes first, the rest in a fixed pseudo-random order: a depth-first
        # product cut at ``max_variants`` would only ever vary the last kernel's last axis
        own = (tuple(bg.grid), bg.forloop)
        rest = [c for c in combos if c != own]
        random.Random(f"{graph.key}:{j}").shuffle(rest)
        for (gx, gy, gz), f in ([own] if own in combos else []) + rest:
            step = size_distance(own, ((gx, gy, gz), f)) if radius is not None else 0.0
            if step > left + 1e-9:
                continue
            nb = _rebuild_block(bg, srcs, (gx, gy, gz), f)
            if nb is None:
                continue
            gets = make_kernel(nb, srcs)
            memo2 = dict(memo)
            for old, new in zip(_gets_of(graph, n), gets, strict=False):
                if old is not None:
                    memo2[old] = new
            memo2[n] = gets[0]
            yield from rec(j + 1, memo2, left - step)

    count = 0
    for memo in rec(0, {}):
        v = KernelGraph(graph.inputs, tuple(memo.get(o, o) for o in graph.outputs))
        if radius is not None and v.key == graph.key:
            continue
        yield v
        count += 1
        if count >= cfg.max_variants:
            return


def _gets_of(graph: KernelGraph, kn: Node) -> list[Node | None]:
    bg: BlockGraph = kn.attr("graph")
    out: list[Node | None] = [None] * len(bg.outputs)
    for n in graph.nodes:
        if n.op == GET and n.src[0] is kn:
            out[n.attr("index")] = n
    return out


def _rebuild_block(bg: BlockGraph, srcs: Sequence[Node], grid: tuple[int, int, int],
                   forloop: int) -> BlockGraph | None:
    try:
        return resized_block(bg, grid, forloop, [(s.shape, s.dtype) for s in srcs])
    except GraphError:
        return None


class BlockSearch:
    """Block-op enumeration for one graph-defined kernel and map configuration."""

    def __init__(self, outer: Enumerator, kin: tuple[Node, ...], in_labels: list[Labels],
                 mc: MapConfig, max_outputs: int, part: int = 0, parts: int = 1) -> None:
        self.o = outer
        #: with ``parts`` > 1, this search explores only its share of the second block ops
        #: (round robin within each first op's moves, `_dfs`); the one-op block graphs are
        #: part 0's. Every block graph of two or more ops has one second op under one first
        #: op: the parts partition the kernel's block graphs
        self.part, self.parts = part, parts
        self.kout = min(max_outputs, outer.cfg.max_kernel_outputs)
        self.cfg = outer.cfg
        self.kin = kin
        self.mc = mc
        self.grid = mc.grid
        self.F = mc.forloop
        self.loop_label = mc.loop[0] if mc.loop else None
        self.axis_labels = {ax: a[0] for ax, a in enumerate(mc.axes)}
        # labels whose dimension every tile sees only a chunk of: the grid's, and the loop's
        self.split_labels = set(self.axis_labels.values()) | ({mc.loop[0]} if mc.loop and mc.forloop > 1 else set())
        self.sig = tuple((n.shape, n.dtype) for n in kin)
        self.in_labels = in_labels
        #: (op, operand nodes, attribute key) -> :meth:`_verdict`
        self.verdicts: dict[tuple[str, tuple[Node, ...], str], list[Any] | None] = {}
        self.accum_choices: dict[tuple[Labels, str], list[tuple[dict[str, Any], str]]] = {}

    def _keep(self, n: Node) -> bool:
        return self.o.keep(n, self.kin, self.grid, self.F)

    def _verdict(self, mk: tuple[str, tuple[Node, ...], str], args: tuple[int, ...],
                 attrs: dict[str, Any]) -> list[Any] | None:
        """What a move's operands decide on their own, whatever the rest of the block graph:
        None when the op's shape rule refuses them; else ``[node, labels, keep]`` with labels
        None when they are inconsistent (or the op reduces a split dimension) and ``keep`` the
        pruner's answer, filled in the first time a move needs it (None until then). A node's
        labels follow from its sources' within one map configuration, and the pruner's answer
        from the node, the kernel inputs, grid and loop, so :meth:`_dfs` keeps these per
        block search (moves recur at every depth below the op that made their operands).
        ``mk``: (op, operand nodes, attribute key), also the key of the enumerator's cache of
        built nodes."""
        name, srcs, _ = mk
        if len(args) == 2 and not precheck(name, [s.shape for s in srcs],
                                           [self.lab[i] for i in args]):
            return None
        made = self.o.block_nodes
        if mk in made:
            n = made[mk]
        else:
            try:
                n = make_op(name, srcs, attrs, BLOCK)
            except GraphError:
                n = None
            made[mk] = n
        if n is None:
            return None
        lab = infer(n, [self.lab[i] for i in args], self.loop_label if self.F > 1 else None)
        if lab is not None and self._reduces_split(n, self.lab[args[0]]):
            lab = None
        return [n, lab, None]

    def _reduces_split(self, n: Node, src_labels: Labels) -> bool:
        """Whether block op ``n`` reduces (a row normalisation, a sum or mean over an axis) a
        dimension the grid or the loop splits: it would reduce one chunk of the program's row,
        which no index-consistent μGraph does (across chunks only accumulators and the
        concatenation labels combine)."""
        rule = REGISTRY[n.op].label
        if rule == "norm":
            return src_labels[-1] in self.split_labels
        if rule == "reduce":
            return src_labels[n.attr("axis") % len(src_labels)] in self.split_labels
        return False

    def run(self) -> Iterator[tuple[BlockGraph, list[Labels]]]:
        st = self.o.stats
        t: list[Node] = []
        lab: list[Labels] = []
        for i in range(len(self.kin)):
            try:
                it = make_iter(self.sig, i, self.mc.imap(i), self.mc.fmap(i), self.grid, self.F)
            except GraphError:
                st.pruned_shape += 1
                return
            if not self._keep(it):
                st.pruned_oracle += 1
                return
            t.append(it)
            lab.append(self.in_labels[i])
        self.t = t
        self.lab = lab
        self.n_iters = len(t)
        self.post = [False] * len(t)
        self.var = [self.mc.fmap(i) != -1 for i in range(len(t))]
        self.uses = [0] * len(t)
        self.last: tuple[Any, ...] = ()
        yield from self._dfs()

    def _moves(self, m0: int, must: set[int] | None
               ) -> list[tuple[str, tuple[int, ...], dict[str, Any], str]]:
        """Candidate ops (name, operand positions, attributes, attribute key) whose largest
        input position is >= m0 (canonical order) and, when ``must`` is given, that consume one
        of those (dangling) tensors (bound tier). Ops in the block-op order with ``accum``
        last; each op's operand tuples in lexicographic order, only those whose largest
        position is >= m0 generated at all."""
        t, post = self.t, self.post
        n = len(t)
        keyed = self.o.op_attrs_keyed
        out: list[tuple[str, tuple[int, ...], dict[str, Any], str]] = []
        add = out.append
        args: tuple[int, ...]
        for name in self.o.block_ops:
            spec = REGISTRY[name]
            lo, hi = spec.arity
            # a reduction's axis choices depend on its operand's rank; other ops' do not
            fixed = None if spec.label == "reduce" else keyed(name, t[0])
            for k in range(lo, hi + 1):
                if k == 1:
                    for i in range(m0, n):
                        if must is not None and i not in must:
                            continue
                        args = (i,)
                        for at, ak in fixed if fixed is not None else keyed(name, t[i]):
                            add((name, args, at, ak))
                elif k == 2:
                    comm = spec.commutative
                    for i in range(n):
                        pi = post[i]
                        mi = must is None or i in must
                        for j in range(i + 1 if comm else 0, n) if i >= m0 else range(
                                max(m0, i + 1) if comm else m0, n):
                            if i == j or post[j] != pi or not (mi or j in must):  # type: ignore[operator]
                                continue
                            args = (i, j)
                            for at, ak in fixed if fixed is not None else keyed(name, t[i]):
                                add((name, args, at, ak))
                else:
                    for args in _canonical_args(n, k, m0):
                        if must is not None and must.isdisjoint(args):
                            continue
                        for at, ak in fixed if fixed is not None else keyed(name, t[args[0]]):
                            add((name, args, at, ak))
        F = self.F
        epilogue_ok = "mean" in self.cfg.accums
        for p in range(m0, n):
            if post[p] or (F == 1 and p >= self.n_iters):
                continue
            # with a loop, a loop-invariant iterator only through a plain mean (the identity:
            # an epilogue's operand, such as a bias added to the product after the loop)
            epilogue = F > 1 and not self.var[p]
            if epilogue and (p >= self.n_iters or not epilogue_ok):
                continue
            if must is not None and p not in must:
                continue
            mode = "epilogue" if epilogue else "once" if F == 1 else "loop"
            for at, ak in self._accum_choices(self.lab[p], mode):
                add(("accum", (p,), at, ak))
        return out

    def _accum_choices(self, labels: Labels, mode: str) -> list[tuple[dict[str, Any], str]]:
        """The accumulator attribute sets (and keys) for a tile with these labels: ``mode``
        "once" (no loop) every choice of ``accums``; "loop" (a tile that varies with the loop)
        all but a plain mean; "epilogue" (a loop-invariant iterator) the plain mean alone."""
        got = self.accum_choices.get((labels, mode))
        if got is not None:
            return got
        out: list[tuple[dict[str, Any], str]] = []
        for a in self.cfg.accums:
            if (a == "mean") != (mode == "epilogue") and mode != "once":
                continue
            kind, _, fold = a.partition(":")
            if fold == "x":
                for x in fold_choices(labels):
                    at: dict[str, Any] = {"kind": kind, "fold": x}
                    out.append((at, _attr_key(at)))
            else:
                at = {"kind": kind, "fold": int(fold) if fold else None}
                out.append((at, _attr_key(at)))
        self.accum_choices[labels, mode] = out
        return out

    def _dfs(self) -> Iterator[tuple[BlockGraph, list[Labels]]]:
        st = self.o.stats
        if len(self.t) >= self.cfg.max_block_ops:
            return
        left = self.cfg.max_block_ops - len(self.t) - 1
        kout = self.kout
        loop_d = sum(1 for p, u in zip(self.post, self.uses, strict=True) if not p and u == 0)
        post_d = sum(1 for p, u in zip(self.post, self.uses, strict=True) if p and u == 0)
        btype = self.o.btype
        m0 = self.last[0][0] if self.last else 0
        # a move that consumes no dangling tensor adds one: allowed only if the bound still holds
        need0 = min(_need(loop_d + 1, post_d, kout), _need(loop_d, post_d + 1, kout))
        must = None
        if need0 > left:
            must = {i for i, u in enumerate(self.uses) if u == 0}
        moves = self._moves(m0, must)
        if self.parts > 1 and len(self.t) == self.n_iters + ONE_KERNEL_SPLIT_DEPTH:
            # this unit's share of the second block ops: round robin within the first op's
            # moves, from an offset its key fixes (the same in every part and process, whatever
            # the pruner decided elsewhere)
            k0 = zlib.crc32(repr(self.last).encode())
            moves = [m for j, m in enumerate(moves, k0) if j % self.parts == self.part]
        last = self.last
        verdicts = self.verdicts
        t, uses, post = self.t, self.uses, self.post
        for name, args, attrs, ak in moves:
            key: tuple[Any, ...] | None = None
            # canonical order: a move whose largest input is past the last op's comes after it
            # (the first key element decides), so only ties on it need the whole key (every
            # move's largest input is >= m0, so "not past" means m0 is one of its inputs)
            if last and m0 in args:
                key = (_desc(args), btype[name], (args, ak))
                if key <= last:
                    continue
            # bound tier, before any node is built: the dangling tensors the move consumes
            # (pairs never repeat a position: _moves skips them) and the one it adds
            ld, pd = loop_d, post_d
            nargs = len(args)
            for i in args if nargs <= 2 else set(args):
                if not uses[i]:
                    if post[i]:
                        pd -= 1
                    else:
                        ld -= 1
            if name == "accum" or post[args[0]]:
                pd += 1
            else:
                ld += 1
            # _need(ld, pd, kout) > left, inline: this runs for every move (millions per unit)
            over = pd + 1 - kout if ld else pd - kout
            if ld + (over if over > 0 else 0) > left:
                st.pruned_bound += 1
                continue
            srcs = ((t[args[0]], t[args[1]]) if nargs == 2 else (t[args[0]],) if nargs == 1
                    else tuple(t[i] for i in args))
            vk = (name, srcs, ak)
            v = verdicts.get(vk, _UNSEEN)
            if v is _UNSEEN:
                v = verdicts[vk] = self._verdict(vk, args, attrs)
            if v is None:
                st.pruned_shape += 1
                continue
            n = v[0]
            if n in t:
                st.pruned_dedup += 1
                continue
            lab = v[1]
            if lab is None:
                st.pruned_shape += 1
                continue
            ok = v[2]
            if ok is None:
                ok = v[2] = self._keep(n)
            else:  # the answer the search state's memo would give, counted as it counts it
                st.oracle_cache_hits += 1
            if not ok:
                st.pruned_oracle += 1
                continue
            # push
            for i in args:
                self.uses[i] += 1
            self.t.append(n)
            self.lab.append(lab)
            self.post.append(name == "accum" or self.post[args[0]])
            self.var.append(any(self.var[i] for i in args))
            self.uses.append(0)
            if key is None:
                key = (_desc(args), btype[name], (args, ak))
            saved_last = self.last
            self.last = key
            try:
                st.visited += 1
                st.by_level["block"] = st.by_level.get("block", 0) + 1
                self.o.tick()
                if self.part == 0 or len(self.t) > self.n_iters + ONE_KERNEL_SPLIT_DEPTH:
                    yield from self._complete()  # graphs above the split: part 0's
                yield from self._dfs()
            finally:
                self.last = saved_last
                self.t.pop()
                self.lab.pop()
                self.post.pop()
                self.var.pop()
                self.uses.pop()
                for i in args:
                    self.uses[i] -= 1

    def _complete(self) -> Iterator[tuple[BlockGraph, list[Labels]]]:
        if any(not p and u == 0 for p, u in zip(self.post, self.uses, strict=True)):
            return
        outs = [i for i, (p, u) in enumerate(zip(self.post, self.uses, strict=True)) if p and u == 0]
        if not 1 <= len(outs) <= self.kout:
            return
        if any(copy_only(self.t[i], self.F) for i in outs):
            self.o.stats.pruned_copy += 1
            return
        per_out: list[list[tuple[int, int, int]]] = []
        for i in outs:
            per_out.append(self._omaps(self.t[i], self.lab[i]))
            if not per_out[-1]:
                self.o.stats.pruned_shape += 1
                return
        for omaps in itertools.product(*per_out):
            try:
                bg = BlockGraph(self.grid, self.cfg.threads, self.F, self.sig,
                                tuple(BlockOutput(self.t[i], om) for i, om in zip(outs, omaps, strict=True)))
            except GraphError:
                self.o.stats.pruned_shape += 1
                continue
            labs = [output_labels(self.lab[i], self.t[i].shape, om, self.axis_labels)
                    for i, om in zip(outs, omaps, strict=True)]
            yield bg, labs

    def _omaps(self, n: Node, lab: Labels) -> list[tuple[int, int, int]]:
        naxes = len(self.mc.axes)
        forced: dict[int, int] = {}
        free_axes = []
        for ax in range(naxes):
            d = _dim_with(lab, self.axis_labels[ax])
            if d == -1:
                free_axes.append(ax)
            else:
                forced[ax] = d
        taken = set(forced.values())
        grid_labels = set(self.axis_labels.values())
        free_dims = [d for d in range(len(n.shape)) if d not in taken and lab[d] not in grid_labels]
        res = []
        for choice in itertools.permutations(free_dims, len(free_axes)):
            m = [-1, -1, -1]
            for ax, d in forced.items():
                m[ax] = d
            for ax, d in zip(free_axes, choice, strict=True):
                m[ax] = d
            res.append((m[0], m[1], m[2]))
        return res
