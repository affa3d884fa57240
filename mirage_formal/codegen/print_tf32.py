"""Printing fp32 products on the tensor cores as three TF32 MMAs each (Schedule.tf32x3).

Each warp owns a fixed WM x WN block of 16 x 8 output tiles (:meth:`KernelLayout.tf32_tiling`).
Per k step of 8 it reads its A and B fragments from the fp32 shared-memory tiles (or their
stage of the cp.async ring, Schedule.ring32; PTX ISA
layout of ``mma.m16n8k8`` with ``.tf32`` operands: A rows g, g + 8 at columns q, q + 4; B rows
q, q + 4 at column g; C rows g, g + 8 at columns 2q, 2q + 1, where g = lane / 4, q = lane % 4),
splits every value into a TF32 big part and a TF32 small part (``mf::tf32_split``) and adds
small·big, big·small and big·big into fp32 sums (``mf::mma_1688_tf32``). A product in
``cc_acc`` keeps those sums in registers through the loop and stores them after it; any other
writes (or adds) them to its destination tile at the end of its step.

Imports ``ir`` and the planning and printing modules of ``codegen``.
"""

from __future__ import annotations

from mirage_formal.codegen.float16 import FLOAT16
from mirage_formal.codegen.printer import TilePrinter
from mirage_formal.ir.node import Node


