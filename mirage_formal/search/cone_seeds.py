"""Cone seeds: a program of several outputs as the join of its outputs' cones, each lifted alone.

The kernel-level enumeration of a derived space allows few kernel ops (``search.derive``: 2),
and a graph-defined kernel gives each grid axis one index label, so a program whose outputs
come from independent weights (a decoder's q, k and v projections of one normed activation,
and q multiplied by the key cache) has no μGraph in the space but its direct lowering. Each
output alone is a familiar single-output program that the seeds handle (``search.seeds``'
lifts, ``search.loop_seeds``' loop lifts: rms_norm(x) · Wq as one kernel).

The *cone* of output ``o`` is the sub-program that computes ``o`` from the program's inputs and
from the earlier outputs that ``o`` reads (those become inputs of the cone: q·K reads q, it does
not compute it again). Values the cones share that are not outputs (the normed activation) are
computed by each cone that reads them, as a fused kernel would. For every cone the cheapest
(by the cost model; within 1% of it, the first by ``cost.tie_key``) of its
lifts, loop lifts and its own direct lowering is chosen, and the chosen μGraphs are joined
into one kernel graph of the whole program: the cones' inputs are bound to the program's
inputs and to the earlier cones' results, and kernels two cones share (the same node: nodes
are interned) appear once. A second join takes each cone's cheapest lift where it has one.
Joins are ordinary candidates (size variants, verification against the program), like the
loop seeds; a join estimated slower than the program's lowering is not verified
(``state.py``). *Cut joins* (:func:`cut_joined_candidates`) apply the same to a product whose
operand comes from a reduction (another product, a layer norm), cut at that operand.

Imports ``ir``, ``search.config``, ``search.cost``, ``search.seeds`` and ``search.loop_seeds``
only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mirage_formal.errors import GraphError
from mirage_formal.ir.graph import INPUT, KernelGraph, make_input, make_op, rebuilt
from mirage_formal.ir.node import Node
from mirage_formal.ir.ops import KERNEL
from mirage_formal.search.config import SearchConfig
from mirage_formal.search.cost import near_cheapest
from mirage_formal.search.loop_seeds import loop_lifted_candidates
from mirage_formal.search.seeds import lifted_candidates

#: joined candidates at most: each cone's cheapest choice, and each cone's cheapest lift
MAX_CONE_SEEDS = 2
#: loop lifts per cone compared by estimate (only the join is verified, so more than a
#: program's own :data:`~mirage_formal.search.loop_seeds.MAX_LOOP_SEEDS`): a projection cone
#: at batch 8 has lifts over its contraction under four choices of split dimensions before
#: the one over its heads that splits only the columns (decoder_post_attention's Wo)
CONE_LOOP_LIFTS = 12


def output_cones(program: KernelGraph) -> list[tuple[Node, KernelGraph, dict[Node, Node]]]:
    """Per output of ``program`` (in program order, whatever order the outputs are listed in,
    so that an output's cone reads the outputs it depends on; none for a program of one
    output): the output's program node, its cone (a kernel graph of one output) and the map
    from the cone's inputs that stand for earlier outputs to those outputs' program nodes. The
    cone's other inputs are the program's own input nodes. An output listed twice has one
    cone."""
    if len(program.outputs) < 2:
        return []
    order = {n: i for i, n in enumerate(program.nodes)}
    cones: list[tuple[Node, KernelGraph, dict[Node, Node]]] = []
    for o in sorted(dict.fromkeys(program.outputs), key=order.__getitem__):
        if o.op == INPUT:
            continue
        earlier = {c[0] for c in cones}
        stands_for: dict[Node, Node] = {}  # the cone's input -> the earlier output it stands for
        memo: dict[Node, Node] = {}
        for n in o.walk():
            if n.op == INPUT:
                memo[n] = n
            elif n is not o and n in earlier:
                memo[n] = make_input(_free_name(program, len(stands_for)), n.shape, n.dtype)
                stands_for[memo[n]] = n
            else:
                memo[n] = make_op(n.op, [memo[s] for s in n.src], n.attr_dict, KERNEL)
        # (the walk also passes through the earlier outputs' own sources: only what the cone's
        # output reads are its inputs)
        reach = set(memo[o].walk())
        ins = tuple(x for x in (*program.inputs, *stands_for) if x in reach)
        cones.append((o, KernelGraph(ins, (memo[o],)), {x: stands_for[x] for x in ins if x in stands_for}))
    return cones


def _free_name(program: KernelGraph, i: int) -> str:
    names = {x.attr("name") for x in program.inputs}
    name = f"cone_output_{i}"
    while name in names:
        name += "_"
    return name


def cone_joined_candidates(program: KernelGraph, cfg: SearchConfig,
                           cheapest: Callable[[KernelGraph], tuple[KernelGraph, float] | None]
                           ) -> list[KernelGraph]:
    """Up to :data:`MAX_CONE_SEEDS` joins of ``program``'s output cones in the space ``cfg``
    (see the module doc); none for a program of one output, or when no cone has a lift.
    ``cheapest(g)``: ``g``'s cheapest size variant that fits in shared memory and its
    estimated seconds (None: none fits); a lift is compared, and joined, at that size."""
    cones = output_cones(program)
    if not cones:
        return []
    # per cone: its lifts at their cheapest sizes, and its own lowering, with their estimates
    choices: list[tuple[list[tuple[KernelGraph, float]], tuple[KernelGraph, float]]] = []
    for _, cone, _ in cones:
        lifts = [c for g in (*loop_lifted_candidates(cone, cfg.grid_sizes, cfg.forloop,
                                                     cfg.max_grid_axes, cfg.threads,
                                                     limit=CONE_LOOP_LIFTS),
                             *lifted_candidates(cone, cfg.grid_sizes, cfg.max_grid_axes, cfg.threads))
                 if (c := cheapest(g)) is not None]
        lowering = cheapest(cone)
        if lowering is None:
            return []
        choices.append((lifts, lowering))
    if not any(lifts for lifts, _ in choices):
        return []

    def first(xs: Sequence[tuple[KernelGraph, float]]) -> KernelGraph:
        # (within 1% of the cheapest, as between size variants: fewest DRAM segments read)
        return xs[near_cheapest(xs)][0]

    picks = [[first([*lifts, lowering]) for lifts, lowering in choices],
             [first(lifts or [lowering]) for lifts, lowering in choices]]
    out: list[KernelGraph] = []
    for pick in picks:
        if all(p == low[0] for p, (_, low) in zip(pick, choices, strict=True)):
            continue  # every cone its own lowering: the program's direct lowering
        try:
            joined = join_cones(program, cones, pick)
        except (GraphError, KeyError):  # (a cone's μGraph that does not bind: no candidate)
            continue
        if joined not in out:
            out.append(joined)
    return out[:MAX_CONE_SEEDS]


#: cut joins at most (:func:`cut_joined_candidates`)
MAX_CUT_SEEDS = 2


#: ops whose result reduces a dimension of their operand: a product's operand computed
#: through one is a cut (:func:`chain_cuts`)
_REDUCING = ("matmul", "sum", "mean", "rms_norm")


def chain_cuts(program: KernelGraph) -> list[Node]:
    """The tensors at which ``program``'s chains of reductions can be cut: each matmul operand
    that is computed (not an input, not already an output) from a reduction (another matmul's
    result, a sum, a mean, an rms_norm), in program order. The gated MLP's ``silu(x·Wg) *
    (x·Wu)`` before its product by Wd is one; a layer norm's ``(x - mean(x)) * rsqrt(...)``
    before its projection is another (its centring keeps the loop lifts from walking the
    projection's k, so its only one-kernel lift holds whole columns of W in each block)."""
    outs = set(program.outputs)
    cuts: list[Node] = []
    for n in program.nodes:
        if n.op != "matmul":
            continue
        for s in n.src:
            if (s.op != INPUT and s not in outs and s not in cuts
                    and any(m.op in _REDUCING for m in s.walk())):
                cuts.append(s)
    return cuts


def cut_joined_candidates(program: KernelGraph, cfg: SearchConfig,
                          cheapest: Callable[[KernelGraph], tuple[KernelGraph, float] | None]
                          ) -> list[KernelGraph]:
    """Joins of ``program`` cut at a chain of products (:func:`chain_cuts`): the program with
    the cut tensor as one more output is cone-joined (:func:`cone_joined_candidates`),
    and the cut tensor is then dropped from the join's outputs, so that one kernel computes
    it and the next reads it. A single-output program such as a decoder's MLP, ``(silu(g) *
    (h·Wu))·Wd + r``, has no lift of one kernel (two reductions over different dimensions in a
    row) and its cones are the whole program; cut before ``·Wd``, each side is a loop lift of
    one kernel with its elementwise ops as prologue or epilogue. Up to :data:`MAX_CUT_SEEDS`,
    each cut alone, then every cut at once."""
    cuts = chain_cuts(program)
    tries = [[c] for c in cuts] + ([cuts] if len(cuts) > 1 else [])
    out: list[KernelGraph] = []
    for cut in tries:
        # (output_cones takes them in program order: a cut after an output reads it, as a
        # cone, rather than computing it again; a layer norm of a returned residual sum)
        outs = list(dict.fromkeys((*cut, *program.outputs)))
        widened = KernelGraph(program.inputs, tuple(outs))
        at = {n: i for i, n in enumerate(outs)}
        for j in cone_joined_candidates(widened, cfg, cheapest):
            try:
                g = KernelGraph(program.inputs, tuple(j.outputs[at[o]] for o in program.outputs))
            except GraphError:
                continue
            if g not in out:
                out.append(g)
        if len(out) >= MAX_CUT_SEEDS:
            break
    return out[:MAX_CUT_SEEDS]


def join_cones(program: KernelGraph, cones: Sequence[tuple[Node, KernelGraph, dict[Node, Node]]],
               pick: Sequence[KernelGraph]) -> KernelGraph:
    """The kernel graph of ``program`` whose outputs are the picked cone μGraphs' outputs,
    each cone's inputs that stand for earlier outputs bound to those cones' results."""
    result: dict[Node, Node] = {}  # program output -> its node in the join
    for (o, _, stands_for), g in zip(cones, pick, strict=True):
        bind = {x: result[stands_for[x]] if x in stands_for else x for x in g.inputs}
        (result[o],) = rebuilt(g, bind)
    return KernelGraph(program.inputs, tuple(o if o.op == INPUT else result[o] for o in program.outputs))
