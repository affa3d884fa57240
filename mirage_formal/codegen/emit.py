"""The emitter: one block graph becomes one CUDA C++ ``__global__`` function.

Every block tile is fp32, except *raw* tiles: fp16 iterator tiles that change every loop
iteration and are read only by tensor-core matmuls stay fp16 in shared memory, in a ring of
stages filled by ``cp.async`` ahead of the loop (EmitOptions.async_copy; read with ldmatrix
where the shape allows). A tile is either *materialized* (an fp32 buffer in shared memory,
or in a per-block global workspace when shared memory is too small, see :mod:`plan`) or
*inlined*: an input iterator or an elementwise op whose every consumer is elementwise, an
accumulator or an output saver is never stored; whoever reads it recomputes it from its
operands in registers (the fused elementwise chain of DESIGN.md). Operands of matmuls,
reductions and rms_norm are always materialized. A matmul whose only consumer is a plain
(sum or mean, fold None) accumulator adds into the accumulator directly.

The kernel is a flat list of *steps*; each step is one loop over the elements of one tile,
threads striding over elements, with a ``__syncthreads()`` before a step only where it touches
memory a step since the last barrier touched (:mod:`barriers`) and at the end of each
iteration:

    pre:  zero accumulators; load loop-invariant iterator tiles (fmap = -1)
    loop: for it in [0, F): per-iteration tiles in topological order, accumulator updates
    post: accumulator finalisation (mean, rms), post-loop ops, output savers

Index arithmetic uses compile-time shapes only: a tile of shape S is row-major; iterator
element t of input T sits at T[b_a*(S_d/g_a) + it*tile_d + t_d] per dimension d (DESIGN.md),
and output savers write block b's tile at chunk b of each omap dimension.

What is decided before printing (inlining, fusion, raw and fp16 tiles, gemv, the typed
steps and buffers) lives in :mod:`layout`; this module prints (block graph, schedule) through
it: steps, loads, accumulators and the kernel's frame here, tensor-core products in
:mod:`print_mma`, row reductions, norms and gemv in :mod:`print_rows`, the split combine in
:mod:`print_combine`, one-row kernels kept in registers in :mod:`print_row_registers`, over
the shared helpers of :mod:`printer`. Imports ``ir`` and the
planning and printing modules of ``codegen``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from mirage_formal.codegen.barriers import Extent, touches, with_barriers
from mirage_formal.codegen.cindex import lin, multi_index
from mirage_formal.codegen.float16 import FLOAT16
from mirage_formal.codegen.plan import plan_buffers
from mirage_formal.codegen.print_combine import CLUSTER_COMBINE_BARRIERS, CombinePrinter
from mirage_formal.codegen.print_mma import MmaPrinter
from mirage_formal.codegen.print_row_registers import RowRegisterPrinter
from mirage_formal.codegen.print_rows import RowPrinter
from mirage_formal.codegen.printer import TileExpr, ld_vec_fn, st_vec_fn, zeroed_accumulators
from mirage_formal.codegen.refine import Refinement
from mirage_formal.codegen.schedule import SIMPLE as SIMPLE
from mirage_formal.codegen.schedule import Schedule
from mirage_formal.codegen.steps import (
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
from mirage_formal.codegen.tma import BOX_COLS, TensorMapSpec, box_rows
from mirage_formal.errors import UnsupportedOpError
from mirage_formal.ir.dtypes import DType
from mirage_formal.ir.graph import ITER, BlockGraph
from mirage_formal.ir.node import Node
from mirage_formal.ir.ops import REGISTRY

#: the most dynamic shared memory a block may use on sm_90 (227 KiB)
SMEM_LIMIT_BYTES = 227 * 1024
#: a grid of at most this many blocks runs in one wave on an H100 (132 SMs, one block each at
#: least): it lets its dependent kernel launch as soon as it starts (see emit_block_graph)
ONE_WAVE_BLOCKS = 132


#: the emitter's options are the thread-level schedule (kept under its old name too)
EmitOptions = Schedule


@dataclass(frozen=True)
class EmittedKernel:
    """One ``__global__`` function and what it takes to launch it.

    Parameters, in order: the kernel inputs (``const T*``), the outputs (``T*``), then a
    ``float*`` workspace of ``ws_floats`` floats per launched block, then ``extra_ws_floats``
    (a split's partial accumulators and tickets; the tickets must be zero before the first
    launch, and every launch leaves them zero). ``grid`` is the launched grid.
    """

    name: str
    source: str
    grid: tuple[int, int, int]
    threads: int
    smem_bytes: int
    ws_floats: int
    in_types: tuple[DType, ...]
    out_types: tuple[DType, ...]
    #: workspace floats after the per-block regions (a split's partials and tickets)
    extra_ws_floats: int = 0
    schedule: Schedule = field(default_factory=Schedule)
    #: the tensor maps a TMA ring kernel takes after ``ws``, by value (:mod:`tma`)
    tensor_maps: tuple[TensorMapSpec, ...] = ()

    @property
    def ws_bytes(self) -> int:
        return 4 * (self.ws_floats * math.prod(self.grid) + self.extra_ws_floats)


class _Emitter(MmaPrinter, RowPrinter, CombinePrinter, RowRegisterPrinter):
    """Prints the kernel a :class:`KernelLayout` describes: the steps, loads, accumulators
    and the kernel's frame here; tensor-core products (:mod:`print_mma`), row reductions,
    norms and gemv (:mod:`print_rows`), the split combine (:mod:`print_combine`) and one-row
    kernels kept in registers (:mod:`print_row_registers`) in their own modules, over the
    shared helpers of :class:`printer.TilePrinter`."""

    def reads_only(self, step: Step) -> frozenset[str]:
        """The buffers ``step`` reads and does not write: its operand tiles (through inlined
        chains) other than the tiles it defines or adds into. A gemv step reads its operand
        tiles (A, and B's cp.async ring) and writes only registers; register chains vouch for
        none (every buffer they name counts as written)."""
        if isinstance(step, Save):
            own: set[str] = set()
        elif isinstance(step, Zero | Load | Finalize) or step.node in self.chains:
            return frozenset()
        elif step.node in self.gemv:
            return frozenset(self.buf[s] for s in step.node.src if s in self.buf)
        else:
            x = step.node
            own = {self.buf[n] for n in (x, self.epi.get(x), self.fused.get(x)) if n in self.buf}
        return frozenset(self.buf[n] for n in self.reads(step) if n in self.buf) - own

    def emit_step(self, step: Step, ind: str) -> list[str]:
        if isinstance(step, Save):
            return self.emit_out(step.index, ind)
        x = step.node
        if isinstance(step, Zero):
            b = self.buf[x]
            return self.loop_over(x.shape, [f"{ind}  {b}[i] = 0.f;"], ind)
        if isinstance(step, Load):
            if x in self.gemv_b:
                return []  # streamed into registers by its matmul's gemv step
            return self.emit_load(x, ind)
        if isinstance(step, Finalize):
            b = self.buf[x]
            return self.loop_over(x.shape, [f"{ind}  {b}[i] = {self.finalized(x, f'{b}[i]')};"], ind)
        if isinstance(step, Accumulate):
            return self.emit_acc(x, ind)
        if isinstance(step, InvariantAccumulate):
            b, src = self.buf[x], x.src[0]
            sq = x.attr("kind") == "rms"

            mean = self._invariant_mean(x)  # (the tile itself: no count, no finalize)

            def once(ex: TileExpr, idx: list[str]) -> list[str]:
                v = ex.val(src, idx)
                if mean:
                    return [f"{b}[i] = {v};"]
                n = "(float)mf_n" if self.stream_k else f"{self.FL}.f"
                return [f"{b}[i] = {n} * ({v})" + (f" * ({v});" if sq else ";")]
            return self.elem_loop(x.shape, ind, once)
        if isinstance(step, MatmulAccumulate):
            if x in self.gemv:
                return self.emit_gemv_step(x, ind)
            if x in self.chains:
                return self.emit_chain(x, ind)
            return self.emit_matmul(x, self.fused[x], True, ind)
        if x.op == "matmul":
            return self.emit_matmul(x, self.epi.get(x, x), False, ind)
        if x.op in ("sum", "mean"):
            return self.emit_reduce(x, ind)
        if x.op == "rms_norm":
            return self.emit_rms_norm(x, ind)
        d = REGISTRY[x.op]
        if not d.elementwise:
            raise UnsupportedOpError(f"codegen: block op {x.op!r} has no lowering")
        b = self.buf[x]
        cvt = FLOAT16[x.dtype].from_float if x in self.half else ""
        return self.elem_loop(x.shape, ind, lambda ex, idx: [
            f"{b}[{self.addr(x, idx)}] = {cvt}({ex.val(x, idx, True)});"])

    def emit_prefetch(self, n: Node, itv: str, ind: str, stage: int = 0) -> list[str]:
        """Issue the global loads of iter tile ``n`` at iteration ``itv`` into registers."""
        V = self.iter_vec(n)
        nv = math.prod(n.shape) // V
        P = self.prefetch_regs(n)
        decls, idx = multi_index(n.shape, "i", "t")
        ref = self.iter_ref(n, idx, itv)
        guard = f"if (v < {nv}) " if nv % self.T else ""
        return [f"{ind}#pragma unroll", f"{ind}for (int p = 0; p < {P}; ++p) {{",
                f"{ind}  const int v = threadIdx.x + p * {self.T};",
                f"{ind}  {guard}{{", f"{ind}    const int i = v * {V};",
                *[ind + "    " + d for d in decls],
                f"{ind}    pf{self.ids[n]}_{stage}[p] = {self.raw_load(n, ref)};", f"{ind}  }}",
                f"{ind}}}"]

    def raw_type(self, n: Node) -> str:
        """The register type of one raw vector of iterator tile ``n``."""
        b = self.vec_bytes(n)
        return "uint4" if b == 16 else f"mf::raw_vec<{b}>::type"

    def emit_unstage(self, n: Node, ind: str, stage: int = 0) -> list[str]:
        """Widen the prefetched registers of ``n`` into its shared-memory tile."""
        _, dt = self.bg.inputs[n.attr("input")]
        V = self.iter_vec(n)
        nv = math.prod(n.shape) // V
        P = self.prefetch_regs(n)
        guard = f"if (v < {nv}) " if nv % self.T else ""
        L = n.shape[-1]
        dst = f"(v * {V} / {L}) * {self.row(n)} + (v * {V}) % {L}" if n in self.ld else f"v * {V}"
        return [f"{ind}#pragma unroll", f"{ind}for (int p = 0; p < {P}; ++p) {{",
                f"{ind}  const int v = threadIdx.x + p * {self.T};",
                f"{ind}  {guard}mf::unpack_vec(pf{self.ids[n]}_{stage}[p], &{self.buf[n]}[{dst}], "
                f"({dt.c_type}*)nullptr);", f"{ind}}}"]

    def emit_cp_async(self, n: Node, itv: str, ind: str, slot: str | None = None) -> list[str]:
        """Issue 16-byte ``cp.async`` copies of raw tile ``n`` at iteration ``itv`` into
        stage ``itv % stages`` of its buffer, or into slot counter ``slot``'s stage (a
        counted ring's refill) (no commit)."""
        per16 = 16 // n.dtype.itemsize  # (elements a 16-byte copy moves)
        nv = math.prod(n.shape) // per16
        decls, idx = multi_index(n.shape, "i", "t")
        ref = self.iter_ref(n, idx, itv)
        off = (self.raw_offset(n, lin(n.shape[:-1], idx[:-1]), f"({idx[-1]}) >> 3", idx[-2])
               if n in self.swz else self.addr(n, idx))
        stage = self.slot_offset(n, slot) if slot else self.stage_offset(n, f"({itv})")
        dst = f"{self.buf[n]} + {stage} + {off}"
        if self.opts.evict_first:
            copy = f"mf::cp_async16_pol<{self.opts.l2_fetch}>({dst}, &{ref}, mf_pol)"
        elif self.opts.l2_fetch:
            copy = f"mf::cp_async16_l2<{self.opts.l2_fetch}>({dst}, &{ref})"
        else:
            copy = f"mf::cp_async16({dst}, &{ref})"
        return [*self.block_loop("v", nv, ind),
                f"{ind}  const int i = v * {per16};", *[ind + "  " + d for d in decls],
                f"{ind}  {copy};", f"{ind}}}"]

    def emit_transposed_load(self, n: Node, ind: str) -> list[str]:
        """Copy iterator tile ``n`` (k x N) into its transposed fp16 tile (layout.bt): row c
        holds column c's k values, ``bt_pitch`` halves apart; rows past N up to the chain's
        padded columns are zeroed. Global reads are vectors where the tile allows them
        (rows or one flat run), each element then stored to its transposed place."""
        _, dt = self.bg.inputs[n.attr("input")]
        t16 = FLOAT16[dt]
        K, N, P = n.shape[-2], n.shape[-1], self.bt_pitch(n)
        cols = self.bt[n].cols
        h = f"reinterpret_cast<{t16.c_type}*>({self.buf[n]})"
        V = self.iter_vec(n) or self.slab_vec(n)
        decls, idx = multi_index(n.shape, "i", "t")
        ref = self.iter_ref(n, idx)
        lines = []
        if cols > N:
            lines += [*self.block_loop("z", (cols - N) * P, ind),
                      f"{ind}  {h}[{N * P} + z] = {t16.zero};", f"{ind}}}"]
        if V:
            lines += [*self.block_loop("v", math.prod(n.shape) // V, ind),
                      f"{ind}  const int i = v * {V};", *[ind + "  " + d for d in decls],
                      f"{ind}  const mf::raw_vec<{V * dt.itemsize}>::type raw = "
                      f"*reinterpret_cast<const mf::raw_vec<{V * dt.itemsize}>::type*>(&{ref});",
                      f"{ind}  const {t16.c_type}* const vals = reinterpret_cast<const {t16.c_type}*>(&raw);",
                      f"{ind}  #pragma unroll",
                      f"{ind}  for (int j = 0; j < {V}; ++j) "
                      f"{h}[((i + j) % {N}) * {P} + (i + j) / {N} % {K}] = vals[j];",
                      f"{ind}}}"]
            return lines
        return [*lines, *self.block_loop("i", math.prod(n.shape), ind), *[ind + "  " + d for d in decls],
                f"{ind}  {h}[({idx[-1]}) * {P} + ({idx[-2]})] = {ref};", f"{ind}}}"]

    def emit_load(self, n: Node, ind: str) -> list[str]:
        if n in self.bt:
            return self.emit_transposed_load(n, ind)
        k = n.attr("input")
        _, dt = self.bg.inputs[k]
        b = self.buf[n]
        # (rows without a whole vector: the tile as one flat run where it is one, layout.slab_vec)
        V = self.iter_vec(n) or self.slab_vec(n)
        if V:
            nv = math.prod(n.shape) // V
            decls, idx = multi_index(n.shape, "i", "t")
            ref = self.iter_ref(n, idx)
            ld = ld_vec_fn(V * dt.itemsize)
            body = [f"{ind}  const int i = v * {V};", *[ind + "  " + d for d in decls],
                    f"{ind}  {ld}(&{ref}, &{b}[{self.addr(n, idx)}]);"]
            return [*self.block_loop("v", nv, ind), *body, f"{ind}}}"]
        return self.elem_loop(n.shape, ind, lambda ex, idx: [
            f"{b}[{self.addr(n, idx)}] = mf::to_f({self.iter_ref(n, idx)});"])

    def emit_out(self, k: int, ind: str) -> list[str]:
        if k in self.reg_saves:
            return self.emit_register_save(k, ind)
        o = self.bg.outputs[k]
        n = o.node
        full = self.bg.output_shape(o)
        V = self.row_vec(n.shape[-1], full[-1], n.dtype)
        c = n.dtype.c_type
        st = st_vec_fn(V * n.dtype.itemsize)
        if V:
            nv = math.prod(n.shape) // V
            decls, idx = multi_index(n.shape, "i", "t")
            last = idx[-1]
            ex = TileExpr(self, ind + "    ")
            vidx = [*idx[:-1], f"{last} + j"] if last != "0" else [*idx[:-1], "j"]
            v = ex.val(n, vidx)
            body = [f"{ind}  const int i = v * {V};", *[ind + "  " + d for d in decls],
                    f"{ind}  float vals[{V}];",
                    f"{ind}  #pragma unroll",
                    f"{ind}  for (int j = 0; j < {V}; ++j) {{", *ex.code(),
                    f"{ind}    vals[j] = {v};", f"{ind}  }}",
                    f"{ind}  {st}(&{self.out_ref(k, idx)}, vals);"]
            return [*self.block_loop("v", nv, ind), *body, f"{ind}}}"]
        return self.elem_loop(n.shape, ind,
                              lambda ex, idx: [f"{self.out_ref(k, idx)} = mf::from_f<{c}>({ex.val(n, idx)});"])

    def emit_acc(self, a: Node, ind: str) -> list[str]:
        x = a.src[0]
        b = self.buf[a]
        sq = a.attr("kind") == "rms"
        fold = a.attr("fold")

        def f(v: str) -> str:
            return f"{v} * {v}" if sq else v

        once = self.bg.forloop == 1  # one iteration: the accumulator is the tile itself
        op = "=" if once else "+="
        if fold is None:
            if once and not sq and x.op == ITER and x in self.inline:
                _, dt = self.bg.inputs[x.attr("input")]
                V = self.iter_vec(x)
                if V:
                    ld = ld_vec_fn(V * dt.itemsize)
                    decls, idx = multi_index(x.shape, "i", "t")
                    return [*self.block_loop("v", math.prod(x.shape) // V, ind),
                            f"{ind}  const int i = v * {V};", *[ind + "  " + d for d in decls],
                            f"{ind}  {ld}(&{self.iter_ref(x, idx)}, &{b}[{self.addr(a, idx)}]);",
                            f"{ind}}}"]
            return self.elem_loop(a.shape, ind, lambda ex, idx: [f"{b}[i] {op} {f(ex.val(x, idx))};"])
        if a in self.frag_fold:  # (added from the product's A fragments: emit_matmul_mma)
            return []
        G = x.shape[-1] // fold
        decls, idx = multi_index(a.shape, "o", "t")
        jl = idx[-1]
        gidx = [*idx[:-1], f"g*{fold} + {jl}" if jl != "0" else f"g*{fold}"]
        na = math.prod(a.shape)
        if a in self.reg_fold:
            ex = TileExpr(self, ind + "      ")
            v = ex.val(x, gidx)
            return self.emit_fold_step(a, G, decls, ex.code(), f(v), ind)
        ex = TileExpr(self, ind + "    ")
        v = ex.val(x, gidx)
        code = ex.code()
        return self.reduce_rows(na, G, decls, lambda i: [*[i + c.strip() for c in code], f"{i}s += {f(v)};"],
                                lambda i: [f"{i}{b}[o] {op} s;"], "g", ind)

    def fold_rows(self, a: Node, ind: str) -> tuple[list[str], str]:
        """The opening lines of the loop over the rows of register fold ``a`` that this thread
        (its warp, its warps) takes part in, as ``o`` with register slot ``k`` (close it with
        two ``}``), and how the columns of a row are shared: the column loop's header."""
        fm = self.reg_fold[a]
        na = math.prod(a.shape)
        K, S = fm.per_thread, fm.share
        if fm.how == "warps":
            head = [f"{ind}{{ const int k = 0, o = threadIdx.x / 32 / {S};",
                    f"{ind}if (threadIdx.x / 32 < {na * S}) {{"]
            return head, f"g = threadIdx.x / 32 % {S} * 32 + threadIdx.x % 32; g < {{G}}; g += {32 * S}"
        first, step = ("threadIdx.x / 32", self.T // 32) if fm.how == "warp" else ("threadIdx.x", self.T)
        cols = "g = threadIdx.x % 32; g < {G}; g += 32" if fm.how == "warp" else "g = 0; g < {G}; ++g"
        return [f"{ind}#pragma unroll", f"{ind}for (int k = 0; k < {K}; ++k) {{ const int o = {first} + k * {step};",
                f"{ind}if (o < {na}) {{"], cols

    def emit_fold_step(self, a: Node, G: int, decls: list[str], code: list[str], term: str,
                       ind: str) -> list[str]:
        """One loop iteration of register fold ``a``: this thread's share of each of its rows'
        ``G`` terms (``term`` at column ``g``, after ``code``) added to its registers; no
        exchange between threads until after the loop (:meth:`emit_fold_reduce`)."""
        head, cols = self.fold_rows(a, ind)
        return [*head, *[ind + "  " + d for d in decls],
                f"{ind}  for (int {cols.format(G=G)}) {{", *code,
                f"{ind}    fr{self.ids[a]}[k] += {term};", f"{ind}  }}", f"{ind}}} }}"]

    def emit_fold_reduce(self, a: Node, ind: str) -> list[str]:
        """After the loop: register fold ``a``'s partial sums added across the threads that
        share each row (warp shuffles, then the warps' sums in warp order) into its tile."""
        fm = self.reg_fold[a]
        b, r = self.buf[a], f"fr{self.ids[a]}"
        na = math.prod(a.shape)
        head, _ = self.fold_rows(a, ind)
        if fm.how == "thread":
            return [*head, f"{ind}  {b}[o] = {r}[k];", f"{ind}}} }}"]
        if fm.how == "warp":
            return [*head, f"{ind}  const float s = mf::warp_sum({r}[k]);",
                    f"{ind}  if (threadIdx.x % 32 == 0) {b}[o] = s;", f"{ind}}} }}"]
        return [*head, f"{ind}  const float s = mf::warp_sum({r}[0]);",
                f"{ind}  if (threadIdx.x % 32 == 0) mf_red[threadIdx.x / 32] = s;", f"{ind}}} }}",
                *self.add_warp_sums(na, fm.share, [], lambda i: [f"{i}{b}[o] = s;"], ind)]

    # ------------------------------------------------------------ whole kernel
    def emit_in_registers(self) -> EmittedKernel:
        """The kernel of a :attr:`Schedule.row_registers` schedule (``print_row_registers``):
        no shared tiles, no loop; the dependency wait before the first load."""
        bg = self.bg
        one_wave = math.prod(self.launch_grid) <= ONE_WAVE_BLOCKS
        body = self.emit_row_registers_body("  ")
        lines = [*self.signature(), self.block_index_decl()]
        if self.row_reductions:
            lines.append(f"  __shared__ float mf_red[{2 * (self.T // 32)}];")
        lines += ["  mf::grid_dep_launch();"] if one_wave else []
        lines += ["  mf::grid_dep_wait();", *body]
        lines += [] if one_wave else ["  mf::grid_dep_launch();"]
        lines.append("}")
        return EmittedKernel(
            name=self.name, source="\n".join(lines) + "\n", grid=self.launch_grid, threads=self.T,
            smem_bytes=0, ws_floats=0, schedule=self.opts,
            in_types=tuple(dt for _, dt in bg.inputs),
            out_types=tuple(o.node.dtype for o in bg.outputs))

    def signature(self, dims: str = "") -> list[str]:
        """The kernel's first lines: ``__launch_bounds__`` with the schedule's threads (and
        min_blocks, if any), the inputs, outputs and workspace pointers; ``dims``: a
        ``__cluster_dims__`` prefix."""
        bg = self.bg
        params = [f"const {dt.c_type}* __restrict__ in{k}" for k, (_, dt) in enumerate(bg.inputs)]
        params += [f"{o.node.dtype.c_type}* __restrict__ out{k}" for k, o in enumerate(bg.outputs)]
        params.append("float* __restrict__ ws")
        if self.tma:  # (one tensor map per ring tile, by value)
            params += [f"const __grid_constant__ mf::TensorMap tm{j}" for j in range(len(self.raw))]
        mb = self.opts.min_blocks
        T = self.T + 32 if self.tma else self.T  # (a TMA ring's producer warp)
        bounds = f"__launch_bounds__({T}, {mb})" if mb else f"__launch_bounds__({T})"
        return [f'extern "C" __global__ void {dims}{bounds} {self.name}(',
                "    " + ",\n    ".join(params) + ") {"]

    # ------------------------------------------------------------ TMA ring (Schedule.tma_ring)
    def tensor_map_spec(self, n: Node) -> TensorMapSpec:
        """The tensor map raw tile ``n``'s copies use: its input, boxes of its rows."""
        k = n.attr("input")
        shape, dt = self.real_inputs[k], self.bg.inputs[k][1]
        rows = box_rows(n.shape[-2])
        assert rows is not None  # (layout._tma_ok)
        return TensorMapSpec(k, math.prod(shape[:-1]), shape[-1], rows, dt)

    def tma_coordinates(self, n: Node) -> tuple[str, str]:
        """(column, row) of raw tile ``n``'s first element at iteration ``it`` in its tensor
        map's 2-D view of the input (a batched input's leading dimensions flattened into the
        rows: slice b's row r is row b * rows + r)."""
        shape = self.real_inputs[n.attr("input")]
        parts = self.iter_starts(n, "it")
        terms = [" + ".join(parts[-2])] if parts[-2] else []
        for d in range(len(shape) - 2):
            if parts[d]:
                terms.append(f"({' + '.join(parts[d])})*{math.prod(shape[d + 1:-1])}")
        return " + ".join(parts[-1]) or "0", " + ".join(terms) or "0"

    def emit_tma_producer(self, raw: list[Node], cluster: bool) -> list[str]:
        """The ring's barriers and the producer warp (thread ``T``): stage after stage, wait
        until the consumers gave the slot back, announce its bytes on the slot's "full"
        barrier and issue one tensor-map copy per 64-column box of each tile; then it leaves
        (``cluster``: after the cluster combine's barriers, which count every thread of the
        cluster). It waits for the previous kernel first unless every tile is of a graph
        input."""
        S, T, F = self.stages, self.T, self.FL
        nbytes = sum(math.prod(n.shape) * 2 for n in raw)
        pol = "true" if self.opts.evict_first else "false"
        pol_arg = "mf_pol" if self.opts.evict_first else "0ull"
        pair = self.mcast_axis is not None  # (Schedule.tma_multicast)
        givers = T // 32 * (2 if pair else 1)
        lines = [f"  __shared__ __align__(8) unsigned long long mf_full[{S}], mf_empty[{S}];",
                 "  if (threadIdx.x == 0) {",
                 f"    for (int s = 0; s < {S}; ++s) {{",
                 f"      mf::mbar_init(&mf_full[s], 1);  // the producer's arrival, then {nbytes} bytes",
                 f"      mf::mbar_init(&mf_empty[s], {givers});  // one arrival per consumer warp"
                 + (" of either block" if pair else ""),
                 "    }", "    mf::mbar_init_fence();", "  }",
                 # (a pair's copies and arrivals reach the other block's barriers: both
                 # initialised first)
                 "  mf::cluster_sync();" if pair else "  __syncthreads();"]
        if pair:
            lines.append(f"  const unsigned mf_rank = blockIdx.{'xyz'[self.mcast_axis or 0]} & 1u;")
        lines += [f"  if (threadIdx.x >= {T}) {{  // the producer warp: every copy of the ring",
                  f"    if (threadIdx.x == {T}) {{"]
        lines += [f"      mf::tensormap_prefetch(&tm{j});" for j in range(len(raw))]
        if any(n.attr("input") not in self.early for n in raw):
            lines.append("      mf::grid_dep_wait();")
        lines += ["      int s = 0;", "      unsigned ph = 0;",
                  f"      for (int it = 0; it < {F}; ++it) {{",
                  f"        if (it >= {S}) mf::mbar_wait(&mf_empty[s], ph ^ 1);",
                  f"        mf::mbar_expect_tx(&mf_full[s], {nbytes});"]
        halves: tuple[list[str], list[str]] = ([], [])  # a pair's shared boxes, by the rank copying
        # the largest tile first: the weight stream's box is requested before the small
        # activation tiles every block also reads (rmsnorm b=8's fused kernel 24.6 -> 24.4 µs,
        # b=1's on tensor cores 26.1 -> 25.4: H100, s28 c8)
        for j, n in sorted(enumerate(raw), key=lambda jn: -math.prod(jn[1].shape)):
            col0, row0 = self.tma_coordinates(n)
            rb = self.tensor_map_spec(n).box_rows  # (a tile taller than one box: several)
            boxes = [(b, r) for b in range(n.shape[-1] // BOX_COLS) for r in range(0, n.shape[-2], rb)]
            for i, (b, r) in enumerate(boxes):
                off = b * self.tma_box_halves(n) + r * BOX_COLS
                dst = f"{self.buf[n]} + s * {self.stage_halves(n)}" + (f" + {off}" if off else "")
                col = f"{col0} + {b * BOX_COLS}" if b else col0
                row = f"{row0} + {r}" if r else row0
                if n in self.mcast:  # (into both blocks of the pair)
                    halves[i % 2].append(f"          mf::tma_load_2d_multicast<{pol}>({dst}, &tm{j}, "
                                         f"{col}, {row}, &mf_full[s], 3, {pol_arg});")
                else:
                    lines.append(f"        mf::tma_load_2d<{pol}>({dst}, &tm{j}, {col}, {row}, "
                                 f"&mf_full[s], {pol_arg});")
        if pair:
            lines += ["        if (mf_rank == 0) {", *halves[0], "        } else {", *halves[1], "        }"]
        lines += [f"        if (++s == {S}) {{", "          s = 0;", "          ph ^= 1;", "        }",
                  "      }", "    }"]
        if cluster or pair:  # (cluster barriers count every thread of the cluster)
            n_sync = CLUSTER_COMBINE_BARRIERS if cluster else 1
            lines += ["    __syncwarp();", *["    mf::cluster_sync();"] * n_sync]
        lines += ["    return;", "  }"]
        return lines

    def emit_tma_loop(self, body: list[Step], extents: dict[str, Extent]) -> list[str]:
        """The consumer warps' loop over a TMA ring: wait for the iteration's stage on its
        "full" barrier, run the body (a block barrier at its end only if it writes memory),
        and each warp gives the stage back on its "empty" barrier once done reading it."""
        S = self.stages
        self.slot_counters = True  # (stage_offset: iteration it's slot is mf_s)
        # warpgroup MMAs (Schedule.wgmma) are left running at the end of an iteration: the
        # stage given back is the previous iteration's, whose products have completed
        lag = bool(self.wg)
        lines = ["  int mf_slot = 0;", "  unsigned mf_ph = 0;", *(["  int mf_prev = 0;"] if lag else []),
                 f"  for (int it = 0; it < {self.FL}; ++it) {{",
                 "    const int mf_s = mf_slot;",
                 "    mf::mbar_wait(&mf_full[mf_s], mf_ph);"]
        lines += with_barriers([(self.emit_step(s, "    "), self.reads_only(s)) for s in body],
                               extents, "    ", close=False, close_if_written=True)
        lines += ["    __syncwarp();"]
        pair = self.mcast_axis is not None

        def give_back(slot: str) -> str:
            """The warp's arrival on ``slot``'s "empty" barrier (a pair: both blocks')."""
            if pair:
                return (f"{{ mf::mbar_arrive_cluster(&mf_empty[{slot}], 0u); "
                        f"mf::mbar_arrive_cluster(&mf_empty[{slot}], 1u); }}")
            return f"mf::mbar_arrive(&mf_empty[{slot}]);"

        if lag:
            lines += [f"    if ((threadIdx.x & 31) == 0 && it > 0) {give_back('mf_prev')}",
                      "    mf_prev = mf_s;"]
        else:
            lines += [f"    if ((threadIdx.x & 31) == 0) {give_back('mf_s')}"]
        lines += [f"    if (++mf_slot == {S}) {{", "      mf_slot = 0;", "      mf_ph ^= 1;", "    }",
                  "  }"]
        if lag:  # (the last iteration's products, before anything reads the accumulators)
            lines.append("  mf::wgmma_wait_all();")
        if pair:
            # every copy into this block and every arrival on the other's barriers is done:
            # past this barrier neither block touches the other's shared memory again, so
            # either may leave
            lines.append("  mf::cluster_sync();")
        self.slot_counters = False
        return lines

    def emit(self) -> EmittedKernel:
        if self.row_registers():
            return self.emit_in_registers()
        steps, p, q, bufs = self.plan()
        # (a TMA ring kernel launches with 1 KB more, to align its ring: see below)
        limit = self.smem_limit - (1024 if self.tma else 0)
        plan = plan_buffers(list(bufs.values()), limit // 4)
        if any(bufs[self.buf[n]].space != "smem" for n in self.raw):
            # cp.async only writes shared memory: without room there, load these tiles as fp32
            self.set_layout(set())
            steps, p, q, bufs = self.plan()
            plan = plan_buffers(list(bufs.values()), self.smem_limit // 4)
        bg = self.bg
        cluster = self.cluster_combine(bufs)
        dims = ""
        if cluster:
            dims = f"__cluster_dims__({self.split}, 1, 1) "
        elif self.mcast_axis is not None:  # (Schedule.tma_multicast: pairs along that axis)
            dims = f"__cluster_dims__({', '.join('2' if a == self.mcast_axis else '1' for a in range(3))}) "
        lines = self.signature(dims)
        SP, SK = self.split, self.stream_k
        gx, gy, gz = self.launch_grid
        if SP > 1:
            # block (bx*SP + s, by, bz) runs iterations [s*FL, (s+1)*FL) of block (bx, by, bz)
            lines += [f"  const int bx = blockIdx.x / {SP}, by = blockIdx.y, bz = blockIdx.z;",
                      f"  const int mf_split = blockIdx.x % {SP};",
                      f"  const int itb = mf_split * {self.FL};"]
        elif not SK:  # (stream-K: each segment's block indices, at the top of its loop below)
            lines.append(self.block_index_decl())
        if self.opts.evict_first:
            # the L2 policy every streamed read passes (unused, and removed, if none is)
            lines.append("  const unsigned long long mf_pol = mf::l2_evict_first();")
        tma = self.tma
        if plan.smem_floats and tma:  # (the ring's stages on 1024-byte boundaries)
            lines += ["  extern __shared__ __align__(16) unsigned char mf_smem_raw[];",
                      "  float* smem = reinterpret_cast<float*>(mf_smem_raw + "
                      "mf::align1024_pad(mf_smem_raw));"]
        elif plan.smem_floats:
            lines.append("  extern __shared__ __align__(16) float smem[];")
        if plan.ws_floats and SK:
            lines.append(f"  float* wsb = ws + (size_t)blockIdx.x * {plan.ws_floats};")
        elif plan.ws_floats:
            lines.append(f"  float* wsb = ws + (size_t)(blockIdx.x + {gx * SP} * (blockIdx.y + {gy} * "
                         f"blockIdx.z)) * {plan.ws_floats};")
        raw_names = {self.buf[n]: n.dtype for n in self.raw}
        half_names = {self.buf[n]: n.dtype for n in self.half if n in self.buf}
        for bname, bb in sorted(bufs.items()):
            base = "smem" if bb.space == "smem" else "wsb"
            if bname in half_names:
                t = FLOAT16[half_names[bname]]
                lines.append(f"  {t.c_type}* {bname} = reinterpret_cast<{t.c_type}*>({base} + {bb.offset});"
                             f"  // {t.name} tile, {bb.size} floats, steps {bb.first}..{bb.last}")
                continue
            if bname in raw_names and raw_names[bname] is DType.F32:  # (Schedule.ring32)
                lines.append(f"  float* {bname} = {base} + {bb.offset};  // raw fp32, {self.stages} "
                             f"stages, {bb.size} floats, steps {bb.first}..{bb.last}")
                continue
            if bname in raw_names:
                t = FLOAT16[raw_names[bname]]
                lines.append(f"  {t.c_type}* {bname} = reinterpret_cast<{t.c_type}*>({base} + {bb.offset});"
                             f"  // raw {t.name}, {self.stages} stages, {bb.size} floats, steps "
                             f"{bb.first}..{bb.last}")
                continue
            lines.append(f"  float* {bname} = {base} + {bb.offset};  // {bb.size} floats, steps "
                         f"{bb.first}..{bb.last}")
        # where each buffer lives, for the barriers between steps (buffers of disjoint
        # lifetimes share addresses); the warp-sum scratch of block-wide reductions too
        extents: dict[str, Extent] = {
            b: (bb.space, bb.offset, bb.offset + bb.size) for b, bb in bufs.items()}
        extents["mf_red"] = ("red", 0, 1)
        raw = sorted(self.raw, key=self.ids.__getitem__)
        S = self.stages
        consumers_from = len(lines)
        if tma:  # the producer warp's loop, then only the consumer warps go on
            lines += self.emit_tma_producer(raw, cluster)
            consumers_from = len(lines)
        staged: list[Node] = []
        # (a loop-free kernel: its gemv B tiles, whose loads then go out before every other
        # step instead of after them)
        if self.opts.prefetch and not tma:
            budget = self.opts.prefetch_regs
            loads = [s.node for s in steps[p:q] if isinstance(s, Load)
                     and (bg.forloop > 1 or s.node in self.gemv_b)]
            # streamed gemv B tiles first: they have no other way to get ahead of their use
            for x in sorted(loads, key=lambda x: x not in self.gemv_b):
                if self.vec_load(x):
                    r = self.prefetch_regs(x)
                    if r <= budget:
                        staged.append(x)
                        budget -= r
        self.staged_set = set(staged)
        F = self.FL  # iterations this block runs (the whole loop unless split)
        tot = sum(self.prefetch_regs(x) for x in staged)
        D = max(1, min(self.opts.prefetch_depth, self.opts.prefetch_regs // tot, F)) if tot else 1
        N = self.loop_n  # (F, or a stream-K segment's runtime length)
        inits: list[str] = []  # register accumulators, zeroed before the loop
        for n in self.gemv:
            inits.append(f"  float ga{self.ids[n]}[{n.shape[0] * 8}];")
            inits.append("  #pragma unroll")
            inits.append(f"  for (int e = 0; e < {n.shape[0] * 8}; ++e) ga{self.ids[n]}[e] = 0.f;")
        for a in sorted(self.reg_fold, key=self.ids.__getitem__):
            K = self.reg_fold[a].per_thread
            inits.append(f"  float fr{self.ids[a]}[{K}];")
            inits.append("  #pragma unroll")
            inits.append(f"  for (int k = 0; k < {K}; ++k) fr{self.ids[a]}[k] = 0.f;")
        for a in sorted(self.frag_fold, key=self.ids.__getitem__):
            wm = self.warp_blocking(self.frag_fold[a])[0]
            inits.append(f"  float ff{self.ids[a]}[{wm}][2];")
            inits.append("  #pragma unroll")
            inits.append(f"  for (int k = 0; k < {2 * wm}; ++k) (&ff{self.ids[a]}[0][0])[k] = 0.f;")
            if self.opts.fold_mma:
                inits += self.fold_mma_init(a, wm)
        lines += [] if SK else inits
        # (stream-K: no early copies, its first segment's tiles are not known before its loop;
        # a TMA ring's producer issues every copy)
        ahead = [x for x in raw if x.attr("input") in self.early] if not SK and not tma else []
        for j in range(min(S - 1, F) if ahead else 0):  # graph inputs' first stages, early
            for x in ahead:
                lines += self.emit_cp_async(x, str(j), "  ")
        # one wave (at most one block per SM of the largest GPU we target): let the dependent
        # grid launch at once, its blocks take the SMs this grid leaves idle and prefetch
        # their graph inputs while this one runs; a grid of more waves signals after its loop
        # (earlier, the dependent's waiting blocks would hold SMs its later waves need)
        one_wave = (SK or gx * gy * gz * SP) <= ONE_WAVE_BLOCKS
        if one_wave:
            lines.append("  mf::grid_dep_launch();")
        # nothing before the post-loop steps reads another kernel's output or writes global
        # memory (no spilled tiles): wait for the previous kernel only after the loop
        late_wait = self.late_wait_ok and not plan.ws_floats
        if not late_wait:
            lines.append("  mf::grid_dep_wait();")
        if SK:
            lines += self.stream_k_loop_head() + inits
        ring: list[str] = []
        for j in range(S - 1 if raw and not tma else 0):  # iterations 0..S-2 of the cp.async tiles
            if j < F:
                ring += [f"  if ({j} < mf_n) {{"] if SK else []
                for x in raw:
                    if x not in ahead:  # (those went out before the wait, in group 0)
                        ring += self.emit_cp_async(x, str(j), "  ")
                ring += ["  }"] if SK else []
            ring.append("  mf::cp_async_commit();")
        # folds the register epilogue finishes in registers: no tile, zeroing, sums or finalize
        reg_folds = self.register_folds()

        def printed(st: Step) -> bool:
            return not (isinstance(st, Zero | Finalize) and st.node in reg_folds)

        # Schedule.ring_first: the ring's copies before the loop-invariant tiles' loads, in
        # flight while those hold their threads (the ring's buffers live from step 0, so no
        # pre-loop tile shares their addresses)
        pre: list[str] = []
        for s in filter(printed, steps[:p]):
            if isinstance(s, Op):  # a loop-invariant op reads tiles the steps above wrote
                pre.append("  __syncthreads();")
            pre += self.emit_step(s, "  ")
        lines += ring + pre if self.opts.ring_first else pre + ring
        for st in range(D):
            for x in staged:
                lines.append(f"  {self.raw_type(x)} pf{self.ids[x]}_{st}[{self.prefetch_regs(x)}];")
                if SK:  # (a segment may be shorter than the register pipeline)
                    lines += [f"  if ({st} < mf_n) {{", *self.emit_prefetch(x, str(st), "    ", st),
                              "  }"]
                else:
                    lines += self.emit_prefetch(x, str(st), "  ", st)
        lines.append("  __syncthreads();")
        for n in sorted(self.reg_acc, key=self.ids.__getitem__):
            WM, WN, _ = self.warp_blocking(n)
            lines += zeroed_accumulators(f"ra{self.ids[n]}", WM, WN, "  ")
            if self.kpair(n):  # the odd k-steps' accumulators
                lines += zeroed_accumulators(f"rb{self.ids[n]}", WM, WN, "  ")
        for n in sorted(self.cc_acc, key=self.ids.__getitem__):
            lines += self.cc_acc_zeros(n, "  ")
        for m in sorted(self.chains, key=self.ids.__getitem__):  # the chains' row sums
            WM = self.chains[m].wm
            for a in self.chains[m].sums:
                lines += [f"  float rs{self.ids[a]}[{WM}][2];", "  #pragma unroll",
                          f"  for (int x = 0; x < {2 * WM}; ++x) (&rs{self.ids[a]}[0][0])[x] = 0.f;"]
        for n in sorted(self.hoist_a, key=self.ids.__getitem__):
            lines += self.emit_matmul_mma(n, self.fused.get(n, self.epi.get(n, n)), False, "  ",
                                          mode="hoist")
        # Schedule.one_barrier: the ring's refill follows the iteration's one barrier
        one_bar = self.opts.one_barrier and bool(raw) and not staged and not SK and not tma
        if q > p and tma:
            lines += self.emit_tma_loop(steps[p:q], extents)
        elif q > p:
            body = [s for s in steps[p:q] if not (isinstance(s, Load) and s.node in staged)]
            # D copies of the body, one per register stage, so stage indices are constants.
            # it0 % S carried from one iteration to the next (see layout.ring_counted); one
            # subtraction wraps it while the body's copies are at most S
            counted = self.slot_counters = self.ring_counted() and D <= S
            if counted:
                lines.append("  int mf_slot = 0;")
            lines.append(f"  for (int it0 = 0; it0 < {N}; it0 += {D}) {{")
            for st in range(D):
                ind = "    "
                lines.append(f"{ind}{{")
                ind += "  "
                lines.append(f"{ind}const int it = it0 + {st};")
                refill = "mf_sr" if counted else None
                if counted:  # this iteration's slot, and the slot its refill fills
                    here = f"mf_slot + {st}"
                    lines.append(f"{ind}const int mf_s = {here} < {S} ? {here} : {here} - {S};" if st
                                 else f"{ind}const int mf_s = mf_slot;")
                    lines.append(f"{ind}const int mf_sr = mf_s == 0 ? {S - 1} : mf_s - 1;")
                if F % D or SK:
                    lines.append(f"{ind}if (it < {N}) {{")
                    ind += "  "
                if one_bar:
                    # this iteration's stage (S - 2 later groups may still be pending), then
                    # the barrier every thread passes only once done with iteration it - 1:
                    # its stage (it + S - 1) % S and every tile it read may be refilled
                    lines.append(f"{ind}mf::cp_async_wait<{S - 2}>();")
                    lines.append(f"{ind}__syncthreads();")
                    lines.append(f"{ind}if (it + {S - 1} < {N}) {{")
                    for x in raw:
                        lines += self.emit_cp_async(x, f"(it + {S - 1})", ind + "  ", refill)
                    lines.append(f"{ind}}}")
                    lines.append(f"{ind}mf::cp_async_commit();")
                elif raw:
                    # Stage (it + S - 1) % S was last read in iteration it - 1, which ended
                    # with a barrier: refill it. One group per iteration (maybe empty), so
                    # leaving S - 1 groups pending completes this iteration's.
                    lines.append(f"{ind}if (it + {S - 1} < {N}) {{")
                    for x in raw:
                        lines += self.emit_cp_async(x, f"(it + {S - 1})", ind + "  ", refill)
                    lines.append(f"{ind}}}")
                    lines.append(f"{ind}mf::cp_async_commit();")
                    lines.append(f"{ind}mf::cp_async_wait<{S - 1}>();")
                for x in staged:
                    if x not in self.gemv_b:
                        lines += self.emit_unstage(x, ind, st)
                    else:
                        # the refill below reuses this stage's registers: keep a copy for gemv
                        P = self.prefetch_regs(x)
                        lines += [f"{ind}uint4 gs{self.ids[x]}[{P}];",
                                  f"{ind}#pragma unroll",
                                  f"{ind}for (int p = 0; p < {P}; ++p) gs{self.ids[x]}[p] = "
                                  f"pf{self.ids[x]}_{st}[p];"]
                if staged or (raw and not one_bar):
                    lines.append(f"{ind}__syncthreads();")
                    lines.append(f"{ind}if (it + {D} < {N}) {{")
                    for x in staged:
                        lines += self.emit_prefetch(x, f"(it + {D})", ind + "  ", st)
                    lines.append(f"{ind}}}")
                lines += with_barriers([(self.emit_step(s, ind), self.reads_only(s)) for s in body],
                                       extents, ind, close=not one_bar)
                if F % D or SK:
                    lines.append(f"{ind[:-2]}}}")
                lines.append("    }")
            if counted:
                lines.append(f"    mf_slot = mf_slot + {D} < {S} ? mf_slot + {D} : mf_slot + {D} - {S};")
            lines.append("  }")
            self.slot_counters = False
        if raw and not tma:
            lines.append("  mf::cp_async_wait<0>();")
        # (the loop's last iteration may have ended without a barrier: one before anything
        # after the loop touches shared memory; a TMA ring's epilogue in registers needs none)
        after_loop = len(lines)
        if one_bar and q > p:
            lines.append("  __syncthreads();")
        if not one_wave and not SK:
            lines.append("  mf::grid_dep_launch();")
        if late_wait:
            lines.append("  mf::grid_dep_wait();")
        # after the loop: the leading post-loop steps (accumulators of loop-invariant tiles,
        # late loads), register results to their tiles, the split combine, the other post-loop
        # steps; barriers only where one of them touches memory an earlier one touched
        head = [(self.emit_step(s, "  "), self.reads_only(s)) for s in steps[q:q + self.post_head]
                if printed(s)]
        tail = [self.emit_gemv_reduce(n, "  ") for n in sorted(self.gemv, key=self.ids.__getitem__)]
        tail += [self.emit_fold_reduce(a, "  ") for a in sorted(self.reg_fold, key=self.ids.__getitem__)]
        tail += [self.emit_fragment_fold_sums(a, "  ") for a in sorted(self.frag_fold, key=self.ids.__getitem__)
                 if a not in reg_folds]
        saved = {m for ms in self.reg_saves.values() for m in ms}  # (stored by their Save)
        tail += [self.emit_matmul_mma(n, self.fused[n], True, "  ", mode="store")
                 for n in sorted(self.reg_acc, key=self.ids.__getitem__) if n not in saved]
        tail += [self.cc_acc_store(n, "  ") for n in sorted(self.cc_acc, key=self.ids.__getitem__)]
        tail += [self.emit_chain_sums(self.chains[n], "  ")
                 for n in sorted(self.chains, key=self.ids.__getitem__) if self.chains[n].sums]
        combine_floats = 0
        if SK:
            combine, combine_floats = self.emit_stream_combine(
                [n for n in self.nodes if n.op == "accum"], ws_base=plan.ws_floats * SK)
            tail.append(combine)
        elif SP > 1:
            accs = [n for n in self.nodes if n.op == "accum"]
            if cluster:
                tail.append(self.emit_cluster_combine(accs))
            else:
                combine, combine_floats = self.emit_split_combine(
                    accs, ws_base=plan.ws_floats * math.prod(self.launch_grid) * SP)
                tail.append(combine)
        chunks = head + [(code, frozenset[str]()) for code in tail]
        chunks += [(self.emit_step(s, "  "), self.reads_only(s)) for s in steps[q + self.post_head:]
                   if printed(s)]
        if tma and q > p and touches(chunks, extents):
            lines.insert(after_loop, "  __syncthreads();")
        lines += with_barriers(chunks, extents, "  ", close=False)
        if SK:  # the owner's post-loop steps end; the next segment reuses the shared tiles
            lines += ["  }", "  __syncthreads();", "  }  // stream-K segment"]
            lines += [] if one_wave else ["  mf::grid_dep_launch();"]
        lines.append("}")
        if tma:  # the producer warp has left: block barriers are the consumer warps' own
            lines[consumers_from:] = [ln.replace("__syncthreads();", f"mf::consumer_sync<{self.T}>();")
                                      for ln in lines[consumers_from:]]
        if self.uses_red:  # block-wide row reductions (split_rows) exchange warp sums here
            lines.insert(2, f"  __shared__ float mf_red[{self.T // 32}];")
        return EmittedKernel(
            name=self.name, source="\n".join(lines) + "\n",
            grid=(SK, 1, 1) if SK else (gx * SP, gy, gz), threads=self.T + 32 if tma else self.T,
            smem_bytes=4 * plan.smem_floats + (1024 if tma else 0), ws_floats=plan.ws_floats,
            extra_ws_floats=combine_floats, schedule=self.opts,
            in_types=tuple(dt for _, dt in bg.inputs),
            out_types=tuple(o.node.dtype for o in bg.outputs),
            tensor_maps=tuple(self.tensor_map_spec(n) for n in raw) if tma else ())


def emit_block_graph(bg: BlockGraph, name: str, smem_limit: int = SMEM_LIMIT_BYTES,
                     opts: EmitOptions | None = None,
                     early: frozenset[int] = frozenset(),
                     refinement: Refinement | None = None) -> EmittedKernel:
    """Emit the ``__global__`` function ``name`` computing block graph ``bg``.

    Every kernel waits for the kernel launched before it (``griddepcontrol.wait``: a no-op
    without a programmatic dependent launch) before it writes global memory or reads anything
    but the kernel inputs listed in ``early`` (graph inputs, which no kernel writes): the
    cp.async copies of those inputs' first ring stages are issued before the wait, so they
    overlap the previous kernel's tail. A kernel lets its dependent begin launching
    (``griddepcontrol.launch_dependents``) at its start when its grid fits one wave
    (``ONE_WAVE_BLOCKS``), else after its main loop.

    ``refinement``: ``bg`` is that refined block's virtual graph (:mod:`refine`): addresses
    follow the real shapes, each CTA's band start added to the refined dimension, and the
    grid is launched wider along the band axis."""
    em = _Emitter(bg, name, smem_limit, opts or EmitOptions())
    em.early = early
    if refinement is not None:
        em.set_refinement(refinement)
    return em.emit()
