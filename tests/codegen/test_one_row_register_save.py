"""A product of one row a block (a gemv-like tile: X's row b times a W column tile) whose sums
go from the registers straight to global memory (Schedule.reg_epilogue).

Until the thirty-fourth session the register save looked the product up at row ``er`` while
its registers were recorded at row 0 (a size-1 dimension), missed them and stored the sums
tile, which nothing had written: every such kernel failed validation (max relative error
~1.0) and the tuner dropped it (found on rmsnorm(X) · W in bf16, s34 c4).

- on any machine: for fp16 and bf16, the save reads the accumulators, never the tile;
- on the GPU: the kernels validate against the float64 program.
"""

from __future__ import annotations

import pytest

from mirage_formal.codegen import compile_graph, gpu_available, launches
from mirage_formal.codegen.schedule import Schedule
from mirage_formal.codegen.validate import validate
from mirage_formal.ir.graph import KernelGraph
from mirage_formal.ir.text import parse_text

#: the schedules of the failing candidate (its second kernel), and of the cp.async ring
SCHEDULES = {
    "tma ring": Schedule(threads=256, async_stage_bytes=153600, min_blocks=1, dense_rows=True,
                         mma_kpair=True, reg_epilogue=True, tma_ring=True),
    "cp.async ring": Schedule(threads=128, reg_epilogue=True, mma_kpair=True),
}


def one_row_program(dtype: str, rows: int = 2, k: int = 1024, n: int = 512, cols: int = 128,
                    k_tile: int = 256) -> KernelGraph:
    """Y = X · W with X (rows, k), W (k, n): block (b, c) multiplies X's row b by W's column
    tile c (grid rows x n / cols), k_tile rows of W an iteration."""
    t = dtype
    return parse_text(
        "ugraph {\n"
        f"  %0 = input() {{name='X'}} : {t}[{rows}, {k}]\n"
        f"  %1 = input() {{name='W'}} : {t}[{k}, {n}]\n"
        f"  %2 = kernel(%0, %1) {{forloop={k // k_tile}, grid=({rows}, {n // cols}, 1), threads=128}} {{\n"
        f"    %b0 = iter() {{fmap=1, imap=(0, -1, -1), input=0}} : {t}[1, {k_tile}]\n"
        f"    %b1 = iter() {{fmap=0, imap=(-1, 1, -1), input=1}} : {t}[{k_tile}, {cols}]\n"
        f"    %b2 = matmul(%b0, %b1) : {t}[1, {cols}]\n"
        f"    %b3 = accum(%b2) {{fold=None, kind='sum'}} : {t}[1, {cols}]\n"
        "    save %b3 {omap=(0, 1, -1)}\n"
        "  }\n"
        f"  %3 = get(%2) {{index=0}} : {t}[{rows}, {n}]\n"
        "  return %3\n"
        "}\n")


def _compiled(dtype: str, name: str, load: bool = True):  # type: ignore[no-untyped-def]
    prog = one_row_program(dtype)
    (la,) = launches(prog, 128)
    return compile_graph(prog, schedules={la.graph.key: SCHEDULES[name]}, arch=None if load else "sm_90",
                         load=load)


@pytest.mark.parametrize("name", sorted(SCHEDULES))
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_the_save_reads_the_accumulators(dtype: str, name: str) -> None:
    (k,) = _compiled(dtype, name, load=False).kernels
    store = next(line for line in k.source.splitlines() if "out0[" in line)
    assert "acc0[e + 0]" in store and "b3[" not in store, store


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a GPU")
@pytest.mark.parametrize("name", sorted(SCHEDULES))
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_one_row_register_saves_validate(dtype: str, name: str) -> None:
    rep = validate(_compiled(dtype, name), trials=2)
    assert rep.ok, f"{dtype} {name}: {rep}"
