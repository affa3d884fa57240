"""The tuner's opening schedule (``tuning_rules.opening_schedule``): what a deadline-cut tuning
measures alone. A kernel on few blocks with a long loop opens split over about one wave of SMs,
at one of ``candidate_schedules``' own grid points (so CI's compile checks cover it); any other
kernel opens at the default."""

from __future__ import annotations

import pytest
from graph_strategies import MATMUL_LOOP_CASES, matmul_loop_program

from mirage_formal.codegen import Schedule, launches
from mirage_formal.codegen.tuning_rules import candidate_schedules, opening_schedule


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


def test_a_grid_over_half_the_sms_opens_at_the_default() -> None:
    bg = _block_graph((16, 32, 16, 128, 0, False, False))  # 2 blocks
    assert opening_schedule(bg, 4).split > 1  # half of 4 SMs: split
    assert opening_schedule(bg, 3) == Schedule()  # more than half of 3: left as it is
