"""The tuner's opening schedule (``tuning_rules.opening_schedule``): what a deadline-cut tuning
measures alone. A kernel on fewer blocks than SMs with a long loop opens split over about one
wave of SMs,
at one of ``candidate_schedules``' own grid points (so CI's compile checks cover it); any other
kernel opens at the default."""

from __future__ import annotations

import pytest
from graph_strategies import MATMUL_LOOP_CASES, matmul_loop_program

from mirage_formal.codegen import Schedule, launches
from mirage_formal.codegen.tuning_rules import candidate_schedules, opening_schedule
from mirage_formal.ir.occupancy import loop_splits


def _block_graph(case: tuple) -> object:
    (la,) = launches(matmul_loop_program(*case), 128)
    return la.graph


def test_few_blocks_and_a_long_loop_open_split_over_one_wave() -> None:
    bg = _block_graph((16, 32, 16, 128, 0, False, False))  # 2 blocks, 128 iterations
    s = opening_schedule(bg, 132)
    assert s.split == 64 and 2 * s.split >= 0.9 * 132
    assert s in candidate_schedules(bg, 132, limit=10**6)


@pytest.mark.parametrize("case", MATMUL_LOOP_CASES)
def test_short_loops_and_full_grids_open_at_the_default(case: tuple) -> None:
    bg = _block_graph(case)
    s = opening_schedule(bg, 132)
    # (these cases' loops are too short to leave 2 iterations per block of a wave-filling split)
    assert s == Schedule()
    assert opening_schedule(bg, 2) == Schedule()  # 2 blocks already fill 2 SMs


def test_a_grid_that_fills_the_sms_opens_at_the_default() -> None:
    bg = _block_graph((16, 32, 16, 128, 0, False, False))  # 2 blocks
    assert opening_schedule(bg, 3).split > 1  # fewer blocks than 3 SMs: split
    assert opening_schedule(bg, 2) == Schedule()  # as many blocks as SMs: left as it is


@pytest.mark.parametrize("case", MATMUL_LOOP_CASES)
@pytest.mark.parametrize("sm_count", [132, 114, 16])
def test_the_opening_split_is_one_of_the_first_rounds_schedules(case: tuple, sm_count: int) -> None:
    """With a loop long enough to split (the case's loop times 32), a kernel on fewer blocks
    than SMs opens at a split that fills about one wave and leaves 2 iterations a block, and
    that schedule is one ``candidate_schedules`` proposes (so CI compiles its kind)."""
    m, k, n, forloop, *rest = case
    bg = _block_graph((m, k, n, forloop * 32, *rest))
    s = opening_schedule(bg, sm_count)
    blocks = bg.grid[0] * bg.grid[1] * bg.grid[2]
    if blocks >= sm_count or not loop_splits(blocks, bg.forloop, sm_count):
        assert s == Schedule()  # (a full grid, or no split fills a wave with 2 iterations left)
        return
    assert s.split > 1 and blocks * s.split >= 0.9 * sm_count and bg.forloop // s.split >= 2
    assert s in candidate_schedules(bg, sm_count, limit=10**6)
