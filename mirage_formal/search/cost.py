"""The cost model: an estimate of a μGraph's run time on a target GPU, with no GPU.

The search ranks accepted μGraphs by :func:`estimate` so it can return a best-first list on a
machine without a GPU; codegen replaces it with measured time where a GPU exists. The model:

    time = fixed + Σ_kernels ( launch + max(memory, arithmetic) + F · loop_step · waves )

- *fixed*: what one replay of the whole μGraph costs beyond its kernels (measured ~3 µs).
- *memory*: bytes each kernel reads and writes. A graph-defined kernel reads every input once
  from device memory; when ``r`` blocks read the same element (the input is replicated along
  grid axes its ``imap`` leaves at -1), the ``r - 1`` re-reads are charged at L2 bandwidth if the
  tensor fits in L2, else at DRAM bandwidth. Outputs are written once. The bandwidth a kernel
  reaches is capped by its resident blocks: ``min(bw, resident · bw_per_block)`` (a small grid
  cannot keep enough loads in flight), resident = min(blocks, SMs · blocks per SM).
- *arithmetic*: matmul tiles of two fp16 or two bf16 operands at the tensor-core rate on
  tiles padded to the MMA shape (m to 16, n to 8, k to 16: the tile-shape efficiency of a thin
  matmul; two fp32 tiles at ``f32_mm_flops``, the rate of the autotuner's blocked and TF32
  schedules; other operand types multiply on CUDA cores, 2mnk flops there), every other op and
  accumulator at the CUDA-core rate (one flop per element; exp, silu, sqrt, ... count 4), both
  scaled by the fraction of SMs the grid occupies. Loop-phase ops run F times per block,
  except loop-invariant ones (``ir.graph.loop_invariant``: codegen computes them once).
- *loop step*: a fixed cost per for-loop iteration (synchronisation, pipeline fill), paid once
  per wave of blocks; waves = ceil(blocks / (SMs · blocks per SM)), blocks per SM limited by
  shared memory (``smem_bytes``) and at most 8.
- *split*: a kernel is costed under each for-loop split S the autotuner will try
  (``ir.occupancy.loop_splits``: S x the blocks, F/S iterations each, plus the fp32 partial
  accumulators written and read back by the combine) and the cheapest counts, so a small grid
  with a long loop is not ranked as if it had to run on few SMs.
- *segments*: DRAM moves ``dram_segment`` (64) bytes at a time, so a first read whose tile's
  contiguous runs (:func:`contiguous_run`) are shorter is charged ``dram_segment / run`` times
  its bytes.
- *ties*: size variants of one estimate are told apart by :func:`tie_key` (fewer bytes read
  again by blocks that replicate an input, then fewer DRAM segments; the search's tie-break,
  ``state.ranked_variants``), and a cone's choices within 1% of each other likewise
  (:func:`near_cheapest`, ``search.cone_seeds``).
- *L2 re-reads* are capped per resident block at ``L2_BLOCK_RATIO`` (4) times the DRAM cap
  ``bw_per_block`` (shorter latency, the same loads in flight), not at the DRAM cap.
- *pipelining*: when a loop iteration's loads (``stage_bytes``) exceed ``PIPELINE_STAGE_MAX``
  (two stages no longer fit the largest staging budget the tuner tries) loads and compute
  alternate: memory time x ``unpipelined_scale`` (fitted; measured: gated_mlp's fused kernel
  with 1024-deep k tiles 62 µs, with 128-deep 42 µs).
- A pre-defined kernel op (lowered by codegen to a default block graph) is charged its bytes
  and flops at full occupancy, times ``predefined_scale``.
- *rows*: a kernel on (batch, ..., rows, columns) activations is costed on the 2-D views
  codegen compiles it on (``ir.flatten.flat_rows``): a product of [b, 1, k] tiles by a
  2-D weight tile is one product of b rows padded to 16, not b products of one row padded to
  16 each; a pre-defined product against a 2-D weight likewise counts its batch as rows.

The parameters per target are data: ``search/cost_model.json`` (fitted by
``benchmarks/fit_cost_model.py`` on measured kernel times in ``benchmarks/data/``; the file says
how they were taken). Without the file the built-in estimates below are used (H100 SXM: 3.0
TB/s DRAM, 8 TB/s L2, 50 MB L2, 132 SMs, 228 KB shared memory per SM; one kernel replayed as a
CUDA graph measured 5.0 µs and two 6.8 µs, hence 3.2 µs fixed + 1.8 µs per launch; 400 TFLOP/s
fp16 tensor-core rate, 25 TFLOP/s CUDA-core rate, 0.1 µs per loop step, 20 GB/s per block).

Shared memory per block (:func:`smem_bytes`): the sum of the tile bytes of every block tensor,
each counted once (no buffer reuse; accumulators and post-loop tiles in fp32), so it is an
upper bound on what a straightforward emitter allocates. Whether a candidate fits leaves out
the tiles codegen keeps in registers between two tensor-core products (its register chain:
attention's exp(Q·K), see :func:`register_chain_tiles`): counted, one head's 197 x 197
scores of ViT's attention (three tiles, 233 KB of the block's 435 KB) kept the one-kernel
form of one block a head out of the space, and that form measured 25.9 µs against the
search's pick's 78 (H200, s48 c3).

Imports ``ir`` (``ir.occupancy``: the split rule and the chain's registers it shares with
``codegen``) and the data-folder locator only.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mirage_formal.errors import MirageError
from mirage_formal.ir.chain import chain_parts
from mirage_formal.ir.dtypes import DType, tensor_core_type
from mirage_formal.ir.flatten import flat_rows
from mirage_formal.ir.graph import (
    GET,
    INPUT,
    ITER,
    KERNEL_OP,
    BlockGraph,
    KernelGraph,
    loop_invariant,
)
from mirage_formal.ir.node import Node
from mirage_formal.ir.occupancy import chain_fits, loop_splits
from mirage_formal.ir.ops import REGISTRY


@dataclass(frozen=True)
class Target:
    name: str
    dram_bw: float        # bytes/s
    l2_bw: float          # bytes/s
    l2_bytes: int
    n_sm: int
    smem_per_sm: int      # bytes
    launch_s: float
    tc_flops: float       # fp16 tensor-core flop/s, sustained
    simt_flops: float     # fp32 CUDA-core flop/s, sustained
    loop_step_s: float
    fixed_s: float = 3.2e-6           # per μGraph replay
    bw_per_block: float = 2.0e10      # bytes/s one resident block can pull
    predefined_scale: float = 1.0     # pre-defined kernel ops' body time multiplier
    unpipelined_scale: float = 1.5    # memory-time multiplier when two stages do not fit
    #: flop/s of products of two fp32 tiles, whose schedules the autotuner blocks in
    #: registers or runs as TF32 MMAs (codegen Schedule.cc_rows, tf32x3). Measured, not
    #: fitted: the H200's fastest 512 x 2048 x 2048 fp32 kernels ran 38 TFLOP/s blocked 8 x
    #: 8 and 47 as TF32 MMAs (s38, s39); the CUDA-core rate fitted on fp16 programs' ops
    #: (``simt_flops``, 2.5 TFLOP/s) put them 10-15 times too slow, so the model ranked fp32
    #: sizes by their flops alone and not by the L2 re-reads that tell them apart
    f32_mm_flops: float = 4.0e13
    #: the bytes DRAM moves per access: a tile whose contiguous runs (``contiguous_run``) are
    #: shorter pays for whole segments. Measured, not fitted: decoder_qkv's per-head
    #: projections as tiles of 8 heads x 16 columns (32-byte runs) took 61 µs on an H200, the
    #: same bytes as 1 head x 128 columns 42.9 (s45 c3); 0 turns the term off
    dram_segment: float = 64.0

    def with_params(self, **p: float) -> Target:
        """A copy with fitted fields (``FITTED``) replaced."""
        bad = set(p) - set(FITTED)
        if bad:
            raise MirageError(f"cost model: {sorted(bad)} are not fitted parameters; use some of {FITTED}")
        d: dict[str, Any] = dict(p)
        return dataclasses.replace(self, **d)


#: the fitted fields (``search/cost_model.json`` "params"), in a fixed order
FITTED = ("dram_bw", "l2_bw", "launch_s", "tc_flops", "simt_flops", "loop_step_s", "fixed_s",
          "bw_per_block", "predefined_scale", "unpipelined_scale")

BUILTIN = {
    "h100": Target("h100", 3.0e12, 8.0e12, 50 * 2**20, 132, 228 * 1024, 1.8e-6, 4.0e14, 2.5e13, 1.0e-7),
    "h200": Target("h200", 4.2e12, 9.0e12, 50 * 2**20, 132, 228 * 1024, 1.8e-6, 4.0e14, 2.5e13, 1.0e-7),
}

COST_MODEL_FILE = "cost_model.json"
#: a block reads from L2 this many times faster than from DRAM (shorter latency, same loads
#: in flight), so its per-block cap on L2 re-reads is this multiple of ``bw_per_block``
L2_BLOCK_RATIO = 4.0
#: loads per loop iteration above which two pipeline stages no longer fit the largest
#: staging budget the autotuner tries (160 KB): loads and compute then alternate
PIPELINE_STAGE_MAX = 80 * 1024


def load_targets(path: str | Path | None = None) -> dict[str, Target]:
    """The built-in targets with the fitted parameters of ``path`` (default: the shipped
    ``search/cost_model.json``, when it exists) applied on top."""
    out = dict(BUILTIN)
    if path is None:
        try:
            from mirage_formal.resources import data_dir

            p = data_dir("search") / COST_MODEL_FILE
        except Exception:
            return out
    else:
        p = Path(path)
    if not p.is_file():
        return out
    try:
        doc = json.loads(p.read_text())
        for name, params in doc.get("targets", {}).items():
            base = out.get(name, out["h100"])
            fitted = {k: float(v) for k, v in params.items() if k in FITTED}
            out[name] = dataclasses.replace(base.with_params(**fitted), name=name)
    except (OSError, ValueError, TypeError) as e:
        raise MirageError(f"cost model parameters {p}: cannot read: {e}; fix or delete the file "
                          "(benchmarks/fit_cost_model.py writes it)") from None
    return out


TARGETS = load_targets()


def _pad(x: int, m: int) -> int:
    return -(-x // m) * m


@dataclass(frozen=True)
class Cost:
    """Estimated seconds and its parts (for the report)."""

    seconds: float
    launches: int
    dram_bytes: float
    l2_bytes: float
    flops: float

    def as_dict(self) -> dict[str, float]:
        return {"us": self.seconds * 1e6, "launches": self.launches, "dram_bytes": self.dram_bytes,
                "l2_bytes": self.l2_bytes, "flops": self.flops}


def _nbytes(n: Node) -> int:
    return math.prod(n.shape) * n.dtype.itemsize


def fp32_product(n: Node) -> bool:
    """Op ``n`` is a product of two fp32 tiles: what the model charges at ``f32_mm_flops``
    (and what the GPU stage's fp32 size rules, ``gpu_sizes``, look for)."""
    return n.op == "matmul" and all(s.dtype is DType.F32 for s in n.src)


def _op_work(n: Node, library: bool = False) -> tuple[float, float, float]:
    """(tensor-core flops, CUDA-core flops, fp32-product flops) of one application of op
    ``n`` on its tile: a tensor-core matmul's flops are counted on the tile padded to the MMA
    shape (16 x 8 x 16); a matmul of two fp32 tiles as fp32-product flops (``f32_mm_flops``);
    one of other operand types (fp16 with bf16, fp16 with fp32) and every other op as
    CUDA-core flops. A ``library`` (pre-defined kernel) product against a 2-D weight counts
    its batch as rows (``codegen.lower`` and ``ir.flatten``)."""
    d = REGISTRY[n.op]
    if d.label == "matmul":
        a, b = n.src
        batch = math.prod(n.shape[:-2])
        m, nn, k = n.shape[-2], n.shape[-1], a.shape[-1]
        if library and len(b.shape) <= 2:
            batch, m = 1, batch * m  # (a 2-D weight: the lowering's blocks take the batch as rows)
        if tensor_core_type(*(s.dtype for s in n.src)) is None:
            if fp32_product(n):
                return 0.0, 0.0, 2.0 * batch * m * nn * k
            return 0.0, 2.0 * batch * m * nn * k, 0.0
        return 2.0 * batch * _pad(m, 16) * _pad(nn, 8) * _pad(k, 16), 0.0, 0.0
    # ops that reduce (label rules reduce, norm, accum) touch every input element
    big = d.label in ("accum", "reduce", "norm")
    elems = math.prod(n.src[0].shape) if big else math.prod(n.shape)
    return 0.0, float(elems) * d.cost, 0.0


def _op_flops(n: Node) -> tuple[float, float]:
    """(tensor-core flops, flops off the tensor cores) of one application of op ``n``."""
    a, b, c = _op_work(n)
    return a, b + c


def _arith_seconds(t: Target, tc: float, simt: float, mm32: float) -> float:
    """Seconds of each kind of work at its rate on the whole GPU (:func:`_op_work`)."""
    return tc / t.tc_flops + simt / t.simt_flops + mm32 / t.f32_mm_flops


def register_chain_tiles(bg: BlockGraph) -> set[Node]:
    """The tiles of ``bg`` that codegen's register chain (``codegen.layout.Chain``) can keep
    in registers: a chain of ``ir.chain.chain_parts`` whose two products take fp16 or bf16
    operands (the tensor cores), the second read by a plain sum accumulator alone and the
    first by nothing else, where some block the tuner tries lets its warps own whole 16-row
    tiles with a 16-column pass within their registers (``ir.occupancy.chain_fits``), the
    second product's columns a multiple of 8 and the first's k of 16, as codegen's choice
    needs."""
    consumers: dict[Node, list[Node]] = {n: [] for n in bg.nodes}
    for n in bg.nodes:
        for x in n.src:
            consumers[x].append(n)
    outs = {o.node for o in bg.outputs}
    tiles: set[Node] = set()

    def tensor_core(m: Node) -> bool:
        return m.op == "matmul" and tensor_core_type(*(x.dtype for x in m.src)) is not None

    for m2 in bg.nodes:
        cs = consumers[m2]
        if not (tensor_core(m2) and len(cs) == 1 and cs[0].op == "accum"
                and cs[0].attr("fold") is None and cs[0].attr("kind") in ("sum", "mean")):
            continue
        parts = chain_parts(m2, consumers, outs)
        if parts is None or not tensor_core(parts.first):
            continue
        E = parts.tile
        row_tiles = math.prod(E.shape[:-2]) * -(-E.shape[-2] // 16)
        n2, k1 = m2.shape[-1], parts.first.src[0].shape[-1]
        if n2 % 8 or k1 % 16 or not chain_fits(row_tiles, n2, k1):
            continue  # (no block the tuner tries holds it: its tiles would be stored)
        tiles |= {parts.first, *parts.inner, E}
    return tiles


def smem_bytes(bg: BlockGraph, chains: bool = False) -> int:
    """Shared memory a block needs: every tile counted once (see module docstring); with
    ``chains``, those a register chain keeps in registers left out (what decides whether a
    candidate fits; the model's blocks per SM still count them, so that no estimate of a
    candidate that fitted before changes)."""
    phases = bg.phases
    in_registers = register_chain_tiles(bg) if chains else set()
    total = 0
    for n in bg.nodes:
        if n in in_registers:
            continue
        size = 4 if (phases[n] or n.op == "accum") else n.dtype.itemsize
        total += math.prod(n.shape) * size
    return total


def contiguous_run(tile: tuple[int, ...], full: tuple[int, ...], itemsize: int) -> int:
    """Bytes of the longest contiguous run of a row-major ``full`` tensor that a ``tile`` of
    it covers: its last dimension, times the next while the dimensions after it are whole."""
    run = 1
    for t, f in zip(reversed(tile), reversed(full), strict=False):
        run *= t
        if t != f:
            break
    return run * itemsize


#: the run (bytes) past which a longer contiguous run of a tile reads no faster (two 128-byte
#: L2 lines): :func:`dram_segments`' cap
RUN_CAP = 256


def _iterator_read(bg: BlockGraph, it: Node) -> tuple[int, int, int]:
    """(bytes of its input, contiguous run of its tile in bytes, blocks that read each element:
    the grid axes its ``imap`` leaves at -1) of iterator ``it`` of ``bg``."""
    shape, dt = bg.inputs[it.attr("input")]
    rep = math.prod(s for s, m in zip(bg.grid, it.attr("imap"), strict=True) if m == -1)
    return math.prod(shape) * dt.itemsize, contiguous_run(it.shape, shape, dt.itemsize), rep


def _iterator_reads(graph: KernelGraph) -> list[tuple[int, int, int]]:
    """:func:`_iterator_read` of every distinct input of every graph-defined kernel of
    ``graph``, on the views the cost model costs (``ir.flatten.flat_rows``)."""
    out = []
    for n in graph.nodes:
        if n.op != KERNEL_OP:
            continue
        g = n.attr("graph")
        bg = flat_rows(g) or g
        seen: set[int] = set()
        for it in bg.nodes:
            if it.op == ITER and it.attr("input") not in seen:
                seen.add(it.attr("input"))
                out.append(_iterator_read(bg, it))
    return out


def dram_segments(graph: KernelGraph) -> float:
    """How many contiguous runs of up to :data:`RUN_CAP` bytes the graph-defined kernels of
    ``graph`` read, each input once: the second part of :func:`tie_key`. Measured on the H200
    (s45 c3), the same per-head projections at one estimate: 1 head x 128 columns a block
    (256-byte runs) 42.9 µs, 2 x 64 (128 bytes) 44.6, 8 x 16 (32 bytes) 61."""
    return sum(size / min(run, RUN_CAP) for size, run, _ in _iterator_reads(graph))


#: inputs of at most this many bytes (2% of an H100's or H200's L2) are left out of
#: :func:`reread_bytes`: their re-reads are L2 hits under any schedule
REREAD_MIN_BYTES = 1 << 20


def reread_bytes(graph: KernelGraph) -> float:
    """Bytes the graph-defined kernels of ``graph`` read again from inputs larger than
    :data:`REREAD_MIN_BYTES`: an input that ``r`` blocks each read (a grid axis its ``imap``
    leaves at -1) is read ``r - 1`` more times. The model charges those at L2 bandwidth, and
    they do not always come from L2: the decoder layer's q/k/v projections at batch 8 split
    the batch over two blocks that each read the whole 33.5 MB weight, and the layer took 391
    µs (s46 c2, c4) against 348 with the batch whole in each block (s45 c5), at one
    estimate."""
    return float(sum(size * (rep - 1) for size, _, rep in _iterator_reads(graph)
                     if size > REREAD_MIN_BYTES))


def tie_key(graph: KernelGraph) -> tuple[float, float]:
    """How the search orders candidates the model cannot tell apart (size variants of one
    estimate, ``state.ranked_variants``; a cone's choices within :data:`NEAR_TIE`,
    :func:`near_cheapest`): fewer bytes read again (:func:`reread_bytes`), then fewer DRAM
    segments (:func:`dram_segments`)."""
    return reread_bytes(graph), dram_segments(graph)


#: estimates within this fraction of the cheapest are a tie for :func:`near_cheapest` (the
#: model's own error is tens of percent: it cannot tell such candidates apart)
NEAR_TIE = 0.01


def near_cheapest(cands: Sequence[tuple[KernelGraph, float]]) -> int:
    """The index of the candidate (graph, estimated seconds) to take as the cheapest: of
    those within :data:`NEAR_TIE` of the lowest estimate, the first by :func:`tie_key`, the
    earliest on a tie. -1 for none."""
    if not cands:
        return -1
    low = min(sec for _, sec in cands) * (1 + NEAR_TIE)
    near = [i for i, (_, sec) in enumerate(cands) if sec <= low]
    return min(near, key=lambda i: (tie_key(cands[i][0]), i))


def stage_bytes(bg: BlockGraph) -> int:
    """Bytes one block loads per loop iteration: the tiles of its loop-varying iterators
    (all its iterators' tiles when it has no loop)."""
    its = [n for n in bg.nodes if n.op == ITER]
    if bg.forloop > 1:
        its = [n for n in its if n.attr("fmap") != -1]
    return sum(math.prod(n.shape) * n.dtype.itemsize for n in its)


def kernel_cost(bg: BlockGraph, t: Target) -> Cost:
    """The cheapest of the kernel under each loop split the autotuner tries (see the module
    docstring): a μGraph is ranked by the schedules that will really be measured."""
    parts = _KernelParts(bg, t)
    splits = [1]
    if parts.has_accum:
        splits += loop_splits(math.prod(bg.grid), bg.forloop, t.n_sm)
    return min((parts.cost(s) for s in splits), key=lambda c: c.seconds)


def _kernel_cost(bg: BlockGraph, t: Target, split: int) -> Cost:
    """The kernel's cost under loop split ``split``."""
    return _KernelParts(bg, t).cost(split)


class _KernelParts:
    """What a kernel's cost is made of, independent of the split: its traffic and per-op flops
    in node order (so every split sums them in the same order), shared-memory residency and
    whether its loop loads can be double-buffered."""

    def __init__(self, bg: BlockGraph, t: Target) -> None:
        self.bg, self.t = bg, t
        #: in node order: ("dram" | "l2", bytes) reads, ("op", tc, simt, runs once) flops and
        #: ("accum", tc, simt, fp32 partial bytes) accumulators
        self.terms: list[tuple[Any, ...]] = []
        phases = bg.phases
        once = loop_invariant(bg)  # computed before the loop by codegen
        read: set[int] = set()
        for n in bg.nodes:
            if n.op == ITER:
                i = n.attr("input")
                if i in read:
                    continue
                read.add(i)
                size, run, rep = _iterator_read(bg, n)
                waste = max(1.0, t.dram_segment / run) if run < size else 1.0
                self.terms.append(("dram", size * waste))
                self.terms.append(("l2" if size <= t.l2_bytes else "dram", size * (rep - 1)))
                continue
            a, b, c = _op_work(n)
            if n.op == "accum":
                self.terms.append(("accum", a, b, c, 2.0 * math.prod(n.shape) * 4))
            else:
                self.terms.append(("op", a, b, c, bool(phases[n]) or n in once))
        self.out_bytes = [math.prod(bg.output_shape(o)) * o.node.dtype.itemsize for o in bg.outputs]
        self.has_accum = any(term[0] == "accum" for term in self.terms)
        self.per_sm = max(1, min(8, t.smem_per_sm // max(1, smem_bytes(bg))))
        self.unpipelined = stage_bytes(bg) > PIPELINE_STAGE_MAX

    def cost(self, split: int) -> Cost:
        t, bg = self.t, self.bg
        blocks = bg.grid[0] * bg.grid[1] * bg.grid[2] * split
        steps = bg.forloop // split
        dram = 0.0
        l2 = 0.0
        tc = simt = mm32 = 0.0
        for term in self.terms:
            kind = term[0]
            if kind == "dram":
                dram += term[1]
            elif kind == "l2":
                l2 += term[1]
            else:
                times = blocks * (1 if kind == "op" and term[4] else steps)
                tc += term[1] * times
                simt += term[2] * times
                mm32 += term[3] * times
                if split > 1 and kind == "accum":
                    # the split's combine: each block writes its fp32 partials, the last reads all
                    l2 += term[4] * blocks
        for ob in self.out_bytes:
            dram += ob
        resident = min(blocks, t.n_sm * self.per_sm)
        block_bw = resident * t.bw_per_block
        mem = dram / min(t.dram_bw, block_bw) + l2 / min(t.l2_bw, L2_BLOCK_RATIO * block_bw)
        if self.unpipelined:
            mem *= t.unpipelined_scale
        parallel = min(1.0, blocks / t.n_sm)
        arith = _arith_seconds(t, tc, simt, mm32) / parallel
        waves = math.ceil(blocks / (t.n_sm * self.per_sm))
        sec = t.launch_s + max(mem, arith) + steps * t.loop_step_s * waves
        return Cost(sec, 1, dram, l2, tc + simt + mm32)


def estimate(graph: KernelGraph, target: str | Target = "h100") -> Cost:
    """Estimated run time of ``graph`` on ``target`` (see the module docstring)."""
    t = TARGETS[target] if isinstance(target, str) else target
    sec = t.fixed_s
    launches = 0
    dram = l2 = flops = 0.0
    for n in graph.nodes:
        if n.op in (INPUT, GET):
            continue
        if n.op == KERNEL_OP:
            bg = n.attr("graph")
            c = kernel_cost(flat_rows(bg) or bg, t)
        else:
            a, b, m = _op_work(n, library=True)
            byt = sum(_nbytes(s) for s in n.src) + _nbytes(n)
            s = t.launch_s + t.predefined_scale * max(byt / t.dram_bw, _arith_seconds(t, a, b, m))
            c = Cost(s, 1, float(byt), 0.0, a + b + m)
        sec += c.seconds
        launches += c.launches
        dram += c.dram_bytes
        l2 += c.l2_bytes
        flops += c.flops
    return Cost(sec, launches, dram, l2, flops)


def input_cost(program: KernelGraph, target: str | Target = "h100") -> Cost:
    """The input program's own cost: its direct lowering (each op one pre-defined kernel),
    which every derived search space contains (``search.derive``)."""
    return estimate(program, target)


def speedup(program: KernelGraph, candidate: Cost, target: str | Target = "h100") -> float:
    """Estimated speedup of a candidate over the input program (> 1: the candidate is faster),
    for the report's rows next to :func:`input_cost`."""
    return input_cost(program, target).seconds / candidate.seconds
