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
it. Imports ``ir`` and the planning modules of ``codegen``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from mirage_formal.codegen.barriers import Extent, with_barriers
from mirage_formal.codegen.cindex import align_idx, fmt_float, multi_index, strides
from mirage_formal.codegen.layout import Chain, KernelLayout
from mirage_formal.codegen.plan import Buffer, plan_buffers
from mirage_formal.codegen.schedule import CLUSTER_MAX, Schedule
from mirage_formal.codegen.schedule import SIMPLE as SIMPLE
from mirage_formal.codegen.steps import (
    Accumulate,
    Finalize,
    Load,
    MatmulAccumulate,
    Op,
    Save,
    Step,
    Zero,
)
from mirage_formal.errors import UnsupportedOpError
from mirage_formal.ir.dtypes import DType
from mirage_formal.ir.graph import ITER, BlockGraph
from mirage_formal.ir.node import Node
from mirage_formal.ir.occupancy import combine_groups
from mirage_formal.ir.ops import REGISTRY

#: the most dynamic shared memory a block may use on sm_90 (227 KiB)
SMEM_LIMIT_BYTES = 227 * 1024
#: a grid of at most this many blocks runs in one wave on an H100 (132 SMs, one block each at
#: least): it lets its dependent kernel launch as soon as it starts (see emit_block_graph)
ONE_WAVE_BLOCKS = 132
#: a loop in which a block's threads share work items is fully unrolled up to this many items
#: per thread (see _Emitter.block_loop)
BLOCK_LOOP_UNROLL = 16
#: registers a thread of a cluster combine fills with remote partials before it sums them
CLUSTER_LOAD_REGS = 32
#: the (original, unsplit) block index of the block graph, as declared at kernel entry
BLOCK_IDX = ("bx", "by", "bz")


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

    @property
    def ws_bytes(self) -> int:
        return 4 * (self.ws_floats * math.prod(self.grid) + self.extra_ws_floats)


def zeroed_accumulators(name: str, wm: int, wn: int, ind: str) -> list[str]:
    """Declare ``float name[wm][wn][4]`` (a warp tile's mma accumulators) set to zero."""
    return [f"{ind}float {name}[{wm}][{wn}][4];", f"{ind}#pragma unroll",
            f"{ind}for (int x = 0; x < {wm * wn * 4}; ++x) (&{name}[0][0][0])[x] = 0.f;"]


class _Expr:
    """Statements computing tile values at given indices inside one element loop."""

    def __init__(self, em: _Emitter, indent: str) -> None:
        self.em = em
        self.lines: list[str] = []
        self.memo: dict[tuple[Node, tuple[str, ...]], str] = {}
        self.indent = indent

    def val(self, n: Node, idx: Sequence[str], compute: bool = False) -> str:
        """Value of tile ``n`` at ``idx``; ``compute``: from its operands even if stored."""
        key = (n, tuple(idx))
        if key in self.memo and not compute:
            return self.memo[key]
        em = self.em
        if n in em.raw and not compute:  # this iteration's stage of its cp.async ring
            v = f"__half2float({em.buf[n]}[{em.stage_offset(n)} + {em.addr(n, idx)}])"
        elif n in em.buf and not compute:
            v = f"{em.buf[n]}[{em.addr(n, idx)}]"
            if n in em.half:
                v = f"__half2float({v})"
        elif n.op == ITER:
            v = em.var()
            self.lines.append(f"const float {v} = mf::to_f({em.iter_ref(n, idx)});")
        else:
            d = REGISTRY[n.op]
            assert d.elementwise and d.c_expr is not None, n.op
            args = [self.val(s, align_idx(idx, n.shape, s.shape)) for s in n.src]
            attrs = {k: fmt_float(x) if isinstance(x, float) else x for k, x in n.attrs}
            v = em.var()
            self.lines.append(f"const float {v} = {d.c_expr.format(*args, **attrs)};")
        self.memo[key] = v
        return v

    def code(self) -> list[str]:
        return [self.indent + ln for ln in self.lines]


def ld_vec_fn(nbytes: int) -> str:
    """The device function that loads one ``nbytes``-byte vector and widens it to fp32."""
    return "mf::ld_vec" if nbytes == 16 else f"mf::ld_vecn<{nbytes}>"


def st_vec_fn(nbytes: int) -> str:
    """The device function that narrows fp32 values and stores one ``nbytes``-byte vector."""
    return "mf::st_vec" if nbytes == 16 else f"mf::st_vecn<{nbytes}>"


