"""Search spaces derived from the program: the default way a :class:`SearchConfig` is made.

Nothing here is keyed by a benchmark's name. Every field comes from the program itself:

- *ops*: the kernel level may use the program's own ops; the block level the same ops minus the
  row reductions that accumulators express (``sum``, ``mean``; kept when the program has no
  matmul, hence no loop), plus the pieces those
  accumulators need to rebuild a normalisation (``rms_norm(x)`` is ``x / rms(x)``: ``div``; with a
  gain also ``mul``; ``mean`` needs the ``mean:1`` accumulator). ``accums`` always holds the loop
  sum; ``sum:1``/``sum:x`` (row sums, and the FlashDecoding combine of split rows) when the
  program sums rows; ``rms:1`` / ``mean:1`` when it normalises.
- *kernel inputs/outputs*: a graph-defined kernel may read every program input (up to
  :data:`MAX_INPUTS`) and save the program's outputs plus one more when the program reduces rows
  (a partial result split over blocks, or a row statistic for a second kernel).
- *grid sizes*: powers of two and divisors near the SM count (``n_sm``, 132 on the H100) of the
  program's dimension sizes, up to ``2 * n_sm``, each size itself up to ``2 * n_sm`` (a prime
  size's one split), and the grids that cut a dimension into tiles of
  64, 128 or 256; *loop ranges*: powers of two that divide a
  reduction size (matmul contraction, summed or normalised rows) and leave tiles of at least
  :data:`MIN_TILE` elements.
- *limits*: ``max_kernel_ops`` from the number of program ops (at most :data:`MAX_KERNEL_OPS`;
  without a matmul as many as graph-defined kernels: one kernel over full rows does the rest),
  ``max_graph_kernels`` 2 when a row reduction must finish before it is used (softmax, a mean
  subtracted), else 1; ``max_block_ops`` counts iterators, ops (a row sum becomes its
  accumulator), an accumulator per split norm and one per matmul contracting the loop's label
  (attention: 9, so the single-kernel FlashAttention is in the space).

The program's *direct lowering* (each of its ops as one pre-defined kernel) is always a member
of a derived space: the enumerator's first work unit replays it (``space.Move("direct")``), so
the best result is never worse, by the cost model, than the input.

A named preset (``search/<name>.toml``) or a preset file by path is a set of *overrides* on top of
the derived space; an override that makes the space unable to express the program raises
:class:`SearchConfigError` (``driver.check_program``).

Imports ``ir`` and ``search.config`` only.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mirage_formal.ir.graph import INPUT, KernelGraph
from mirage_formal.ir.node import Node
from mirage_formal.search.config import SearchConfig, load_preset_data
from mirage_formal.search.labels import UNIT, Label, Labels, program_labels

#: SMs on the default target (H100 SXM)
H100_SMS = 132
#: kernel-level ops enumerated at most (longer programs keep their direct lowering as a unit)
MAX_KERNEL_OPS = 2
#: inputs of one graph-defined kernel at most
MAX_INPUTS = 4
#: smallest loop tile along a reduction (elements)
MIN_TILE = 16
#: largest loop range
MAX_FORLOOP = 64
#: tile widths whose grids a space always offers (d = 6144: grids 96, 48, 24 beside the powers of two)
TILE_WIDTHS = (64, 128, 256)
#: block ops at most (one fewer when the block has a loop: its accumulators are per reduction)
MAX_BLOCK_OPS = 11

ROW_REDUCTIONS = frozenset({"sum", "mean"})


def program_ops(program: KernelGraph) -> set[str]:
    return {n.op for n in program.nodes if n.op != INPUT}


def _reduction_sizes(program: KernelGraph) -> set[int]:
    """Sizes of the dimensions a for-loop may split: matmul contractions and summed rows."""
    out: set[int] = set()
    for n in program.nodes:
        if n.op == "matmul":
            out.add(n.src[0].shape[-1])
        elif n.op in ROW_REDUCTIONS:
            out.add(n.src[0].shape[n.attr("axis") % len(n.src[0].shape)])
    return out


def _grid_sizes(program: KernelGraph, n_sm: int) -> tuple[int, ...]:
    cap = 2 * n_sm
    sizes: set[int] = set()
    for n in program.nodes:
        for d in n.shape:
            p = 2
            while p <= min(d, cap):
                if d % p == 0:
                    sizes.add(p)
                p *= 2
            # the largest divisor of d not above the SM count: one full wave
            for q in range(min(d, n_sm), 1, -1):
                if d % q == 0:
                    sizes.add(q)
                    break
            # d itself (one element of d a block) up to two waves: the only split a prime
            # size has (ViT's 197 tokens: a row-wise kernel of 197 blocks)
            if 2 <= d <= cap:
                sizes.add(d)
            # the grids that leave tensor-core-friendly tiles of 64, 128 or 256 along d
            for w in TILE_WIDTHS:
                if d % w == 0 and 2 <= d // w <= cap:
                    sizes.add(d // w)
    return tuple(sorted(sizes))


def _forloops(program: KernelGraph) -> tuple[int, ...]:
    """Loop ranges: the powers of two that leave tiles of at least ``MIN_TILE``, and the
    ranges that leave tiles of :data:`TILE_WIDTHS` (k = 768: 12, 6 and 3 beside 2-32). A
    power of two alone leaves 96- or 48-wide k tiles of 768, which neither the tensor maps'
    64-column boxes nor warpgroup MMAs' k steps of 64 take (ViT's 768 -> 2304 projection)."""
    ranges = {1}
    for k in _reduction_sizes(program):
        f = 2
        while f <= MAX_FORLOOP and k % f == 0 and k // f >= MIN_TILE:
            ranges.add(f)
            f *= 2
        ranges.update(k // w for w in TILE_WIDTHS if k % w == 0 and 2 <= k // w <= MAX_FORLOOP)
    return tuple(sorted(ranges))


def _loop_labels(program: KernelGraph) -> set[Label]:
    """Labels of the dimensions a for-loop may split: matmul contractions."""
    labs = program_labels(program)
    return {labs[n.src[0]][-1] for n in program.nodes if n.op == "matmul"} - {UNIT}


def _loop_matmuls(program: KernelGraph, labs: Mapping[Node, Labels]) -> int:
    """The most matmuls that contract one loop label (``labs``: the program's labels): the
    loop-sum accumulators one kernel with a for-loop over that label needs besides its ops
    (attention's exp(QK)·V: 1 of its 2)."""
    by_label: dict[Label, int] = {}
    for n in program.nodes:
        if n.op == "matmul" and labs[n.src[0]][-1] != UNIT:
            by_label[labs[n.src[0]][-1]] = by_label.get(labs[n.src[0]][-1], 0) + 1
    return max(by_label.values(), default=0)


#: a product that reads another product's output over a contraction at least this wide, into
#: more columns than this, gets a graph-defined kernel of its own (:func:`_chained_matmuls`)
CHAINED_MIN_K = 256
CHAINED_MIN_N = 128


def _chained_matmuls(program: KernelGraph) -> bool:
    """A matmul reads, through any ops, another matmul's product as its left operand over a
    contraction of at least :data:`CHAINED_MIN_K` into more than :data:`CHAINED_MIN_N`
    columns: an MLP's down projection of its activated up projection (ViT-Base: k 3072 into
    768), which one kernel could only compute by recomputing the first product for every
    column tile of the second. Not a low-rank adapter's (X·A)·B (k 32: the rank-32 product
    fits any kernel) nor exp(A·B)·C into 64 columns (one column tile: the one-kernel form
    recomputes nothing); their second kernels cost lora's search 56 s instead of 11 and that
    one's 73 s instead of 8 on 2 cores, for the same best estimates (s50)."""
    after: dict[Node, bool] = {}  # node -> a matmul's product reaches it (itself included)
    for n in program.nodes:
        fed = any(after.get(s, False) for s in n.src)
        if (n.op == "matmul" and after.get(n.src[0], False)
                and n.src[0].shape[-1] >= CHAINED_MIN_K and n.shape[-1] > CHAINED_MIN_N):
            return True
        after[n] = fed or n.op == "matmul"
    return False


def derive_fields(program: KernelGraph, n_sm: int = H100_SMS) -> dict[str, Any]:
    """The derived values of every :class:`SearchConfig` field that depends on the program."""
    ops = program_ops(program)
    nodes = [n for n in program.nodes if n.op != INPUT]
    n_ops = len(nodes)
    labs = program_labels(program)
    loop_labels = _loop_labels(program)
    block = set(ops) - ROW_REDUCTIONS
    accums = ["sum"]
    if "sum" in ops:
        accums += ["sum:1", "sum:x"]
    if "mean" in ops:
        accums += ["mean:1"]
    n_split_norms = 0
    for n in nodes:
        # a normalisation over a dimension a loop splits is rebuilt from an accumulated rms
        if n.op == "rms_norm" and labs[n.src[0]][-1] in loop_labels:
            n_split_norms += 1
            accums.append("rms:1")
            block.add("div")
            if len(n.src) == 2:
                block.add("mul")
                n_split_norms += 1  # the gain's product
    if n_split_norms and not any(
        n.op == "rms_norm" and labs[n.src[0]][-1] not in loop_labels for n in nodes
    ):
        block.discard("rms_norm")
    n_in = len(program.inputs)
    # inputs with no dimension a loop splits (a bias, a residual): in a kernel with a loop
    # each reaches the epilogue through a plain mean accumulator of its invariant tile
    n_epilogue = sum(1 for x in program.inputs if loop_labels and not set(labs[x]) & loop_labels)
    if n_epilogue:
        accums.append("mean")
    row_red = any(n.op in ROW_REDUCTIONS for n in nodes)
    if not loop_labels:
        # no loop: accumulators apply to iterators only, so a block reduces rows itself
        block |= ops & ROW_REDUCTIONS
        # no loop: an accumulator applies to iterators only, one per input
        block_ops = 2 * n_in + n_ops
    else:
        # iterators, ops (a row sum becomes its accumulator), the accumulators of split norms
        # and of the matmuls that contract the loop's dimension (one loop label per kernel)
        block_ops = (n_in + n_ops + n_split_norms + min(2, _loop_matmuls(program, labs))
                     + n_epilogue)
    # two graph-defined kernels where a row reduction or a second product needs its own
    # loop: an MLP's two products each with its epilogue (ViT's 768 -> 3072 -> 768 with its
    # biases, gelu and residual: as one graph-defined kernel beside library ops the best
    # measured 54 µs, its lowering 42, torch.compile 28; H200 s49 c2)
    gk = 2 if (row_red and n_ops > 1) or _chained_matmuls(program) else 1
    # without a loop one kernel over full rows does all the work: more kernels only add launches
    kops = gk if not loop_labels else min(MAX_KERNEL_OPS, n_ops, max(gk, 2))
    cap = MAX_BLOCK_OPS if not loop_labels else MAX_BLOCK_OPS - 1
    grids = _grid_sizes(program, n_sm)
    return {
        "kernel_ops": tuple(sorted(ops)),
        "block_ops": tuple(sorted(block)),
        "accums": tuple(dict.fromkeys(accums)),
        "max_kernel_ops": kops,
        "max_graph_kernels": gk,
        "max_block_ops": max(4, min(cap, block_ops)),
        "max_kernel_inputs": max(1, min(MAX_INPUTS, n_in)),
        "max_kernel_outputs": len(program.outputs) + (1 if row_red else 0),
        # (no size splits: every dimension is 1 or a prime above two waves; one block a kernel)
        "max_grid_axes": 3 if grids else 0,
        "grid_sizes": grids,
        "forloop": _forloops(program),
    }


def derive_config(
    program: KernelGraph,
    preset: str | Path | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    n_sm: int = H100_SMS,
    directory: str | Path | None = None,
) -> SearchConfig:
    """The search space for ``program``: derived fields, then the keys of ``preset`` (a shipped
    preset's name or a ``.toml`` path) as overrides, then ``overrides``; validated."""
    data: dict[str, Any] = dict(derive_fields(program, n_sm))
    name = "derived"
    if preset is not None:
        data.update(preset_keys(preset, directory))
        name = f"derived+{Path(str(preset)).stem}"
    for k, v in (overrides or {}).items():
        data[k] = v
    return SearchConfig.from_dict(data, name)


def preset_keys(preset: str | Path, directory: str | Path | None = None) -> dict[str, Any]:
    """The keys preset ``preset`` sets itself (its ``base`` chain up to, not including, the
    shipped ``default`` preset, whose values the derived space replaces)."""
    data = dict(load_preset_data(str(preset), directory, _stop_at="default"))
    data.pop("base", None)
    data.pop("description", None)
    return data
