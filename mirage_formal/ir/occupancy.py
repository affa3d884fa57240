"""How a block graph's for-loop may be spread over extra blocks: the rule the autotuner's
schedule candidates use (``codegen.schedule``) and the cost model assumes (``search.cost``),
kept in one place so the model ranks a μGraph by the schedules that will really be measured.

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
