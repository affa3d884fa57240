"""Block-wide barriers between printed steps, only where a step needs one.

A kernel's steps run one after another in every thread; threads share tiles through shared
memory (and the per-block global workspace), so a step must not begin while another thread
may still write a tile it reads (read after write), or read or write a tile it writes (write
after read, write after write). A ``__syncthreads()`` between every two steps orders them all;
this module puts one only before a step that writes memory a step since the last barrier
touched, or touches memory such a step wrote. Steps that touch disjoint memory (the loads of
a loop-free kernel's inputs) or only read the same tile (a row sum of the exponentials and
the matmul that multiplies them by V) then run without a barrier between them, so their
global loads overlap instead of paying a memory latency each.

The test is conservative. A step *touches* every buffer whose name occurs in its printed
code; it only *reads* those the caller vouches for (a step's operand tiles, which no step but
their definition writes), and is taken to write every other one. Two buffers collide when
their address ranges overlap in the same memory space (buffers with disjoint lifetimes share
addresses). A name seen by mistake only adds a barrier. Code that reached a buffer under
another name would defeat the test; every tile is addressed through its declared pointer.

Imports nothing of ours.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

#: the barrier line printed between steps
BARRIER = "__syncthreads();"

#: a buffer's place: (memory space, first float, one past the last float)
Extent = tuple[str, int, int]

#: one printed step and the names of the buffers it only reads
Chunk = tuple[list[str], frozenset[str]]


def _collides(a: Iterable[Extent], b: Iterable[Extent]) -> bool:
    b = list(b)
    return any(sa == sb and lo < hb and lb < hi for sa, lo, hi in a for sb, lb, hb in b)


def touches(chunks: Sequence[Chunk], extents: Mapping[str, Extent]) -> bool:
    """Whether any of the steps' printed code names a buffer of ``extents`` (shared memory,
    the workspace, the reduction scratch): code that names none touches only registers and
    global memory the steps own."""
    if not extents:
        return False
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(extents, key=len, reverse=True))) + r")\b")
    return any(pattern.search(line) for code, _ in chunks for line in code)


def with_barriers(chunks: Sequence[Chunk], extents: Mapping[str, Extent], ind: str,
                  close: bool = True, close_if_written: bool = False) -> list[str]:
    """The steps' printed code in order, a barrier (at indent ``ind``) before each one that
    writes memory touched, or touches memory written, since the last barrier; with ``close``,
    one after the last step too (a loop body's end: the next iteration refills its tiles);
    with ``close_if_written`` instead, one only if some step writes memory (a TMA ring's loop
    body, whose ring stages go back to the producer through mbarriers: a body that only reads
    them and writes registers needs no barrier at all)."""
    names = sorted(extents, key=len, reverse=True)
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b") if names else None
    out: list[str] = []
    read: list[Extent] = []
    written: list[Extent] = []
    any_written = False
    for code, reads_only in chunks:
        if not code:
            continue
        seen = {m for line in code for m in pattern.findall(line)} if pattern else set()
        r = [extents[m] for m in seen if m in reads_only]
        w = [extents[m] for m in seen if m not in reads_only]
        if _collides(w, read + written) or _collides(r, written):
            out.append(ind + BARRIER)
            read, written = [], []
        out += code
        read += r
        written += w
        any_written = any_written or bool(w)
    if close or (close_if_written and any_written):
        out.append(ind + BARRIER)
    return out
