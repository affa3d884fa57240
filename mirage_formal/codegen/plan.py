"""Shared-memory planning for one block graph: buffers, lifetimes, offsets.

A block graph's materialized tiles (and scratch rows) become fp32 buffers. Each buffer has a
lifetime ``[first, last]`` in the kernel's flat step order; a buffer defined before the
for-loop and read inside it, and every accumulator, lives across the whole loop. Buffers whose
lifetimes do not overlap share memory. Offsets are assigned greedily, largest first, at the
lowest 16-byte-aligned offset (or the buffer's own larger alignment: a TMA ring's stages start
on 1024-byte boundaries) that collides with no overlapping buffer (first fit). If the
plan exceeds the shared-memory limit, the largest buffers move to a per-block global
workspace (planned the same way), so every block graph the IR accepts can be emitted.

Imports nothing of ours.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: floats per alignment unit (16 bytes)
ALIGN = 4


@dataclass
class Buffer:
    name: str
    size: int  # floats
    first: int
    last: int
    space: str = "smem"  # "smem" or "ws" (per-block global workspace)
    offset: int = 0
    align: int = ALIGN  # floats; a multiple of ALIGN

    def overlaps(self, o: Buffer) -> bool:
        return not (self.last < o.first or o.last < self.first)


@dataclass
class Plan:
    buffers: list[Buffer] = field(default_factory=list)
    smem_floats: int = 0
    ws_floats: int = 0


def _assign(bufs: list[Buffer]) -> int:
    """First-fit offsets, largest first; returns the total floats used."""
    placed: list[Buffer] = []
    total = 0
    for b in sorted(bufs, key=lambda b: (-b.size, b.name)):
        size = -(-b.size // ALIGN) * ALIGN
        busy = sorted((p.offset, p.offset + -(-p.size // ALIGN) * ALIGN) for p in placed if p.overlaps(b))
        off = 0
        for lo, hi in busy:
            if off + size <= lo:
                break
            off = -(-max(off, hi) // b.align) * b.align
        b.offset = off
        placed.append(b)
        total = max(total, off + size)
    return total


def plan_buffers(bufs: list[Buffer], smem_limit_floats: int) -> Plan:
    """Place ``bufs`` in shared memory, spilling the largest to the workspace if needed."""
    smem = list(bufs)
    ws: list[Buffer] = []
    while True:
        total = _assign(smem)
        if total <= smem_limit_floats or not smem:
            break
        big = max(smem, key=lambda b: (b.size, b.name))
        smem.remove(big)
        big.space = "ws"
        ws.append(big)
    for b in smem:
        b.space = "smem"
    ws_total = _assign(ws) if ws else 0
    return Plan(list(bufs), total if smem else 0, ws_total)
