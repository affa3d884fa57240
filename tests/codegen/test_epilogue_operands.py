"""A loop-invariant tile added after a product's loop through a plain mean accumulator (a
bias: the identity over the loop), as the search now builds gelu(X·W + c) in one kernel.

- on any machine: every candidate schedule compiles for sm_90; without a split the tile is
  copied once after the loop (no count, no finalize), a split loop keeps count x tile per
  block (the combine sums the blocks' partials, the finalize divides by the range); the
  float64 interpreter gives the program's function;
- on the GPU: the kernel validates under every candidate schedule.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from mirage_formal.codegen import candidate_schedules, compile_graph, gpu_available, launches
from mirage_formal.ir.graph import KernelGraph
from mirage_formal.ir.text import parse_text
from mirage_formal.semantics import F64, evaluate, random_inputs


def _fused(k: int = 2048, n: int = 512, cols: int = 64, forloop: int = 32) -> KernelGraph:
    return parse_text(
        "ugraph {\n"
        f"  %0 = input() {{name='X'}} : f16[16, {k}]\n"
        f"  %1 = input() {{name='W'}} : f16[{k}, {n}]\n"
        f"  %2 = input() {{name='C'}} : f16[{n}]\n"
        f"  %3 = kernel(%0, %1, %2) {{forloop={forloop}, grid=({n // cols}, 1, 1), threads=128}} {{\n"
        f"    %b0 = iter() {{fmap=1, imap=(-1, -1, -1), input=0}} : f16[16, {k // forloop}]\n"
        f"    %b1 = iter() {{fmap=0, imap=(1, -1, -1), input=1}} : f16[{k // forloop}, {cols}]\n"
        f"    %b2 = iter() {{fmap=-1, imap=(0, -1, -1), input=2}} : f16[{cols}]\n"
        f"    %b3 = matmul(%b0, %b1) : f16[16, {cols}]\n"
        f"    %b4 = accum(%b3) {{fold=None, kind='sum'}} : f16[16, {cols}]\n"
        f"    %b5 = accum(%b2) {{fold=None, kind='mean'}} : f16[{cols}]\n"
        f"    %b6 = add(%b4, %b5) : f16[16, {cols}]\n"
        f"    %b7 = gelu(%b6) : f16[16, {cols}]\n"
        "    save %b7 {omap=(1, -1, -1)}\n"
        "  }\n"
        f"  %4 = get(%3) {{index=0}} : f16[16, {n}]\n"
        "  return %4\n"
        "}\n")


def test_the_bias_tile_is_copied_once_after_the_loop() -> None:
    g = _fused()
    (la,) = launches(g, 128)
    xs = random_inputs(g, np.random.default_rng(5))
    x, w, c = (np.asarray(xs[k], dtype=np.float64) for k in ("X", "W", "C"))
    h = x @ w + c
    want = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)))
    (got,) = evaluate(g, xs, F64())
    assert np.allclose(got, want, rtol=2e-2, atol=2e-2)
    cands = candidate_schedules(la.graph)
    assert any(s.tma_ring for s in cands) and any(s.split > 1 for s in cands)
    for s in cands:
        (k,) = compile_graph(g, schedules={la.graph.key: s}, arch="sm_90", load=False).kernels
        # the bias tile's values read from C (input 2) and what its tile is set to
        (read,) = re.findall(r"const float (v\d+) = mf::to_f\(in2\[", k.source)
        (stored,) = re.findall(rf"b\d+\[i\] = ([^;]*\b{read}\b[^;]*);", k.source)
        if s.split == 1 and not s.stream_k:
            # the tile's own values, once, and never divided by the loop's range
            assert stored == read and "0.03125f" not in k.source, s.short()
        else:  # (count x tile per block, the finalize after the combine)
            assert stored == f"{32 // s.split}.f * ({read})" and "0.03125f" in k.source, s.short()


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a GPU")
def test_the_bias_kernel_validates_under_every_candidate_schedule() -> None:
    from mirage_formal.codegen.validate import validate

    g = _fused()
    (la,) = launches(g, 128)
    for s in candidate_schedules(la.graph):
        rep = validate(compile_graph(g, schedules={la.graph.key: s}), trials=2)
        assert rep.ok, f"{s.short()}: {rep}"
