"""The printer's shared helpers: tile expressions, addressing and block-wide loops.

:class:`TilePrinter` adds to a :class:`layout.KernelLayout` what every part of the printer
uses: global references of iterator and output tiles, the loops in which a block's threads
share work items, fused elementwise expressions (:class:`TileExpr`), raw vector loads and
matmul epilogues. The printing itself is split by concept: :mod:`print_mma` (tensor-core
products and register chains), :mod:`print_rows` (row reductions, norms, gemv),
:mod:`print_combine` (a split loop's combine) and :mod:`emit` (steps, loads, accumulators
and the kernel's frame), which puts them together.

Imports ``ir`` and the planning modules of ``codegen``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from mirage_formal.codegen.cindex import align_idx, fmt_float, multi_index, strides
from mirage_formal.codegen.float16 import FLOAT16
from mirage_formal.codegen.layout import KernelLayout
from mirage_formal.ir.graph import ITER
from mirage_formal.ir.node import Node
from mirage_formal.ir.ops import REGISTRY

#: a loop in which a block's threads share work items is fully unrolled up to this many items
#: per thread (see TilePrinter.block_loop)
BLOCK_LOOP_UNROLL = 16
#: the (original, unsplit) block index of the block graph, as declared at kernel entry
BLOCK_IDX = ("bx", "by", "bz")


def zeroed_accumulators(name: str, wm: int, wn: int, ind: str) -> list[str]:
    """Declare ``float name[wm][wn][4]`` (a warp tile's mma accumulators) set to zero."""
    return [f"{ind}float {name}[{wm}][{wn}][4];", f"{ind}#pragma unroll",
            f"{ind}for (int x = 0; x < {wm * wn * 4}; ++x) (&{name}[0][0][0])[x] = 0.f;"]


class TileExpr:
    """Statements computing tile values at given indices inside one element loop."""

    def __init__(self, em: TilePrinter, indent: str) -> None:
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
            v = f"{FLOAT16[n.dtype].to_float}({em.buf[n]}[{em.stage_offset(n)} + {em.addr(n, idx)}])"
        elif n in em.buf and not compute:
            v = f"{em.buf[n]}[{em.addr(n, idx)}]"
            if n in em.half:
                v = f"{FLOAT16[n.dtype].to_float}({v})"
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


def band_start(rows: int, size: int) -> str:
    """Where a refined block's band (``mf_band``, :mod:`refine`) of ``rows`` starts along its
    dimension of ``size``: clamped so that the last band ends at the dimension's end."""
    return f"mf_band*{rows}" if size % rows == 0 else f"min(mf_band*{rows}, {size - rows})"


def flat_ref(name: str, shape: Sequence[int], parts: Sequence[Sequence[str]],
             idx: Sequence[str]) -> str:
    """Element ``name[...]`` of a row-major global tensor of ``shape``: dimension d's index is
    the sum of ``parts[d]`` (block and iteration offsets) and ``idx[d]`` (omitted when "0")."""
    st = strides(shape)
    terms = []
    for d in range(len(shape)):
        ps = [*parts[d], *([idx[d]] if idx[d] != "0" else [])]
        if ps:
            e = " + ".join(ps)
            terms.append(f"({e})" if st[d] == 1 else f"({e})*{st[d]}")
    return f"{name}[{' + '.join(terms) if terms else '0'}]"


class TilePrinter(KernelLayout):
    """A kernel layout with the helpers every printing step uses."""

    # ------------------------------------------------------------ addressing
    def iter_starts(self, n: Node, itv: str = "it") -> list[list[str]]:
        """Per dimension of its input, the terms of where iterator tile ``n`` starts at
        iteration ``itv`` (its block's chunk of each imap dimension, the iteration's of the
        fmap one)."""
        k = n.attr("input")
        shape, _ = self.bg.inputs[k]
        real = self.real_inputs[k]
        imap, fmap = n.attr("imap"), n.attr("fmap")
        parts: list[list[str]] = []
        for d in range(len(shape)):
            ps = [f"{BLOCK_IDX[a]}*{shape[d] // self.bg.grid[a]}" for a in range(3) if imap[a] == d]
            if real[d] != shape[d]:  # (a refined block's band of rows)
                ps.append(band_start(shape[d], real[d]))
            if fmap == d and self.bg.forloop > 1:
                it = f"(itb + {itv})" if self.split > 1 or self.stream_k else itv
                ps.append(f"{it}*{n.shape[d]}")
            parts.append(ps)
        return parts

    def iter_ref(self, n: Node, idx: Sequence[str], itv: str = "it") -> str:
        k = n.attr("input")
        return flat_ref(f"in{k}", self.real_inputs[k], self.iter_starts(n, itv), idx)

    def out_ref(self, k: int, idx: Sequence[str]) -> str:
        o = self.bg.outputs[k]
        shape = self.real_outputs[k]
        virtual = self.bg.output_shape(o)
        parts = [[f"{BLOCK_IDX[a]}*{o.node.shape[d]}" for a in range(3) if o.omap[a] == d]
                 + ([band_start(virtual[d], shape[d])] if virtual[d] != shape[d] else [])
                 for d in range(len(shape))]
        return flat_ref(f"out{k}", shape, parts, idx)

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
                  make: Callable[[TileExpr, list[str]], list[str]]) -> list[str]:
        """A loop over tile elements: ``make(expr, idx) -> list of final statements``."""
        decls, idx = multi_index(shape, "i", "t")
        ex = TileExpr(self, ind + "  ")
        tail = make(ex, idx)
        body = [ind + "  " + d for d in decls] + ex.code() + [ind + "  " + t for t in tail]
        return self.loop_over(shape, body, ind)

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

    def epilogue(self, dst: Node, v: str) -> str:
        """``v`` passed through ``dst``'s op when ``dst`` is a matmul's epilogue."""
        if dst.op == "matmul" or dst.op == "accum":
            return v
        d = REGISTRY[dst.op]
        assert d.c_expr is not None
        attrs = {k: fmt_float(x) if isinstance(x, float) else x for k, x in dst.attrs}
        return d.c_expr.format(v, **attrs)
