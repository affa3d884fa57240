"""Planning one kernel: what a (block graph, schedule) pair decides before anything is printed.

:class:`KernelLayout` settles, for one block graph under one :class:`Schedule`, which tiles
are *inlined* (recomputed in registers by every reader), which matmuls add straight into
their accumulator (*fused*), which write through an elementwise *epilogue*, which iterator
tiles stay *raw* fp16 in a cp.async ring, which computed tiles are stored as fp16
(``half_tiles``), which skinny matmuls stream through registers (``gemv``), the padded row
strides, the typed steps of the kernel (:mod:`steps`) and every buffer with its lifetime
(placed by :mod:`plan`). The emitter (:mod:`emit`) prints from it.

Imports ``ir`` and the planning modules of ``codegen`` (plan, schedule, steps, cindex).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from mirage_formal.codegen.cindex import fmt_float, lin
from mirage_formal.codegen.plan import Buffer
from mirage_formal.codegen.refine import Refinement
from mirage_formal.codegen.schedule import (
    ROWWISE_MAX_ROW,
    Schedule,
    cc_block,
    gemv_rows_ok,
    pair_axis,
    row_groups,
    split_ok,
    stream_k_ok,
    tf32_product_dims,
    tf32_warp_tiling,
    warp_tiles,
    wgmma_threads,
)
from mirage_formal.codegen.steps import (
    DEFINING,
    Accumulate,
    Finalize,
    InvariantAccumulate,
    Load,
    MatmulAccumulate,
    Op,
    Save,
    Step,
    Zero,
)
from mirage_formal.codegen.stream_k import longest_segment
from mirage_formal.codegen.tma import BOX_COLS, box_rows, tma_tile_ok
from mirage_formal.errors import GraphError, UnsupportedOpError
from mirage_formal.ir.chain import chain_parts
from mirage_formal.ir.dtypes import DType, tensor_core_type
from mirage_formal.ir.graph import (
    ITER,
    BlockGraph,
    block_phases,
    elementwise_tree,
    invariant_mean,
    loop_invariant,
)
from mirage_formal.ir.node import Node
from mirage_formal.ir.occupancy import chain_register_budget, chain_registers
from mirage_formal.ir.ops import REGISTRY

_MAX_ELEMS = 2**31 - 1
#: a chain run in passes may pad its columns by this factor over the next multiple of 16
#: (fewer, wider passes: more products in flight per pass)
PASS_PADDING = 1.125


@dataclass(frozen=True)
class Chain:
    """Two tensor-core matmuls joined in registers (Schedule.mma_chain): ``first``'s product
    passes through the elementwise ``inner`` nodes to ``tile`` (never stored), which is
    ``second``'s A operand; ``sums`` are row-sum accumulators (fold 1) of chain nodes, kept
    per thread in registers through the loop. Every warp owns ``wm`` 16-row tiles; ``kw``
    warps share them, each taking 1/kw of the first product's columns (a multiple of 16),
    which are the second product's k range: each warp runs the second product over its k
    slice into its own register sums; after the loop the kw partial sums (and row sums) go to
    the slices of a scratch tile (``kslices``) and are added in slice order (a fixed order),
    so few rows (a 16-row query tile) still keep every warp busy."""

    first: Node
    inner: tuple[Node, ...]
    tile: Node
    second: Node
    sums: tuple[Node, ...]
    wm: int
    kw: int = 1
    #: the first product's columns with padding: a multiple of 16 (and of ``chunk``) at or
    #: above its real columns; the padded columns' values are zero (neither summed nor
    #: multiplied: their B columns and the second product's B rows load as zeros)
    cols: int = 0
    #: the first product's columns a warp computes in one pass (a multiple of 16 dividing
    #: ``cols``; ``cols / kw`` in one pass); less than that when the whole row would not fit
    #: in the chain's registers (``ir.occupancy.chain_register_budget``):
    #: the warp then runs the chain pass by pass over its columns, each pass's products
    #: added into the second product's registers (only with ``kw`` 1)
    chunk: int = 0

    @property
    def passes(self) -> int:
        """How many passes over its share of the first product's columns each warp runs."""
        return self.cols // (self.chunk * self.kw)

    @property
    def nodes(self) -> tuple[Node, ...]:
        """The tiles that live only in registers: the first product and its elementwise
        descendants up to the second matmul's operand."""
        return (self.first, *self.inner, self.tile)


#: the most rows of one fold accumulator a thread keeps partial sums of in registers
FOLD_REGISTERS_MAX = 8


@dataclass(frozen=True)
class FoldMap:
    """How a fold accumulator's partial sums live in registers through the loop
    (Schedule.fold_registers). ``how`` "warps": warps ``[o*S, (o+1)*S)`` share row ``o``, every
    lane a strided share of its columns; "warp": warp w takes rows w, w + W, ... (``per_thread``
    of them), its lanes a strided share of each; "thread": thread t takes rows t, t + T, ...
    and all their columns. Fixed by the thread index alone, so the same registers receive the
    same (row, column) terms in every iteration."""

    how: str
    per_thread: int
    share: int


#: floats added to each row of a register product's sums tile (Schedule.pad_acc_rows): a
#: column's 8 lanes then fall 8 banks apart, so a half-warp's float2 stores of its 16 rows x
#: 4 columns cover the 32 banks once
ACC_ROW_PAD = 8


