"""Printing tensor-core matmuls: mma.sync warp tiles, register accumulators and chains.

A matmul on tensor cores becomes m16n8k16 products over warp tiles (register blocking,
ldmatrix fragments of raw and fp16 tiles, hoisted loop-invariant A fragments); two products
joined by elementwise ops keep the tile between them in registers (the register chain,
:class:`layout.Chain`), with row sums and k slices added after the loop. Matmuls off the
tensor cores print as plain fp32 loops.

Imports ``ir`` and the planning and printing modules of ``codegen``.
"""

from __future__ import annotations

import math
from typing import Literal

from mirage_formal.codegen.cindex import align_idx, fmt_float, multi_index
from mirage_formal.codegen.float16 import FLOAT16, Float16Names
from mirage_formal.codegen.layout import Chain
from mirage_formal.codegen.print_tf32 import Tf32Printer
from mirage_formal.codegen.printer import (
    TileExpr,
    zeroed_accumulators,
)
from mirage_formal.codegen.schedule import FRAGMENT_OPS, row_groups
from mirage_formal.ir.dtypes import tensor_core_type
from mirage_formal.ir.node import Node
from mirage_formal.ir.ops import REGISTRY

#: the widest warpgroup MMA instruction (Schedule.wgmma) the printer issues: 64, 128 or 256
#: columns of B
WGMMA_MAX_N = 256


