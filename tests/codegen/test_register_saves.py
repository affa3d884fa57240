"""Outputs stored from the registers of their products (Schedule.reg_epilogue): two cases whose
kernels failed validation until the thirty-fourth session and were dropped by the tuner.

- A product of one row a block (a gemv-like tile: X's row b times a W column tile): the save
  looked the product up at row ``er`` while its registers were recorded at row 0 (a size-1
  dimension), missed them and stored the sums tile, which nothing had written (max relative
  error ~1.0; found on rmsnorm(X) · W in bf16, s34 c4).
- Attention's register chain whose second product (P·V) runs over k slices, two warps a row
  tile: each warp stored its own slice's partial sums to the same outputs (errors 0.75-0.94;
  four kernels of the s25, s26 and s32 tuning logs, re-validated in s34 c5). Such a product
  now keeps its sums in shared memory, where the slices are added.

- on any machine: the one-row save reads the accumulators, never the tile (fp16 and bf16);
  the k-sliced chain takes no register save;
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


def attention_program(heads: int = 2, rows: int = 128, d: int = 64, kv: int = 512,
                      row_tile: int = 32, kv_tile: int = 128) -> KernelGraph:
    """One kernel of exp(Q·K) row sums and exp(Q·K)·V, both outputs saved (the first kernel of
    prefill_attention's winner, smaller)."""
    return parse_text(
        "ugraph {\n"
        f"  %0 = input() {{name='Q'}} : f16[{heads}, {rows}, {d}]\n"
        f"  %1 = input() {{name='K'}} : f16[{heads}, {d}, {kv}]\n"
        f"  %2 = input() {{name='V'}} : f16[{heads}, {kv}, {d}]\n"
        f"  %3 = kernel(%0, %1, %2) {{forloop={kv // kv_tile}, grid=({heads}, {rows // row_tile}, 1), "
        "threads=128} {\n"
        f"    %b0 = iter() {{fmap=-1, imap=(0, 1, -1), input=0}} : f16[1, {row_tile}, {d}]\n"
        f"    %b1 = iter() {{fmap=2, imap=(0, -1, -1), input=1}} : f16[1, {d}, {kv_tile}]\n"
        f"    %b2 = matmul(%b0, %b1) : f16[1, {row_tile}, {kv_tile}]\n"
        f"    %b3 = exp(%b2) : f16[1, {row_tile}, {kv_tile}]\n"
        f"    %b4 = accum(%b3) {{fold=1, kind='sum'}} : f16[1, {row_tile}, 1]\n"
        f"    %b5 = iter() {{fmap=1, imap=(0, -1, -1), input=2}} : f16[1, {kv_tile}, {d}]\n"
        f"    %b6 = matmul(%b3, %b5) : f16[1, {row_tile}, {d}]\n"
        f"    %b7 = accum(%b6) {{fold=None, kind='sum'}} : f16[1, {row_tile}, {d}]\n"
        "    save %b4 {omap=(0, 1, -1)}\n"
        "    save %b7 {omap=(0, 1, -1)}\n"
        "  }\n"
        f"  %4 = get(%3) {{index=0}} : f16[{heads}, {rows}, 1]\n"
        f"  %5 = get(%3) {{index=1}} : f16[{heads}, {rows}, {d}]\n"
        "  return %4, %5\n"
        "}\n")


#: the schedules of the failing candidates (s32 c1's two, s26's)
CHAIN_SCHEDULES = {
    "cp.async": Schedule(async_stage_bytes=49152, async_stages=4, min_blocks=1, reg_epilogue=True),
    "tma ring": Schedule(async_stage_bytes=49152, async_stages=4, dense_rows=True, min_blocks=1,
                         reg_epilogue=True, tma_ring=True),
    "6 stages": Schedule(async_stage_bytes=163840, async_stages=6, evict_first=True, min_blocks=1,
                         reg_epilogue=True),
}


def _chain(name: str, load: bool = True):  # type: ignore[no-untyped-def]
    prog = attention_program()
    (la,) = launches(prog, 128)
    return compile_graph(prog, schedules={la.graph.key: CHAIN_SCHEDULES[name]},
                         arch=None if load else "sm_90", load=load)


@pytest.mark.parametrize("name", sorted(CHAIN_SCHEDULES))
def test_a_k_sliced_chain_keeps_its_sums_in_shared_memory(name: str) -> None:
    (k,) = _chain(name, load=False).kernels
    assert "kq = tile %" in k.source  # (the chain's second product runs over k slices)
    assert not any("out1[" in line and "acc0" in line for line in k.source.splitlines())


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a GPU")
@pytest.mark.parametrize("name", sorted(CHAIN_SCHEDULES))
def test_k_sliced_chains_validate(name: str) -> None:
    rep = validate(_chain(name), trials=2)
    assert rep.ok, f"{name}: {rep}"
