"""Printing a one-row kernel with every tile in registers (``Schedule.row_registers``).

A loop-free block graph whose tiles are each one row of L values (or one value: a row's sum,
mean or norm) runs with thread t owning the 8-column chunks t, t + T, t + 2T, ... of every row
tile: it loads its chunks of each input with 16-byte vector loads (all loads issued before
any use), computes every elementwise op on its own values, and meets the other threads only
for row reductions (rms_norm's sum of squares, sum, mean): its partial sum (its chunks in
order), a warp shuffle sum, the warps' sums in warp order through shared memory and one
barrier. Nothing else touches shared memory: the stored path's round trips through shared
tiles and the barriers around them (nine of them in ntrans's kernel) are gone.

Which block graphs qualify is :func:`schedule.row_registers_ok`. Imports ``ir`` and the
printing helpers of ``codegen``.
"""

from __future__ import annotations

import math

from mirage_formal.codegen.cindex import fmt_float
from mirage_formal.codegen.printer import TilePrinter
from mirage_formal.codegen.schedule import ROW_CHUNK, row_registers_ok
from mirage_formal.ir.graph import ITER
from mirage_formal.ir.node import Node
from mirage_formal.ir.ops import REGISTRY


class RowRegisterPrinter(TilePrinter):
    """Prints :attr:`Schedule.row_registers` kernels (see the module docstring)."""

    def row_registers(self) -> bool:
        """This kernel is printed with its rows in registers."""
        return bool(self.opts.row_registers) and row_registers_ok(self.bg, self.T)

    def _chunk_io(self, fn: str, ref: str, regs: str, itemsize: int) -> list[str]:
        """Move one 8-column chunk between global ``ref`` and registers ``regs`` (16-byte
        vectors: one for 2-byte types, two for fp32)."""
        per = 16 // itemsize
        return [f"{fn}(&{ref} + {o}, {regs} + {o});" if o else f"{fn}(&{ref}, {regs});"
                for o in range(0, ROW_CHUNK, per)]

    def _col_index(self, n: Node, col: str) -> list[str]:
        return ["0"] * (len(n.shape) - 1) + [col]

    def emit_row_registers_body(self, ind: str) -> list[str]:
        """The kernel body after the dependency wait: loads, ops and reductions, stores."""
        bg, T = self.bg, self.T
        self.row_reductions = 0
        L = max(n.shape[-1] for n in bg.nodes)
        K = L // (ROW_CHUNK * T)
        reg: dict[Node, str] = {}
        scalar: set[Node] = set()
        lines: list[str] = []
        col = f"(threadIdx.x + k * {T}) * {ROW_CHUNK}"
        reductions = 0

        def operand(s: Node) -> str:
            return reg[s] if s in scalar else f"{reg[s]}[k][j]"

        def each_chunk(body: list[str]) -> list[str]:  # the thread's chunks, column c first
            return [f"{ind}#pragma unroll", f"{ind}for (int k = 0; k < {K}; ++k) {{",
                    f"{ind}  const int c = {col};", *[f"{ind}  {b}" for b in body], f"{ind}}}"]

        def each_value(body: list[str]) -> list[str]:
            return [f"{ind}#pragma unroll", f"{ind}for (int k = 0; k < {K}; ++k) {{",
                    f"{ind}  #pragma unroll", f"{ind}  for (int j = 0; j < {ROW_CHUNK}; ++j) {{",
                    *[f"{ind}    {b}" for b in body], f"{ind}  }}", f"{ind}}}"]

        def block_sum(term: str, out: str) -> list[str]:
            # the thread's values in order, its warp by shuffles, the warps in warp order;
            # two scratch rows used in turn: reduction i + 2 writes row i % 2 only after
            # every thread passed reduction i + 1's barrier, so after it read row i % 2
            nonlocal reductions
            r = reductions % 2
            reductions += 1
            self.row_reductions = reductions
            W = T // 32
            return [f"{ind}float {out};", f"{ind}{{", f"{ind}  float s = 0.f;",
                    *[f"  {x}" for x in each_value([f"s += {term};"])],
                    f"{ind}  s = mf::warp_sum(s);",
                    f"{ind}  if (threadIdx.x % 32 == 0) mf_red[{r * W} + threadIdx.x / 32] = s;",
                    f"{ind}  __syncthreads();", f"{ind}  s = 0.f;",
                    f"{ind}  #pragma unroll",
                    f"{ind}  for (int w = 0; w < {W}; ++w) s += mf_red[{r * W} + w];",
                    f"{ind}  {out} = s;", f"{ind}}}"]

        iters = [n for n in bg.nodes if n.op == ITER]
        for n in iters:  # every load in flight before the first use
            name = f"t{self.ids[n]}"
            reg[n] = name
            _, dt = bg.inputs[n.attr("input")]
            ref = self.iter_ref(n, self._col_index(n, "c"))
            lines += [f"{ind}float {name}[{K}][{ROW_CHUNK}];",
                      *each_chunk(self._chunk_io("mf::ld_vec", ref, f"{name}[k]", dt.itemsize))]
        for n in bg.nodes:
            if n.op == ITER:
                continue
            if n.op == "accum":  # a loop of one iteration: its sum (or mean) is its source
                reg[n] = reg[n.src[0]]
                if n.src[0] in scalar:
                    scalar.add(n)
                continue
            name = f"t{self.ids[n]}"
            reg[n] = name
            if n.op == "rms_norm":
                x = n.src[0]
                r = f"r{self.ids[n]}"
                lines += block_sum(f"{operand(x)} * {operand(x)}", r)
                lines.append(f"{ind}{r} = 1.0f / sqrtf({r} * {fmt_float(1.0 / L)}f + "
                             f"{fmt_float(n.attr('eps'))}f);")
                gain = f" * {operand(n.src[1])}" if len(n.src) == 2 else ""
                lines.append(f"{ind}float {name}[{K}][{ROW_CHUNK}];")
                lines += each_value([f"{name}[k][j] = {operand(x)} * {r}{gain};"])
                continue
            if n.op in ("sum", "mean"):
                scale = "" if n.op == "sum" else f" * {fmt_float(1.0 / L)}f"
                lines += block_sum(operand(n.src[0]), name)
                if scale:
                    lines.append(f"{ind}{name} = {name}{scale};")
                scalar.add(n)
                continue
            d = REGISTRY[n.op]
            assert d.elementwise and d.c_expr is not None, n.op
            attrs = {k: fmt_float(v) if isinstance(v, float) else v for k, v in n.attrs}
            if math.prod(n.shape) == 1:  # every operand one value
                args = [reg[s] for s in n.src]
                lines.append(f"{ind}const float {name} = {d.c_expr.format(*args, **attrs)};")
                scalar.add(n)
                continue
            expr = d.c_expr.format(*[operand(s) for s in n.src], **attrs)
            lines.append(f"{ind}float {name}[{K}][{ROW_CHUNK}];")
            lines += each_value([f"{name}[k][j] = {expr};"])
        for k_out, o in enumerate(bg.outputs):
            n = o.node
            ref = self.out_ref(k_out, self._col_index(n, "c"))
            lines += each_chunk(self._chunk_io("mf::st_vec", ref, f"{reg[n]}[k]", n.dtype.itemsize))
        return lines

