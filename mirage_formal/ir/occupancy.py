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
