"""Printing a split loop's combine: partial accumulators summed in a fixed order.

Through global memory and an atomic ticket (the last block of the split sums every part, in
split order, two levels for long splits), or through a thread-block cluster's distributed
shared memory. Also a stream-K kernel's segment loop and its combine (:mod:`stream_k`: the
blocks that share a grid block's iterations, summed in block order by the last to arrive).

Imports ``ir`` and the planning and printing modules of ``codegen``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from mirage_formal.codegen.plan import Buffer
from mirage_formal.codegen.printer import (
    TilePrinter,
)
from mirage_formal.codegen.schedule import CLUSTER_MAX
from mirage_formal.codegen.stream_k import max_parts
from mirage_formal.ir.node import Node
from mirage_formal.ir.occupancy import combine_groups

#: registers a thread of a cluster combine fills with remote partials before it sums them
CLUSTER_LOAD_REGS = 32
#: cluster barriers every thread of a cluster-combined kernel passes (the one before block 0
#: reads the partials, the one that keeps them alive until it has): a TMA ring's producer
#: warp, done with its copies, passes them too
CLUSTER_COMBINE_BARRIERS = 2


class CombinePrinter(TilePrinter):
    """Prints the combine of a split loop's partial accumulators."""

    def cluster_combine(self, bufs: Mapping[str, Buffer]) -> bool:
        """Whether this kernel's split combine goes through the cluster's shared memory: asked
        for, a split of 2..CLUSTER_MAX, and every accumulator in shared memory (``bufs``: the
        buffer plan)."""
        return (self.opts.cluster_combine and 1 < self.split <= CLUSTER_MAX
                and all(bufs[self.buf[a]].space == "smem" for a in self.nodes if a.op == "accum"))

    def sum_parts(self, a: Node, n: int | str, term: str, dst: str, ind: str) -> list[str]:
        """Every thread sums ``n`` partials of accumulator ``a``'s element ``i`` in order (``term``:
        partial ``k``'s element, in ``k`` and ``i``) into ``dst`` (in ``i``)."""
        return [*self.block_loop("i", self.buf_size(a), ind),
                f"{ind}  float s = 0.f;", f"{ind}  #pragma unroll",
                f"{ind}  for (int k = 0; k < {n}; ++k) s += {term};",
                f"{ind}  {dst} = s;", f"{ind}}}"]

    def partial_offsets(self, accs: Sequence[Node]) -> tuple[list[int], int]:
        """Where each accumulator starts in one partial record, and the record's floats."""
        offs, total = [], 0
        for a in accs:
            offs.append(total)
            total += self.buf_size(a)
        return offs, total

    def store_partials(self, accs: Sequence[Node], offs: Sequence[int], ind: str) -> list[str]:
        """The block's accumulators copied into its partial record ``mf_mine``."""
        out = []
        for a, o in zip(accs, offs, strict=True):
            out += [*self.block_loop("i", self.buf_size(a), ind),
                    f"{ind}  mf_mine[{o} + i] = {self.buf[a]}[i];", f"{ind}}}"]
        return out

    def add_partials(self, accs: Sequence[Node], offs: Sequence[int], size: int, n: int | str,
                     src: str, dst: Callable[[Node, int], str], ind: str) -> list[str]:
        """Sum ``n`` consecutive partial records at ``src`` (each ``size`` floats) in order,
        through L2, into ``dst`` (of the accumulator and its offset)."""
        out = []
        for a, o in zip(accs, offs, strict=True):
            out += self.sum_parts(a, n, f"__ldcg({src} + k * {size} + {o} + i)", dst(a, o), ind)
        return out

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
        lines += ["    }", "    mf::cluster_sync();", "    if (mf_split != 0) return;", "  }"]  # (CLUSTER_COMBINE_BARRIERS)
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
        offs, acc_floats = self.partial_offsets(accs)
        part = nblk * S * acc_floats
        grp = nblk * NG * acc_floats if NG > 1 else 0

        def add_up(src: str, n: int, dst: Callable[[Node, int], str]) -> list[str]:
            return self.add_partials(accs, offs, acc_floats, n, src, dst, "    ")

        lines = ["  {  // split combine",
                 f"    float* mf_part = ws + {ws_base};",
                 f"    unsigned* mf_cnt = reinterpret_cast<unsigned*>(ws + {ws_base + part + grp});",
                 f"    const int mf_blk = bx + {gx} * (by + {gy} * bz);",
                 f"    float* mf_mine = mf_part + ((size_t)mf_blk * {S} + mf_split) * {acc_floats};"]
        lines += self.store_partials(accs, offs, "    ")
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

    def stream_k_loop_head(self) -> list[str]:
        """The opening of a stream-K kernel's segment loop (closed by the emitter after the
        post-loop steps): block p runs units [p·U/P, (p+1)·U/P) of the U = tiles x F (grid
        block, iteration) units, one segment per grid block it touches; each segment names
        its grid block (``bx``, ``by``, ``bz``), first iteration ``itb`` and length ``mf_n``.
        The same arithmetic as :func:`stream_k.segments`."""
        gx, gy, gz = self.bg.grid
        F, P = self.bg.forloop, self.stream_k
        U = gx * gy * gz * F
        return [f"  // stream-K: block p runs units [p*{U}/{P}, (p+1)*{U}/{P}) of the {gx * gy * gz}"
                f" x {F} (grid block, iteration) units",
                f"  const int mf_u_end = (int)((long long)(blockIdx.x + 1) * {U} / {P});",
                f"  for (int mf_u = (int)((long long)blockIdx.x * {U} / {P}); mf_u < mf_u_end;) {{",
                f"  const int mf_tile = mf_u / {F};",
                f"  const int itb = mf_u - mf_tile * {F};",
                f"  const int mf_n = min({F} - itb, mf_u_end - mf_u);",
                "  mf_u += mf_n;",
                f"  const int bx = mf_tile % {gx}, by = mf_tile / {gx} % {gy}, "
                f"bz = mf_tile / {gx * gy};"]

    def emit_stream_combine(self, accs: Sequence[Node], ws_base: int) -> tuple[list[str], int]:
        """A stream-K segment's combine. A grid block whose units one launched block runs
        whole needs none. Otherwise each of its blocks p0..p1 writes its partial accumulators
        to slot p - p0 of the grid block's partials and takes its ticket; the last to arrive
        sums the p1 - p0 + 1 partials in slot (block) order into its own accumulators,
        whichever block it is, and resets the ticket. Ends by opening ``if (mf_own) {`` around
        the post-loop steps (the emitter closes it): only the block that holds the finished
        accumulators runs them. Returns the code and the workspace floats (partials, then
        one unsigned ticket per grid block, zero before the first launch and after each)."""
        gx, gy, gz = self.bg.grid
        F, P = self.bg.forloop, self.stream_k
        tiles = gx * gy * gz
        U = tiles * F
        M = max_parts(tiles, F, P)
        offs, acc_floats = self.partial_offsets(accs)
        part = tiles * M * acc_floats
        lines = ["  bool mf_own = true;",
                 "  {  // stream-K combine: the blocks p0..p1 that share this grid block",
                 f"    const int mf_p0 = (int)((((long long)mf_tile * {F} + 1) * {P} - 1) / {U});",
                 f"    const int mf_p1 = (int)((((long long)mf_tile * {F} + {F}) * {P} - 1) / {U});",
                 "    if (mf_p1 > mf_p0) {",
                 f"      float* mf_part = ws + {ws_base} + (size_t)mf_tile * {M * acc_floats};",
                 f"      unsigned* mf_cnt = reinterpret_cast<unsigned*>(ws + {ws_base + part});",
                 "      __shared__ unsigned mf_ticket;",
                 f"      float* mf_mine = mf_part + (size_t)((int)blockIdx.x - mf_p0) * {acc_floats};"]
        lines += self.store_partials(accs, offs, "      ")
        # (the ticket's ordering as in emit_split_combine: a barrier, one acquire-release
        # atomic, a barrier; the last block reads the others' partials through L2)
        lines += ["      __syncthreads();",
                  "      if (threadIdx.x == 0) mf_ticket = mf::ticket_acq_rel(&mf_cnt[mf_tile]);",
                  "      __syncthreads();",
                  "      mf_own = mf_ticket == (unsigned)(mf_p1 - mf_p0);",
                  "      if (mf_own) {"]
        lines += self.add_partials(accs, offs, acc_floats, "mf_p1 - mf_p0 + 1", "mf_part",
                                   lambda a, o: f"{self.buf[a]}[i]", "        ")
        lines += ["        if (threadIdx.x == 0) mf_cnt[mf_tile] = 0u;", "      }",
                  "      __syncthreads();", "    }", "  }", "  if (mf_own) {"]
        return lines, part + tiles
