"""Schedule.row_registers: one-row kernels with every tile in registers.

For every elementwise op of the registry (a new op is covered without a new test), a kernel of
one-row tiles that applies it, normalizes the result and scales it by row reductions:
- on any machine, which kernels qualify, that the kernel keeps no tile in shared memory
  (its only barriers are the row reductions'), and that it compiles for sm_90;
- on the GPU, that it computes the program's float64 function at every thread count the
  tuner may give it, in fp16 and fp32.
"""

from __future__ import annotations

import pytest
from graph_strategies import attention_loop_program, row_kernel_program
from op_checks import attrs_for, operand_shapes

from mirage_formal import workloads
from mirage_formal.codegen import (
    Schedule,
    candidate_schedules,
    compile_graph,
    gpu_available,
    launches,
)
from mirage_formal.codegen.schedule import row_registers_ok
from mirage_formal.ir.ops import REGISTRY

ELEMENTWISE = sorted(n for n, d in REGISTRY.items() if d.elementwise and d.c_expr is not None)


def _program(name: str, dtype: str, length: int = 2048) -> object:
    d = REGISTRY[name]
    shapes = operand_shapes(d)
    given = {a.name: attrs_for(d, shapes)[a.name] for a in d.attrs
             if a.default is None and not a.optional}
    return row_kernel_program(name, dtype=dtype, length=length, attrs=given)


@pytest.mark.parametrize("dtype", ["f16", "f32"])
@pytest.mark.parametrize("name", ELEMENTWISE)
def test_row_kernels_keep_every_tile_in_registers(name: str, dtype: str) -> None:
    prog = _program(name, dtype)
    (la,) = launches(prog, 128)  # type: ignore[arg-type]
    # 2048 columns: 2 chunks of 8 a thread at 128 threads, 1 at 256; not 512 (256 chunks)
    assert [row_registers_ok(la.graph, t) for t in (128, 256, 512)] == [True, True, False]
    cands = candidate_schedules(la.graph)
    assert {s.threads for s in cands if s.row_registers} == {None, 256}
    cg = compile_graph(prog, arch="sm_90", load=False,  # type: ignore[arg-type]
                       schedules={la.graph.key: Schedule(row_registers=True)})
    assert cg.cubin[:4] == b"\x7fELF"
    assert "extern __shared__" not in cg.source and cg.kernels[0].smem_bytes == 0
    # the three row reductions (rms_norm, sum, mean) are the only places threads meet
    assert cg.source.count("__syncthreads()") == 3


def test_only_one_row_loop_free_kernels_qualify() -> None:
    """A loop, a tile of two rows, or a matmul keeps the stored path."""
    (attention,) = launches(attention_loop_program(16, 64, 64, 64, 4), 128)
    assert not row_registers_ok(attention.graph, 128)
    for b in (1, 8):  # ntrans's lifted kernels: one row per block, or two
        from mirage_formal.search.seeds import lifted_candidates

        for g in lifted_candidates(workloads.program("ntrans", b), (1, 2, 4, 8)):
            for la in launches(g, 128):
                rows = la.graph.nodes[0].shape[0] if la.graph.nodes[0].shape else 1
                if la.graph.forloop == 1 and rows > 1:
                    assert not row_registers_ok(la.graph, 128)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a GPU")
@pytest.mark.parametrize("dtype", ["f16", "f32"])
@pytest.mark.parametrize("name", ELEMENTWISE)
def test_row_kernels_in_registers_validate(name: str, dtype: str) -> None:
    from mirage_formal.codegen.validate import validate

    prog = _program(name, dtype)
    (la,) = launches(prog, 128)  # type: ignore[arg-type]
    for t in (None, 256):
        cg = compile_graph(prog, schedules={la.graph.key: Schedule(threads=t, row_registers=True)})  # type: ignore[arg-type]
        rep = validate(cg, trials=2, low=0.5, high=2.0)
        assert rep.ok, f"{name} {dtype} threads={t}: {rep}\n{cg.source}"
