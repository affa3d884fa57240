"""Printing row-wise work: reductions, rms_norm and skinny matmuls streamed through registers.

Block-wide row reductions (warp shuffles, then the warps' partials summed in warp order),
rms_norm row-wise from registers or through a reduction, and gemv (a skinny matmul whose B
vectors stream into registers, reduced across threads once after the loop).

Imports ``ir`` and the planning and printing modules of ``codegen``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from mirage_formal.codegen.cindex import fmt_float, multi_index
from mirage_formal.codegen.float16 import FLOAT16
from mirage_formal.codegen.printer import (
    TileExpr,
    TilePrinter,
)
from mirage_formal.ir.node import Node


class RowPrinter(TilePrinter):
    """Prints reductions, norms and gemv steps."""

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

    def reduce_rows(self, rows: int, R: int, decls: list[str], inner: Callable[[str], list[str]],
                    store: Callable[[str], list[str]], var: str, ind: str) -> list[str]:
        """Sum ``rows`` rows of ``R`` terms into ``s`` and ``store(ind)`` it for row ``o``:
        several warps a row (:meth:`split_rows`), else a warp a row (lanes striding over the
        terms, a shuffle sum, lane 0 stores), else a thread a row. ``inner(ind)`` adds the
        terms at column ``var`` into ``s``."""
        wide = self.split_rows(rows, R, decls, inner, store, var, ind)
        if wide is not None:
            return wide
        if R >= 32 and self.warp_ok():
            W = self.T // 32
            return [f"{ind}for (int o = threadIdx.x / 32; o < {rows}; o += {W}) {{",
                    *[ind + "  " + d for d in decls], f"{ind}  float s = 0.f;",
                    f"{ind}  for (int {var} = threadIdx.x % 32; {var} < {R}; {var} += 32) {{",
                    *inner(ind + "    "), f"{ind}  }}", f"{ind}  s = mf::warp_sum(s);",
                    f"{ind}  if (threadIdx.x % 32 == 0) {{", *store(ind + "    "), f"{ind}  }}",
                    f"{ind}}}"]
        return [*self.block_loop("o", rows, ind),
                *[ind + "  " + d for d in decls], f"{ind}  float s = 0.f;",
                f"{ind}  for (int {var} = 0; {var} < {R}; ++{var}) {{", *inner(ind + "    "),
                f"{ind}  }}", *store(ind + "  "), f"{ind}}}"]

    def emit_reduce(self, n: Node, ind: str) -> list[str]:
        """A sum or mean over one axis of tile ``x``: read from its buffer, or, where ``x`` is
        an inlined elementwise op (``layout._inlinable``), computed term by term inside the
        sum (a layer norm's squared differences are never stored)."""
        x = n.src[0]
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

        def term(i: str) -> list[str]:
            if x in self.buf:
                return [f"{i}s += {self.buf[x]}[{self.addr(x, xi)}];"]
            ex = TileExpr(self, i)
            v = ex.val(x, xi)
            return [*ex.code(), f"{i}s += {v};"]

        return self.reduce_rows(no, R, decls, term, lambda i: [f"{i}{dst}[o] = s{scale};"], "r",
                                ind)

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
                else f"{FLOAT16[x.dtype].to_float}({xs}[{at}])" if xh else f"{xs}[{at}]")
        gain = f" * {self.buf[n.src[1]]}[c]" if len(n.src) == 2 else ""
        cvt = FLOAT16[n.dtype].from_float if n in self.half else ""
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
            # B's cp.async ring: this iteration's stage (rows padded, or dense and swizzled)
            lines.append(f"{ind}  const __half* gb{i} = {self.buf[B]} + {self.stage_offset(B)};")

            def load(dst: str, p: str) -> list[str]:
                return [f"{dst} = *reinterpret_cast<const uint4*>(gb{i} + "
                        f"{self.raw_offset(B, f'kg + ({p}) * {kg_n}', 'cv')});"]
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
