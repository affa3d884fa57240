"""Stream-K partitions: a kernel's (grid block, loop iteration) units in equal runs per block.

A block graph with grid G blocks and a for-loop of F iterations is U = G·F units of work,
unit u = tile·F + iteration (tile: the grid block, x fastest). Under
:attr:`Schedule.stream_k` = P the kernel launches P blocks and block p runs the contiguous
units [u0(p), u0(p+1)), u0(p) = floor(p·U/P): every block gets floor(U/P) or ceil(U/P)
units whatever G is, so P = the SM count keeps every SM streaming in one wave where G blocks
would leave SMs idle (96 tiles on 132 SMs) or run a partial second wave.

A block's run crosses tile boundaries: it runs a *segment* per tile it touches. A tile that
one block covers whole is finished by that block; a tile covered by several blocks is
finished by the last of them to arrive (an atomic ticket), which sums their partial
accumulators in block order — a fixed order, so the result does not depend on timing.

This module is the partition's arithmetic, shared by the printer (:mod:`print_combine`,
which prints the same formulas in C) and the tests. Imports nothing from the package.
"""

from __future__ import annotations


def run_start(p: int, units: int, blocks: int) -> int:
    """u0(p): the first unit of block ``p`` (``blocks`` = P launched blocks)."""
    return p * units // blocks


def block_of(u: int, units: int, blocks: int) -> int:
    """The block whose run holds unit ``u``: the largest p with u0(p) <= u, which is
    floor(((u + 1)·P - 1) / U)."""
    return ((u + 1) * blocks - 1) // units


def tile_blocks(tile: int, forloop: int, units: int, blocks: int) -> tuple[int, int]:
    """The first and last block whose runs touch ``tile``'s units."""
    return (block_of(tile * forloop, units, blocks),
            block_of(tile * forloop + forloop - 1, units, blocks))


def max_parts(tiles: int, forloop: int, blocks: int) -> int:
    """The most blocks that share one tile (the workspace's partial slots per tile)."""
    units = tiles * forloop
    return max(b - a + 1 for a, b in (tile_blocks(t, forloop, units, blocks)
                                      for t in range(tiles)))


def segments(p: int, tiles: int, forloop: int, blocks: int) -> list[tuple[int, int, int]]:
    """Block ``p``'s segments as (tile, first iteration, iterations), in the order it runs
    them (the printed kernel's outer loop, in Python)."""
    units = tiles * forloop
    u, end = run_start(p, units, blocks), run_start(p + 1, units, blocks)
    out = []
    while u < end:
        tile, it0 = divmod(u, forloop)
        n = min(forloop - it0, end - u)
        out.append((tile, it0, n))
        u += n
    return out


def longest_segment(tiles: int, forloop: int, blocks: int) -> int:
    """The most iterations one segment runs: min(F, ceil(U / P))."""
    return min(forloop, -(-tiles * forloop // blocks))
