"""How a block graph's for-loop may be spread over extra blocks: the rule the autotuner's
schedule candidates use (``codegen.schedule``) and the cost model assumes (``search.cost``),
kept in one place so the model ranks a μGraph by the schedules that will really be measured;
likewise the registers a register chain may hold (``codegen.layout.Chain``), which decide
whether the search counts its score tiles toward shared memory.

Imports nothing of ours.
"""

from __future__ import annotations

import math

#: a grid this many waves over the SMs or more is not split
SPLIT_MAX_WAVES = 1.5
#: the loop must have at least this many iterations to be split
SPLIT_MIN_FORLOOP = 4


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def loop_splits(blocks: int, forloop: int, n_sm: int) -> list[int]:
    """The splits S > 1 of a for-loop of ``forloop`` iterations over ``blocks`` blocks worth
    trying on ``n_sm`` SMs: when the grid has fewer than about 1.5 waves of blocks and the loop
    is long, the smallest divisors S of the loop that reach about one full wave
    (blocks x S >= 0.9 x SMs) and two (>= 2 x SMs), each leaving at least 2 iterations per block.
    Empty when no split applies. (Whether the block graph has accumulators to combine is the
    caller's check.)"""
    out: list[int] = []
    if blocks >= SPLIT_MAX_WAVES * n_sm or forloop < SPLIT_MIN_FORLOOP:
        return out
    for want in (math.ceil(0.9 * n_sm), 2 * n_sm):
        s = next((d for d in _divisors(forloop)
                  if d > 1 and blocks * d >= want and forloop // d >= 2), None)
        if s is not None and s not in out:
            out.append(s)
    return out


def combine_groups(split: int) -> int:
    """The group size G of a split's two-level combine (``codegen.emit``): the last block of
    each group of G consecutive splits sums their partials, the last group sums the S/G group
    partials, so the serial tail reads G + S/G partials instead of S. G is the divisor of S
    nearest sqrt(S) (the smaller on a tie); G = S (one level) when two levels would read as
    many (S <= 4)."""
    S = split
    g = min((d for d in range(2, S) if S % d == 0 and S // d >= 2),
            key=lambda d: (d + S // d, d), default=S)
    return S if g + S // g >= S else g


def combine_reads(split: int) -> int:
    """Partials the last block of a split's combine reads one after another (G + S/G, or S)."""
    g = combine_groups(split)
    return split if g == split else g + split // g


#: registers a thread may spend on a register chain's fragments (first product, second
#: product's accumulators, the first product's A fragments): beyond this the compiler spills
CHAIN_REGISTERS = 160
#: registers of one SM (a block's threads share them), and those a chain thread needs besides
#: its fragments (addresses, B fragments, loop counters)
REGISTERS_PER_SM, CHAIN_OVERHEAD = 65536, 48


def chain_register_budget(threads: int) -> int:
    """Fragment registers a register chain's thread may hold in a block of ``threads``."""
    return min(CHAIN_REGISTERS, REGISTERS_PER_SM // threads - CHAIN_OVERHEAD)


def chain_registers(wm: int, columns: int, n2: int, k1: int) -> int:
    """Fragment registers of a register chain's thread that owns ``wm`` 16-row tiles: its
    ``columns`` of the first product, the second product's ``n2`` columns of accumulators,
    and the first product's A fragments over ``k1``."""
    return wm * (columns // 8 + n2 // 8) * 4 + wm * (k1 // 16) * 4


def chain_fits(row_tiles: int, n2: int, k1: int) -> bool:
    """Some block the autotuner tries (128 or 256 threads, or one warp per 16-row tile up to
    1024) lets every warp own whole row tiles (1, 2 or 4 of the ``row_tiles``) and hold a
    16-column pass of a register chain within its registers."""
    blocks = {128, 256} | ({32 * row_tiles} if row_tiles <= 32 else set())
    return any(-(-row_tiles // wm) <= t // 32
               and chain_registers(wm, 16, n2, k1) <= chain_register_budget(t)
               for t in blocks for wm in (1, 2, 4))