class _Emitter(KernelLayout):
    """Prints the kernel a :class:`KernelLayout` describes."""

    # ------------------------------------------------------------ addressing
    def iter_ref(self, n: Node, idx: Sequence[str], itv: str = "it") -> str:
        k = n.attr("input")
        shape, _ = self.bg.inputs[k]
        imap, fmap = n.attr("imap"), n.attr("fmap")
        st = strides(shape)
        terms = []
        for d in range(len(shape)):
            parts = []
            for a in range(3):
                if imap[a] == d:
                    parts.append(f"{BLOCK_IDX[a]}*{shape[d] // self.bg.grid[a]}")
            if fmap == d and self.bg.forloop > 1:
                it = f"(itb + {itv})" if self.split > 1 else itv
                parts.append(f"{it}*{n.shape[d]}")
            if idx[d] != "0":
                parts.append(idx[d])
            if parts:
                e = " + ".join(parts)
                terms.append(f"({e})" if st[d] == 1 else f"({e})*{st[d]}")
        return f"in{k}[{' + '.join(terms) if terms else '0'}]"

    def out_ref(self, k: int, idx: Sequence[str]) -> str:
        o = self.bg.outputs[k]
        shape = self.bg.output_shape(o)
        st = strides(shape)
        terms = []
        for d in range(len(shape)):
            parts = [f"{BLOCK_IDX[a]}*{o.node.shape[d]}" for a in range(3) if o.omap[a] == d]
            if idx[d] != "0":
                parts.append(idx[d])
            if parts:
                e = " + ".join(parts)
                terms.append(f"({e})" if st[d] == 1 else f"({e})*{st[d]}")
        return f"out{k}[{' + '.join(terms) if terms else '0'}]"

    # ------------------------------------------------------------ code per step
    def block_loop(self, var: str, n: int, ind: str) -> list[str]:
        """The opening lines of a loop in which the block's threads share ``n`` work items:
        thread t takes items t, t + T, t + 2T, ... as ``var`` (close it with one ``}``).

        Printed as a loop over the thread's own item count, a compile-time constant (fully
        unrolled up to ``BLOCK_LOOP_UNROLL`` items, else unrolled by 4), with the item index
        computed from ``threadIdx.x``: NVRTC then knows every index is non-negative (divisions
        and remainders by powers of two become shifts and masks) and hoists the per-thread
        part of each address out of the kernel's main loop. The plain strided loop
        (``for (v = threadIdx.x; v < n; v += T)``) cost about twice the instructions in the
        attention kernels' copy loops (sign fix-ups, a remainder loop, addresses recomputed)."""
        T = self.T
        r = -(-n // T)
        if r == 1 and n == T:
            return [f"{ind}{{ const int {var} = threadIdx.x;"]
        if r == 1:
            return [f"{ind}if (threadIdx.x < {n}) {{ const int {var} = threadIdx.x;"]
        guard = f" if ({var} >= {n}) break;" if n % T else ""
        unroll = "#pragma unroll" if r <= BLOCK_LOOP_UNROLL else "#pragma unroll 4"
        return [f"{ind}{unroll}",
                f"{ind}for (int {var}_r = 0; {var}_r < {r}; ++{var}_r) {{ "
                f"const int {var} = threadIdx.x + {var}_r * {T};{guard}"]

    def loop_over(self, shape: Sequence[int], body: list[str], ind: str, var: str = "i") -> list[str]:
        return [*self.block_loop(var, math.prod(shape), ind), *body, f"{ind}}}"]

    def elem_loop(self, shape: Sequence[int], ind: str,
                  make: Callable[[_Expr, list[str]], list[str]]) -> list[str]:
        """A loop over tile elements: ``make(expr, idx) -> list of final statements``."""
        decls, idx = multi_index(shape, "i", "t")
        ex = _Expr(self, ind + "  ")
        tail = make(ex, idx)
        body = [ind + "  " + d for d in decls] + ex.code() + [ind + "  " + t for t in tail]
        return self.loop_over(shape, body, ind)

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
            src = x.src[0]
            fold = x.attr("fold")
            count = self.bg.forloop * (src.shape[-1] // fold if fold is not None else 1)
            e = f"{b}[i] * {fmt_float(1.0 / count)}f"
            if x.attr("kind") == "rms":
                e = f"sqrtf({e})"
            return self.loop_over(x.shape, [f"{ind}  {b}[i] = {e};"], ind)
        if isinstance(step, Accumulate):
            return self.emit_acc(x, ind)
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
        cvt = "__float2half_rn" if x in self.half else ""
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

    def vec_bytes(self, n: Node) -> int:
        """Bytes of one global-memory vector of iterator tile ``n``."""
        _, dt = self.bg.inputs[n.attr("input")]
        return int(self.iter_vec(n) * dt.itemsize)

    def raw_load(self, n: Node, ref: str) -> str:
        """The expression that reads one raw vector of iterator tile ``n`` at ``ref`` (an
        element of its input), with the schedule's L2 fetch size and eviction policy."""
        b = self.vec_bytes(n)
        if self.opts.evict_first:
            return f"mf::ld_rawn_pol<{b}, {self.opts.l2_fetch}>(&{ref}, mf_pol)"
        if self.opts.l2_fetch:
            return f"mf::ld_rawn_l2<{b}, {self.opts.l2_fetch}>(&{ref})"
        return f"mf::ld_raw(&{ref})" if b == 16 else f"mf::ld_rawn<{b}>(&{ref})"

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

    def emit_cp_async(self, n: Node, itv: str, ind: str) -> list[str]:
        """Issue 16-byte ``cp.async`` copies of raw tile ``n`` at iteration ``itv`` into
        stage ``itv % stages`` of its buffer (no commit)."""
        nv = math.prod(n.shape) // 8
        decls, idx = multi_index(n.shape, "i", "t")
        ref = self.iter_ref(n, idx, itv)
        dst = f"{self.buf[n]} + {self.stage_offset(n, f'({itv})')} + {self.addr(n, idx)}"
        if self.opts.evict_first:
            copy = f"mf::cp_async16_pol<{self.opts.l2_fetch}>({dst}, &{ref}, mf_pol)"
        elif self.opts.l2_fetch:
            copy = f"mf::cp_async16_l2<{self.opts.l2_fetch}>({dst}, &{ref})"
        else:
            copy = f"mf::cp_async16({dst}, &{ref})"
        return [*self.block_loop("v", nv, ind),
                f"{ind}  const int i = v * 8;", *[ind + "  " + d for d in decls],
                f"{ind}  {copy};", f"{ind}}}"]

    def emit_load(self, n: Node, ind: str) -> list[str]:
        k = n.attr("input")
        _, dt = self.bg.inputs[k]
        b = self.buf[n]
        V = self.iter_vec(n)
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
            ex = _Expr(self, ind + "    ")
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
        G = x.shape[-1] // fold
        decls, idx = multi_index(a.shape, "o", "t")
        jl = idx[-1]
        gidx = [*idx[:-1], f"g*{fold} + {jl}" if jl != "0" else f"g*{fold}"]
        na = math.prod(a.shape)
        if a in self.reg_fold:
            ex = _Expr(self, ind + "      ")
            v = ex.val(x, gidx)
            return self.emit_fold_step(a, G, decls, ex.code(), f(v), ind)
        ex = _Expr(self, ind + "    ")
        v = ex.val(x, gidx)
        code = ex.code()
        wide = self.split_rows(na, G, decls, lambda i: [*[i + c.strip() for c in code], f"{i}s += {f(v)};"],
                               lambda i: [f"{i}{b}[o] {op} s;"], "g", ind)
        if wide is not None:
            return wide
        if G >= 32 and self.warp_ok():
            W = self.T // 32
            return [f"{ind}for (int o = threadIdx.x / 32; o < {na}; o += {W}) {{",
                    *[ind + "  " + d for d in decls], f"{ind}  float s = 0.f;",
                    f"{ind}  for (int g = threadIdx.x % 32; g < {G}; g += 32) {{", *code,
                    f"{ind}    s += {f(v)};", f"{ind}  }}", f"{ind}  s = mf::warp_sum(s);",
                    f"{ind}  if (threadIdx.x % 32 == 0) {b}[o] {op} s;", f"{ind}}}"]
        return [*self.block_loop("o", na, ind),
                *[ind + "  " + d for d in decls], f"{ind}  float s = 0.f;",
                f"{ind}  for (int g = 0; g < {G}; ++g) {{", *code,
                f"{ind}    s += {f(v)};", f"{ind}  }}", f"{ind}  {b}[o] {op} s;", f"{ind}}}"]

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

    def epilogue(self, dst: Node, v: str) -> str:
        """``v`` passed through ``dst``'s op when ``dst`` is a matmul's epilogue."""
        if dst.op == "matmul" or dst.op == "accum":
            return v
        d = REGISTRY[dst.op]
        assert d.c_expr is not None
        attrs = {k: fmt_float(x) if isinstance(x, float) else x for k, x in dst.attrs}
        return d.c_expr.format(v, **attrs)

    def emit_matmul(self, n: Node, dst: Node, add: bool, ind: str) -> list[str]:
        A, B = n.src
        if (self.opts.mma and self.warp_ok() and A.dtype is DType.F16 and B.dtype is DType.F16):
            return self.emit_matmul_mma(n, dst, add, ind)
        return self.emit_matmul_simple(n, dst, add, ind)

    def emit_matmul_mma(self, n: Node, dnode: Node, add: bool, ind: str,
                        mode: Literal["loop", "hoist", "store", "chain_a", "chain_b"] = "loop",
                        ) -> list[str]:
        """Warps take 16x8 output tiles; each is a chain of m16n8k16 tensor-core products
        whose fp16 fragments are packed from the fp32 shared-memory tiles (PTX ISA layout:
        A rows g, g+8 and columns 2q, 2q+1, +8; B rows 2q, 2q+1, +8 and column g; C rows g,
        g+8 and columns 2q, 2q+1, where g = lane/4, q = lane%4).

        ``mode``: ``"loop"`` the product itself (into registers ``ra<id>`` for a register
        accumulator, see KernelLayout.reg_acc); ``"hoist"`` the code before the loop that loads
        a loop-invariant A's fragments into ``ha<id>``; ``"store"`` the code after the loop that
        writes a register accumulator to its tile; ``"chain_a"`` / ``"chain_b"`` the first and
        second product of a register chain (:meth:`emit_chain`, which declares the warp tile
        and the registers): the first into ``cs<id>``, the second with its A fragments from
        ``ea<id>``."""
        A, B = n.src
        a, b = self.buf.get(A, ""), self.buf[B]
        M, N, K = n.shape[-2], n.shape[-1], A.shape[-1]
        # Raw fp16 operands (cp.async tiles) are read from the current stage; with ldmatrix
        # when K is a multiple of 16 (and, for B, N of 8). A's rows past M are clamped to row
        # M - 1: they only feed output rows that are not stored.
        # fp16 tiles (raw cp.async stages, or half_tiles) are read as halves
        ra, rb = A in self.raw or A in self.half, B in self.raw or B in self.half
        ldsm = self.opts.ldmatrix
        xa = ra and ldsm and K % 16 == 0 and A.shape[-2] == M
        xb = rb and ldsm and K % 16 == 0 and N % 8 == 0 and B.shape[-1] == N
        if A in self.raw:
            a = f"{a} + {self.stage_offset(A)}"
        if B in self.raw:
            b = f"{b} + {self.stage_offset(B)}"
        batch = n.shape[:-2]
        W = self.T // 32
        _, bidx = multi_index(batch, "tb", "u") if batch else ([], [])
        ab = self.addr(A, [*align_idx(bidx, batch, A.shape[:-2]), "0", "0"]) if batch else "0"
        bb = self.addr(B, [*align_idx(bidx, batch, B.shape[:-2]), "0", "0"]) if batch else "0"
        lda, ldb = self.row(A), self.row(B)
        mk, kk, nk = M % 16 != 0, K % 16 != 0, N % 8 != 0

        def la(r: str, k: str) -> str:
            cond = [c for c, need in ((f"{r} < {M}", mk), (f"{k} < {K}", kk)) if need]
            e = f"pa[{r} * {lda} + {k}]"
            return f"({' && '.join(cond)} ? {e} : {'mf::hzero()' if ra else '0.f'})" if cond else e

        def lb(k: str, c: str) -> str:
            cond = [x for x, need in ((f"{k} < {K}", kk), (f"{c} < {N}", nk)) if need]
            e = f"pb[{k} * {ldb} + {c}]"
            return f"({' && '.join(cond)} ? {e} : {'mf::hzero()' if rb else '0.f'})" if cond else e

        pka = "mf::pack_h2" if ra else "mf::pack_half2"
        pkb = "mf::pack_h2" if rb else "mf::pack_half2"
        i3 = ind + "    "
        if xa:
            row = "tm * 16 + (lane & 15)" if M % 16 == 0 else f"min(tm * 16 + (lane & 15), {M - 1})"
            frag_a = [f"{i3}mf::ldsm_x4(fa, pa + ({row}) * {lda} + k0 + (lane >> 4) * 8);"]
        elif not ra and not mk and not kk and lda % 2 == 0:
            # fp32 A tile, no bounds checks: each fragment register is one 8-byte pair
            frag_a = [f"{i3}fa[0] = mf::pack_f2(pa + r0 * {lda} + ka);",
                      f"{i3}fa[1] = mf::pack_f2(pa + r1 * {lda} + ka);",
                      f"{i3}fa[2] = mf::pack_f2(pa + r0 * {lda} + kb);",
                      f"{i3}fa[3] = mf::pack_f2(pa + r1 * {lda} + kb);"]
        else:
            frag_a = [f"{i3}fa[0] = {pka}({la('r0', 'ka')}, {la('r0', '(ka + 1)')});",
                      f"{i3}fa[1] = {pka}({la('r1', 'ka')}, {la('r1', '(ka + 1)')});",
                      f"{i3}fa[2] = {pka}({la('r0', 'kb')}, {la('r0', '(kb + 1)')});",
                      f"{i3}fa[3] = {pka}({la('r1', 'kb')}, {la('r1', '(kb + 1)')});"]
        if xb:
            frag_b = [f"{i3}mf::ldsm_x2_trans(fb, pb + (k0 + (lane & 15)) * {ldb} + tn * 8);"]
        else:
            frag_b = [f"{i3}fb[0] = {pkb}({lb('ka', 'c0')}, {lb('(ka + 1)', 'c0')});",
                      f"{i3}fb[1] = {pkb}({lb('kb', 'c0')}, {lb('(kb + 1)', 'c0')});"]

        dst = self.buf.get(dnode, "")

        def st(r: str, c: str, v: str, op: str, to: str) -> str:
            cond = [x for x, need in ((f"{r} < {M}", mk), (f"{c} < {N}", nk)) if need]
            e = self.epilogue(dnode, v)
            if dnode in self.half:
                e = f"__float2half_rn({e})"
            s = f"{to}[{self.addr(dnode, [*bidx, r, c])}] {op} {e};"
            return f"if ({' && '.join(cond)}) {s}" if cond else s

        i2, i4 = ind + "  ", ind + "      "

        def stores(op: str, to: str) -> list[str]:
            if dnode in self.half and not mk and not nk and op == "=" and to == dst:
                # fp16 destination, no bounds checks: each row's two adjacent values as one half2
                def st2(r: str, v0: str, v1: str) -> str:
                    a0 = self.addr(dnode, [*bidx, r, "cc"])
                    return (f"{i4}*reinterpret_cast<__half2*>(&{dst}[{a0}]) = __floats2half2_rn("
                            f"{self.epilogue(dnode, v0)}, {self.epilogue(dnode, v1)});")
                return [st2("r0", "acc[0]", "acc[1]"), st2("r1", "acc[2]", "acc[3]")]
            return [f"{i4}{st(r, c, f'acc[{e}]', op, to)}"
                    for e, (r, c) in enumerate((("r0", "cc"), ("r0", "(cc + 1)"),
                                                ("r1", "cc"), ("r1", "(cc + 1)")))]
        ta = "__half" if ra else "float"
        tb = "__half" if rb else "float"
        # Register blocking: a warp computes WM x WN output tiles of 16x8 at once, so each
        # A fragment feeds WN products and each B fragment WM (shared-memory reads per
        # product fall from 3 fragments to 2/WN + 1/WM).
        WM, WN, tiles = self.warp_blocking(n)
        KS = K // 16
        i3, i5 = ind + "    ", ind + "      "
        racc = n in self.reg_acc
        hoist = n in self.hoist_a
        accs = f"ra{self.ids[n]}" if racc else f"cs{self.ids[n]}" if mode == "chain_a" else "accs"
        head = self.mma_head(n, i2)
        pa_line = f"{i2}const {ta}* pa = {a} + {ab};"
        pb_line = f"{i2}const {tb}* pb = {b} + {bb};"

        def store_all(op: str, to: str = dst) -> list[str]:
            return [f"{i2}#pragma unroll",
                    f"{i2}for (int wm = 0; wm < {WM}; ++wm) {{",
                    f"{i3}const int r0 = (tm0 + wm) * 16 + g, r1 = r0 + 8;",
                    f"{i3}#pragma unroll",
                    f"{i3}for (int wn = 0; wn < {WN}; ++wn) {{",
                    f"{i5}const int cc = (tn0 + wn) * 8 + 2 * q;",
                    f"{i5}const float* const acc = {accs}[wm][wn];",
                    *stores(op, to),
                    f"{i3}}}",
                    f"{i2}}}"]
        store = store_all("+=" if add and mode != "store" else "=")
        kw = self.second_kw(n)
        if mode == "store" and kw > 1:
            # k slices of a register chain: each warp writes its partial sums to slice kq of
            # the scratch tile, then every thread adds the slices in order (deterministic)
            size = self.buf_size(dnode)
            return [f"{ind}if (threadIdx.x / 32 < {tiles}) {{",
                    f"{i2}const int tile = threadIdx.x / 32;", *head,
                    *store_all("=", f"({self.kslices[dnode]} + kq * {size})"), f"{ind}}}",
                    *self.add_slices(self.kslices[dnode], dst, size, kw, "=", ind)]
        if mode == "store":  # after the loop: the register sums to the accumulator's tile
            return [f"{ind}if (threadIdx.x / 32 < {tiles}) {{",
                    f"{i2}const int tile = threadIdx.x / 32;", *head, *store, f"{ind}}}"]
        hoisted = f"ha{self.ids[n]}[wm][ks]"  # the hoisted fragments of warp tile row wm
        frag_a_loop = [f"{i3}#pragma unroll",
                       f"{i3}for (int wm = 0; wm < {WM}; ++wm) {{",
                       f"{i3}  const int tm = tm0 + wm, r0 = tm * 16 + g, r1 = r0 + 8;",
                       f"{i3}  unsigned* const fa = {hoisted if mode == 'hoist' else 'fas[wm]'};",
                       *["  " + x for x in frag_a],
                       f"{i3}}}"]
        if mode == "hoist":  # before the loop: a loop-invariant A's fragments into registers
            return [f"{ind}unsigned ha{self.ids[n]}[{WM}][{KS}][4];",
                    f"{ind}if (threadIdx.x / 32 < {tiles}) {{",
                    f"{i2}const int tile = threadIdx.x / 32;", *head, pa_line,
                    f"{i2}#pragma unroll",
                    f"{i2}for (int ks = 0; ks < {KS}; ++ks) {{",
                    f"{i3}const int k0 = ks * 16, ka = k0 + 2 * q, kb = ka + 8;",
                    *frag_a_loop, f"{i2}}}", f"{ind}}}"]
        if hoist or mode == "chain_b":
            KW = kw if mode == "chain_b" else 1  # the k slice kq of KS / KW k-steps
            k0 = f"(kq * {KS // KW} + ks) * 16" if KW > 1 else "ks * 16"
            kloop = [f"{i2}#pragma unroll",
                     f"{i2}for (int ks = 0; ks < {KS // KW}; ++ks) {{",
                     f"{i3}const int k0 = {k0}, ka = k0 + 2 * q, kb = ka + 8;",
                     f"{i3}unsigned fbs[{WN}][2];"]
            fa_ref = hoisted if hoist else f"ea{self.ids[n]}[wm][ks]"
        else:
            kloop = [f"{i2}#pragma unroll {max(1, 4 // (WM * WN))}",
                     f"{i2}for (int k0 = 0; k0 < {K}; k0 += 16) {{",
                     f"{i3}const int ka = k0 + 2 * q, kb = ka + 8;",
                     f"{i3}unsigned fas[{WM}][4], fbs[{WN}][2];",
                     *frag_a_loop]
            fa_ref = "fas[wm]"
        if xb and WN % 2 == 0:
            # two adjacent 8-column B fragments per ldmatrix (x4, transposed): half the
            # instructions for the same shared-memory bytes
            frags_b = [f"{i3}#pragma unroll",
                       f"{i3}for (int wn = 0; wn < {WN}; wn += 2) {{",
                       f"{i3}  const int tn = tn0 + wn;",
                       f"{i3}  mf::ldsm_x4_trans(fbs[wn], pb + (k0 + (lane & 15)) * {ldb} "
                       f"+ (tn + (lane >> 4)) * 8);",
                       f"{i3}}}"]
        else:
            frags_b = [f"{i3}#pragma unroll",
                       f"{i3}for (int wn = 0; wn < {WN}; ++wn) {{",
                       f"{i3}  const int tn = tn0 + wn, c0 = tn * 8 + g;",
                       f"{i3}  unsigned* const fb = fbs[wn];",
                       *["  " + x for x in frag_b],
                       f"{i3}}}"]
        product = [
            *kloop,
            *frags_b,
            f"{i3}#pragma unroll",
            f"{i3}for (int wm = 0; wm < {WM}; ++wm)",
            f"{i3}  #pragma unroll",
            f"{i3}  for (int wn = 0; wn < {WN}; ++wn) mf::mma_16816({accs}[wm][wn], {fa_ref}, fbs[wn]);",
            f"{i2}}}"]
        if mode == "chain_a":
            return [f"{ind}{{", pa_line, pb_line, *product, f"{ind}}}"]
        if mode == "chain_b":
            # the chain's warp tile head is the first product's: this product spans all
            # columns, over the warp's k slice
            own = [f"{i2}const int tn0 = 0, kq = tile % {kw};"] if kw > 1 else []
            return [f"{ind}{{", *own, pb_line, *product, f"{ind}}}"]
        zero = [] if racc else zeroed_accumulators("accs", WM, WN, i2)
        return [
            f"{ind}for (int tile = threadIdx.x / 32; tile < {tiles}; tile += {W}) {{",
            *head, pa_line, pb_line, *zero, *product,
            *([] if racc else store),
            f"{ind}}}"]

    def mma_head(self, n: Node, ind: str) -> list[str]:
        """Declarations of tensor-core matmul ``n``'s warp tile ``tile`` (a variable in scope):
        lane, g, q, the batch index ``tb`` and its batch coordinates, the first 16-row tile
        ``tm0`` and 8-column tile ``tn0``."""
        M, N = n.shape[-2], n.shape[-1]
        MT, NT = -(-M // 16), -(-N // 8)
        WM, WN, _ = self.warp_blocking(n)
        MTW, NTW = MT // WM, NT // WN
        batch = n.shape[:-2]
        decls, _ = multi_index(batch, "tb", "u") if batch else ([], [])
        kw = self.second_kw(n)
        if kw > 1:  # a register chain's second product: kw warps share a row tile, k slice kq
            return [f"{ind}const int lane = threadIdx.x % 32, g = lane >> 2, q = lane & 3;",
                    f"{ind}const int tb = tile / {kw * MTW}, tm0 = (tile / {kw}) % {MTW} * {WM}, "
                    f"tn0 = 0, kq = tile % {kw};",
                    *[ind + d for d in decls]]
        return [f"{ind}const int lane = threadIdx.x % 32, g = lane >> 2, q = lane & 3;",
                f"{ind}const int tb = tile / {MTW * NTW}, tm0 = (tile / {NTW}) % {MTW} * {WM}, "
                f"tn0 = tile % {NTW} * {WN};",
                *[ind + d for d in decls]]

    def emit_chain(self, m2: Node, ind: str) -> list[str]:
        """One loop iteration of the register chain ending in matmul ``m2`` (layout.Chain):
        warp ``tile`` computes its whole rows of the first product into ``cs``, passes each
        value through the chain's elementwise ops, adds it to its row sums ``rs<acc>`` and
        packs it as fp16 into the second product's A fragments ``ea`` (an m16n8k16 C fragment
        pair of columns 16k..16k+15 is the A fragment of k-step k: rows g, g+8 and columns
        2q, 2q+1, +8), then runs the second product into its register accumulator."""
        ch = self.chains[m2]
        m1, E = ch.first, ch.tile
        WM, NT1, tiles = self.warp_blocking(m1)
        i2, i3, i4, i5 = (ind + "  " * k for k in (1, 2, 3, 4))
        # every chain tile has E's shape: one index (size-1 dimensions read as 0) for all
        idx = align_idx([*(f"u{d}" for d in range(len(E.shape) - 2)), "r", "c"], E.shape, E.shape)
        ex = _Expr(self, i5)
        ex.memo[(m1, tuple(idx))] = "c[e]"
        v = ex.val(E, idx, True)
        sum_lines = [f"{i5}rs{self.ids[a]}[wm][e >> 1] += {ex.val(a.src[0], idx)};"
                     for a in ch.sums]
        return [f"{ind}if (threadIdx.x / 32 < {tiles}) {{",
                f"{i2}const int tile = threadIdx.x / 32;", *self.mma_head(m1, i2),
                *zeroed_accumulators(f"cs{self.ids[m1]}", WM, NT1, i2),
                *self.emit_matmul_mma(m1, m1, False, i2, mode="chain_a"),
                f"{i2}unsigned ea{self.ids[m2]}[{WM}][{NT1 // 2}][4];",
                f"{i2}#pragma unroll",
                f"{i2}for (int wm = 0; wm < {WM}; ++wm) {{",
                f"{i3}#pragma unroll",
                f"{i3}for (int wn = 0; wn < {NT1}; ++wn) {{",
                f"{i4}const float* const c = cs{self.ids[m1]}[wm][wn];",
                f"{i4}float ev[4];",
                f"{i4}#pragma unroll",
                f"{i4}for (int e = 0; e < 4; ++e) {{",
                *ex.code(), f"{i5}ev[e] = {v};", *sum_lines,
                f"{i4}}}",
                f"{i4}unsigned* const fa = ea{self.ids[m2]}[wm][wn >> 1] + (wn & 1) * 2;",
                f"{i4}fa[0] = mf::pack_half2(ev[0], ev[1]);",
                f"{i4}fa[1] = mf::pack_half2(ev[2], ev[3]);",
                f"{i3}}}",
                f"{i2}}}",
                *self.emit_matmul_mma(m2, self.fused[m2], True, i2, mode="chain_b"),
                f"{ind}}}"]

    def emit_chain_sums(self, ch: Chain, ind: str) -> list[str]:
        """After the loop: each row sum of chain ``ch`` is spread over the 4 threads of a quad
        (lanes 4g..4g+3 hold rows g and g+8 of every warp tile row): shuffles add them and
        lane q = 0 adds the total into the accumulator's tile."""
        WM, _, tiles = self.warp_blocking(ch.first)
        i2, i3, i4 = ind + "  ", ind + "    ", ind + "      "
        batch = ch.tile.shape[:-2]
        _, bidx = multi_index(batch, "tb", "u") if batch else ([], [])
        kw, M = ch.kw, ch.tile.shape[-2]
        lines = [f"{ind}if (threadIdx.x / 32 < {tiles}) {{",
                 f"{i2}const int tile = threadIdx.x / 32;", *self.mma_head(ch.first, i2)]
        if kw > 1:  # this warp's k slice (the first product's columns it computed)
            lines.append(f"{i2}const int kq = tile % {kw};")
        for a in ch.sums:
            at = f"{self.addr(a, [*bidx, 'r', '0'])}"
            # k slices: the partial row sums to slice kq of the scratch tile (added below)
            dst = (f"{self.kslices[a]}[kq * {self.buf_size(a)} + {at}]" if kw > 1
                   else f"{self.buf[a]}[{at}]")
            lines += [f"{i2}#pragma unroll",
                      f"{i2}for (int wm = 0; wm < {WM}; ++wm) {{",
                      f"{i3}#pragma unroll",
                      f"{i3}for (int h = 0; h < 2; ++h) {{",
                      f"{i4}float s = rs{self.ids[a]}[wm][h];",
                      f"{i4}s += __shfl_xor_sync(0xffffffffu, s, 1);",
                      f"{i4}s += __shfl_xor_sync(0xffffffffu, s, 2);",
                      f"{i4}const int r = (tm0 + wm) * 16 + g + 8 * h;",
                      f"{i4}if ({'q == 0' if M % 16 == 0 else f'q == 0 && r < {M}'}) "
                      f"{dst} {'=' if kw > 1 else '+='} s;",
                      f"{i3}}}", f"{i2}}}"]
        lines.append(f"{ind}}}")
        if kw > 1:
            for k, a in enumerate(ch.sums):
                lines += self.add_slices(self.kslices[a], self.buf[a], self.buf_size(a), kw, "+=",
                                         ind, barrier=k == 0)
        return lines

    def add_slices(self, scratch: str, dst: str, size: int, kw: int, op: str, ind: str,
                   barrier: bool = True) -> list[str]:
        """After a barrier (unless ``barrier`` is False: one was just printed), every thread
        adds the ``kw`` slices of ``scratch`` (``size`` floats each) element by element in
        slice order and ``op``s the total into ``dst``."""
        terms = " + ".join(f"{scratch}[{j * size} + i]" for j in range(kw))
        return [*([f"{ind}__syncthreads();"] if barrier else []),
                *self.block_loop("i", size, ind), f"{ind}  {dst}[i] {op} {terms};", f"{ind}}}"]

    def emit_matmul_simple(self, n: Node, dnode: Node, add: bool, ind: str) -> list[str]:
        A, B = n.src
        a, b = self.buf[A], self.buf[B]
        K = A.shape[-1]
        N = B.shape[-1]
        decls, idx = multi_index(n.shape, "i", "t")
        batch = idx[:-2]
        m, nn = idx[-2], idx[-1]
        ai = [*align_idx(batch, n.shape[:-2], A.shape[:-2]), m, "0"]
        bi = [*align_idx(batch, n.shape[:-2], B.shape[:-2]), "0", nn]
        if A.shape[-2] == 1:
            ai[-2] = "0"
        if N == 1:
            bi[-1] = "0"
        op = "+=" if add else "="
        body = [*[ind + "  " + d for d in decls],
                f"{ind}  const float* pa = {a} + {self.addr(A, ai)};",
                f"{ind}  const float* pb = {b} + {self.addr(B, bi)};",
                f"{ind}  float s = 0.f;",
                f"{ind}  #pragma unroll 8",
                f"{ind}  for (int k = 0; k < {K}; ++k) s += pa[k] * pb[k * {self.row(B)}];",
                f"{ind}  {self.buf[dnode]}[{self.addr(dnode, idx)}] {op} "
                f"{'__float2half_rn' if dnode in self.half else ''}({self.epilogue(dnode, 's')});"]
        return self.loop_over(n.shape, body, ind)

    def split_rows(self, rows: int, R: int, decls: list[str], inner: Callable[[str], list[str]],
                   store: Callable[[str], list[str]], var: str, ind: str) -> list[str] | None:
        """Reduce ``rows`` rows of length ``R`` with every warp of the block when a warp per row
        would leave most warps idle: warps ``[o*S, (o+1)*S)`` share row ``o`` (``S`` = warps //
        rows), each warp's sum goes to ``mf_red`` and the row's owner thread adds the ``S``
        partials. ``inner(ind)`` adds the terms at column ``var`` into ``s``; ``store(ind)``
        writes ``s`` for row ``o``. None when a warp per row already keeps the block busy."""
        S = self.warps_per_row(rows, R)
        if not S:
            return None
        return [f"{ind}if (threadIdx.x / 32 < {rows * S}) {{",
                f"{ind}  const int o = threadIdx.x / 32 / {S}, mf_p = threadIdx.x / 32 % {S};",
                *[ind + "  " + d for d in decls], f"{ind}  float s = 0.f;",
                f"{ind}  for (int {var} = mf_p * 32 + threadIdx.x % 32; {var} < {R}; {var} += {32 * S}) {{",
                *inner(ind + "    "), f"{ind}  }}", f"{ind}  s = mf::warp_sum(s);",
                f"{ind}  if (threadIdx.x % 32 == 0) mf_red[threadIdx.x / 32] = s;", f"{ind}}}",
                *self.add_warp_sums(rows, S, decls, store, ind)]

    def add_warp_sums(self, rows: int, S: int, decls: list[str], store: Callable[[str], list[str]],
                      ind: str) -> list[str]:
        """After warps ``[o*S, (o+1)*S)`` wrote their sums of row ``o`` to ``mf_red``: a
        barrier, then row ``o``'s thread adds its S warp sums in warp order into ``s`` and
        ``store(ind)`` writes it."""
        self.uses_red = True
        return [f"{ind}__syncthreads();", *self.block_loop("o", rows, ind),
                *[ind + "  " + d for d in decls], f"{ind}  float s = 0.f;",
                f"{ind}  for (int k = 0; k < {S}; ++k) s += mf_red[o * {S} + k];",
                *store(ind + "  "), f"{ind}}}"]

    def emit_reduce(self, n: Node, ind: str) -> list[str]:
        x = n.src[0]
        xb = self.buf[x]
        ax = n.attr("axis") % len(x.shape)
        R = x.shape[ax]
        scale = "" if n.op == "sum" else f" * {fmt_float(1.0 / R)}f"
        decls, idx = multi_index(n.shape, "o", "t")
        xi = list(idx)
        if n.attr("keepdims"):
            xi[ax] = "r"
        else:
            xi.insert(ax, "r")
        dst = self.buf[n]
        no = math.prod(n.shape)
        wide = self.split_rows(no, R, decls, lambda i: [f"{i}s += {xb}[{self.addr(x, xi)}];"],
                               lambda i: [f"{i}{dst}[o] = s{scale};"], "r", ind)
        if wide is not None:
            return wide
        if R >= 32 and self.warp_ok():
            W = self.T // 32
            return [f"{ind}for (int o = threadIdx.x / 32; o < {no}; o += {W}) {{",
                    *[ind + "  " + d for d in decls], f"{ind}  float s = 0.f;",
                    f"{ind}  for (int r = threadIdx.x % 32; r < {R}; r += 32) s += {xb}[{self.addr(x, xi)}];",
                    f"{ind}  s = mf::warp_sum(s);",
                    f"{ind}  if (threadIdx.x % 32 == 0) {dst}[o] = s{scale};", f"{ind}}}"]
        return [*self.block_loop("o", no, ind),
                *[ind + "  " + d for d in decls], f"{ind}  float s = 0.f;",
                f"{ind}  for (int r = 0; r < {R}; ++r) s += {xb}[{self.addr(x, xi)}];",
                f"{ind}  {dst}[o] = s{scale};", f"{ind}}}"]

    def rms_vec_group(self, n: Node) -> int:
        """Lanes per row when row-wise rms_norm ``n`` moves 16-byte vectors (8 values per lane
        per vector; every row start, stride and tile offset a multiple of 8 elements), else 0:
        the largest power of two G <= 32 with 8·G dividing the row."""
        x = n.src[0]
        L = x.shape[-1]
        if L % 8:
            return 0
        # shared-memory rows are L (+ 8 halves or + 4 floats of padding) long: 16-byte
        # aligned; a global source needs rows of a multiple of 8 elements too
        if x in self.direct and self.bg.inputs[x.attr("input")][0][-1] % 8:
            return 0
        G = 32
        while L % (8 * G):
            G //= 2
        return G

    def norm_source(self, x: Node) -> tuple[bool, str, list[str], list[str]]:
        """How a row-wise norm reads its input tile ``x``: (read straight from global memory,
        the shared buffer expression (this iteration's stage of a raw ring), the row-index
        declarations for the global reads, the row index names)."""
        direct = x in self.direct
        xs = "" if direct else self.buf[x]
        if x in self.raw:
            xs = f"({xs} + {self.stage_offset(x)})"
        decls, ridx = multi_index(x.shape[:-1], "o", "t")
        return direct, xs, decls if direct else [], ridx

    def rms_norm_vec(self, n: Node, G: int, ind: str) -> list[str]:
        """Row-wise rms_norm ``n`` with ``G`` lanes per row (:meth:`rms_vec_group`): lane l of
        a group holds 8-value vectors at columns 8·(l + G·t); a warp takes 32/G rows at a time
        and up to 4 such row sets at once (their loads in flight together), sums squares over
        its group with G-lane shuffles and writes the scaled vectors."""
        x = n.src[0]
        L = x.shape[-1]
        rows = math.prod(x.shape[:-1])
        W, R, C = self.T // 32, 32 // G, L // (8 * G)
        U = max(1, min(4, 64 // (8 * C), -(-rows // (W * R))))
        direct, xs, decls, ridx = self.norm_source(x)
        dst = self.buf[n]
        gain = self.buf[n.src[1]] if len(n.src) == 2 else None
        eps = fmt_float(n.attr("eps"))
        i2, i3, i4 = ind + "  ", ind + "    ", ind + "      "
        src = (f"&{self.iter_ref(x, [*ridx, 'c'])}" if direct
               else f"&{xs}[o * {self.row(x)} + c]")
        lines = [f"{ind}for (int o0 = threadIdx.x / 32 * {R}; o0 < {rows}; o0 += {W * R * U}) {{",
                 f"{i2}const int lane = threadIdx.x % 32;",
                 f"{i2}float u[{U}][{8 * C}], s[{U}];",
                 f"{i2}#pragma unroll", f"{i2}for (int k = 0; k < {U}; ++k) {{",
                 f"{i3}const int o = o0 + k * {W * R} + lane / {G};",
                 *[i3 + d for d in decls],
                 f"{i3}s[k] = 0.f;",
                 f"{i3}#pragma unroll", f"{i3}for (int t = 0; t < {C}; ++t) {{",
                 f"{i4}const int c = (lane % {G} + {G} * t) * 8;",
                 f"{i4}if (o < {rows}) mf::ld8({src}, &u[k][8 * t]);",
                 f"{i4}else for (int e = 0; e < 8; ++e) u[k][8 * t + e] = 0.f;",
                 f"{i4}#pragma unroll",
                 f"{i4}for (int e = 0; e < 8; ++e) s[k] += u[k][8 * t + e] * u[k][8 * t + e];",
                 f"{i3}}}", f"{i2}}}",
                 f"{i2}#pragma unroll",
                 f"{i2}for (int k = 0; k < {U}; ++k) s[k] = mf::group_sum<{G}>(s[k]);",
                 f"{i2}#pragma unroll", f"{i2}for (int k = 0; k < {U}; ++k) {{",
                 f"{i3}const int o = o0 + k * {W * R} + lane / {G};",
                 f"{i3}if (o >= {rows}) continue;",
                 f"{i3}const float r = 1.0f / sqrtf(s[k] * {fmt_float(1.0 / L)}f + {eps}f);",
                 f"{i3}#pragma unroll", f"{i3}for (int t = 0; t < {C}; ++t) {{",
                 f"{i4}const int c = (lane % {G} + {G} * t) * 8;",
                 f"{i4}float w[8];"]
        if gain is not None:
            lines += [f"{i4}mf::ld8(&{gain}[c], w);",
                      f"{i4}#pragma unroll",
                      f"{i4}for (int e = 0; e < 8; ++e) w[e] *= u[k][8 * t + e] * r;"]
        else:
            lines += [f"{i4}#pragma unroll",
                      f"{i4}for (int e = 0; e < 8; ++e) w[e] = u[k][8 * t + e] * r;"]
        lines += [f"{i4}mf::st8(&{dst}[o * {self.row(n)} + c], w);", f"{i3}}}", f"{i2}}}",
                  f"{ind}}}"]
        return lines

    def rms_norm_rows(self, n: Node, ind: str) -> list[str]:
        """Row-wise rms_norm ``n`` whose rows do not move as 16-byte vectors (not a multiple of
        8 long): warp w normalizes rows w, w + W, ...; lane l holds columns l + 32j, sums their
        squares, and after one warp_sum writes them scaled. The source is read from global
        memory, as fp16 (a raw stage or a half tile) or as fp32; the result is written as fp32
        or as an fp16 tile."""
        x = n.src[0]
        L = x.shape[-1]
        rows = math.prod(x.shape[:-1])
        W, J = self.T // 32, -(-L // 32)
        direct, xs, decls, ridx = self.norm_source(x)
        xh = x in self.raw or x in self.half
        at = f"o * {self.row(x)} + c"
        read = (f"mf::to_f({self.iter_ref(x, [*ridx, 'c'])})" if direct
                else f"__half2float({xs}[{at}])" if xh else f"{xs}[{at}]")
        gain = f" * {self.buf[n.src[1]]}[c]" if len(n.src) == 2 else ""
        cvt = "__float2half_rn" if n in self.half else ""
        eps = fmt_float(n.attr("eps"))
        i2, i3 = ind + "  ", ind + "    "
        return [f"{ind}for (int o = threadIdx.x / 32; o < {rows}; o += {W}) {{",
                f"{i2}const int lane = threadIdx.x % 32;",
                *[i2 + d for d in decls],
                f"{i2}float u[{J}];", f"{i2}float s = 0.f;",
                f"{i2}#pragma unroll", f"{i2}for (int j = 0; j < {J}; ++j) {{",
                f"{i3}const int c = lane + 32 * j;",
                f"{i3}u[j] = c < {L} ? {read} : 0.f;", f"{i3}s += u[j] * u[j];",
                f"{i2}}}", f"{i2}s = mf::warp_sum(s);",
                f"{i2}const float r = 1.0f / sqrtf(s * {fmt_float(1.0 / L)}f + {eps}f);",
                f"{i2}#pragma unroll", f"{i2}for (int j = 0; j < {J}; ++j) {{",
                f"{i3}const int c = lane + 32 * j;",
                f"{i3}if (c < {L}) {self.buf[n]}[o * {self.row(n)} + c] = {cvt}(u[j] * r{gain});",
                f"{i2}}}", f"{ind}}}"]

    def emit_rms_norm(self, n: Node, ind: str) -> list[str]:
        if self.rms_rowwise(n):
            G = self.rms_vec_group(n)
            return self.rms_norm_vec(n, G, ind) if G else self.rms_norm_rows(n, ind)
        x = n.src[0]
        xb = self.buf[x]
        L = x.shape[-1]
        rows = math.prod(x.shape[:-1])
        r = f"r{self.ids[n]}"
        eps = fmt_float(n.attr("eps"))
        fin = f"1.0f / sqrtf(s * {fmt_float(1.0 / L)}f + {eps}f)"
        wide = self.split_rows(
            rows, L, [], lambda i: [f"{i}const float u = {xb}[o * {self.row(x)} + c]; s += u * u;"],
            lambda i: [f"{i}{r}[o] = {fin};"], "c", ind)
        if wide is not None:
            stat = wide
        elif L >= 32 and self.warp_ok():
            W = self.T // 32
            stat = [f"{ind}for (int o = threadIdx.x / 32; o < {rows}; o += {W}) {{",
                    f"{ind}  float s = 0.f;",
                    f"{ind}  for (int c = threadIdx.x % 32; c < {L}; c += 32) {{ const float u = {xb}[o * {self.row(x)} + c]; s += u * u; }}",
                    f"{ind}  s = mf::warp_sum(s);",
                    f"{ind}  if (threadIdx.x % 32 == 0) {r}[o] = {fin};", f"{ind}}}"]
        else:
            stat = [*self.block_loop("o", rows, ind),
                    f"{ind}  float s = 0.f;",
                    f"{ind}  for (int c = 0; c < {L}; ++c) {{ const float u = {xb}[o * {self.row(x)} + c]; s += u * u; }}",
                    f"{ind}  {r}[o] = {fin};", f"{ind}}}"]
        gain = f" * {self.buf[n.src[1]]}[i % {L}]" if len(n.src) == 2 else ""
        dst = self.buf[n]
        xi = f"(i / {L}) * {self.row(x)} + i % {L}" if x in self.ld else "i"
        apply = self.loop_over(n.shape, [f"{ind}  {dst}[i] = {xb}[{xi}] * {r}[i / {L}]{gain};"], ind)
        return [*stat, f"{ind}__syncthreads();", *apply]

    def emit_gemv_step(self, n: Node, ind: str) -> list[str]:
        """One loop iteration of gemv ``n``: thread t holds column vector cv = t % (N/8) of B
        and rows kg, kg + T/(N/8), ...; each 16-byte B vector (from the prefetch registers
        when B is staged, else loaded here) is multiplied by the matching A column (fp32 tile
        in shared memory) into ``ga{id}[m*8 + j]``.

        Loaded here, a thread's P vectors are read in chunks of at most ``gemv_chunk``, software
        pipelined through a ring of ``gemv_depth`` chunks (chunks c+1 .. c+depth-1 are in
        flight while chunk c's products run): a long K slice (a whole 2048-row tile per
        iteration) then needs depth x chunk vector registers, not P."""
        B = n.src[1]
        K, N = B.shape
        nc = N // 8
        kg_n = self.T // nc
        P = K * nc // self.T
        i = self.ids[n]
        lines = [f"{ind}{{", f"{ind}  const int cv = threadIdx.x % {nc}, kg = threadIdx.x / {nc};"]
        if B in self.staged_set:
            src = f"gs{self.ids[B]}"  # this iteration's copy of B's prefetch registers
            return lines + self._gemv_products(n, src, "p", P, ind + "  ") + [f"{ind}}}"]
        if B in self.raw:
            # B's cp.async ring: this iteration's stage, rows padded to ld halves
            lines.append(f"{ind}  const __half* gb{i} = {self.buf[B]} + {self.stage_offset(B)};")

            def load(dst: str, p: str) -> list[str]:
                return [f"{dst} = *reinterpret_cast<const uint4*>(gb{i} + (kg + ({p}) * {kg_n}) * "
                        f"{self.ld[B]} + cv * 8);"]
        else:
            decls, idx = multi_index(B.shape, "e", "t")

            def load(dst: str, p: str) -> list[str]:
                return ["{", f"  const int e = (threadIdx.x + ({p}) * {self.T}) * 8;",
                        *[f"  {d}" for d in decls],
                        f"  {dst} = {self.raw_load(B, self.iter_ref(B, idx))};", "}"]
        C = max(d for d in range(1, min(P, self.opts.gemv_chunk) + 1) if P % d == 0)
        NCH = P // C
        R = min(self.opts.gemv_depth, NCH)  # ring slots: R - 1 chunks ahead of the products
        j2 = ind + "  "
        if NCH == 1:
            lines += [f"{j2}uint4 gw{i}[{P}];", f"{j2}#pragma unroll",
                      f"{j2}for (int p = 0; p < {P}; ++p) {{",
                      *[f"{j2}  {x}" for x in load(f"gw{i}[p]", "p")], f"{j2}}}"]
            return lines + self._gemv_products(n, f"gw{i}", "p", P, j2) + [f"{ind}}}"]
        lines.append(f"{j2}uint4 gw{i}[{R}][{C}];")
        for c0 in range(R - 1):  # the ring's first R - 1 chunks
            lines += [f"{j2}#pragma unroll", f"{j2}for (int p = 0; p < {C}; ++p) {{",
                      *[f"{j2}  {x}" for x in load(f"gw{i}[{c0}][p]", f"{c0 * C} + p")], f"{j2}}}"]
        lines += [f"{j2}#pragma unroll", f"{j2}for (int c = 0; c < {NCH}; ++c) {{",
                  f"{j2}  if (c + {R - 1} < {NCH}) {{", f"{j2}    #pragma unroll",
                  f"{j2}    for (int p = 0; p < {C}; ++p) {{",
                  *[f"{j2}      {x}" for x in load(f"gw{i}[(c + {R - 1}) % {R}][p]",
                                                   f"(c + {R - 1}) * {C} + p")],
                  f"{j2}    }}", f"{j2}  }}"]
        lines += self._gemv_products(n, f"gw{i}[c % {R}]", f"c * {C} + p", C, j2 + "  ")
        return [*lines, f"{j2}}}", f"{ind}}}"]

    def _gemv_products(self, n: Node, src: str, row: str, count: int, ind: str) -> list[str]:
        """``ga += A[:, k] * B-vector`` for ``count`` vectors ``src[p]``, thread row
        ``k = kg + (row) * T/(N/8)``."""
        A = n.src[0]
        kg_n = self.T // (n.shape[1] // 8)
        i = self.ids[n]
        return [f"{ind}#pragma unroll", f"{ind}for (int p = 0; p < {count}; ++p) {{",
                f"{ind}  const int k = kg + ({row}) * {kg_n};",
                f"{ind}  float w[8];",
                f"{ind}  mf::unpack_vec({src}[p], w, (half*)nullptr);",
                f"{ind}  #pragma unroll",
                f"{ind}  for (int m = 0; m < {n.shape[0]}; ++m) {{",
                f"{ind}    const float x = {self.buf[A]}[{self.addr(A, ['m', 'k'])}];",
                f"{ind}    #pragma unroll",
                f"{ind}    for (int j = 0; j < 8; ++j) ga{i}[m * 8 + j] += x * w[j];",
                f"{ind}  }}", f"{ind}}}"]

    def emit_gemv_reduce(self, n: Node, ind: str) -> list[str]:
        """After the loop: sum gemv ``n``'s register accumulators over the threads that share
        a column vector (xor shuffles inside a warp, then shared memory across warps) and add
        them to its accumulator tile."""
        M, N = n.shape
        nc = N // 8
        i = self.ids[n]
        red = self.buf[n]
        acc = self.fused[n]
        R = self.gemv_rows(n)
        lines = [f"{ind}{{", f"{ind}  const int cv = threadIdx.x % {nc};"]
        if self.gemv_shuffles(n):
            lines += [f"{ind}  #pragma unroll", f"{ind}  for (int e = 0; e < {M * 8}; ++e) {{",
                      f"{ind}    float v = ga{i}[e];",
                      f"{ind}    #pragma unroll",
                      f"{ind}    for (int o = {nc}; o < 32; o <<= 1) v += __shfl_xor_sync(0xffffffffu, v, o);",
                      f"{ind}    ga{i}[e] = v;", f"{ind}  }}",
                      f"{ind}  if (threadIdx.x % 32 < {nc}) {{",
                      f"{ind}    float* r = {red} + (threadIdx.x / 32) * {M * N};"]
        else:
            lines += [f"{ind}  {{", f"{ind}    float* r = {red} + (threadIdx.x / {nc}) * {M * N};"]
        lines += [f"{ind}    #pragma unroll", f"{ind}    for (int m = 0; m < {M}; ++m)",
                  f"{ind}      #pragma unroll",
                  f"{ind}      for (int j = 0; j < 8; ++j) r[m * {N} + cv * 8 + j] = ga{i}[m * 8 + j];",
                  f"{ind}  }}", f"{ind}}}", f"{ind}__syncthreads();"]
        decls, idx = multi_index(n.shape, "e", "t")
        lines += [*self.block_loop("e", M * N, ind),
                  *[f"{ind}  {d}" for d in decls], f"{ind}  float s = 0.f;",
                  f"{ind}  for (int r = 0; r < {R}; ++r) s += {red}[r * {M * N} + e];",
                  f"{ind}  {self.buf[acc]}[{self.addr(acc, idx)}] += s;", f"{ind}}}",
                  f"{ind}__syncthreads();"]
        return lines

    def cluster_combine(self, bufs: Mapping[str, Buffer]) -> bool:
        """Whether this kernel's split combine goes through the cluster's shared memory: asked
        for, a split of 2..CLUSTER_MAX, and every accumulator in shared memory (``bufs``: the
        buffer plan)."""
        return (self.opts.cluster_combine and 1 < self.split <= CLUSTER_MAX
                and all(bufs[self.buf[a]].space == "smem" for a in self.nodes if a.op == "accum"))

    def sum_parts(self, a: Node, n: int, term: str, dst: str, ind: str) -> list[str]:
        """Every thread sums ``n`` partials of accumulator ``a``'s element ``i`` in order (``term``:
        partial ``k``'s element, in ``k`` and ``i``) into ``dst`` (in ``i``)."""
        return [*self.block_loop("i", self.buf_size(a), ind),
                f"{ind}  float s = 0.f;", f"{ind}  #pragma unroll",
                f"{ind}  for (int k = 0; k < {n}; ++k) s += {term};",
                f"{ind}  {dst} = s;", f"{ind}}}"]

    def emit_cluster_combine(self, accs: Sequence[Node]) -> list[str]:
        """The split combine of a cluster of S blocks (one per split, cluster rank = split
        index): after a cluster barrier, block 0 sums the S blocks' accumulator tiles in split
        order from their shared memory (the order of the global-memory combine, so the same
        sums) and goes on to the post-loop steps; a second barrier keeps the other blocks'
        shared memory alive until it has read them, then they return."""
        S, T = self.split, self.T
        lines = ["  {  // split combine through the cluster's shared memory",
                 "    mf::cluster_sync();",
                 "    if (mf_split == 0) {"]
        per = max(1, CLUSTER_LOAD_REGS // S)  # items a thread loads before it sums them
        for a in accs:
            b, n = self.buf[a], self.buf_size(a)
            items = -(-n // T)  # per thread
            # all of a chunk's remote loads go out before the sums are stored: a store between
            # them would hold each next load back behind the last one's round trip
            for c0 in range(0, items, per):
                rows = min(per, items - c0)
                guard = f" if (i >= {n}) break;" if (c0 + rows) * T > n else ""
                head = (f"        for (int r = 0; r < {rows}; ++r) {{ const int i = threadIdx.x + "
                        f"({c0} + r) * {T};{guard}")
                lines += ["      {",
                          f"        float mf_cv[{rows}][{S}];",
                          "        #pragma unroll", head,
                          "          #pragma unroll",
                          f"          for (int k = 0; k < {S}; ++k) mf_cv[r][k] = "
                          f"mf::ld_cluster(&{b}[i], k);",
                          "        }",
                          "        #pragma unroll", head,
                          "          float s = 0.f;",
                          "          #pragma unroll",
                          f"          for (int k = 0; k < {S}; ++k) s += mf_cv[r][k];",
                          f"          {b}[i] = s;",
                          "        }",
                          "      }"]
        lines += ["    }", "    mf::cluster_sync();", "    if (mf_split != 0) return;", "  }"]
        return lines

    def emit_split_combine(self, accs: Sequence[Node], ws_base: int) -> tuple[list[str], int]:
        """Combine the accumulators of the ``split`` blocks of one grid block: each writes its
        partial accumulators to the workspace and takes a ticket; the last of each group of
        ``G`` consecutive splits sums its group's partials in the fixed order (a group partial),
        and the last group sums the group partials in group order into its own accumulators —
        deterministic whichever blocks are last — resets the tickets for the next launch and
        goes on to the post-loop steps; the others return. Two levels keep the serial tail
        (one block reading partials through one SM) at G + S/G partials instead of S
        (G = the divisor of S nearest sqrt(S); one level, G = S, up to S = 4). Returns the code
        and the workspace floats it uses (partials, group partials, then one unsigned ticket
        per grid block and one per group, zeroed when the workspace is allocated)."""
        S = self.split
        G = combine_groups(S)
        NG = S // G
        gx, gy, gz = self.bg.grid
        nblk = gx * gy * gz
        offs, acc_floats = [], 0
        for a in accs:
            offs.append(acc_floats)
            acc_floats += self.buf_size(a)
        part = nblk * S * acc_floats
        grp = nblk * NG * acc_floats if NG > 1 else 0

        def add_up(src: str, n: int, dst: Callable[[Node, int], str]) -> list[str]:
            """Sum ``n`` consecutive partials at ``src`` (each ``acc_floats`` long) in order."""
            out = []
            for a, o in zip(accs, offs, strict=True):
                out += self.sum_parts(a, n, f"__ldcg({src} + k * {acc_floats} + {o} + i)",
                                      dst(a, o), "    ")
            return out

        lines = ["  {  // split combine",
                 f"    float* mf_part = ws + {ws_base};",
                 f"    unsigned* mf_cnt = reinterpret_cast<unsigned*>(ws + {ws_base + part + grp});",
                 f"    const int mf_blk = bx + {gx} * (by + {gy} * bz);",
                 f"    float* mf_mine = mf_part + ((size_t)mf_blk * {S} + mf_split) * {acc_floats};"]
        for a, o in zip(accs, offs, strict=True):
            lines += [*self.block_loop("i", self.buf_size(a), "    "),
                      f"      mf_mine[{o} + i] = {self.buf[a]}[i];", "    }"]
        # the block's writes meet at a barrier, then one thread takes the ticket with one
        # acquire-release atomic (release is cumulative: it publishes every write the barrier
        # showed it; for the last block, acquire makes the others' partials visible to its
        # threads after the next barrier; they read them through L2, __ldcg)
        def ticket(counter: str, last: int) -> list[str]:
            return ["    __syncthreads();",
                    f"    if (threadIdx.x == 0) mf_ticket = mf::ticket_acq_rel({counter});",
                    "    __syncthreads();",
                    f"    if (mf_ticket != {last}u) return;"]

        lines.append("    __shared__ unsigned mf_ticket;")
        if NG > 1:
            lines += [f"    float* mf_grp = ws + {ws_base + part};",
                      f"    const int mf_g = mf_split / {G};",
                      f"    unsigned* const mf_gcnt = mf_cnt + {nblk} + mf_blk * {NG} + mf_g;"]
            lines += ticket("mf_gcnt", G - 1)
            lines += [f"    const float* mf_gin = mf_part + ((size_t)mf_blk * {S} + mf_g * {G}) * {acc_floats};",
                      f"    float* mf_gout = mf_grp + ((size_t)mf_blk * {NG} + mf_g) * {acc_floats};"]
            lines += add_up("mf_gin", G, lambda a, o: f"mf_gout[{o} + i]")
            lines += ["    if (threadIdx.x == 0) *mf_gcnt = 0u;"]
            lines += ticket("&mf_cnt[mf_blk]", NG - 1)
            lines += [f"    const float* mf_all = mf_grp + (size_t)mf_blk * {NG} * {acc_floats};"]
            lines += add_up("mf_all", NG, lambda a, o: f"{self.buf[a]}[i]")
        else:
            lines += ticket("&mf_cnt[mf_blk]", S - 1)
            lines += [f"    const float* mf_all = mf_part + (size_t)mf_blk * {S} * {acc_floats};"]
            lines += add_up("mf_all", S, lambda a, o: f"{self.buf[a]}[i]")
        lines += ["    if (threadIdx.x == 0) mf_cnt[mf_blk] = 0u;", "    __syncthreads();", "  }"]
        return lines, part + grp + nblk + (nblk * NG if NG > 1 else 0)

    # ------------------------------------------------------------ whole kernel
    def emit(self) -> EmittedKernel:
        steps, p, q, bufs = self.plan()
        plan = plan_buffers(list(bufs.values()), self.smem_limit // 4)
        if any(bufs[self.buf[n]].space != "smem" for n in self.raw):
            # cp.async only writes shared memory: without room there, load these tiles as fp32
            self.set_layout(set())
            steps, p, q, bufs = self.plan()
            plan = plan_buffers(list(bufs.values()), self.smem_limit // 4)
        bg = self.bg
        params = [f"const {dt.c_type}* __restrict__ in{k}" for k, (_, dt) in enumerate(bg.inputs)]
        params += [f"{o.node.dtype.c_type}* __restrict__ out{k}" for k, o in enumerate(bg.outputs)]
        params.append("float* __restrict__ ws")
        cluster = self.cluster_combine(bufs)
        dims = f"__cluster_dims__({self.split}, 1, 1) " if cluster else ""
        lines = [f'extern "C" __global__ void {dims}__launch_bounds__({self.T}) {self.name}(',
                 "    " + ",\n    ".join(params) + ") {"]
        SP = self.split
        gx, gy, gz = bg.grid
        if SP > 1:
            # block (bx*SP + s, by, bz) runs iterations [s*FL, (s+1)*FL) of block (bx, by, bz)
            lines += [f"  const int bx = blockIdx.x / {SP}, by = blockIdx.y, bz = blockIdx.z;",
                      f"  const int mf_split = blockIdx.x % {SP};",
                      f"  const int itb = mf_split * {self.FL};"]
        else:
            lines.append("  const int bx = blockIdx.x, by = blockIdx.y, bz = blockIdx.z;")
        if self.opts.evict_first:
            # the L2 policy every streamed read passes (unused, and removed, if none is)
            lines.append("  const unsigned long long mf_pol = mf::l2_evict_first();")
        if plan.smem_floats:
            lines.append("  extern __shared__ __align__(16) float smem[];")
        if plan.ws_floats:
            lines.append(f"  float* wsb = ws + (size_t)(blockIdx.x + {gx * SP} * (blockIdx.y + {gy} * "
                         f"blockIdx.z)) * {plan.ws_floats};")
        raw_names = {self.buf[n] for n in self.raw}
        half_names = {self.buf[n] for n in self.half if n in self.buf}
        for bname, bb in sorted(bufs.items()):
            base = "smem" if bb.space == "smem" else "wsb"
            if bname in half_names:
                lines.append(f"  __half* {bname} = reinterpret_cast<__half*>({base} + {bb.offset});"
                             f"  // fp16 tile, {bb.size} floats, steps {bb.first}..{bb.last}")
                continue
            if bname in raw_names:
                lines.append(f"  __half* {bname} = reinterpret_cast<__half*>({base} + {bb.offset});"
                             f"  // raw fp16, {self.stages} stages, {bb.size} floats, steps "
                             f"{bb.first}..{bb.last}")
                continue
            lines.append(f"  float* {bname} = {base} + {bb.offset};  // {bb.size} floats, steps "
                         f"{bb.first}..{bb.last}")
        # where each buffer lives, for the barriers between steps (buffers of disjoint
        # lifetimes share addresses); the warp-sum scratch of block-wide reductions too
        extents: dict[str, Extent] = {
            b: (bb.space, bb.offset, bb.offset + bb.size) for b, bb in bufs.items()}
        extents["mf_red"] = ("red", 0, 1)
        staged: list[Node] = []
        if self.opts.prefetch and bg.forloop > 1:
            budget = self.opts.prefetch_regs
            loads = [s.node for s in steps[p:q] if isinstance(s, Load)]
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
        for n in self.gemv:
            lines.append(f"  float ga{self.ids[n]}[{n.shape[0] * 8}];")
            lines.append("  #pragma unroll")
            lines.append(f"  for (int e = 0; e < {n.shape[0] * 8}; ++e) ga{self.ids[n]}[e] = 0.f;")
        for a in sorted(self.reg_fold, key=self.ids.__getitem__):
            K = self.reg_fold[a].per_thread
            lines.append(f"  float fr{self.ids[a]}[{K}];")
            lines.append("  #pragma unroll")
            lines.append(f"  for (int k = 0; k < {K}; ++k) fr{self.ids[a]}[k] = 0.f;")
        raw = sorted(self.raw, key=self.ids.__getitem__)
        S = self.stages
        ahead = [x for x in raw if x.attr("input") in self.early]
        for j in range(min(S - 1, F) if ahead else 0):  # graph inputs' first stages, early
            for x in ahead:
                lines += self.emit_cp_async(x, str(j), "  ")
        # one wave (at most one block per SM of the largest GPU we target): let the dependent
        # grid launch at once, its blocks take the SMs this grid leaves idle and prefetch
        # their graph inputs while this one runs; a grid of more waves signals after its loop
        # (earlier, the dependent's waiting blocks would hold SMs its later waves need)
        one_wave = gx * gy * gz * SP <= ONE_WAVE_BLOCKS
        if one_wave:
            lines.append("  mf::grid_dep_launch();")
        lines.append("  mf::grid_dep_wait();")
        for s in steps[:p]:
            if isinstance(s, Op):  # a loop-invariant op reads tiles the steps above wrote
                lines.append("  __syncthreads();")
            lines += self.emit_step(s, "  ")
        for j in range(S - 1 if raw else 0):  # iterations 0..S-2 of the cp.async tiles
            if j < F:
                for x in raw:
                    if x not in ahead:  # (those went out before the wait, in group 0)
                        lines += self.emit_cp_async(x, str(j), "  ")
            lines.append("  mf::cp_async_commit();")
        for st in range(D):
            for x in staged:
                lines.append(f"  {self.raw_type(x)} pf{self.ids[x]}_{st}[{self.prefetch_regs(x)}];")
                lines += self.emit_prefetch(x, str(st), "  ", st)
        lines.append("  __syncthreads();")
        for n in sorted(self.reg_acc, key=self.ids.__getitem__):
            WM, WN, _ = self.warp_blocking(n)
            lines += zeroed_accumulators(f"ra{self.ids[n]}", WM, WN, "  ")
        for m in sorted(self.chains, key=self.ids.__getitem__):  # the chains' row sums
            WM = self.chains[m].wm
            for a in self.chains[m].sums:
                lines += [f"  float rs{self.ids[a]}[{WM}][2];", "  #pragma unroll",
                          f"  for (int x = 0; x < {2 * WM}; ++x) (&rs{self.ids[a]}[0][0])[x] = 0.f;"]
        for n in sorted(self.hoist_a, key=self.ids.__getitem__):
            lines += self.emit_matmul_mma(n, self.fused.get(n, self.epi.get(n, n)), False, "  ",
                                          mode="hoist")
        if q > p:
            body = [s for s in steps[p:q] if not (isinstance(s, Load) and s.node in staged)]
            # D copies of the body, one per register stage, so stage indices are constants.
            lines.append(f"  for (int it0 = 0; it0 < {F}; it0 += {D}) {{")
            for st in range(D):
                ind = "    "
                lines.append(f"{ind}{{")
                ind += "  "
                lines.append(f"{ind}const int it = it0 + {st};")
                if F % D:
                    lines.append(f"{ind}if (it < {F}) {{")
                    ind += "  "
                if raw:
                    # Stage (it + S - 1) % S was last read in iteration it - 1, which ended
                    # with a barrier: refill it. One group per iteration (maybe empty), so
                    # leaving S - 1 groups pending completes this iteration's.
                    lines.append(f"{ind}if (it + {S - 1} < {F}) {{")
                    for x in raw:
                        lines += self.emit_cp_async(x, f"(it + {S - 1})", ind + "  ")
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
                if staged or raw:
                    lines.append(f"{ind}__syncthreads();")
                    lines.append(f"{ind}if (it + {D} < {F}) {{")
                    for x in staged:
                        lines += self.emit_prefetch(x, f"(it + {D})", ind + "  ", st)
                    lines.append(f"{ind}}}")
                lines += with_barriers([(self.emit_step(s, ind), self.reads_only(s)) for s in body],
                                       extents, ind)
                if F % D:
                    lines.append(f"{ind[:-2]}}}")
                lines.append("    }")
            lines.append("  }")
        if raw:
            lines.append("  mf::cp_async_wait<0>();")
        if not one_wave:
            lines.append("  mf::grid_dep_launch();")
        # after the loop: register results to their tiles, the split combine, the post-loop
        # steps; barriers only where one of them touches memory an earlier one touched
        tail = [self.emit_gemv_reduce(n, "  ") for n in sorted(self.gemv, key=self.ids.__getitem__)]
        tail += [self.emit_fold_reduce(a, "  ") for a in sorted(self.reg_fold, key=self.ids.__getitem__)]
        tail += [self.emit_matmul_mma(n, self.fused[n], True, "  ", mode="store")
                 for n in sorted(self.reg_acc, key=self.ids.__getitem__)]
        tail += [self.emit_chain_sums(self.chains[n], "  ")
                 for n in sorted(self.chains, key=self.ids.__getitem__) if self.chains[n].sums]
        combine_floats = 0
        if SP > 1:
            accs = [n for n in self.nodes if n.op == "accum"]
            if cluster:
                tail.append(self.emit_cluster_combine(accs))
            else:
                combine, combine_floats = self.emit_split_combine(
                    accs, ws_base=plan.ws_floats * math.prod(bg.grid) * SP)
                tail.append(combine)
        chunks = [(code, frozenset[str]()) for code in tail]
        chunks += [(self.emit_step(s, "  "), self.reads_only(s)) for s in steps[q:]]
        lines += with_barriers(chunks, extents, "  ", close=False)
        lines.append("}")
        if self.uses_red:  # block-wide row reductions (split_rows) exchange warp sums here
            lines.insert(2, f"  __shared__ float mf_red[{self.T // 32}];")
        return EmittedKernel(
            name=self.name, source="\n".join(lines) + "\n", grid=(gx * SP, gy, gz), threads=self.T,
            smem_bytes=4 * plan.smem_floats, ws_floats=plan.ws_floats,
            extra_ws_floats=combine_floats, schedule=self.opts,
            in_types=tuple(dt for _, dt in bg.inputs),
            out_types=tuple(o.node.dtype for o in bg.outputs))


def emit_block_graph(bg: BlockGraph, name: str, smem_limit: int = SMEM_LIMIT_BYTES,
                     opts: EmitOptions | None = None,
                     early: frozenset[int] = frozenset()) -> EmittedKernel:
    """Emit the ``__global__`` function ``name`` computing block graph ``bg``.

    Every kernel waits for the kernel launched before it (``griddepcontrol.wait``: a no-op
    without a programmatic dependent launch) before it writes global memory or reads anything
    but the kernel inputs listed in ``early`` (graph inputs, which no kernel writes): the
    cp.async copies of those inputs' first ring stages are issued before the wait, so they
    overlap the previous kernel's tail. A kernel lets its dependent begin launching
    (``griddepcontrol.launch_dependents``) at its start when its grid fits one wave
    (``ONE_WAVE_BLOCKS``), else after its main loop."""
    em = _Emitter(bg, name, smem_limit, opts or EmitOptions())
    em.early = early
    return em.emit()
