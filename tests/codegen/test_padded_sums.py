"""Padded rows for the tiles register products store their sums into (Schedule.pad_acc_rows).

- on any machine: the field pads such a tile's rows of a multiple of 32 floats by
  ``ACC_ROW_PAD`` and stores each lane's adjacent sums as one float2; every reader (the flat
  combines, the row-wise epilogue) takes the padded rows; tiles of other widths and schedules
  without the field print as before; the second round proposes it for a split or stream-K
  winner of such a product; the kernels compile for sm_90;
- on the GPU: split (global and cluster combine), stream-K and wgmma split kernels with it
  validate against the float64 program and equal the unpadded kernels bit for bit (the same
  sums in the same order).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from graph_strategies import gemm_program, matmul_loop_program

from mirage_formal.codegen import candidate_schedules, compile_graph, gpu_available, launches
from mirage_formal.codegen.layout import ACC_ROW_PAD
from mirage_formal.codegen.schedule import Schedule
from mirage_formal.codegen.tuning_rules import refinements
from mirage_formal.codegen.validate import validate
from mirage_formal.ir.graph import KernelGraph

#: (program, schedule): sums tiles of 64 and 128 columns through every way a loop's partials
#: meet in memory (mma.sync and warpgroup MMA)
CASES: dict[str, tuple[KernelGraph, Schedule]] = {
    "split 4, global": (matmul_loop_program(32, 32, 64, 16), Schedule(split=4)),
    "split 2, cluster": (matmul_loop_program(32, 32, 64, 16), Schedule(split=2, cluster_combine=True)),
    "stream-K": (matmul_loop_program(16, 64, 128, 12), Schedule(stream_k=5)),
    "wgmma split 2, cluster": (gemm_program(64, 128, 128, 8, gm=2, gn=2),
                               Schedule(tma_ring=True, dense_rows=True, min_blocks=1, wgmma=True,
                                        threads=128, split=2, cluster_combine=True)),
    "wgmma split 2, global": (gemm_program(128, 64, 128, 6, gm=1, gn=2),
                              Schedule(tma_ring=True, dense_rows=True, min_blocks=1, wgmma=True,
                                       threads=256, split=2)),
}


def _padded(name: str) -> tuple[KernelGraph, Schedule, Schedule]:
    prog, sched = CASES[name]
    return prog, sched, replace(sched, pad_acc_rows=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_sums_tile_gets_padded_rows_and_float2_stores(name: str) -> None:
    prog, plain, padded = _padded(name)
    (k,) = compile_graph(prog, opts=padded, arch="sm_90", load=False).kernels
    (p,) = compile_graph(prog, opts=plain, arch="sm_90", load=False).kernels
    n = prog.outputs[0].shape[-1] // 2  # (each block's columns: a grid of 2 over them)
    store = f"*{n + ACC_ROW_PAD} + (cc)]) = make_float2(acc[0], acc[1]);"
    assert store in k.source and store not in p.source
    assert f")*{n + ACC_ROW_PAD} + (t1" in k.source  # (the epilogue reads the padded rows)


def test_other_widths_and_loop_free_kernels_print_as_before() -> None:
    prog = matmul_loop_program(16, 64, 48, 4)  # (48-column sums: no bank conflict to remove)
    s = Schedule(split=2)
    assert (compile_graph(prog, opts=replace(s, pad_acc_rows=True), arch="sm_90", load=False).source
            == compile_graph(prog, opts=s, arch="sm_90", load=False).source)


def test_the_second_round_proposes_it_for_split_winners_only() -> None:
    (la,) = launches(matmul_loop_program(32, 32, 64, 16), 128)
    split = Schedule(split=4)
    assert replace(split, pad_acc_rows=True) in refinements(split, [split], la.graph)
    assert not any(r.pad_acc_rows for r in refinements(Schedule(), [Schedule()], la.graph))
    assert not any(s.pad_acc_rows for s in candidate_schedules(la.graph))
    (narrow,) = launches(matmul_loop_program(16, 64, 48, 8), 128)
    assert not any(r.pad_acc_rows for r in refinements(split, [split], narrow.graph))


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a GPU")
@pytest.mark.parametrize("name", sorted(CASES))
def test_padded_sums_validate_and_equal_the_unpadded_kernel(name: str) -> None:
    prog, plain, padded = _padded(name)
    cg = compile_graph(prog, opts=padded)
    rep = validate(cg, low=-0.5, high=0.5, trials=2)
    assert rep.ok, f"{name}: {rep}"
    ref = compile_graph(prog, opts=plain)
    rng = np.random.default_rng(13)
    xs = [rng.uniform(-0.5, 0.5, n.shape).astype(np.float16) for n in prog.inputs]
    assert all(np.array_equal(a, b) for a, b in zip(ref(*xs), cg(*xs), strict=True)), name