class KernelLayout:
    """The decisions, steps and buffers of one block graph under one schedule."""

    def __init__(self, bg: BlockGraph, name: str, smem_limit: int, opts: Schedule) -> None:
        self.opts = opts
        self.bg = bg
        self.name = name
        self.T = opts.threads or bg.threads
        if not split_ok(bg, opts.split):
            raise GraphError(f"codegen: split {opts.split} needs accumulators and must divide "
                             f"the for-loop range {bg.forloop}")
        if opts.stream_k and not stream_k_ok(bg, opts.stream_k):
            raise GraphError(f"codegen: stream-K over {opts.stream_k} blocks needs a loop, "
                             f"accumulators and at least one of the {math.prod(bg.grid)} x "
                             f"{bg.forloop} (block, iteration) units per block")
        #: the for-loop is split over ``split`` blocks; each runs ``FL`` iterations
        self.split = opts.split
        #: stream-K: launched blocks (0: off); a segment runs ``mf_n`` <= ``FL`` iterations
        self.stream_k = opts.stream_k
        self.uses_red = False  # set by the printer when a block-wide row reduction needs mf_red
        self.FL = (longest_segment(math.prod(bg.grid), bg.forloop, opts.stream_k)
                   if opts.stream_k else bg.forloop // opts.split)
        #: the C expression of the iterations this block runs (a runtime value under stream-K)
        self.loop_n = "mf_n" if opts.stream_k else str(self.FL)
        self.nodes = bg.nodes
        self.phase = block_phases(self.nodes)
        self.ids = {n: i for i, n in enumerate(self.nodes)}
        self.out_nodes = {o.node for o in bg.outputs}
        self.consumers: dict[Node, list[Node]] = {n: [] for n in self.nodes}
        for n in self.nodes:
            for s in n.src:
                self.consumers[s].append(n)
        for n in self.nodes:
            if n.op not in (ITER, "accum") and n.op not in REGISTRY:
                raise UnsupportedOpError(f"codegen: block op {n.op!r} has no lowering")
            if math.prod(n.shape) > _MAX_ELEMS:
                raise GraphError(f"codegen: tile {list(n.shape)} is too large for 32-bit indexing")
        for shape, _ in bg.inputs:
            if math.prod(shape) > _MAX_ELEMS:
                raise GraphError(f"codegen: input {list(shape)} is too large for 32-bit indexing")
        self.inline = {n for n in self.nodes if self._inlinable(n)}
        #: elementwise expressions computed on a tensor-core product's A fragments from their
        #: one or two raw leaf tiles (Schedule.a_op_fragments): root op -> that matmul; no
        #: tile, no step of their own
        self.frag_op: dict[Node, Node] = {}
        #: ... their leaf tiles (one or two, in node order) and the ops inside them
        self.frag_leaves: dict[Node, list[Node]] = {}
        self.frag_inner: set[Node] = set()
        for n in self.nodes:
            tree = self._frag_tree(n) if n.op != ITER and n.op != "matmul" else None
            if tree is not None:
                self.frag_op[n] = self.consumers[n][0]
                self.frag_leaves[n] = tree[0]
                self.frag_inner.update(tree[1])
        self.fused = {n: self.consumers[n][0] for n in self.nodes if self._fusable(n)}
        # A matmul whose only consumer is a stored unary elementwise op writes that op's
        # value directly (epilogue): no product tile, one step and one barrier fewer.
        self.epi: dict[Node, Node] = {}
        for n in self.nodes:
            cs = self.consumers[n]
            if (n.op == "matmul" and n not in self.fused and n not in self.out_nodes
                    and len(cs) == 1 and len(cs[0].src) == 1 and cs[0] not in self.inline
                    and cs[0].op in REGISTRY and REGISTRY[cs[0].op].elementwise):
                self.epi[n] = cs[0]
        #: register chains (Schedule.mma_chain), keyed by their second matmul
        self.chains: dict[Node, Chain] = {}
        self.kslice: dict[Node, int] = {}  # (set below, once the chains and gemvs are known)
        for n in self.nodes:
            ch = self._chain(n)
            if ch is not None:
                self.chains[ch.second] = ch
                self.epi.pop(ch.first, None)
        #: the register chains' matmuls and their rows of 16 per warp (whole rows per warp)
        self.chain_wm = {m: ch.wm for ch in self.chains.values() for m in (ch.first, ch.second)}
        #: ... and each one's chain (its warps, columns and passes)
        self.chain_of = {m: ch for ch in self.chains.values() for m in (ch.first, ch.second)}
        self.chain_nodes = {x for ch in self.chains.values() for x in ch.nodes}
        self.chain_sums = {a for ch in self.chains.values() for a in ch.sums}
        self.epi_of = {e: m for m, e in self.epi.items()}
        self.buf: dict[Node, str] = {}
        self.nvar = 0
        self.smem_limit = smem_limit
        #: skinny matmuls streamed through registers (Schedule.gemv): matmul -> its B tile
        self.gemv: dict[Node, Node] = {n: n.src[1] for n in self.nodes if self._gemv_ok(n)}
        self.gemv_b = set(self.gemv.values())
        #: computed tiles stored as fp16 in shared memory (Schedule.half_tiles)
        self.half = {n for n in self.nodes if self._half_ok(n)}
        #: register-summed tensor-core products whose k-steps several warps share
        #: (Schedule.mma_kslice): matmul -> warps per warp tile (each is in ``reg_acc``)
        self.kslice = {n: kw for n in self.fused if (kw := self._kslice(n)) > 1}
        #: tensor-core matmuls whose plain accumulator lives in registers through the loop
        #: (Schedule.mma_registers; stored to the accumulator's tile after the loop)
        self.reg_acc = {n for n in self.fused if self._reg_acc_ok(n)}
        #: fp32 products on the tensor cores as three TF32 MMAs (Schedule.tf32x3): product ->
        #: its warp tiling (16 x 8 tiles a warp down, across; warps across the columns)
        self.tf32 = {n: wt for n in self.nodes if (wt := self.tf32_tiling(n)) is not None}
        #: CUDA-core products blocked in registers (Schedule.cc_rows), and TF32 products, whose
        #: plain sum lives in the threads' registers through the loop, stored once after it
        #: (Schedule.mma_registers)
        self.cc_acc = {n for n in self.fused if self._cc_acc_ok(n)}
        self.wg: set[Node] = set()  # (set by set_layout, which knows the ring)
        #: block outputs written straight from register accumulators (Schedule.reg_epilogue):
        #: output index -> the register products it is computed from
        self.reg_saves = self._register_saves()
        #: fold accumulators whose per-thread partial sums stay in registers through the
        #: loop (Schedule.fold_registers), each with how its threads share the rows (those
        #: summed from A fragments instead are taken out by set_layout, which knows the raw
        #: tiles: a raw tile may have register folds among its readers)
        self.reg_fold = {n: fm for n in self.nodes if (fm := self._fold_map(n)) is not None}
        self.frag_fold: dict[Node, Node] = {}
        #: tensor-core matmuls whose loop-invariant A fragments are loaded into registers
        #: once before the loop (decided by :meth:`plan`, from the steps)
        self.hoist_a: set[Node] = set()
        #: iterator tiles the printer prefetches into registers (chosen while printing the loop)
        self.staged_set: set[Node] = set()
        self.alias: dict[Node, Node] = {}  # (set by plan)
        #: kernel inputs (graph inputs) whose first ring stages are copied before the wait for
        #: the previous kernel (see emit.emit_block_graph)
        self.early: frozenset[int] = frozenset()
        #: the real shapes of the kernel's inputs and outputs, which addresses follow: a
        #: refined block's virtual graph (:mod:`refine`) has other shapes (see emit_block_graph)
        self.real_inputs: tuple[tuple[int, ...], ...] = tuple(s for s, _ in bg.inputs)
        self.real_outputs: tuple[tuple[int, ...], ...] = tuple(bg.output_shape(o) for o in bg.outputs)
        #: the refinement whose virtual graph this block graph is (:mod:`refine`), or None
        self.refinement: Refinement | None = None
        #: (set by build_steps) the wait for the previous kernel may follow the loop; the
        #: number of leading post-loop steps printed before the reductions and the combine
        self.late_wait_ok = False
        self.post_head = 0
        #: computed tiles that are the same in every iteration of a real loop (every iterator
        #: they derive from has fmap -1, no accumulator in between): computed once, before it
        self.invariant = loop_invariant(bg)
        #: loop-invariant iterator tiles that a row-wise rms_norm alone reads straight from
        #: global memory (no shared-memory copy, no load step and barrier of their own)
        self.direct = {n for n in self.nodes if self._direct_ok(n)}
        self.set_layout({n for n in self.nodes if self._raw_ok(n)})

    def set_layout(self, raw: set[Node]) -> None:
        """Row strides of operand tiles; ``raw``: the tiles kept as raw fp16 (cp.async)."""
        #: raw fp16 tiles: ``stages`` deep, filled by cp.async, read by tensor-core matmuls;
        #: their ``ld`` entry counts halves, rows padded by 8 halves (16 bytes) unless swizzled
        #: (below): row starts stay 16-byte aligned and the 8 rows one ldmatrix reads fall in
        #: distinct banks
        self.raw = raw
        #: raw tiles in dense rows with their 16-byte chunks swizzled (Schedule.dense_rows):
        #: chunk c of row r sits at chunk c ^ (r & 7), so rows stay whole 128-byte lines for
        #: the copies and the 8 rows one ldmatrix reads still fall in distinct banks. The
        #: others keep rows padded by 8 halves (16 bytes) for the same reads
        self.swz = {n for n in raw if self.opts.dense_rows and self._swizzle_ok(n)}
        #: Schedule.tma_ring applies: a producer warp fills the ring with tensor-map copies,
        #: and every raw tile is stored as the copies write it (see :meth:`raw_offset`)
        self.tma = self._tma_ok()
        #: Schedule.tma_multicast: the grid axis whose pairs of blocks form a cluster, and the
        #: ring tiles both blocks of a pair read (copied once for both), or None and nothing
        self.mcast_axis, self.mcast = self._multicast()
        per_stage = sum(n.dtype.itemsize * math.prod(n.shape[:-1]) * (n.shape[-1] + self.raw_pad(n))
                        for n in raw)
        #: cp.async pipeline depth: iterations in flight (stages of every raw tile)
        self.stages = max(2, min(self.opts.async_stages, self.FL,
                                 self.opts.async_stage_bytes // max(per_stage, 1)))
        #: set while the main loop is printed when it keeps ring-slot counters (ring_counted)
        self.slot_counters = False
        # Operand tiles of matmuls get rows padded by 4 floats: tensor-core fragment loads
        # then hit distinct shared-memory banks (a row stride that is a multiple of 32 words
        # puts the 8 rows a warp reads in one bank).
        self.ld: dict[Node, int] = {}
        for n in self.nodes:
            if n.op == "matmul":
                for s in n.src:
                    if s in raw:  # (its rows are set with every raw tile's below)
                        continue
                    if ((s.op == ITER or REGISTRY[s.op].elementwise or self.rms_rowwise(s))
                            and s not in self.inline and s.shape[-1] % 4 == 0
                            and s.shape[-1] >= 8):
                        self.ld[s] = s.shape[-1] + 4
        for n in self.tf32:
            # a TF32 product's lanes read 8-byte pairs of A at rows g (0-7) and columns 2q
            # (0-6): rows 8 or 24 floats apart mod 32 put a half-warp's 16 pairs in distinct
            # banks (print_tf32; B's rows at 4 mod 8, as above, already do for its reads)
            A = n.src[0]
            if A in self.ld:
                self.ld[A] = A.shape[-1] + self.tf32_pad(A)
        for n in self.half:  # fp16 rows padded by 8 halves (ldmatrix)
            self.ld[n] = n.shape[-1] + 8
        #: a one-iteration register chain's first-product B iterator tile stored transposed
        #: as fp16 (:meth:`_transposed_b`), with the chain it feeds
        self.bt = {ch.first.src[1]: ch for ch in self.chains.values() if self._transposed_b(ch, raw)}
        for n in raw:  # (raw tiles that only rms_norms read get the same rows)
            self.ld[n] = n.shape[-1] + self.raw_pad(n)
        if self.opts.pad_acc_rows:  # (the sums' tiles of register products: Schedule field)
            for prod in self.reg_acc:
                sums = self.fused[prod]
                if sums.shape[-1] % 32 == 0 and sums not in self.ld and sums not in self.half:
                    self.ld[sums] = sums.shape[-1] + ACC_ROW_PAD
        #: fold accumulators summed from a register product's A fragments
        #: (Schedule.fold_fragments): fold -> that product; they leave the register folds
        self.frag_fold = {a: m for a in self.nodes if (m := self._fragment_product(a)) is not None}
        self.reg_fold = {n: fm for n in self.nodes
                         if n not in self.frag_fold and (fm := self._fold_map(n)) is not None}
        #: products that run as warpgroup MMAs (Schedule.wgmma): both operands in the TMA
        #: ring, summed in registers, nothing else reading their fragments (wgmma_shape
        #: already leaves out register chains and ops on A: its operands are iterators)
        self.wg = {n for n in self.reg_acc if self.tma and self.wgmma_shape(n)
                   and n.src[0] in self.swz and n.src[1] in self.swz and n not in self.kslice
                   and n not in self.frag_fold.values()}

    def kpair(self, n: Node) -> bool:
        """Tensor-core matmul ``n`` sums its even and odd k-steps into two register
        accumulator sets (Schedule.mma_kpair): a register accumulator of the plain loop
        (no hoisted A) with at least two k-steps."""
        return (self.opts.mma_kpair and n in self.reg_acc and n not in self.hoist_a and n not in self.wg
                and n.src[0].shape[-1] >= 32 * self.kslice.get(n, 1))

    def _tma_ok(self) -> bool:
        """Whether :attr:`Schedule.tma_ring` applies, and warps are left to spare for the
        producer. It needs a real loop of this block and no stream-K (a split combines through
        global memory or through the cluster: the producer warp then waits at the cluster's
        barriers before it leaves). Every tile of the ring must:
        - keep swizzled dense rows;
        - be a 2-D tile, or one slice of a batched input (:func:`tma.tma_tile_ok`: the map
          then views the input as 2-D, its leading dimensions flattened into the rows);
        - be of an fp16 or bf16 input whose rows are a multiple of 16 bytes;
        - be copied in boxes of at most 256 rows (:func:`tma.box_rows`: a taller tile in equal
          boxes of a multiple of 8 rows).
        That is what a 2-D tensor map can describe. A split block's producer copies its own
        iterations (``itb + it``); its combine's block barriers are the consumer warps' own,
        like every barrier after the producer's branch."""
        if not (self.opts.tma_ring and self.raw and self.swz == self.raw and self.FL > 1
                and not self.stream_k and self.T % 32 == 0 and self.T + 32 <= 1024):
            return False
        for n in self.raw:
            shape, dt = self.bg.inputs[n.attr("input")]
            if (not tma_tile_ok(n.shape, shape) or dt.itemsize != 2 or shape[-1] % 8
                    or n.shape[-1] % BOX_COLS or box_rows(n.shape[-2]) is None):
                return False
        return True

    def _multicast(self) -> tuple[int | None, frozenset[Node]]:
        """Where :attr:`Schedule.tma_multicast` applies: a TMA ring kernel without a split or
        stream-K, and a grid axis of even extent that the map of at least one ring tile
        leaves out (that tile is the same for both blocks of a pair along it). The axis whose
        shared tiles hold the most bytes, the lowest first on a tie; (None, {}) if none."""
        pair = (pair_axis(self.raw, self.bg.grid) if self.opts.tma_multicast and self.tma
                and self.split == 1 and not self.stream_k else None)
        if pair is None:
            return None, frozenset()
        axis = pair[0]
        return axis, frozenset(n for n in self.raw if n.attr("imap")[axis] == -1)

    def tma_box_halves(self, n: Node) -> int:
        """Halves between the 64-column boxes of one stage of raw tile ``n`` in a TMA ring:
        the box's rows of 128 bytes, rounded up to 8 rows (a 1024-byte swizzle period, so
        every box starts where the copy engine's swizzle pattern does)."""
        return -(-math.prod(n.shape[:-1]) // 8) * 8 * BOX_COLS

    def raw_pad(self, n: Node) -> int:
        """Elements (halves; floats for an fp32 tile) of padding after each row of raw tile
        ``n``: 16 bytes for ldmatrix's rows, none where swizzled; an fp32 tile's as a TF32
        product reads it (:meth:`tf32_pad`)."""
        if n.dtype is DType.F32:
            return self.tf32_pad(n)
        return 0 if n in self.swz else 8

    def tf32_pad(self, n: Node) -> int:
        """Floats of padding after each row of fp32 tile ``n`` that TF32 products read: as
        some product's A, rows 8 or 24 floats apart mod 32 (a half-warp's 8-byte fragment
        pairs in distinct banks); as B only, 4 (its fragment rows 2q and 2q + 1 at column g:
        rows 4 apart mod 8 put them in distinct banks)."""
        if any(c.src[0] is n for c in self.consumers[n] if c in self.tf32):
            return 8 if n.shape[-1] % 16 == 0 else 16
        return 4

    def _swizzle_ok(self, n: Node) -> bool:
        """Raw tile ``n`` can keep swizzled dense rows: rows of whole groups of eight 16-byte
        chunks, a multiple of 8 rows per batch slice when there are several (a slice then
        starts at a row ≡ 0 mod 8, so its local row and the buffer's row agree in the bits the
        swizzle uses), and read only where the printers apply the swizzle: as the B tile of a
        gemv, through ldmatrix by tensor-core matmuls (attention's register chains too), or
        element by element through :meth:`addr` by a register fold accumulator (rmsnorm's
        fused X tile, summed for its rms beside the matmul)."""
        if len(n.shape) < 2 or n.shape[-1] % 64 or (n.shape[-2] % 8 and math.prod(n.shape[:-2]) > 1):
            return False
        for c in self.consumers[n]:
            if c in self.reg_fold or c in self.frag_op or c in self.frag_inner:  # (ldmatrix)
                continue
            if len(c.src) != 2 or c.src[0] is c.src[1]:
                return False
            if c in self.gemv:
                if c.src[1] is not n:
                    return False
            elif not (self._mma(c) and self.opts.ldmatrix
                      and c.src[0].shape[-1] % 16 == 0
                      and (c.src[0] is not n or n.shape[-2] == c.shape[-2])
                      and (c.src[1] is not n or (c.shape[-1] % 8 == 0 and n.shape[-1] == c.shape[-1]))):
                return False
        return True

    def raw_offset(self, n: Node, row: str, chunk: str, xor_row: str | None = None) -> str:
        """Halves from a stage (or batch slice) of raw tile ``n`` to 16-byte chunk ``chunk`` of
        row ``row`` (C expressions), swizzled where ``n`` keeps dense rows by ``xor_row``
        (default ``row``: the row within its batch slice, which has the same low bits)."""
        if n in self.swz and self.tma and n.shape[-1] > BOX_COLS:
            # a TMA ring's tile of several 64-column boxes: box after box, each in rows of
            # 128 bytes whose chunks the copy engine's 128-byte swizzle places at c ^ (r & 7)
            return (f"((({chunk}) >> 3) * {self.tma_box_halves(n)} + ({row}) * {BOX_COLS} + "
                    f"(((({chunk}) & 7) ^ (({xor_row or row}) & 7)) << 3))")
        if n in self.swz:
            return f"({row}) * {self.ld[n]} + ((({chunk}) ^ (({xor_row or row}) & 7)) << 3)"
        return f"({row}) * {self.ld[n]} + {chunk if chunk.isidentifier() else f'({chunk})'} * 8"

    # ------------------------------------------------------------ decisions
    def _inlinable(self, n: Node) -> bool:
        if n.op != ITER and not (n.op in REGISTRY and REGISTRY[n.op].elementwise):
            return False
        if n.op == ITER and self._prefetchable(n):
            # read in place, a tile that changes every iteration costs each iteration a
            # global-memory round trip before its expression; as a load step it is
            # prefetched into registers iterations ahead ((X + Y) · W fused: see
            # docs/codegen.md)
            return False
        # (an op, not an iterator, may also be summed where it is computed: emit_reduce
        # evaluates it term by term, so a layer norm's squared differences are never stored)
        return all(c.op == "accum" or REGISTRY[c.op].elementwise
                   or (n.op != ITER and c.op in ("sum", "mean")) for c in self.consumers[n])

    def _frag_tree(self, n: Node) -> tuple[list[Node], list[Node]] | None:
        """(leaf tiles, inner ops) of the elementwise expression ``n`` that
        Schedule.a_op_fragments computes on a tensor-core product's A fragments, or None.

        ``n``'s one reader is a tensor-core matmul (ldmatrix, k-steps of 16) taking it as its
        A operand of the product's rows; ``n`` and the ops below it are elementwise (with a C
        expression), each read only inside the expression, down to one or two distinct 2-D
        fp16 iterator tiles of ``n``'s shape that change every iteration of a real loop and
        that only the expression reads (ring tiles: set_layout makes them raw, where the
        printer reads them)."""
        if not (self.opts.a_op_fragments and self.opts.ldmatrix and self.opts.async_copy) \
                or self.bg.forloop < 2:
            return None
        cs = self.consumers[n]
        if len(cs) != 1:
            return None
        m = cs[0]
        if (m.op != "matmul" or m.src[0] is not n or m.src[1] is n or not self._mma(m)
                or len(n.shape) != 2 or n.shape[-1] % 16 or m.shape[-2] != n.shape[-2]
                or n.dtype is not DType.F16):  # (half2 arithmetic on the fragments)
            return None
        tree = elementwise_tree(self.bg, n)
        if tree is None or n in self.out_nodes or not 1 <= len(tree[0]) <= 2:
            return None
        leaves, inner = tree
        if not all(self._ring_tile(x) and x.shape == n.shape for x in leaves):
            return None
        return leaves, inner

    def _prefetchable(self, n: Node) -> bool:
        """Iterator ``n`` changes every iteration of a loop, an elementwise op reads it (not
        only accumulators: a sum of tiles read in place measured faster, s27 c13) and it fits
        the prefetch registers alone (the emitter's staging takes such tiles while its
        register budget lasts)."""
        return (self.bg.forloop > 1 and n.attr("fmap") != -1 and self.opts.prefetch
                and any(c.op != "accum" for c in self.consumers[n])
                and self.vec_load(n) and self.prefetch_regs(n) <= self.opts.prefetch_regs)

    def _fusable(self, n: Node) -> bool:
        cs = self.consumers[n]
        return (n.op == "matmul" and len(cs) == 1 and cs[0].op == "accum"
                and cs[0].attr("fold") is None and cs[0].attr("kind") in ("sum", "mean")
                and n not in self.out_nodes)

    def _mma(self, n: Node) -> bool:
        """Matmul ``n`` runs on tensor cores (``emit_matmul_mma``): both operands fp16, or
        both bf16 (:func:`float16.tensor_core_type`)."""
        return (n.op == "matmul" and self.opts.mma and self.warp_ok()
                and tensor_core_type(*(s.dtype for s in n.src)) is not None)

    def set_refinement(self, rf: Refinement) -> None:
        """This layout's block graph is ``rf``'s virtual graph: address the real tensors and
        launch ``rf.parts`` bands of each block along ``rf.axis``."""
        self.real_inputs, self.real_outputs = rf.real_inputs, rf.real_outputs
        self.refinement = rf

    @property
    def launch_grid(self) -> tuple[int, int, int]:
        """The grid the kernel launches (a refined block's bands along their axis)."""
        return self.refinement.launch_grid if self.refinement is not None else self.bg.grid

    def block_index_decl(self) -> str:
        """The kernel's declaration of its block index ``bx, by, bz`` (and, refined, of its
        band ``mf_band``)."""
        idx = [f"blockIdx.{c}" for c in "xyz"]
        band = ""
        if (rf := self.refinement) is not None:
            a, c = rf.axis, rf.parts
            idx[a] = f"blockIdx.{'xyz'[a]} / {c}" if self.bg.grid[a] > 1 else "0"
            band = f" const int mf_band = blockIdx.{'xyz'[a]} % {c};"
        return f"  const int bx = {idx[0]}, by = {idx[1]}, bz = {idx[2]};{band}"

    def rows_past(self, n: Node) -> bool:
        """Tensor-core matmul ``n``'s warps address rows past its last, whose loads must clamp
        and whose sums and stores must be skipped: its rows end inside a 16-row tile, or (a
        register chain's) the last warp's group of ``wm`` row tiles runs past its row tiles
        (7 row tiles of a 112-row band, 2 a warp)."""
        M = n.shape[-2]
        wm = self.chain_wm.get(n)
        return M % 16 != 0 or (wm is not None and (M // 16) % wm != 0)

    def warp_blocking(self, n: Node) -> tuple[int, int, int]:
        """Tensor-core matmul ``n``'s register blocking (WM, WN) and its number of warp tiles
        (a k-sliced product's: one per warp of each slice)."""
        NB = math.prod(n.shape[:-2])
        MT, NT = -(-n.shape[-2] // 16), -(-n.shape[-1] // 8)
        wm = self.chain_wm.get(n)
        if wm is not None:  # a register chain's matmul: whole rows per kw warps
            ch = self.chain_of[n]
            return wm, (NT if n in self.chains else ch.chunk // 8), NB * row_groups(MT, wm) * ch.kw
        if self.wgmma_shape(n):  # one 16-row tile a warp, its warpgroup's columns (Schedule.wgmma)
            C = self.opts.wgmma_cols
            return 1, -(-n.shape[-1] // 8) // C, -(-n.shape[-2] // 16) * C
        kw = self.kslice.get(n, 1)
        WM, WN, tiles = self._plain_blocking(n, self.T // 32 // kw)
        return WM, WN, tiles * kw

    def wgmma_shape(self, n: Node) -> bool:
        """Schedule.wgmma's blocking applies to ``n``: a product of a block whose products the
        field takes (:func:`schedule.wgmma_threads`), on one thread block warp per 16 of their
        rows. (Whether it really runs as warpgroup MMAs depends on the ring too: :attr:`wg`.)"""
        return (self.opts.wgmma and n.op == "matmul"
                and wgmma_threads(self.bg, self.opts.wgmma_cols) == self.T)

    def _plain_blocking(self, n: Node, warps: int) -> tuple[int, int, int]:
        """(WM, WN) and the warp tiles of matmul ``n`` (no register chain) on ``warps`` warps."""
        NB = math.prod(n.shape[:-2])
        MT, NT = -(-n.shape[-2] // 16), -(-n.shape[-1] // 8)
        # rows past the last in a ragged group of row tiles are clamped and skipped like a
        # partial tile's (schedule.warp_tiles); only where the loop could keep sums in registers
        ragged = n.shape[-2] % 16 != 0 and self.bg.forloop > 1 and self.opts.mma_registers
        WM, WN = warp_tiles(NB, MT, NT, warps, self.opts.warp_m, self.opts.warp_n, ragged)
        return WM, WN, NB * row_groups(MT, WM) * (NT // WN)

    def _register_saves(self) -> dict[int, tuple[Node, ...]]:
        """The outputs stored from registers (Schedule.reg_epilogue), each with the register
        products (matmuls in ``reg_acc``) it reads: an output whose value, through inlined
        elementwise ops, reads the plain sum accumulators of one or more register products of
        the same shape as the output and the same warp tiles (each warp then holds every one
        of them at the same elements), each read by this output alone; its other operands are
        tiles in memory. Not with a split loop, stream-K, a cluster combine or k slices (a
        register chain's included: until s34 its warps each stored their own k slice's
        partial sums to the same outputs, and such kernels failed validation)."""
        o = self.opts
        if (not o.reg_epilogue or o.split > 1 or o.stream_k or o.cluster_combine
                or self.bg.forloop < 2):
            return {}
        # (not a k-sliced product, nor a register chain's second product over k slices: each
        # warp's registers then hold a partial sum; the slices meet in shared memory)
        accs = {self.fused[m]: m for m in self.reg_acc
                if m not in self.kslice and self.second_kw(m) == 1}
        found: dict[int, tuple[Node, ...]] = {}
        for k, out in enumerate(self.bg.outputs):
            root, chain = out.node, self._inline_chain(out.node)
            ms = list({accs[n]: None for n in (root, *(s for c in chain for s in c.src)) if n in accs})
            if not ms:
                continue
            blocking = {self.warp_blocking(m) for m in ms}
            if len(blocking) == 1 and all(
                    self.fused[m].shape == root.shape and self.fused[m].attr("kind") == "sum"
                    and set(self.consumers[self.fused[m]]) <= chain
                    and sum(x.node is self.fused[m] for x in self.bg.outputs) == (root is self.fused[m])
                    for m in ms):
                found[k] = tuple(sorted(ms, key=self.ids.__getitem__))
        used = [m for ms in found.values() for m in ms]
        return {k: ms for k, ms in found.items() if all(used.count(m) == 1 for m in ms)}

    def _kslice(self, n: Node) -> int:
        """The warps that share each warp tile of matmul ``n`` over k slices
        (Schedule.mma_kslice), or 1: a tensor-core product folded into a plain accumulator
        of a real loop, not a register chain's, whose k-steps divide evenly over the slices
        and whose warp tiles for the fewer warps each slice has still give every warp one."""
        kw = self.opts.mma_kslice
        if (kw == 1 or not self.opts.mma_registers or self.bg.forloop < 2 or n in self.chains
                or n in self.chain_wm or n in self.gemv or not self._mma(n)
                or self.fused[n] in self.half):
            return 1
        W, K = self.T // 32, n.src[0].shape[-1]
        if W % kw or K % 16 or (K // 16) % kw:
            return 1
        return kw if self._plain_blocking(n, W // kw)[2] <= W // kw else 1

    def second_kw(self, n: Node) -> int:
        """The warps sharing a row tile of ``n`` when it is a register chain's second product
        (each runs it over its own k slice); 1 otherwise."""
        return self.chains[n].kw if n in self.chains else 1

    def static_warp_tiles(self, n: Node) -> bool:
        """Each warp owns at most one warp tile of matmul ``n`` (the same in every iteration)."""
        return self.warp_blocking(n)[2] <= self.T // 32

    def _chain(self, m2: Node) -> Chain | None:
        """The register chain ending in matmul ``m2`` (see :class:`Chain`), or None.

        ``m2`` adds into a plain accumulator; the chain's structure is ``ir.chain.chain_parts``
        (its A operand ``E`` computed from one matmul ``m1`` alone through elementwise
        nodes, their other readers row-sum accumulators), both products on tensor cores,
        ``m1`` not itself summed. Rows may end inside a 16-row tile, ``m1``'s columns are
        padded to a multiple of 16 (:attr:`Chain.cols`), and every warp can own ``wm`` whole row tiles of both (one warp tile each) within
        ``ir.occupancy.chain_register_budget`` registers (else in passes over the columns)."""
        o = self.opts
        if not (o.mma_chain and o.mma_registers and m2.op == "matmul"
                and m2 in self.fused and self._mma(m2)):
            return None
        parts = chain_parts(m2, self.consumers, self.out_nodes)
        if parts is None or parts.first in self.fused or not self._mma(parts.first):
            return None
        m1, E = parts.first, parts.tile
        M, N1, N2, K1 = E.shape[-2], E.shape[-1], m2.shape[-1], m1.src[0].shape[-1]
        if N2 % 8 or K1 % 16:
            return None
        # rows past M in the last 16-row tile (mha b=8's 8-row query tiles) read A's row M-1
        # or zeros and are neither summed into a tile nor stored; so do the rows of a last
        # group of wm row tiles that runs past the rows (13 row tiles of 197 queries, wm 2)
        NB, MT = math.prod(E.shape[:-2]), -(-M // 16)
        W = self.T // 32
        wm = next((w for w in (1, 2, 4) if MT % w == 0 and NB * (MT // w) <= W), None)
        if wm is None:
            wm = next((w for w in (1, 2, 4) if NB * row_groups(MT, w) <= W), None)
            if wm is None:
                return None
        elif o.chain_rows > wm and MT % o.chain_rows == 0:
            wm = o.chain_rows  # more rows per warp, the extra warps on k slices (Schedule)
        groups, cols = NB * row_groups(MT, wm), -(-N1 // 16) * 16

        def regs(columns: int) -> int:  # the first product's, the second's, A's fragments
            return chain_registers(wm, columns, N2, K1)

        # the warps left over share each row tile's columns (k slices of the second product)
        kw = next(k for k in (8, 4, 2, 1) if groups * k <= W and (cols // 16) % k == 0
                  and (o.chain_warps == 0 or k <= o.chain_warps))
        chunk = cols // kw
        # (the registers the block leaves a thread bound them too: 512 threads, 128 each)
        budget = chain_register_budget(self.T)
        if regs(chunk) > budget:
            if N1 % 16 == 0 and self.bg.forloop > 1:
                return None  # (a loop's key tiles: the loop is the pass over the columns)
            # passes of ``chunk`` columns, each within those registers: the fewest passes
            # whose padding stays within PASS_PADDING, then the fewest columns (197 keys, 2
            # row tiles a warp: 7 passes of 32 columns)
            fits = [c for c in range(16, cols + 1, 16) if regs(c) <= budget
                    and -(-N1 // c) * c <= cols * PASS_PADDING]
            if not fits:
                return None
            kw, chunk = 1, min(fits, key=lambda c: (-(-N1 // c), -(-N1 // c) * c))
            cols = -(-N1 // chunk) * chunk
        return Chain(m1, tuple(sorted(parts.inner, key=self.ids.__getitem__)), E, m2,
                     tuple(sorted(parts.sums, key=self.ids.__getitem__)), wm, kw, cols, chunk)

    def _transposed_b(self, ch: Chain, raw: set[Node]) -> bool:
        """Chain ``ch``'s first product reads its B operand, an iterator tile of one
        iteration that cp.async cannot copy (rows without 16-byte chunks: ViT's K stored
        transposed, 197 keys a row), from an fp16 copy stored transposed: one row of
        ``k + 8`` halves per column, the chain's padded columns included (zeroed), so each
        B fragment is one ldmatrix (non-transposed) or two 4-byte reads instead of four
        scalar fp32 reads and two conversions (:meth:`bt_pitch`)."""
        m1 = ch.first
        B = m1.src[1]
        return (self.bg.forloop == 1 and B.op == ITER and B not in raw
                and self.consumers[B] == [m1] and B.dtype in (DType.F16, DType.BF16)
                and self.bg.inputs[B.attr("input")][1] is B.dtype
                and B.shape[-2] % 16 == 0 and math.prod(B.shape[:-2]) == 1)

    def bt_pitch(self, n: Node) -> int:
        """Halves between the rows (B's columns) of transposed tile ``n`` (:attr:`bt`): its
        k range and 8 more, so the 8 rows one ldmatrix reads fall in distinct banks."""
        return n.shape[-2] + 8

    def _invariant_mean(self, a: Node) -> bool:
        """Accumulator ``a`` is a plain mean (no fold) of a loop-invariant tile computed once
        after the loop (:class:`InvariantAccumulate`): the tile itself. Not in a loop split
        over blocks (a split, stream-K): there each block's partial is its iterations' count
        times the tile, which the combine sums and the finalize divides by the loop's range."""
        o = self.opts
        return (invariant_mean(a) and o.split == 1 and not o.stream_k
                and self._invariant_accum(a))

    def _reg_acc_ok(self, n: Node) -> bool:
        return (self.opts.mma_registers and (self.bg.forloop > 1 or n in self.chains) and n not in self.gemv
                and self._mma(n) and self.static_warp_tiles(n))

    def cc_rc(self, n: Node) -> tuple[int, int]:
        """The outputs a thread (rows, columns) of CUDA-core product ``n`` under this schedule's
        ``cc_rows`` / ``cc_cols`` (:func:`schedule.cc_block`; (1, 1): unblocked)."""
        return cc_block(n.shape, self.opts.cc_rows, self.opts.cc_cols, self.T)

    def _cc_acc_ok(self, n: Node) -> bool:
        """CUDA-core product ``n``, added into its plain sum every iteration, keeps that sum in
        registers through the loop: its blocking (:func:`schedule.cc_block`) gives every thread
        exactly one block of outputs, so each thread's R x C registers are always the same
        outputs (no stream-K, whose blocks restart their sums per segment)."""
        if (not self.opts.mma_registers or self.bg.forloop < 2 or self.stream_k or n in self.gemv
                or n in self.chains or self._mma(n)):
            return False
        a = self.fused[n]
        if a.op != "accum" or a.attr("kind") != "sum" or a.attr("fold") is not None:
            return False
        if n in self.tf32:  # (every warp always owns the same 16 x 8 tiles)
            return True
        R, C = self.cc_rc(n)
        groups = math.prod(n.shape[:-2]) * (n.shape[-2] // R) * (n.shape[-1] // C)
        return R * C > 1 and groups == self.T

    def tf32_tiling(self, n: Node) -> tuple[int, int, int] | None:
        """How the warps share fp32 product ``n`` on the tensor cores under Schedule.tf32x3
        (:func:`schedule.tf32_warp_tiling`), or None where it stays on the CUDA cores: a
        product :func:`schedule.tf32_product_dims` takes, of two tiles stored in shared
        memory as fp32 (not inlined, not fp16 tiles, not a gemv's), that the function tiles
        for this block's warps."""
        dims = tf32_product_dims(n) if self.opts.tf32x3 else None
        if dims is None or n in self.gemv or self.T % 32:
            return None
        if any(s in self.inline or s in self.half for s in n.src):  # (fp32 buffers only)
            return None
        return tf32_warp_tiling(*dims, self.T // 32)

    def _hoist_ok(self, n: Node, loop_defined: set[Node]) -> bool:
        """Loop-step matmul ``n`` runs on tensor cores, its A tile is stored and defined before
        the loop, and each warp owns one warp tile: its A fragments (at most 64 registers per
        thread) are loaded once before the loop (Schedule.mma_registers)."""
        A = n.src[0]
        K = A.shape[-1]
        if (not self.opts.mma_registers or n.op != "matmul" or n in self.gemv or not self._mma(n)
                or A in loop_defined or A in self.raw or A not in self.buf or K % 16
                or n in self.kslice):
            return False
        return self.static_warp_tiles(n) and self.warp_blocking(n)[0] * (K // 16) * 4 <= 64

    def rms_rowwise(self, n: Node) -> bool:
        """rms_norm ``n`` runs row-wise in one step (``emit.rms_norm_vec``: a group of lanes per
        row, 16-byte vectors; ``emit.rms_norm_rows`` for rows not a multiple of 8 long): each
        lane keeps its at most 16 values of a row in registers between the row's sum of squares
        and the scaled writes, so there is no second pass, no barrier between the two and no
        scratch row buffer; its source may be a raw fp16 ring (cp.async), global memory or an
        fp16 tile, its result stored padded or as fp16 (``half_tiles``) for tensor-core reads."""
        return n.op == "rms_norm" and self.warp_ok() and n.shape[-1] <= ROWWISE_MAX_ROW

    def _normalizes(self, c: Node, n: Node) -> bool:
        """``c`` is a row-wise rms_norm of tile ``n`` (its input, not its gain)."""
        return self.rms_rowwise(c) and c.src[0] is n and n not in c.src[1:]

    def _half_ok(self, n: Node) -> bool:
        """Tile ``n`` can be stored in its own 16-bit type, fp16 or bf16 (Schedule.half_tiles):
        a materialized elementwise result (or a matmul epilogue's), a row-wise rms_norm's, or
        a tensor-core matmul's own product (no epilogue: lora's A·B, which X·(A·B) reads as
        B), with rows of 8-element multiples, no output, read only by accumulators and by
        tensor-core matmuls of its type (an elementwise result as operand A, a norm's or a
        product's as either operand)."""
        if (not self.opts.half_tiles or n.op == ITER or n in self.inline or n in self.out_nodes
                or n in self.chain_nodes or n in self.frag_op or n in self.frag_inner
                or tensor_core_type(n.dtype) is None):  # (stored in its own 16-bit type)
            return False
        norm = self.rms_rowwise(n)
        # a product stored from its fragments as pairs (its dtype is fp16 or bf16: the
        # rounding the program itself has)
        product = (n.op == "matmul" and self._mma(n) and n not in self.fused and n not in self.epi)
        either = norm or product  # (read as A or as B)
        if not either and (n.op not in REGISTRY or not REGISTRY[n.op].elementwise
                           or n in self.fused):
            return False
        if len(n.shape) < 2 or n.shape[-1] % 8 or n.shape[-1] < 16:
            return False
        cs = self.consumers[n]

        def reads(c: Node) -> bool:
            # (products of the tile's own type: a bf16 product's fragments cannot be an fp16
            # tile's)
            if (not self._mma(c) or c in self.epi or c.src[0] is c.src[1]
                    or tensor_core_type(*(s.dtype for s in c.src)) is not n.dtype):
                return False
            return c.src[0] is n or (either and c.src[1] is n)

        return bool(cs) and any(c.op == "matmul" for c in cs) and all(
            c.op == "accum" or reads(c) for c in cs)

    def _fold_map(self, a: Node) -> FoldMap | None:
        """How fold accumulator ``a``'s threads keep its partial sums in registers through a
        real loop (see Schedule.fold_registers), or None: not a fold accumulator, a register
        chain's row sum, or more than ``FOLD_REGISTERS_MAX`` rows per thread."""
        if (not self.opts.fold_registers or a.op != "accum" or a.attr("fold") is None
                or self.bg.forloop == 1 or a in self.chain_sums):
            return None
        rows = math.prod(a.shape)
        cols = a.src[0].shape[-1] // a.attr("fold")  # terms per row and iteration
        W = self.T // 32
        share = self.warps_per_row(rows, cols)
        if share:
            fm = FoldMap("warps", 1, share)  # S warps share each row
        elif self.warp_ok() and cols >= 32:
            fm = FoldMap("warp", -(-rows // W), 1)  # a warp per row
        else:
            fm = FoldMap("thread", -(-rows // self.T), 1)  # a thread per row
        return fm if fm.per_thread <= FOLD_REGISTERS_MAX else None

    def register_folds(self) -> dict[Node, Node]:
        """Fragment folds (:attr:`frag_fold`, no k slices) whose every reader is an inlined op
        of an output stored from the registers of their own product (``reg_saves``): each
        warp already holds its rows' partial sums in registers (every warp adds the terms of
        its A fragments), so the register epilogue finishes them there (quad shuffles, then
        the mean or square root) and the fold's shared tile, its zeroing, the post-loop sums
        and the barriers between them are not printed. Fold -> its product."""
        saved = [(ms, self._inline_chain(self.bg.outputs[k].node)) for k, ms in self.reg_saves.items()]
        out: dict[Node, Node] = {}
        for a, m in self.frag_fold.items():
            chains = [chain for ms, chain in saved if m in ms]
            if (m in self.kslice or a in self.out_nodes or not chains
                    or not set(self.consumers[a]) <= set().union(*chains)):
                continue
            out[a] = m
        return out

    def _inline_chain(self, root: Node) -> set[Node]:
        """The inlined elementwise ops an output computes through (its root included)."""
        chain, stack = set(), [root]
        while stack:
            n = stack.pop()
            if n in self.inline and n.op != ITER and n not in chain:
                chain.add(n)
                stack.extend(n.src)
        return chain

    def finalized(self, a: Node, v: str) -> str:
        """Accumulator ``a``'s final value from its sum ``v`` (a C expression): the mean over
        its terms, or their root mean square; a plain sum as it is."""
        if a.attr("kind") == "sum":
            return v
        fold = a.attr("fold")
        count = self.bg.forloop * (a.src[0].shape[-1] // fold if fold is not None else 1)
        e = f"{v} * {fmt_float(1.0 / count)}f"
        return f"sqrtf({e})" if a.attr("kind") == "rms" else e

    def _fragment_product(self, a: Node) -> Node | None:
        """The register product whose A fragments fold accumulator ``a`` adds its terms from
        (Schedule.fold_fragments), or None: ``a`` adds up each row (sum, mean: the values;
        rms: their squares) of a 2-D raw fp16 tile streamed through a real loop, one value
        per row, and that tile is the A operand of a register-summed tensor-core product (not
        a register chain's) whose warps own at most one warp tile each (the fold's partial
        sums then stay with the same rows in every iteration)."""
        if (not self.opts.fold_fragments or a.op != "accum" or a.attr("fold") != 1
                or self.bg.forloop < 2 or a in self.chain_sums or len(a.src[0].shape) != 2
                or a.src[0] not in self.raw):
            return None
        x = a.src[0]
        for m in self.consumers[x]:
            if (m.op == "matmul" and m.src[0] is x and m.src[1] is not x and m in self.reg_acc
                    and m not in self.chain_wm and self.static_warp_tiles(m)):
                return m
        return None

    def _gemv_ok(self, n: Node) -> bool:
        """Matmul ``n`` can stream its B tile through registers (see Schedule.gemv): it folds
        into a plain accumulator, has at most 8 rows (16 with at most 256 threads:
        ``schedule.gemv_rows_ok``) and no batch, and B is a per-iteration
        fp16 iterator tile read only by ``n`` whose 16-byte vectors divide evenly over the
        threads, each thread keeping one column vector (threads % (N/8) == 0; N/8 need not be
        a power of two: see :meth:`gemv_shuffles`)."""
        if (not self.opts.gemv or n not in self.fused or n in self.chains or len(n.shape) != 2
                or not gemv_rows_ok(n.shape[0], self.T)):
            return False
        A, B = n.src
        # a per-iteration tile of a real loop, or the one tile of a loop-free kernel (a whole
        # K x N weight slice: streamed in chunks instead of staged whole in shared memory)
        looped = self.bg.forloop >= 2 and B.attr("fmap") != -1
        if B.op != ITER or not (looped or self.bg.forloop == 1) or self.consumers[B] != [n]:
            return False
        if A is B or B in self.out_nodes:
            return False
        shape, dt = self.bg.inputs[B.attr("input")]
        K, N = B.shape
        nc = N // 8
        return (dt is DType.F16 and B.dtype is DType.F16 and N % 8 == 0 and shape[-1] % 8 == 0
                and self.T % nc == 0 and (K * nc) % self.T == 0)

    def _direct_ok(self, n: Node) -> bool:
        """Iterator tile ``n`` is read once, before any loop (loop-invariant, or a kernel
        without a real loop), by one row-wise rms_norm as its input, and is no output."""
        if n.op != ITER or n in self.out_nodes or n in self.inline:
            return False
        if n.attr("fmap") != -1 and self.bg.forloop > 1:
            return False
        cs = self.consumers[n]
        return len(cs) == 1 and self._normalizes(cs[0], n)

    def _ring_tile(self, n: Node) -> bool:
        """Iterator tile ``n`` could be a raw ring tile whoever reads it: it changes every
        iteration of a real loop, is no output and not inlined, and is fp16 or bf16 (or, under
        Schedule.ring32, fp32) with rows of 16-byte multiples in the tile and in global
        memory."""
        # (one iteration: a kernel with a register chain copies its operand tiles once, as
        # one ring stage, for ldmatrix fragments)
        once = self.bg.forloop == 1 and bool(self.chains)
        if not self.opts.async_copy or n.op != ITER or (self.bg.forloop < 2 and not once):
            return False
        if (n.attr("fmap") == -1 and not once) or n in self.out_nodes or n in self.inline:
            return False
        shape, dt = self.bg.inputs[n.attr("input")]
        if dt is DType.F32 and n.dtype is DType.F32:  # (Schedule.ring32: 4 floats a copy)
            return self.opts.ring32 and n.shape[-1] % 4 == 0 and shape[-1] % 4 == 0
        return (tensor_core_type(dt, n.dtype) is not None and n.shape[-1] % 8 == 0
                and shape[-1] % 8 == 0)

    def _raw_ok(self, n: Node) -> bool:
        """Iterator tile ``n`` can stay raw fp16 in shared memory, filled by cp.async: a ring
        tile (:meth:`_ring_tile`) that only tensor-core matmuls (or the readers below) read."""
        if not self._ring_tile(n):
            return False
        cs = self.consumers[n]
        if n.dtype is DType.F32:  # (an fp32 ring tile: TF32 products read it, nothing else)
            return bool(cs) and all(c in self.tf32 for c in cs)

        # consumers: tensor-core matmuls, gemv matmuls reading it as B (16-byte vectors from
        # the ring instead of prefetch registers; a gemv reads its A as fp32), row-wise
        # rms_norms normalizing it (not using it as their gain), or fold accumulators summing
        # it in registers (rmsnorm's fused kernel: X feeds the matmul and the sum of X²)
        def reads(c: Node) -> bool:
            if c in self.gemv:
                return c.src[1] is n and c.src[0] is not n
            if c.op == "rms_norm":
                return self._normalizes(c, n)
            if c in self.reg_fold or c in self.frag_op or c in self.frag_inner:
                return True
            return self._mma(c)

        return bool(cs) and all(reads(c) for c in cs)

    def stage_halves(self, n: Node) -> int:
        """Elements (halves; floats for an fp32 tile) of one stage of raw tile ``n`` (16-byte
        multiple; in a TMA ring, whole 1024-byte boxes: :meth:`tma_box_halves`)."""
        if self.tma:
            return n.shape[-1] // BOX_COLS * self.tma_box_halves(n)
        per16 = 16 // n.dtype.itemsize
        return -(-math.prod(n.shape[:-1]) * self.ld[n] // per16) * per16

    def ring_counted(self) -> bool:
        """Whether the loop keeps its ring slots in counters (``mf_s``, ``mf_sr``) instead of
        computing ``it % stages``: for a ring depth that is not a power of two, where the
        remainder is a chain of about ten dependent integer instructions at the head of every
        iteration (a power of two is one AND). Measured on the fused rmsnorm kernel (s27):
        5 stages ran 1.7 µs slower than 4 and 7 stages of 64 rows 7 µs slower than 8, with
        16-31% more instructions executed."""
        return bool(self.raw) and self.stages & (self.stages - 1) != 0

    def stage_offset(self, n: Node, itv: str = "it") -> str:
        """Halves from raw tile ``n``'s ring to the stage iteration ``itv`` reads or fills. In
        the loop of a counted ring (:meth:`ring_counted`; ``slot_counters`` is set while the
        loop is printed) iteration ``it``'s stage is the loop's slot counter ``mf_s`` (the
        refill passes its own, ``mf_sr``, to ``emit_cp_async``); constants (the prologue's
        stages) fold at compile time."""
        if self.slot_counters and itv == "it":
            return self.slot_offset(n, "mf_s")
        return f"({itv} % {self.stages}) * {self.stage_halves(n)}"

    def slot_offset(self, n: Node, slot: str) -> str:
        """Halves from raw tile ``n``'s ring to the stage in slot ``slot`` (a counter)."""
        return f"{slot} * {self.stage_halves(n)}"

    def row(self, n: Node) -> int:
        """Floats between consecutive rows (last-dimension runs) of ``n``'s buffer."""
        return self.ld.get(n, n.shape[-1])

    def addr(self, n: Node, idx: Sequence[str]) -> str:
        """Offset of element ``idx`` in ``n``'s (possibly row-padded, possibly swizzled)
        buffer. In a swizzled raw tile (``swz``) element c of row r sits in 16-byte chunk
        (c >> 3) ^ (r & 7) of its row, at the same place in the chunk (:meth:`raw_offset`)."""
        if n not in self.ld:
            return lin(n.shape, idx)
        rows = lin(n.shape[:-1], idx[:-1])
        last = idx[-1]
        if n in self.swz:
            return f"{self.raw_offset(n, rows, f'({last}) >> 3')} + (({last}) & 7)"
        parts = [] if rows == "0" else [f"({rows})*{self.ld[n]}"]
        if last != "0":
            parts.append(f"({last})")
        return " + ".join(parts) if parts else "0"

    def buf_size(self, n: Node) -> int:
        """Floats of ``n``'s buffer (a raw tile: ``stages`` stages of padded rows)."""
        if n in self.raw:
            return self.stages * self.stage_halves(n) * n.dtype.itemsize // 4
        if n in self.half:
            return -(-math.prod(n.shape[:-1]) * self.ld[n] // 2)
        if n in self.bt:  # (every padded column of the chain a row)
            return -(-self.bt[n].cols * self.bt_pitch(n) // 2)
        return math.prod(n.shape[:-1]) * self.row(n)

    def var(self) -> str:
        self.nvar += 1
        return f"v{self.nvar}"

    # ------------------------------------------------------------ steps
    def _invariant_accum(self, n: Node) -> bool:
        """Accumulator ``n`` (no fold) sums a loop-invariant tile over a real loop: computed once
        after the loop (:class:`InvariantAccumulate`) instead of added to every iteration."""
        x = n.src[0]
        return (n.op == "accum" and self.bg.forloop > 1 and n.attr("fold") is None
                and ((x.op == ITER and x.attr("fmap") == -1) or x in self.invariant)
                and x not in self.fused and x not in self.reg_acc and n not in self.reg_fold
                and n not in self.chain_sums and n not in self.alias)

    def _produced(self, n: Node) -> bool:
        """``n`` depends on a kernel input that is not in ``early``: one an earlier kernel of the
        graph writes."""
        return any(m.op == ITER and m.attr("input") not in self.early for m in n.walk())

    def build_steps(self) -> tuple[list[Step], int, int]:
        """The kernel's steps and the bounds of the loop part: ``steps[p:q]`` run per iteration.

        After the loop come, first, the :attr:`post_head` steps that the printer emits before
        the register reductions and the split combine: accumulators of loop-invariant tiles
        and, when the loop reads only graph inputs (``early``) and writes no global memory,
        the loads and ops of tiles that depend on other kernels' outputs, which nothing in the
        loop reads (:attr:`late_wait_ok`: the wait for the previous kernel can then follow the
        loop instead of preceding it)."""
        pre: list[Step] = []
        loop: list[Step] = []
        post: list[Step] = []
        invariant_accs: list[Step] = []
        for n in self.nodes:
            # one iteration: an accumulator is written, not added to (a matmul that adds into
            # its accumulator still needs the zeros)
            if n.op == "accum" and (self.bg.forloop > 1 or n.src[0] in self.fused
                                    or n in self.chain_sums) \
                    and n.src[0] not in self.reg_acc and n.src[0] not in self.cc_acc \
                    and not self._invariant_accum(n):
                pre.append(Zero(n))  # (register sums are stored, not added)
        for n in self.nodes:
            if (n in self.inline or n in self.fused or n in self.epi_of or n in self.raw
                    or n in self.chain_nodes or n in self.direct or n in self.frag_op
                    or n in self.frag_inner):
                continue  # (a register chain runs inside its second matmul's step)
            after = self.phase[n]
            if n.op == ITER:
                if n.attr("fmap") == -1 and self.bg.forloop > 1:
                    pre.append(Load(n))
                else:
                    loop.append(Load(n))
            elif n in self.alias:
                continue  # its source's tile
            elif n.op == "accum":
                src = n.src[0]
                if src in self.fused:
                    loop.append(MatmulAccumulate(src))
                elif self._invariant_accum(n):
                    invariant_accs.append(InvariantAccumulate(n))
                elif n not in self.chain_sums:  # (chain row sums: in registers)
                    loop.append(Accumulate(n))
                # (a plain mean of a loop-invariant tile is the tile: copied once, nothing to
                # finalize)
                if n.attr("kind") != "sum" and not self._invariant_mean(n):
                    post.append(Finalize(n))
            elif n in self.invariant:
                pre.append(Op(n))
            else:
                (post if after else loop).append(Op(n))
        for k in range(len(self.bg.outputs)):
            post.append(Save(k))
        # Loads have no dependencies inside an iteration: issue them all first.
        loop = [s for s in loop if isinstance(s, Load)] + [s for s in loop if not isinstance(s, Load)]
        #: the wait for the previous kernel may follow the loop: this kernel has graph inputs,
        #: a real loop, and nothing in the loop (its steps, the ring's and streamed tiles)
        #: derives from another kernel's output; the printer also requires no spilled tiles
        self.late_wait_ok = bool(self.early) and self.bg.forloop > 1 and not self.stream_k \
            and not any(
            n.op == ITER and n.attr("fmap") != -1 and n.attr("input") not in self.early
            for n in self.nodes) and not any(
            self._produced(s.node) for s in loop if not isinstance(s, Save))  # (none is a Save)
        late = [s for s in pre if isinstance(s, Load | Op) and self._produced(s.node)] \
            if self.late_wait_ok else []
        pre = [s for s in pre if s not in late]
        #: leading post-loop steps printed before the register reductions and the combine
        self.post_head = len(late) + len(invariant_accs)
        steps = pre + loop + late + invariant_accs + post
        return steps, len(pre), len(pre) + len(loop)

    def reads(self, step: Step) -> set[Node]:
        """The materialized tiles ``step`` reads (through inlined elementwise chains)."""
        if isinstance(step, Save):
            roots = [self.bg.outputs[step.index].node]
        elif isinstance(step, Zero | Finalize | Load):
            return set()
        else:
            roots = list(step.node.src)
        out: set[Node] = set()
        stack = roots
        while stack:
            n = stack.pop()
            if n in self.inline or n in self.chain_nodes or n in self.frag_op or n in self.frag_inner:
                stack.extend(n.src)
            else:
                out.add(n)
        return out

    def _alias_ok(self, a: Node) -> bool:
        """Accumulator ``a`` of a kernel without a loop is its source tile itself (a plain sum
        or mean over one iteration): the source's buffer, no copy step and barrier. The source
        is a stored fp32 tile laid out like the accumulator (not an iterator, not inlined,
        fused or in registers)."""
        if a.op != "accum" or self.bg.forloop != 1 or a.attr("fold") is not None:
            return False
        x = a.src[0]
        return (a.attr("kind") in ("sum", "mean") and x.op != ITER and x.shape == a.shape
                and x not in self.inline and x not in self.fused and x not in self.chain_nodes
                and x not in self.gemv and x not in self.half and x not in self.epi_of
                and x not in self.ld and a not in self.ld)

    def plan(self) -> tuple[list[Step], int, int, dict[str, Buffer]]:
        #: loop-free accumulators that share their source's buffer (see _alias_ok)
        self.alias = {a: a.src[0] for a in self.nodes if self._alias_ok(a)}
        steps, p, q = self.build_steps()
        defined: dict[Node, int] = {}
        last: dict[Node, int] = {}
        scratch: dict[Node, int] = {}
        for i, step in enumerate(steps):
            if isinstance(step, DEFINING) and step.node not in self.gemv_b:
                x = step.node
                defined.setdefault(self.epi.get(x, x), i)
                if isinstance(step, Op) and x.op == "rms_norm" and not self.rms_rowwise(x):
                    scratch[x] = i
            for r in self.reads(step):
                last[r] = max(last.get(r, -1), i)
        for a, x in self.alias.items():
            last[x] = max(last.get(x, -1), last.pop(a, -1))
        bufs: dict[str, Buffer] = {}
        for n, d in defined.items():
            u = last.get(n, d)
            if n.op == "accum":
                d, u = 0, max(u, q - 1)
            elif d < p and u >= p:
                u = max(u, q - 1)
            bufs[f"b{self.ids[n]}"] = Buffer(f"b{self.ids[n]}", self.buf_size(n), d, u)
            self.buf[n] = f"b{self.ids[n]}"
        for a, x in self.alias.items():
            self.buf[a] = self.buf[x]
        for m in self.reg_acc | self.cc_acc:
            # written once after the loop from the warps' registers: free during the loop
            a = self.fused[m]
            bufs[f"b{self.ids[a]}"] = Buffer(f"b{self.ids[a]}", self.buf_size(a), q,
                                             max(last.get(a, q), q))
            self.buf[a] = f"b{self.ids[a]}"
        #: k-sliced register chains: each slice's partial sums go to a slice of a scratch tile
        #: after the loop (the cp.async ring is free by then), then all threads add the slices
        self.kslices: dict[Node, str] = {}
        for ch in self.chains.values():
            if ch.kw > 1:
                for a in (self.fused[ch.second], *ch.sums):
                    name = f"k{self.ids[a]}"
                    bufs[name] = Buffer(name, ch.kw * self.buf_size(a), q, q)
                    self.kslices[a] = name
        for m, kw in self.kslice.items():  # (k-sliced register products: the same after the loop)
            a = self.fused[m]
            name = f"k{self.ids[a]}"
            bufs[name] = Buffer(name, kw * self.buf_size(a), q, q)
            self.kslices[a] = name
        for a, m in self.frag_fold.items():  # (and the fragment folds of their A tiles)
            if m in self.kslice:
                name = f"k{self.ids[a]}"
                bufs[name] = Buffer(name, self.kslice[m] * self.buf_size(a), q, q)
                self.kslices[a] = name
        for n in self.raw:
            # cp.async writes a raw tile before the loop and during every iteration: it
            # lives from the first step to the end of the loop.
            bufs[f"b{self.ids[n]}"] = Buffer(f"b{self.ids[n]}", self.buf_size(n), 0, max(q - 1, 0))
            if self.tma:  # (stages on the copy engine's 1024-byte swizzle period)
                bufs[f"b{self.ids[n]}"].align = 256
            self.buf[n] = f"b{self.ids[n]}"
        for n, i in scratch.items():
            rows = math.prod(n.shape[:-1])
            bufs[f"r{self.ids[n]}"] = Buffer(f"r{self.ids[n]}", rows, i, i)
        for n in self.gemv:
            # cross-thread reduction of the register accumulators, once after the loop
            name = f"g{self.ids[n]}"
            bufs[name] = Buffer(name, self.gemv_rows(n) * math.prod(n.shape), q, q)
            self.buf[n] = name
        # tiles (re)defined inside the loop: a step's node, its epilogue's and accumulator's
        loop_defined = {m for st in steps[p:q] if not isinstance(st, Save)
                        for m in (st.node, self.epi.get(st.node, st.node),
                                  self.fused.get(st.node, st.node))}
        self.hoist_a = {st.node for st in steps[p:q] if isinstance(st, Op | MatmulAccumulate)
                        and self._hoist_ok(st.node, loop_defined)}
        self.hoist_a |= {ch.first for m, ch in self.chains.items()
                         if any(isinstance(st, MatmulAccumulate) and st.node is m
                                for st in steps[p:q]) and self._hoist_ok(ch.first, loop_defined)}
        return steps, p, q, bufs

    @staticmethod
    def gemv_shuffles(n: Node) -> bool:
        """Gemv ``n``'s threads that share a column vector sit at xor distances inside a warp
        (N/8 a power of two below 32), so warp shuffles sum them before shared memory."""
        nc = n.shape[1] // 8
        return nc < 32 and nc & (nc - 1) == 0

    def gemv_rows(self, n: Node) -> int:
        """Partial sums per output element left after the in-warp shuffles of gemv ``n``
        (one per warp), or one per row group of threads when there are no shuffles."""
        return self.T // 32 if self.gemv_shuffles(n) else self.T // (n.shape[1] // 8)

    def warp_ok(self) -> bool:
        return self.T % 32 == 0

    def warps_per_row(self, rows: int, length: int) -> int:
        """Warps that share each of ``rows`` row reductions of ``length`` terms when a warp
        per row would leave most of the block's warps idle (at least two per row, rows of at
        least 64 terms), else 0."""
        W = self.T // 32
        return W // rows if self.warp_ok() and length >= 64 and rows * 2 <= W else 0

    @staticmethod
    def row_vec(tile_row: int, tensor_row: int, dt: DType) -> int:
        """Elements per vector for moving rows of ``tile_row`` elements of a tensor whose rows
        hold ``tensor_row``: the widest of 16, 8 and 4 bytes that both divide (so every vector
        is aligned), 0 when none does (element by element)."""
        for nbytes in (16, 8, 4):
            v = nbytes // dt.itemsize
            if v >= 1 and tile_row % v == 0 and tensor_row % v == 0:
                return v
        return 0

    def iter_vec(self, n: Node) -> int:
        """Elements per global-memory vector of iterator tile ``n`` (0: no vectors)."""
        shape, dt = self.bg.inputs[n.attr("input")]
        return self.row_vec(n.shape[-1], shape[-1], dt)

    def slab_vec(self, n: Node) -> int:
        """Elements per global-memory vector for copying iterator tile ``n`` as one flat run
        (0: not): its elements are consecutive in memory (every dimension after the first of
        more than one element is whole), its shared-memory tile is dense (no padded rows),
        and every place a block or iteration may start it is a whole number of vectors from
        the tensor's start. ViT's K stored transposed (64 x 197 halves a head: rows of 394
        bytes, no row vector) is one aligned 25216-byte run a head: 16-byte vectors, where
        element by element its copy took most of the attention kernel's time."""
        if n in self.ld:
            return 0
        shape, dt = self.bg.inputs[n.attr("input")]
        t = n.shape
        j = next((d for d, x in enumerate(t) if x > 1), len(t))
        if any(t[d] != shape[d] for d in range(j + 1, len(t))):
            return 0
        for nbytes in (16, 8, 4):
            v = int(nbytes // dt.itemsize)
            if v > 1 and math.prod(t) % v == 0 and all(
                    t[d] * math.prod(shape[d + 1:]) % v == 0
                    for d in range(len(t)) if t[d] < shape[d]):
                return v
        return 0

    def vec_load(self, n: Node) -> bool:
        return self.iter_vec(n) > 0

    def prefetch_regs(self, n: Node) -> int:
        """Vector registers (of up to 16 bytes) a thread holds for one prefetched tile ``n``."""
        nv = math.prod(n.shape) // self.iter_vec(n)
        return -(-nv // self.T)