class Tf32Printer(TilePrinter):
    """Prints the TF32 products of a kernel (the products in ``tf32``)."""

    def _tf32_sums(self, n: Node) -> str:
        """The name of product ``n``'s per-thread sums array ``[WM][WN][4]``."""
        return f"mf_t{self.ids[n]}" if n in self.cc_acc else "mf_ts"

    def _tf32_head(self, n: Node, ind: str) -> list[str]:
        """The warp's lane coordinates and the first row and column of its block."""
        WM, WN, GN = self.tf32[n]
        return [f"{ind}const int mf_w = threadIdx.x >> 5, mf_g = (threadIdx.x & 31) >> 2, "
                f"mf_q = threadIdx.x & 3;",
                f"{ind}const int mf_m0 = (mf_w / {GN}) * {WM * 16}, mf_n0 = (mf_w % {GN}) * {WN * 8};"]

    def _tf32_tile(self, x: Node) -> str:
        """Where operand tile ``x`` starts: its buffer, or this iteration's stage of it in the
        cp.async ring (Schedule.ring32)."""
        return f"({self.buf[x]} + {self.stage_offset(x)})" if x in self.raw else self.buf[x]

    def tf32_zeros(self, n: Node, ind: str) -> list[str]:
        """Before the loop: the zeroed sums of TF32 product ``n`` (in ``cc_acc``)."""
        WM, WN, _ = self.tf32[n]
        return [f"{ind}float {self._tf32_sums(n)}[{WM}][{WN}][4] = {{}};"]

    def tf32_store(self, n: Node, ind: str) -> list[str]:
        """After the loop: TF32 product ``n``'s register sums (in ``cc_acc``) written to its
        accumulator's tile."""
        i2 = ind + "  "
        return [f"{ind}{{", *self._tf32_head(n, i2),
                *self._tf32_writes(n, self.fused[n], False, i2), f"{ind}}}"]

    def emit_matmul_tf32(self, n: Node, dnode: Node, add: bool, ind: str) -> list[str]:
        """One step of TF32 product ``n`` into ``dnode`` (added when ``add``), or, for a product
        in ``cc_acc``, into its register sums.

        The step's k runs in 8s. Within each 8, the fragment's k index j (0-7) reads column
        (or B row) 2j and 2j + 1 for j < 4 and j >= 4 as the PTX layout's q and q + 4: the
        same sum in another order, and each A fragment row a lane reads is one 8-byte pair
        (rows padded to 8 or 24 mod 32 floats: no bank conflict; B's rows stay at 4 mod 8). The
        three products of a 16 x 8 tile depend on each other through its sums, so each of
        the three terms is issued for every tile of the warp before the next term starts.

        The sums a step's MMAs add into are zeroed at its start and added into the product's
        own fp32 sums (registers or tile) at its end: the tensor cores add into their fp32
        sums without rounding to nearest, so one chain through the whole loop loses accuracy
        with its length. Measured on the 512 x 2048 x 2048 product (H200, s39 c4/c5, largest
        error over the largest output): one chain 7.6e-6 to 1.5e-5, a chain per step
        3.2e-7 to 5.9e-7, fp32 FMAs on the CUDA cores 1.2e-6; the step's own sums cost 64
        registers a thread (91.4 against 84.7 µs at the fastest schedule of each)."""
        A, B = n.src
        WM, WN, _ = self.tf32[n]
        K = A.shape[-1]
        lda, ldb = self.row(A), self.row(B)
        sums = self._tf32_sums(n)
        i2, i3, i4 = ind + "  ", ind + "    ", ind + "      "
        regs = n in self.cc_acc
        step = "mf_tc" if regs else sums
        terms = []
        for fa, fb in (("mf_as", "mf_bb"), ("mf_ab", "mf_bs"), ("mf_ab", "mf_bb")):
            terms += [f"{i4}#pragma unroll",
                      f"{i4}for (int wn = 0; wn < {WN}; ++wn)",
                      f"{i4}  mf::mma_1688_tf32({step}[wm][wn], {fa}, {fb}[wn]);"]
        lines = [f"{ind}{{", *self._tf32_head(n, i2),
                 f"{i2}float {step}[{WM}][{WN}][4] = {{}};",
                 f"{i2}const float* const mf_pa = {self._tf32_tile(A)} + (mf_m0 + mf_g) * {lda} + 2 * mf_q;",
                 f"{i2}const float* const mf_pb = {self._tf32_tile(B)} + 2 * mf_q * {ldb} + mf_n0 + mf_g;",
                 f"{i2}#pragma unroll 2",
                 f"{i2}for (int k = 0; k < {K}; k += 8) {{",
                 f"{i3}unsigned mf_bb[{WN}][2], mf_bs[{WN}][2];",
                 f"{i3}#pragma unroll",
                 f"{i3}for (int wn = 0; wn < {WN}; ++wn) {{",
                 f"{i4}const float* const p = mf_pb + k * {ldb} + wn * 8;",
                 *[f"{i4}mf::tf32_split(p[{off}], mf_bb[wn][{j}], mf_bs[wn][{j}]);"
                   for j, off in enumerate(("0", f"{ldb}"))],
                 f"{i3}}}",
                 f"{i3}#pragma unroll",
                 f"{i3}for (int wm = 0; wm < {WM}; ++wm) {{",
                 f"{i4}const float* const p = mf_pa + wm * {16 * lda} + k;",
                 f"{i4}const float2 mf_v0 = *reinterpret_cast<const float2*>(p), "
                 f"mf_v1 = *reinterpret_cast<const float2*>(p + {8 * lda});",
                 f"{i4}unsigned mf_ab[4], mf_as[4];",
                 *[f"{i4}mf::tf32_split({v}, mf_ab[{j}], mf_as[{j}]);"
                   for j, v in enumerate(("mf_v0.x", "mf_v1.x", "mf_v0.y", "mf_v1.y"))],
                 *terms,
                 f"{i3}}}",
                 f"{i2}}}"]
        if regs:
            lines += [f"{i2}#pragma unroll",
                      f"{i2}for (int e = 0; e < {WM * WN * 4}; ++e)",
                      f"{i2}  (&{sums}[0][0][0])[e] += (&mf_tc[0][0][0])[e];"]
        else:
            lines += self._tf32_writes(n, dnode, add, i2)
        return [*lines, f"{ind}}}"]

    def _tf32_writes(self, n: Node, dnode: Node, add: bool, ind: str) -> list[str]:
        """A thread's sums of TF32 product ``n`` written (or added, ``add``) to ``dnode``'s tile
        through its epilogue, at their C-fragment places; the lane's two adjacent columns as
        one float2 where ``dnode`` is a plain fp32 tile of even rows."""
        WM, WN, _ = self.tf32[n]
        sums, buf = self._tf32_sums(n), self.buf[dnode]
        conv = FLOAT16[dnode.dtype].from_float if dnode in self.half else ""
        op = "+=" if add else "="
        pairs = not conv and self.row(dnode) % 2 == 0 and not add
        i2, i3 = ind + "  ", ind + "    "
        lead = ["0"] * (len(dnode.shape) - 2)  # (a per-head tile's leading dimensions of 1)
        body: list[str] = []
        for h, row in enumerate(("r", "r + 8")):
            vals = [self.epilogue(dnode, f"{sums}[wm][wn][{2 * h + j}]") for j in range(2)]
            if pairs:
                at = self.addr(dnode, [*lead, row, "c"])
                body.append(f"{i3}*reinterpret_cast<float2*>(&{buf}[{at}]) = "
                            f"make_float2({vals[0]}, {vals[1]});")
            else:
                body += [f"{i3}{buf}[{self.addr(dnode, [*lead, row, f'c + {j}'])}] {op} {conv}({v});"
                         for j, v in enumerate(vals)]
        return [f"{ind}#pragma unroll",
                f"{ind}for (int wm = 0; wm < {WM}; ++wm) {{",
                f"{i2}#pragma unroll",
                f"{i2}for (int wn = 0; wn < {WN}; ++wn) {{",
                f"{i3}const int r = mf_m0 + wm * 16 + mf_g, c = mf_n0 + wn * 8 + 2 * mf_q;",
                *body, f"{i2}}}", f"{ind}}}"]