class MmaPrinter(Tf32Printer):
    """Prints matmul steps, register chains and their after-loop sums."""

    def emit_matmul(self, n: Node, dst: Node, add: bool, ind: str) -> list[str]:
        if self._mma(n):
            return self.emit_matmul_mma(n, dst, add, ind)
        return self.emit_matmul_simple(n, dst, add, ind)

    def operand_names(self, n: Node) -> Float16Names:
        """The names of tensor-core matmul ``n``'s operand type (fp16 or bf16)."""
        t = tensor_core_type(*(s.dtype for s in n.src))
        assert t is not None, "a tensor-core product has fp16 or bf16 operands"
        return FLOAT16[t]

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
        if n in self.wg and mode == "loop":
            return self.emit_wgmma(n, ind)
        A, B = n.src
        t16 = self.operand_names(n)
        a, b = self.buf.get(A, ""), self.buf[B]
        M, N, K = n.shape[-2], n.shape[-1], A.shape[-1]
        # Raw fp16 operands (cp.async tiles) are read from the current stage; with ldmatrix
        # when K is a multiple of 16 (and, for B, N of 8). A's rows past M are clamped to row
        # M - 1: they only feed output rows that are not stored.
        # fp16 tiles (raw cp.async stages, or half_tiles) are read as halves
        # (an expression computed on the A fragments reads its raw leaf tiles as halves: fop)
        fop = A in self.frag_op
        ra, rb = A in self.raw or A in self.half or fop, B in self.raw or B in self.half
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
        mk, kk, nk = self.rows_past(n), K % 16 != 0, N % 8 != 0
        # a register chain's padded columns (layout.Chain.cols): the first product's B
        # columns and the second's B rows past the real ones load as zeros
        ch = self.chain_of.get(n)
        pad = ch is not None and ch.cols > ch.tile.shape[-1]
        if pad and mode == "chain_a":
            nk, xb = True, False
        krow = "k0 + (lane & 15)"  # (the B rows a lane's ldmatrix address names)
        if pad and mode == "chain_b":
            # B's rows past the real ones (the padded k-steps) are read clamped to the last:
            # finite values the zeroed A columns multiply by zero
            kk, krow = True, f"min(k0 + (lane & 15), {K - 1})"
            xb = rb and ldsm and N % 8 == 0 and B.shape[-1] == N

        def la(r: str, k: str) -> str:
            cond = [c for c, need in ((f"{r} < {M}", mk), (f"{k} < {K}", kk)) if need]
            e = f"pa[{r} * {lda} + {k}]"
            return f"({' && '.join(cond)} ? {e} : {t16.zero if ra else '0.f'})" if cond else e

        def lb(k: str, c: str) -> str:
            cond = [x for x, need in ((f"{k} < {K}", kk), (f"{c} < {N}", nk)) if need]
            e = f"pb[{k} * {ldb} + {c}]"
            return f"({' && '.join(cond)} ? {e} : {t16.zero if rb else '0.f'})" if cond else e

        pka = t16.pack_raw if ra else t16.pack_floats
        pkb = t16.pack_raw if rb else t16.pack_floats
        i3 = ind + "    "
        if xa:
            # an A of at most 8 rows whose fragments also feed a fragment fold loads only its
            # rows: lanes 0-7 address them at k 0-7, lanes 8-15 at k 8-15, and fragment
            # registers 1 and 3 (rows 8-15) are zero (rmsnorm b=1's fused kernel, 2 rows:
            # 24.29 -> 24.09 µs, H100 s35 c3). ldmatrix.x2 fills a register pair where the
            # product wants registers 0 and 2 of a quad, so each fragment costs moves: on
            # products without a fold (gated_mlp's 8 rows: 784 -> 960 instructions) that is
            # not measured to pay, and they keep the .x4 load
            rows8 = M <= 8 and n in self.frag_fold.values()
            lanes, half_k, ld = ("(lane & 7)", "((lane >> 3) & 1)", "mf::ldsm_x2_rows8") if rows8 else \
                ("(lane & 15)", "(lane >> 4)", "mf::ldsm_x4")
            row = f"tm * 16 + {lanes}" if not mk else f"min(tm * 16 + {lanes}, {M - 1})"

            def ld_frag(dst: str, t: Node, p: str) -> str:
                """ldmatrix of raw or fp16 tile ``t`` (at ``p``) into fragment ``dst``."""
                if t in self.swz:
                    return f"{i3}{ld}({dst}, {p} + {self.raw_offset(t, row, f'(k0 >> 3) + {half_k}')});"
                return f"{i3}{ld}({dst}, {p} + ({row}) * {self.row(t)} + k0 + {half_k} * 8);"

            if fop:  # each leaf tile's fragments, then the expression on each half2 register
                leaves = self.frag_leaves[A]
                fr = {t: f"f{v}" for v, t in zip("xy", leaves, strict=False)}
                frag_a = [f"{i3}unsigned {', '.join(f + '[4]' for f in fr.values())};",
                          *(ld_frag(f, t, f"p{f[1]}") for t, f in fr.items())]
                if A.op in FRAGMENT_OPS and list(A.src) == leaves:  # one half2 instruction
                    frag_a += [f"{i3}fa[{j}] = {FRAGMENT_OPS[A.op]}(fx[{j}], fy[{j}]);" for j in range(4)]
                else:  # in fp32, each half, then both rounded to fp16 as one pair

                    def half(x: Node, j: int, part: str) -> str:
                        if x in fr:
                            return f"mf::h2_{part}({fr[x]}[{j}])"
                        expr = REGISTRY[x.op].c_expr
                        assert expr is not None
                        attrs = {k: fmt_float(v) if isinstance(v, float) else v for k, v in x.attrs}
                        return expr.format(*(half(s, j, part) for s in x.src), **attrs)
                    # (an A of at most 8 rows: registers 1 and 3 hold rows 8-15, padding whose
                    # products are dropped; zeros there spare the op half its work)
                    live = (0, 2) if M <= 8 else range(4)
                    frag_a += [f"{i3}fa[{j}] = mf::pack_half2({half(A, j, 'lo')}, {half(A, j, 'hi')});"
                               for j in live]
                    frag_a += [f"{i3}fa[{j}] = 0u;" for j in range(4) if j not in live]
            else:
                frag_a = [ld_frag("fa", A, "pa")]
        elif not ra and not mk and not kk and lda % 2 == 0:
            # fp32 A tile, no bounds checks: each fragment register is one 8-byte pair
            pf = t16.pack_float_pair
            frag_a = [f"{i3}fa[0] = {pf}(pa + r0 * {lda} + ka);",
                      f"{i3}fa[1] = {pf}(pa + r1 * {lda} + ka);",
                      f"{i3}fa[2] = {pf}(pa + r0 * {lda} + kb);",
                      f"{i3}fa[3] = {pf}(pa + r1 * {lda} + kb);"]
        else:
            frag_a = [f"{i3}fa[0] = {pka}({la('r0', 'ka')}, {la('r0', '(ka + 1)')});",
                      f"{i3}fa[1] = {pka}({la('r1', 'ka')}, {la('r1', '(ka + 1)')});",
                      f"{i3}fa[2] = {pka}({la('r0', 'kb')}, {la('r0', '(kb + 1)')});",
                      f"{i3}fa[3] = {pka}({la('r1', 'kb')}, {la('r1', '(kb + 1)')});"]
        if xb:
            frag_b = [f"{i3}mf::ldsm_x2_trans(fb, pb + {self.raw_offset(B, krow, 'tn')});"]
        else:
            frag_b = [f"{i3}fb[0] = {pkb}({lb('ka', 'c0')}, {lb('(ka + 1)', 'c0')});",
                      f"{i3}fb[1] = {pkb}({lb('kb', 'c0')}, {lb('(kb + 1)', 'c0')});"]

        dst = self.buf.get(dnode, "")

        def st(r: str, c: str, v: str, op: str, to: str) -> str:
            cond = [x for x, need in ((f"{r} < {M}", mk), (f"{c} < {N}", nk)) if need]
            e = self.epilogue(dnode, v)
            if dnode in self.half:
                e = f"{FLOAT16[dnode.dtype].from_float}({e})"
            s = f"{to}[{self.addr(dnode, [*bidx, r, c])}] {op} {e};"
            return f"if ({' && '.join(cond)}) {s}" if cond else s

        i2, i4 = ind + "  ", ind + "      "

        def stores(op: str, to: str) -> list[str]:
            if dnode in self.half and not mk and not nk and op == "=" and to == dst:
                # fp16 destination, no bounds checks: each row's two adjacent values as one half2
                def st2(r: str, v0: str, v1: str) -> str:
                    a0 = self.addr(dnode, [*bidx, r, "cc"])
                    t = FLOAT16[dnode.dtype]
                    return (f"{i4}*reinterpret_cast<{t.pair_type}*>(&{dst}[{a0}]) = {t.pair_from_floats}("
                            f"{self.epilogue(dnode, v0)}, {self.epilogue(dnode, v1)});")
                return [st2("r0", "acc[0]", "acc[1]"), st2("r1", "acc[2]", "acc[3]")]
            if (self.opts.pad_acc_rows and dnode in self.ld and dnode.shape[-1] % 32 == 0
                    and not mk and not nk and to == dst and dnode not in self.half):
                # padded fp32 sums tile (Schedule.pad_acc_rows): each row's two adjacent sums
                # as one float2 (cc is even, the padded rows keep 8-byte alignment)
                def stf2(r: str, v0: str, v1: str) -> str:
                    a0 = self.addr(dnode, [*bidx, r, "cc"])
                    e0, e1 = self.epilogue(dnode, v0), self.epilogue(dnode, v1)
                    if op == "=":
                        return f"{i4}*reinterpret_cast<float2*>(&{dst}[{a0}]) = make_float2({e0}, {e1});"
                    return (f"{i4}{{ float2* const p2 = reinterpret_cast<float2*>(&{dst}[{a0}]); "
                            f"p2->x {op} {e0}; p2->y {op} {e1}; }}")
                return [stf2("r0", "acc[0]", "acc[1]"), stf2("r1", "acc[2]", "acc[3]")]
            return [f"{i4}{st(r, c, f'acc[{e}]', op, to)}"
                    for e, (r, c) in enumerate((("r0", "cc"), ("r0", "(cc + 1)"),
                                                ("r1", "cc"), ("r1", "(cc + 1)")))]
        ta = t16.c_type if ra else "float"
        tb = t16.c_type if rb else "float"
        # Register blocking: a warp computes WM x WN output tiles of 16x8 at once, so each
        # A fragment feeds WN products and each B fragment WM (shared-memory reads per
        # product fall from 3 fragments to 2/WN + 1/WM).
        WM, WN, tiles = self.warp_blocking(n)
        KS = ch.cols // 16 if mode == "chain_b" and ch is not None else K // 16
        i3, i5 = ind + "    ", ind + "      "
        racc = n in self.reg_acc
        # (a register chain run in passes loads its first product's A fragments once, before
        # the passes: :meth:`emit_chain`)
        hoist = n in self.hoist_a or (mode == "chain_a" and ch is not None and ch.passes > 1)
        accs = f"ra{self.ids[n]}" if racc else f"cs{self.ids[n]}" if mode == "chain_a" else "accs"
        head = self.mma_head(n, i2)
        pa_lines = ([f"{i2}const __half* p{v} = {self.buf[t]} + {self.stage_offset(t)};"
                     for v, t in zip("xy", self.frag_leaves[A], strict=False)] if fop
                    else [f"{i2}const {ta}* pa = {a} + {ab};"])
        pb_line = f"{i2}const {tb}* pb = {b} + {bb};"
        bt = B in self.bt  # (B stored transposed as fp16: layout.bt; no batch)
        if bt:
            pb_line = f"{i2}const {t16.c_type}* pb = reinterpret_cast<const {t16.c_type}*>({b});"

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
        ksl = self.kslice.get(n, 1)  # (Schedule.mma_kslice)
        kw = self.second_kw(n) if n in self.chain_wm else ksl
        kpair = self.kpair(n)
        pair = self.add_kpair(n, WM * WN, i2)
        if mode == "store" and kw > 1:
            # k slices (of a register chain, or Schedule.mma_kslice): each warp writes its
            # partial sums to slice kq of the scratch tile, then every thread adds the slices
            # in order (deterministic)
            size = self.buf_size(dnode)
            return [f"{ind}if (threadIdx.x / 32 < {tiles}) {{",
                    f"{i2}const int tile = threadIdx.x / 32;", *head, *pair,
                    *store_all("=", f"({self.kslices[dnode]} + kq * {size})"), f"{ind}}}",
                    *self.add_slices(self.kslices[dnode], dst, size, kw, "=", ind)]
        if mode == "store":  # after the loop: the register sums to the accumulator's tile
            return [f"{ind}if (threadIdx.x / 32 < {tiles}) {{",
                    f"{i2}const int tile = threadIdx.x / 32;", *head, *pair, *store, f"{ind}}}"]
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
                    f"{i2}const int tile = threadIdx.x / 32;", *head, *pa_lines,
                    f"{i2}#pragma unroll",
                    f"{i2}for (int ks = 0; ks < {KS}; ++ks) {{",
                    f"{i3}const int k0 = ks * 16, ka = k0 + 2 * q, kb = ka + 8;",
                    *frag_a_loop, f"{i2}}}", f"{ind}}}"]
        passes = ch.passes if ch is not None and mode == "chain_b" else 1
        if hoist or mode == "chain_b":
            # the k slice kq of KS / KW k-steps (a chain run in passes: pass kq's k-steps)
            KW = max(kw, passes) if mode == "chain_b" else 1
            k0 = f"(kq * {KS // KW} + ks) * 16" if KW > 1 else "ks * 16"
            kloop = [f"{i2}#pragma unroll",
                     f"{i2}for (int ks = 0; ks < {KS // KW}; ++ks) {{",
                     f"{i3}const int k0 = {k0}, ka = k0 + 2 * q, kb = ka + 8;",
                     f"{i3}unsigned fbs[{WN}][2];"]
            fa_ref = hoisted if hoist else f"ea{self.ids[n]}[wm][ks]"
        elif ksl > 1:
            # this warp's k slice kq: k-steps kq * KS / ksl ... (unrolled whole: with kpair
            # each k-step's accumulator set is known at compile time)
            kloop = [f"{i2}#pragma unroll",
                     f"{i2}for (int ks = 0; ks < {KS // ksl}; ++ks) {{",
                     f"{i3}const int k0 = (kq * {KS // ksl} + ks) * 16, ka = k0 + 2 * q, kb = ka + 8;",
                     f"{i3}unsigned fas[{WM}][4], fbs[{WN}][2];",
                     *frag_a_loop]
            fa_ref = "fas[wm]"
        else:
            # (kpair: unrolled whole, so each k-step's accumulator set is known at compile time)
            kloop = [f"{i2}#pragma unroll" + ("" if kpair else f" {max(1, 4 // (WM * WN))}"),
                     f"{i2}for (int k0 = 0; k0 < {K}; k0 += 16) {{",
                     f"{i3}const int ka = k0 + 2 * q, kb = ka + 8;",
                     f"{i3}unsigned fas[{WM}][4], fbs[{WN}][2];",
                     *frag_a_loop]
            fa_ref = "fas[wm]"
        if bt:
            # B's column c is row c of the transposed tile: a fragment is two 4-byte reads
            # (k pairs 2q and 2q + 8 of column g), or, two 8-column tiles at a time, one
            # ldmatrix (rows: the 16 columns; lanes 8-15 and 24-31 the k half 8-15)
            P = self.bt_pitch(B)
            if ldsm and WN % 2 == 0:
                frags_b = [f"{i3}#pragma unroll",
                           f"{i3}for (int wn = 0; wn < {WN}; wn += 2) {{",
                           f"{i3}  mf::ldsm_x4(fbs[wn], pb + ((tn0 + wn) * 8 + (lane & 7) + (lane >> 4) * 8)"
                           f" * {P} + k0 + ((lane >> 3) & 1) * 8);",
                           f"{i3}}}"]
            else:
                frags_b = [f"{i3}#pragma unroll",
                           f"{i3}for (int wn = 0; wn < {WN}; ++wn) {{",
                           f"{i3}  const int c0 = (tn0 + wn) * 8 + g;",
                           f"{i3}  fbs[wn][0] = *reinterpret_cast<const unsigned*>(pb + c0 * {P} + ka);",
                           f"{i3}  fbs[wn][1] = *reinterpret_cast<const unsigned*>(pb + c0 * {P} + kb);",
                           f"{i3}}}"]
        elif xb and WN % 2 == 0:
            # two adjacent 8-column B fragments per ldmatrix (x4, transposed): half the
            # instructions for the same shared-memory bytes
            frags_b = [f"{i3}#pragma unroll",
                       f"{i3}for (int wn = 0; wn < {WN}; wn += 2) {{",
                       f"{i3}  const int tn = tn0 + wn;",
                       f"{i3}  mf::ldsm_x4_trans(fbs[wn], pb + "
                       f"{self.raw_offset(B, krow, 'tn + (lane >> 4)')});",
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
            f"{i3}  for (int wn = 0; wn < {WN}; ++wn) {t16.mma}("
            + (f"{'(ks & 1)' if ksl > 1 else '((k0 >> 4) & 1)'} ? rb{self.ids[n]}[wm][wn] : {accs}[wm][wn]"
               if kpair else f"{accs}[wm][wn]")
            + f", {fa_ref}, fbs[wn]);",
            # (after the products: the fold's arithmetic then overlaps the next fragment loads)
            *(self.fragment_fold_terms(n, WM, i3) if fa_ref == "fas[wm]" else []),
            f"{i2}}}"]
        if mode == "chain_a":
            return [f"{ind}{{", *pa_lines, pb_line, *product, f"{ind}}}"]
        if mode == "chain_b":
            # the chain's warp tile head is the first product's: this product spans all
            # columns, over the warp's k slice
            own = ([f"{i2}const int tn0 = 0, kq = tile % {kw};"] if kw > 1
                   else [f"{i2}const int tn0 = 0, kq = pass;"] if passes > 1 else [])
            return [f"{ind}{{", *own, pb_line, *product, f"{ind}}}"]
        zero = [] if racc else zeroed_accumulators("accs", WM, WN, i2)
        return [
            f"{ind}for (int tile = threadIdx.x / 32; tile < {tiles}; tile += {W}) {{",
            *head, *pa_lines, pb_line, *zero, *product,
            *([] if racc else store),
            f"{ind}}}"]

    def emit_wgmma(self, n: Node, ind: str) -> list[str]:
        """One iteration of warpgroup MMA ``n`` (Schedule.wgmma, :attr:`KernelLayout.wg`):
        warpgroup w / 4 multiplies A's rows 64 (w / 4) ... + 63 by all of B, one m64nNk16 per
        16-deep k-step and N columns of B (the widest of 256, 128 and 64 that divides them), straight from the current ring stage through
        shared-memory descriptors (A K-major: 32 bytes further along its 128-byte rows per
        k-step, the next 64-column box every four; B N-major: 16 rows of 128 bytes further
        per k-step). It leaves them running and waits only for the previous iteration's,
        whose stage the loop then gives back (:meth:`emit_tma_loop`): the tensor cores
        work on one stage while the warps wait for the next. Warp w's 32
        accumulators of each box are its 16-row tile w's mma.sync fragments of those 8
        8-column tiles (``ra<id>[0][8 nb + j]``), which the loop's epilogue reads as such."""
        A, B = n.src
        C = self.opts.wgmma_cols  # (column groups: warpgroup g takes group g / R)
        N, K = n.shape[-1] // C, A.shape[-1]
        pa = f"{self.buf[A]} + {self.stage_offset(A)}"
        pb = f"{self.buf[B]} + {self.stage_offset(B)}"
        a_box, b_box = 2 * self.tma_box_halves(A), 2 * self.tma_box_halves(B)
        # the widest instruction that divides the columns: one over several 64-column boxes
        # of B names the next box by the descriptor's leading offset (16-byte units)
        width = next(w for w in (256, 128, 64) if w <= WGMMA_MAX_N and N % w == 0)
        lbo = b_box // 16 if width > 64 else 1
        i2, i3 = ind + "  ", ind + "    "
        if C > 1:
            R = A.shape[-2] // 64
            where = [f"{i2}const unsigned mf_wa = mf::smem_u32({pa}) + (threadIdx.x / 128) % {R} * 8192;",
                     f"{i2}const unsigned mf_wb = mf::smem_u32({pb}) + (threadIdx.x / {128 * R}) * "
                     f"{N // 64 * b_box};"]
        else:
            where = [f"{i2}const unsigned mf_wa = mf::smem_u32({pa}) + (threadIdx.x / 128) * 8192;",
                     f"{i2}const unsigned mf_wb = mf::smem_u32({pb});"]
        return [f"{ind}{{  // warpgroup MMA: this warp's 16 rows are rows 16 (w % 4) of its warpgroup's 64",
                *where,
                f"{i2}mf::wgmma_fence();",
                f"{i2}#pragma unroll",
                f"{i2}for (int ks = 0; ks < {K // 16}; ++ks) {{",
                f"{i3}const unsigned long long mf_da = mf::wgmma_desc(mf_wa + (ks >> 2) * {a_box} "
                "+ (ks & 3) * 32);",
                f"{i3}#pragma unroll",
                f"{i3}for (int nb = 0; nb < {N // width}; ++nb)",
                f"{i3}  mf::wgmma_m64nNk16<{width}{self.operand_names(n).wgmma_flag}>(&ra{self.ids[n]}[0][nb * {width // 8}][0], mf_da, "
                f"mf::wgmma_desc(mf_wb + nb * {width // 64 * b_box} + ks * 2048, {lbo}));",
                f"{i2}}}",
                f"{i2}mf::wgmma_commit();",
                f"{i2}mf::wgmma_wait_one();",
                f"{ind}}}"]

    def mma_head(self, n: Node, ind: str) -> list[str]:
        """Declarations of tensor-core matmul ``n``'s warp tile ``tile`` (a variable in scope):
        lane, g, q, the batch index ``tb`` and its batch coordinates, the first 16-row tile
        ``tm0`` and 8-column tile ``tn0``."""
        M, N = n.shape[-2], n.shape[-1]
        MT, NT = -(-M // 16), -(-N // 8)
        WM, WN, _ = self.warp_blocking(n)
        MTW, NTW = row_groups(MT, WM), NT // WN
        batch = n.shape[:-2]
        decls, _ = multi_index(batch, "tb", "u") if batch else ([], [])
        kw = self.second_kw(n)
        ch = self.chain_of.get(n)
        if ch is not None and n is ch.first:
            # a register chain's first product: kw warps share a row tile's columns (one
            # pass each), or one warp computes them pass by pass (:meth:`emit_chain` then
            # declares each pass's first column tile)
            NTW = ch.kw if ch.passes == 1 else 1
        if kw > 1:  # a register chain's second product: kw warps share a row tile, k slice kq
            return [f"{ind}const int lane = threadIdx.x % 32, g = lane >> 2, q = lane & 3;",
                    f"{ind}const int tb = tile / {kw * MTW}, tm0 = (tile / {kw}) % {MTW} * {WM}, "
                    f"tn0 = 0, kq = tile % {kw};",
                    *[ind + d for d in decls]]
        ksl = self.kslice.get(n, 1)
        if ksl > 1:  # Schedule.mma_kslice: ksl warps share warp tile tile / ksl, k slice kq
            return [f"{ind}const int lane = threadIdx.x % 32, g = lane >> 2, q = lane & 3;",
                    f"{ind}const int tw = tile / {ksl}, kq = tile % {ksl};",
                    f"{ind}const int tb = tw / {MTW * NTW}, tm0 = (tw / {NTW}) % {MTW} * {WM}, "
                    f"tn0 = tw % {NTW} * {WN};",
                    *[ind + d for d in decls]]
        if NTW > 1 and self.wgmma_shape(n):
            # Schedule.wgmma_cols: a warpgroup's four warps take consecutive 16-row tiles of
            # one column group (rows fastest)
            return [f"{ind}const int lane = threadIdx.x % 32, g = lane >> 2, q = lane & 3;",
                    f"{ind}const int tb = tile / {MTW * NTW}, tm0 = tile % {MTW} * {WM}, "
                    f"tn0 = (tile / {MTW}) % {NTW} * {WN};",
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
        ex = TileExpr(self, i5)
        ex.memo[(m1, tuple(idx))] = "c[e]"
        v = ex.val(E, idx, True)
        N1, guard = E.shape[-1], ""
        if ch.cols > N1:
            # padded columns (their products are zero, exp(0) is not): zero before the row
            # sums and the second product
            real = f"((tn0 + wn) * 8 + 2 * q + (e & 1)) < {N1}"
            v, guard = f"({real} ? {v} : 0.f)", f"if ({real}) "
        sum_lines = [f"{i5}{guard}rs{self.ids[a]}[wm][e >> 1] += {ex.val(a.src[0], idx)};"
                     for a in ch.sums]
        body = [*zeroed_accumulators(f"cs{self.ids[m1]}", WM, NT1, i2),
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
                f"{i4}fa[0] = {self.operand_names(m2).pack_floats}(ev[0], ev[1]);",
                f"{i4}fa[1] = {self.operand_names(m2).pack_floats}(ev[2], ev[3]);",
                f"{i3}}}",
                f"{i2}}}",
                *self.emit_matmul_mma(m2, self.fused[m2], True, i2, mode="chain_b")]
        if ch.passes > 1:
            # pass by pass over the first product's columns (layout.Chain.chunk): this
            # pass's first 8-column tile shadows the warp tile's; the first product's A
            # fragments are loaded once, before the passes
            body = [*self.emit_matmul_mma(m1, m1, False, i2, mode="hoist"),
                    f"{i2}#pragma unroll 1",
                    f"{i2}for (int pass = 0; pass < {ch.passes}; ++pass) {{",
                    f"{i2}const int tn0 = pass * {NT1};",
                    *body, f"{i2}}}"]
        return [f"{ind}if (threadIdx.x / 32 < {tiles}) {{",
                f"{i2}const int tile = threadIdx.x / 32;", *self.mma_head(m1, i2),
                *body, f"{ind}}}"]

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
                      f"{i4}if ({'q == 0' if not self.rows_past(ch.first) else f'q == 0 && r < {M}'}) "
                      f"{dst} {'=' if kw > 1 else '+='} s;",
                      f"{i3}}}", f"{i2}}}"]
        lines.append(f"{ind}}}")
        if kw > 1:
            for k, a in enumerate(ch.sums):
                lines += self.add_slices(self.kslices[a], self.buf[a], self.buf_size(a), kw, "+=",
                                         ind, barrier=k == 0)
        return lines

    def fragment_fold_terms(self, n: Node, wm: int, ind: str) -> list[str]:
        """Inside product ``n``'s k-step, after its products: the folds that take their terms
        from its A fragments ``fas`` (layout.frag_fold, Schedule.fold_fragments) add them.
        Every warp adds its fragments' terms, and only the sums of the first column tile's
        warps are used after the loop (each A element once per k slice): a branch on the
        column tile in the k-step kept the compiler from issuing the next fragment loads
        ahead, and the fused rmsnorm kernel ran 32.6 µs instead of 25 (H100, s26). A thread's
        registers 0 and 2 hold row g, 1 and 3 row g + 8 of its 16-row tile (an A of at most 8
        rows: 1 and 3 are zero, and only row g's terms are added). Schedule.fold_mma: the
        terms go through the tensor cores instead (:meth:`fold_mma_terms`)."""
        folds = [a for a, m in sorted(self.frag_fold.items(), key=lambda am: self.ids[am[0]]) if m is n]
        if not folds:
            return []
        if self.opts.fold_mma:
            return self.fold_mma_terms(n, folds, wm, ind)
        adds: list[str] = []
        for a in folds:
            t16 = FLOAT16[a.src[0].dtype]  # (the fragments of the raw tile the fold adds up)
            f, r = (t16.frag_square_sum if a.attr("kind") == "rms" else t16.frag_sum), f"ff{self.ids[a]}"
            adds.append(f"{ind}    {r}[wm][0] += {f}(fas[wm][0]) + {f}(fas[wm][2]);")
            if n.shape[-2] > 8:
                adds.append(f"{ind}    {r}[wm][1] += {f}(fas[wm][1]) + {f}(fas[wm][3]);")
        return [f"{ind}#pragma unroll", f"{ind}for (int wm = 0; wm < {wm}; ++wm) {{",
                *[x[2:] for x in adds], f"{ind}}}"]

    def fold_mma_tiles(self, a: Node) -> int:
        """The 16x8 tensor-core accumulator tiles a fragment fold keeps per warp tile row
        (Schedule.fold_mma): a sum one (every column holds the row sums), an rms one per 8
        rows of its product's A tile (the diagonal of X·Xᵀ, rows 0-7 and 8-15)."""
        return 2 if a.attr("kind") == "rms" and self.frag_fold[a].shape[-2] > 8 else 1

    def fold_mma_terms(self, n: Node, folds: list[Node], wm: int, ind: str) -> list[str]:
        """Schedule.fold_mma: each fragment fold's terms of the k-step as m16n8k16 products
        on the A fragments, accumulated in fp32 like the product's own (``fm<id>``; with
        mma_kpair its odd k-steps into ``fn<id>``). A sum multiplies by a B of ones: column 0
        of the result holds the row sums. An rms multiplies X by Xᵀ, whose B fragment is the A
        fragment's registers 0 and 2 (rows 0-7) or 1 and 3 (rows 8-15): the diagonal holds
        the sums of squares. fp16 products are exact in fp32, so this sums the same terms
        as the scalar fold, in a different order; :meth:`fold_mma_finish` moves them into the
        ``ff<id>`` registers after the loop."""
        lines = [f"{ind}#pragma unroll", f"{ind}for (int wm = 0; wm < {wm}; ++wm) {{"]
        i2 = ind + "  "
        pair = self.kpair(n)

        def acc(k: int, h: int) -> str:
            """Fold ``k``'s accumulator tile ``h`` for this k-step (mma_kpair: odd k-steps' own)."""
            return f"((k0 >> 4) & 1) ? fn{k}[wm][{h}] : fm{k}[wm][{h}]" if pair else f"fm{k}[wm][{h}]"

        for a in folds:
            t16, k = FLOAT16[a.src[0].dtype], self.ids[a]
            if a.attr("kind") == "rms":
                for h in range(self.fold_mma_tiles(a)):
                    lines += [f"{i2}{{", f"{i2}  const unsigned xt[2] = {{fas[wm][{h}], fas[wm][{h + 2}]}};",
                              f"{i2}  {t16.mma}({acc(k, h)}, fas[wm], xt);", f"{i2}}}"]
            else:
                lines += [f"{i2}{{", f"{i2}  const unsigned ones[2] = {{{t16.one_pair}, {t16.one_pair}}};",
                          f"{i2}  {t16.mma}({acc(k, 0)}, fas[wm], ones);", f"{i2}}}"]
        return [*lines, f"{ind}}}"]

    def fold_mma_init(self, a: Node, wm: int) -> list[str]:
        """Before the loop: fragment fold ``a``'s tensor-core accumulators, zeroed
        (Schedule.fold_mma)."""
        t = self.fold_mma_tiles(a)
        names = [f"fm{self.ids[a]}", *([f"fn{self.ids[a]}"] if self.kpair(self.frag_fold[a]) else [])]
        return [line for r in names for line in (
            f"  float {r}[{wm}][{t}][4];", "  #pragma unroll",
            f"  for (int k = 0; k < {wm * t * 4}; ++k) (&{r}[0][0][0])[k] = 0.f;")]

    def fold_mma_finish(self, a: Node, ind: str) -> list[str]:
        """After the loop (lane, g and q in scope): fragment fold ``a``'s tensor-core sums
        moved into ``ff<id>`` as the scalar fold leaves them, one partial sum per row and lane
        that the quad's shuffles then add: a sum's C[g][0] and C[g + 8][0] on lane q = 0, an
        rms's diagonal C[r][r] (rows 0-7: element r & 1 of lane g = r, q = r / 2; rows 8-15:
        the second tile's C[8 + j][j], its element 2 + (j & 1)), zero on every other lane."""
        if not self.opts.fold_mma or a not in self.frag_fold:
            return []
        wm = self.warp_blocking(self.frag_fold[a])[0]
        k = self.ids[a]
        pair = self.kpair(self.frag_fold[a])

        def c(h: int, e: int) -> str:
            return f"(fm{k}[wm][{h}][{e}] + fn{k}[wm][{h}][{e}])" if pair else f"fm{k}[wm][{h}][{e}]"

        if a.attr("kind") == "rms":
            lo = f"q == (g >> 1) ? ((g & 1) ? {c(0, 1)} : {c(0, 0)}) : 0.f"
            hi = f"q == (g >> 1) ? ((g & 1) ? {c(1, 3)} : {c(1, 2)}) : 0.f" if self.fold_mma_tiles(a) > 1 else "0.f"
        else:
            lo, hi = f"q == 0 ? {c(0, 0)} : 0.f", f"q == 0 ? {c(0, 2)} : 0.f"
        return [f"{ind}#pragma unroll", f"{ind}for (int wm = 0; wm < {wm}; ++wm) {{",
                f"{ind}  ff{k}[wm][0] = {lo};", f"{ind}  ff{k}[wm][1] = {hi};", f"{ind}}}"]

    def emit_fragment_fold_sums(self, a: Node, ind: str) -> list[str]:
        """After the loop: fragment fold ``a``'s partial sums (rows g and g + 8 of each of the
        warp's 16-row tiles, spread over the 4 lanes of a quad) added by shuffles; lane q = 0
        writes each row's sum to the fold's tile (k slices: to slice kq of its scratch tile,
        then every thread adds the slices in order)."""
        m = self.frag_fold[a]
        WM, _, tiles = self.warp_blocking(m)
        kw, M = self.kslice.get(m, 1), m.shape[-2]
        i2, i3, i4 = ind + "  ", ind + "    ", ind + "      "
        at = self.addr(a, ["r", "0"])
        dst = f"{self.kslices[a]}[kq * {self.buf_size(a)} + {at}]" if kw > 1 else f"{self.buf[a]}[{at}]"
        lines = [f"{ind}if (threadIdx.x / 32 < {tiles}) {{", f"{i2}const int tile = threadIdx.x / 32;",
                 *self.mma_head(m, i2), *self.fold_mma_finish(a, i2),
                 f"{i2}if (tn0 == 0) {{",
                 f"{i2}#pragma unroll",
                 f"{i2}for (int wm = 0; wm < {WM}; ++wm) {{",
                 f"{i3}#pragma unroll",
                 f"{i3}for (int h = 0; h < 2; ++h) {{",
                 f"{i4}float s = ff{self.ids[a]}[wm][h];",
                 f"{i4}s += __shfl_xor_sync(0xffffffffu, s, 1);",
                 f"{i4}s += __shfl_xor_sync(0xffffffffu, s, 2);",
                 f"{i4}const int r = (tm0 + wm) * 16 + g + 8 * h;",
                 f"{i4}if ({'q == 0' if not self.rows_past(m) else f'q == 0 && r < {M}'}) {dst} = s;",
                 f"{i3}}}", f"{i2}}}", f"{i2}}}", f"{ind}}}"]
        if kw > 1:
            lines += self.add_slices(self.kslices[a], self.buf[a], self.buf_size(a), kw, "=", ind)
        return lines

    def emit_register_save(self, k: int, ind: str) -> list[str]:
        """Block output ``k`` written straight from the accumulator registers of its register
        products (layout.reg_saves, Schedule.reg_epilogue): each warp computes the output at
        its fragments' elements (rows g, g + 8 and columns 2q, 2q + 1 of each 16x8 tile), the
        products' values taken from its registers (two-chain sets added first), every other
        operand from its tile, and stores each element (an fp16 pair of adjacent columns as one
        half2) to global memory."""
        ms = self.reg_saves[k]
        root = self.bg.outputs[k].node
        WM, WN, tiles = self.warp_blocking(ms[0])
        M, N = root.shape[-2], root.shape[-1]
        batch = root.shape[:-2]
        _, bidx = multi_index(batch, "tb", "u") if batch else ([], [])
        i2, i3, i4, i5 = (ind + "  " * j for j in (1, 2, 3, 4))
        full = self.bg.output_shape(self.bg.outputs[k])
        # fp16 or bf16 with even rows (tile and output): each row's two adjacent values as one
        # pair (half2, bfloat162)
        pair = root.dtype in FLOAT16 and N % 2 == 0 and full[-1] % 2 == 0
        exs: list[TileExpr] = []
        vals: list[str] = []
        # fragment folds finished here (layout.register_folds): each row's sum from its quad
        folds = sorted((a for a, m in self.register_folds().items() if m in ms), key=self.ids.__getitem__)
        finish = [line for a in folds for line in (
            f"{i2}float fq{self.ids[a]}[{WM}][2];", f"{i2}#pragma unroll",
            f"{i2}for (int x = 0; x < {2 * WM}; ++x) {{",
            f"{i3}float s = (&ff{self.ids[a]}[0][0])[x];",
            f"{i3}s += __shfl_xor_sync(0xffffffffu, s, 1);",
            f"{i3}s += __shfl_xor_sync(0xffffffffu, s, 2);",
            f"{i3}(&fq{self.ids[a]}[0][0])[x] = {self.finalized(a, 's')};", f"{i2}}}")]
        for col in (["ec", "(ec + 1)"] if pair else ["ec"]):
            idx = [*bidx, "er", col]
            ex = TileExpr(self, i5)
            for j, m in enumerate(ms):
                ex.memo[(self.fused[m], tuple(align_idx(idx, root.shape, self.fused[m].shape)))] = \
                    f"acc{j}[e + {len(exs)}]"
            for a in folds:  # (row er is r0 for e < 2, r1 after)
                ex.memo[(a, tuple(align_idx(idx, root.shape, a.shape)))] = f"fq{self.ids[a]}[wm][e >> 1]"
            # (size-1 dimensions read at 0, as the memo's keys above: a one-row product's
            # output otherwise missed its registers and read its never-written tile)
            vals.append(ex.val(root, align_idx(idx, root.shape, root.shape)))
            exs.append(ex)
        cond = [c for c, need in (("er < " + str(M), self.rows_past(root)), ("ec < " + str(N), N % 8 != 0))
                if need]
        at = self.out_ref(k, [*bidx, "er", "ec"])
        if pair:
            t = FLOAT16[root.dtype]
            store = f"*reinterpret_cast<{t.pair_type}*>(&{at}) = {t.pair_from_floats}({vals[0]}, {vals[1]});"
        else:
            store = f"{at} = mf::from_f<{root.dtype.c_type}>({vals[0]});"
        return [f"{ind}if (threadIdx.x / 32 < {tiles}) {{", f"{i2}const int tile = threadIdx.x / 32;",
                *self.mma_head(ms[0], i2), *[x for m in ms for x in self.add_kpair(m, WM * WN, i2)],
                *[x for a in folds for x in self.fold_mma_finish(a, i2)], *finish,
                f"{i2}#pragma unroll",
                f"{i2}for (int wm = 0; wm < {WM}; ++wm) {{",
                f"{i3}const int r0 = (tm0 + wm) * 16 + g, r1 = r0 + 8;",
                f"{i3}#pragma unroll",
                f"{i3}for (int wn = 0; wn < {WN}; ++wn) {{",
                f"{i4}const int cc = (tn0 + wn) * 8 + 2 * q;",
                *[f"{i4}const float* const acc{j} = ra{self.ids[m]}[wm][wn];" for j, m in enumerate(ms)],
                f"{i4}#pragma unroll",
                f"{i4}for (int e = 0; e < 4; e += {2 if pair else 1}) {{",
                f"{i5}const int er = e < 2 ? r0 : r1, ec = cc + (e & 1);",
                *[line for ex in exs for line in ex.code()],
                f"{i5}{'if (' + ' && '.join(cond) + ') ' if cond else ''}{store}",
                f"{i4}}}", f"{i3}}}", f"{i2}}}", f"{ind}}}"]

    def add_kpair(self, n: Node, tiles: int, ind: str) -> list[str]:
        """After the loop, register product ``n``'s odd k-steps' sums (Schedule.mma_kpair)
        added into its accumulators, over the warp's ``tiles`` 16x8 tiles; nothing without."""
        if not self.kpair(n):
            return []
        return [f"{ind}#pragma unroll",
                f"{ind}for (int x = 0; x < {tiles * 4}; ++x) (&ra{self.ids[n]}[0][0][0])[x] += "
                f"(&rb{self.ids[n]}[0][0][0])[x];"]

    def add_slices(self, scratch: str, dst: str, size: int, kw: int, op: str, ind: str,
                   barrier: bool = True) -> list[str]:
        """After a barrier (unless ``barrier`` is False: one was just printed), every thread
        adds the ``kw`` slices of ``scratch`` (``size`` floats each) element by element in
        slice order and ``op``s the total into ``dst``."""
        terms = " + ".join(f"{scratch}[{j * size} + i]" for j in range(kw))
        return [*([f"{ind}__syncthreads();"] if barrier else []),
                *self.block_loop("i", size, ind), f"{ind}  {dst}[i] {op} {terms};", f"{ind}}}"]

    def emit_matmul_simple(self, n: Node, dnode: Node, add: bool, ind: str) -> list[str]:
        """A product off the tensor cores as plain fp32 loops over k: one output a thread,
        or (:func:`schedule.cc_block`) R x C outputs a thread from R rows of A and C columns of B, each
        summed over k in the same order as the unblocked loop; an fp32 product under
        Schedule.tf32x3 (``tf32``) on the tensor cores instead (:mod:`print_tf32`)."""
        if n in self.tf32:
            return self.emit_matmul_tf32(n, dnode, add, ind)
        R, C = self.cc_rc(n)
        if R * C > 1:
            return self._matmul_blocked(n, dnode, add, R, C, ind)
        A, B = n.src
        K = A.shape[-1]
        decls, idx = multi_index(n.shape, "i", "t")
        batch = idx[:-2]
        op = "+=" if add else "="
        body = [*[ind + "  " + d for d in decls],
                f"{ind}  const float* pa = {self._a_row(n, batch, idx[-2])};",
                f"{ind}  const float* pb = {self._b_col(n, batch, idx[-1])};",
                f"{ind}  float s = 0.f;",
                f"{ind}  #pragma unroll 8",
                f"{ind}  for (int k = 0; k < {K}; ++k) s += pa[k] * pb[k * {self.row(B)}];",
                f"{ind}  {self.buf[dnode]}[{self.addr(dnode, idx)}] {op} "
                f"{FLOAT16[dnode.dtype].from_float if dnode in self.half else ''}({self.epilogue(dnode, 's')});"]
        return self.loop_over(n.shape, body, ind)

    def _matmul_blocked(self, n: Node, dnode: Node, add: bool, R: int, C: int,
                        ind: str, store: bool = False) -> list[str]:
        """:meth:`emit_matmul_simple` with R x C outputs a thread: per k, C values of B and R
        of A read once each into registers and R x C FMAs. A thread's rows are ``M / R``
        apart, so that with at least 32 column groups a warp reads one row of A (a
        broadcast). Where the tiles allow (:meth:`_vector_a`, :meth:`_vector_b`) shared memory
        is read 16 bytes at a time: each A row four k at once, and B's columns in runs of four
        (a thread's runs ``4 N / C`` apart, neighbouring lanes on neighbouring runs: no bank
        conflict; each run's outputs then written 16 bytes at a time too); otherwise one float
        at a time, a thread's columns ``N / C`` apart. Either way each iteration's sum over its
        k is taken in the unblocked loop's order and added to the accumulator's tile.

        A product in ``cc_acc`` instead sums into registers declared before the loop
        (:meth:`cc_acc_zeros`), one running fp32 sum over every k of every iteration in
        increasing k order, and writes nothing in the loop; ``store`` prints only the write of
        those registers to the accumulator's tile, after the loop."""
        A, B = n.src
        K = A.shape[-1]
        M, N = n.shape[-2], n.shape[-1]
        va, vb = self._vector_a(n), self._vector_b(n, C)
        groups = (*n.shape[:-2], M // R, N // C)
        decls, idx = multi_index(groups, "i", "t")
        batch, mg, ng = idx[:-2], idx[-2], idx[-1]

        def at(g: str, apart: int, j: int) -> str:  # a thread's j-th row, column or run
            if j == 0:
                return g
            return str(j * apart) if g == "0" else f"{j * apart} + {g}"

        rows = [at(mg, M // R, r) for r in range(R)]
        if vb:  # runs of four columns: run q starts at 4 * ng + q * 4N/C
            run0 = "0" if ng == "0" else f"4 * {ng}"
            runs = [at(run0, 4 * N // C, q) for q in range(C // 4)]
            cols = [at(runs[c // 4], 1, c % 4) for c in range(C)]
            pb = [self._b_col(n, batch, r) for r in runs]
        else:
            cols = [at(ng, N // C, c) for c in range(C)]
            pb = [self._b_col(n, batch, c) for c in cols]
        pa = [self._a_row(n, batch, r) for r in rows]
        conv = FLOAT16[dnode.dtype].from_float if dnode in self.half else ""
        i2 = ind + "  "
        acc = self._cc_acc_names(n, R, C)
        regs = n in self.cc_acc
        add = add and not store
        step = 4 if va else 1
        lanes = "xyzw"

        def k_step(j: int) -> list[str]:  # the loads and FMAs of k + j
            kj = "k" if j == 0 else f"(k + {j})"
            sfx = f"_{j}" if step > 1 else ""
            if vb:
                loads = [f"{i2}  const float4 mf_bv{q}_{j} = *reinterpret_cast<const float4*>"
                         f"(mf_pb{q} + {kj} * {self.row(B)});" for q in range(C // 4)]
                bv = [f"mf_bv{c // 4}_{j}.{lanes[c % 4]}" for c in range(C)]
            else:
                loads = [f"{i2}  const float mf_bv{c}{sfx} = mf_pb{c}[{kj} * {self.row(B)}];"
                         for c in range(C)]
                bv = [f"mf_bv{c}{sfx}" for c in range(C)]
            if va:
                av = [f"mf_av{r}.{lanes[j]}" for r in range(R)]
            else:
                loads += [f"{i2}  const float mf_av{r} = mf_pa{r}[k];" for r in range(R)]
                av = [f"mf_av{r}" for r in range(R)]
            return [*loads, *[f"{i2}  {acc[r][c]} += {av[r]} * {bv[c]};"
                              for r in range(R) for c in range(C)]]

        a_loads = [f"{i2}  const float4 mf_av{r} = *reinterpret_cast<const float4*>(mf_pa{r} + k);"
                   for r in range(R)] if va else []
        body = [i2 + d for d in decls]
        if not store:
            body += [*[f"{i2}const float* const mf_pa{r} = {e};" for r, e in enumerate(pa)],
                     *[f"{i2}const float* const mf_pb{c} = {e};" for c, e in enumerate(pb)],
                     *([] if regs else [f"{i2}float {acc[r][c]} = 0.f;"
                                        for r in range(R) for c in range(C)]),
                     f"{i2}#pragma unroll {2 if va else 4}",
                     f"{i2}for (int k = 0; k < {K}; {'k += 4' if va else '++k'}) {{",
                     *a_loads,
                     *[line for j in range(step) for line in k_step(j)],
                     f"{i2}}}"]
        if store or not regs:  # (a product in cc_acc writes its sums after the loop only)
            run_starts = runs if vb and not conv and self._vector_tile(dnode) else None
            body += self._blocked_writes(dnode, batch, rows, cols, run_starts, acc, add, conv, i2)
        return [*self.block_loop("i", math.prod(groups), ind), *body, f"{ind}}}"]

    def _blocked_writes(self, dnode: Node, batch: list[str], rows: list[str], cols: list[str],
                        runs: list[str] | None, acc: list[list[str]], add: bool, conv: str,
                        ind: str) -> list[str]:
        """A thread's R x C sums ``acc`` (at ``rows`` x ``cols``) added (``add``) or written
        to ``dnode``'s tile through its epilogue: with ``runs`` (the columns in runs of four
        starting there, a plain fp32 destination) each run's four as one 16-byte access, since
        one float at a time hits each bank four times over (neighbouring lanes' runs are 16
        bytes apart); otherwise one float at a time."""
        buf = self.buf[dnode]
        if runs is None:
            op = "+=" if add else "="
            return [f"{ind}{buf}[{self.addr(dnode, [*batch, row, col])}] {op} "
                    f"{conv}({self.epilogue(dnode, acc[r][c])});"
                    for r, row in enumerate(rows) for c, col in enumerate(cols)]
        lines = []
        for r, row in enumerate(rows):
            for q, run in enumerate(runs):
                vals = [self.epilogue(dnode, acc[r][4 * q + j]) for j in range(4)]
                lines.append(f"{ind}{{ float4* const mf_o = reinterpret_cast<float4*>("
                             f"{buf} + {self.addr(dnode, [*batch, row, run])});")
                if add:
                    lines += [f"{ind}  float4 mf_v = *mf_o;",
                              *[f"{ind}  mf_v.{'xyzw'[j]} += {v};" for j, v in enumerate(vals)],
                              f"{ind}  *mf_o = mf_v; }}"]
                else:
                    lines.append(f"{ind}  *mf_o = make_float4({', '.join(vals)}); }}")
        return lines

    def _cc_acc_names(self, n: Node, R: int, C: int) -> list[list[str]]:
        """The R x C registers of a thread's sums of CUDA-core product ``n`` (kernel-wide
        names for a product in ``cc_acc``, the loop step's own otherwise)."""
        pre = f"mf_r{self.ids[n]}_" if n in self.cc_acc else "mf_s"
        return [[f"{pre}{r}_{c}" for c in range(C)] for r in range(R)]

    def cc_acc_zeros(self, n: Node, ind: str) -> list[str]:
        """Before the loop: the zeroed registers product ``n`` (in ``cc_acc``) sums into."""
        if n in self.tf32:
            return self.tf32_zeros(n, ind)
        R, C = self.cc_rc(n)
        return [f"{ind}float {a} = 0.f;" for row in self._cc_acc_names(n, R, C) for a in row]

    def cc_acc_store(self, n: Node, ind: str) -> list[str]:
        """After the loop: product ``n``'s (in ``cc_acc``) register sums written to its
        accumulator's tile."""
        if n in self.tf32:
            return self.tf32_store(n, ind)
        R, C = self.cc_rc(n)
        return self._matmul_blocked(n, self.fused[n], False, R, C, ind, store=True)

    def _vector_tile(self, x: Node) -> bool:
        """Whether operand tile ``x`` is a plain fp32 buffer whose rows (and so every row's
        start: buffers start on 16 bytes) sit a multiple of four floats apart."""
        return (x not in self.half and x not in self.raw and x not in self.swz
                and self.row(x) % 4 == 0)

    def _vector_a(self, n: Node) -> bool:
        """Whether CUDA-core product ``n`` reads A four k at a time (16-byte loads)."""
        A = n.src[0]
        return A.shape[-1] % 4 == 0 and self._vector_tile(A)

    def _vector_b(self, n: Node, C: int) -> bool:
        """Whether CUDA-core product ``n`` with ``C`` columns a thread reads B's columns in
        runs of four (16-byte loads)."""
        B = n.src[1]
        return C % 4 == 0 and B.shape[-1] > 1 and self._vector_tile(B)

    def _a_row(self, n: Node, batch: list[str], row: str) -> str:
        """Where CUDA-core product ``n``'s A row ``row`` starts (at batch index ``batch`` of
        ``n``; a one-row A is read at row 0 whatever ``row`` is)."""
        A = n.src[0]
        at = [*align_idx(batch, n.shape[:-2], A.shape[:-2]), "0" if A.shape[-2] == 1 else row, "0"]
        return f"{self.buf[A]} + {self.addr(A, at)}"

    def _b_col(self, n: Node, batch: list[str], col: str) -> str:
        """Where CUDA-core product ``n``'s B column ``col`` starts (a one-column B at 0)."""
        B = n.src[1]
        at = [*align_idx(batch, n.shape[:-2], B.shape[:-2]), "0", "0" if B.shape[-1] == 1 else col]
        return f"{self.buf[B]} + {self.addr(B, at)}"
