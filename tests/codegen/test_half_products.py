"""Schedule.half_tiles on tensor-core products read by another tensor-core product.

lora's best μGraph computes A·B per iteration and multiplies X by it (the product read as
operand B); the reassociated form multiplies X·A by B (the product read as operand A). Under
half_tiles such a product is stored from its fragments as fp16 pairs and read back with
ldmatrix, instead of as scalar pairs of an fp32 tile:
- on any machine: which tiles the layout stores as fp16, that the consumer reads them with
  ldmatrix, that the tuner proposes the schedule, and that every candidate compiles for sm_90;
- on the GPU: both forms, at two loop lengths and two block sizes, compute the float64
  function of their μGraph.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mirage_formal.codegen import (
    Schedule,
    candidate_schedules,
    compile_graph,
    gpu_available,
    launches,
)
from mirage_formal.codegen.layout import KernelLayout
from mirage_formal.ir.graph import KernelGraph
from mirage_formal.ir.text import parse_text


def _lora_like(as_b: bool, k: int = 128, n: int = 512, loop: int = 2, dtype: str = "f16") -> KernelGraph:
    """X (16, k), W (k, n), A (k, 16), B (16, n): X·W + X·(A·B) per k-chunk (``as_b``: the
    product A·B read as X's B operand) or X·W + (X·A)·B (the product X·A read as A); every
    tensor in ``dtype`` (fp16 or bf16)."""
    kt, nt = k // loop, 32
    grid = n // nt
    if as_b:
        second = (f"    %b6 = matmul(%b4, %b5) : f16[{kt}, {nt}]\n"
                  f"    %b7 = matmul(%b0, %b6) : f16[16, {nt}]\n")
    else:
        second = ("    %b6 = matmul(%b0, %b4) : f16[16, 16]\n"
                  f"    %b7 = matmul(%b6, %b5) : f16[16, {nt}]\n")
    text = (
        "ugraph {\n"
        f"  %0 = input() {{name='X'}} : f16[16, {k}]\n"
        f"  %1 = input() {{name='W'}} : f16[{k}, {n}]\n"
        f"  %2 = input() {{name='A'}} : f16[{k}, 16]\n"
        f"  %3 = input() {{name='B'}} : f16[16, {n}]\n"
        f"  %4 = kernel(%0, %1, %2, %3) {{forloop={loop}, grid=({grid}, 1, 1), threads=128}} {{\n"
        f"    %b0 = iter() {{fmap=1, imap=(-1, -1, -1), input=0}} : f16[16, {kt}]\n"
        f"    %b1 = iter() {{fmap=0, imap=(1, -1, -1), input=1}} : f16[{kt}, {nt}]\n"
        f"    %b2 = matmul(%b0, %b1) : f16[16, {nt}]\n"
        f"    %b3 = accum(%b2) {{fold=None, kind='sum'}} : f16[16, {nt}]\n"
        f"    %b4 = iter() {{fmap=0, imap=(-1, -1, -1), input=2}} : f16[{kt}, 16]\n"
        f"    %b5 = iter() {{fmap=-1, imap=(1, -1, -1), input=3}} : f16[16, {nt}]\n"
        + second +
        f"    %b8 = accum(%b7) {{fold=None, kind='sum'}} : f16[16, {nt}]\n"
        f"    %b9 = add(%b3, %b8) : f16[16, {nt}]\n"
        "    save %b9 {omap=(1, -1, -1)}\n"
        "  }\n"
        f"  %5 = get(%4) {{index=0}} : f16[16, {n}]\n"
        "  return %5\n"
        "}\n")
    return parse_text(text.replace("f16[", f"{dtype}["))


#: how each 16-bit type's pairs are stored from fragments
PAIR_STORE = {"f16": "__floats2half2_rn", "bf16": "__floats2bfloat162_rn"}


@pytest.mark.parametrize("dtype", sorted(PAIR_STORE))
@pytest.mark.parametrize("as_b", [True, False])
def test_products_read_by_products_are_16_bit_tiles(as_b: bool, dtype: str, tmp_path: Path) -> None:
    prog = _lora_like(as_b, dtype=dtype)
    (la,) = launches(prog, 128)
    bg = la.graph
    product = next(n for n in bg.nodes if n.op == "matmul" and any(
        c.op == "matmul" and n in c.src for c in bg.nodes))
    assert product not in KernelLayout(bg, "k", 227 * 1024, Schedule()).half
    lay = KernelLayout(bg, "k", 227 * 1024, Schedule(half_tiles=True))
    assert product in lay.half and lay.row(product) == product.shape[-1] + 8
    cands = candidate_schedules(bg)
    assert any(s.half_tiles for s in cands)
    for sched in [Schedule(half_tiles=True), Schedule(half_tiles=True, threads=256), *cands]:
        cg = compile_graph(prog, arch="sm_90", load=False, cache=tmp_path,
                           schedules={bg.key: sched})
        assert cg.cubin[:4] == b"\x7fELF"
        if sched.half_tiles:
            # stored as pairs, read with ldmatrix (transposed when it is operand B)
            assert PAIR_STORE[dtype] in cg.source
            assert ("ldsm_x2_trans" if as_b else "ldsm_x4(fa") in cg.source


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a GPU")
@pytest.mark.parametrize("dtype", sorted(PAIR_STORE))
@pytest.mark.parametrize("loop", [2, 4])
@pytest.mark.parametrize("as_b", [True, False])
def test_16_bit_products_validate(as_b: bool, loop: int, dtype: str) -> None:
    from mirage_formal.codegen.validate import validate

    prog = _lora_like(as_b, k=256, loop=loop, dtype=dtype)
    (la,) = launches(prog, 128)
    for sched in (Schedule(half_tiles=True), Schedule(half_tiles=True, threads=256),
                  Schedule(half_tiles=True, ring_first=True, split=2)):
        cg = compile_graph(prog, schedules={la.graph.key: sched})
        rep = validate(cg, trials=2)
        assert rep.ok, f"{sched.short()}: {rep}\n{cg.source}"
