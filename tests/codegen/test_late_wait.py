"""Accumulators of loop-invariant tiles, and the wait for the previous kernel after the loop.

A kernel whose loop streams only graph inputs, and which reads another kernel's output only
after its loop (rmsnorm(X)·W as (X·W) / rms(X), the rms from a first kernel), waits for that
kernel (``griddepcontrol.wait``) after its loop rather than before it, so its weight stream
overlaps the first kernel. The rms reaches the post-loop division through an accumulator of a
loop-invariant tile (the IR lets no post-loop op read an iterator), which is computed once
after the loop (``InvariantAccumulate``) instead of added to every iteration:
- on any machine: where the wait and the reads of the other kernel's output are, that the
  accumulator is not in the loop, that a kernel whose loop reads another kernel's output keeps
  its wait before the loop, and that every candidate schedule compiles for sm_90;
- on the GPU: each accumulator kind, under several schedules (split loops included), computes
  the float64 function of its μGraph.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mirage_formal.codegen import (
    Schedule,
    candidate_schedules,
    compile_graph,
    gpu_available,
    launches,
)
from mirage_formal.ir.graph import KernelGraph
from mirage_formal.ir.text import parse_text


def _scaled_after_loop(kind: str = "mean", rows: int = 2, k: int = 512, n: int = 256,
                       loop: int = 4, nt: int = 64) -> KernelGraph:
    """First kernel: r = rms of each row of X (rows, k); second: (X·W) / accum(r) with W
    (k, n) streamed over ``loop`` iterations; accum ``kind`` of the loop-invariant r."""
    kt = k // loop
    return parse_text(
        "ugraph {\n"
        f"  %0 = input() {{name='X'}} : f16[{rows}, {k}]\n"
        f"  %1 = input() {{name='W'}} : f16[{k}, {n}]\n"
        f"  %2 = kernel(%0) {{forloop={loop}, grid=({rows}, 1, 1), threads=128}} {{\n"
        f"    %b0 = iter() {{fmap=1, imap=(0, -1, -1), input=0}} : f16[1, {kt}]\n"
        "    %b1 = accum(%b0) {fold=1, kind='rms'} : f16[1, 1]\n"
        "    save %b1 {omap=(0, -1, -1)}\n"
        "  }\n"
        f"  %3 = get(%2) {{index=0}} : f16[{rows}, 1]\n"
        f"  %4 = kernel(%0, %1, %3) {{forloop={loop}, grid=({n // nt}, 1, 1), threads=128}} {{\n"
        f"    %b0 = iter() {{fmap=1, imap=(-1, -1, -1), input=0}} : f16[{rows}, {kt}]\n"
        f"    %b1 = iter() {{fmap=0, imap=(1, -1, -1), input=1}} : f16[{kt}, {nt}]\n"
        f"    %b2 = matmul(%b0, %b1) : f16[{rows}, {nt}]\n"
        f"    %b3 = accum(%b2) {{fold=None, kind='sum'}} : f16[{rows}, {nt}]\n"
        f"    %b4 = iter() {{fmap=-1, imap=(-1, -1, -1), input=2}} : f16[{rows}, 1]\n"
        f"    %b6 = accum(%b4) {{fold=None, kind='{kind}'}} : f16[{rows}, 1]\n"
        f"    %b5 = div(%b3, %b6) : f16[{rows}, {nt}]\n"
        "    save %b5 {omap=(1, -1, -1)}\n"
        "  }\n"
        f"  %5 = get(%4) {{index=0}} : f16[{rows}, {n}]\n"
        "  return %5\n"
        "}\n")


def _second_kernel(source: str) -> str:
    return source[source.rindex('extern "C" __global__'):]


def _block_iterations(sched: Schedule, loop: int = 4) -> int:
    """The iterations one block of the second kernel runs (the loop, split ``sched.split`` ways)."""
    return loop // sched.split


@pytest.mark.parametrize("kind", ["sum", "mean", "rms"])
def test_the_wait_follows_the_loop_and_the_invariant_accumulator_is_computed_once(
        kind: str, tmp_path: Path) -> None:
    prog = _scaled_after_loop(kind)
    second = launches(prog, 128)[1].graph
    scheds = [Schedule(), Schedule(threads=256), Schedule(split=2), *candidate_schedules(second)]
    for sched in scheds:
        cg = compile_graph(prog, arch="sm_90", load=False, cache=tmp_path,
                           schedules={second.key: sched})
        assert cg.cubin[:4] == b"\x7fELF"
        k2 = _second_kernel(cg.source)
        # (the cp.async loop's counter is it0; a TMA ring's producer and consumers count it)
        loop_at = re.search(r"for \(int it0? = 0;", k2).start()  # type: ignore[union-attr]
        wait_at = k2.index("mf::grid_dep_wait();")
        assert k2.count("mf::grid_dep_wait();") == 1 and wait_at > loop_at, sched.short()
        # before the wait: reads of graph inputs only (X, W), no global write; the other
        # kernel's output (the third input) is read after it, once, times the block's
        # iterations: not accumulated in the loop
        before = k2[:wait_at]
        assert set(map(int, re.findall(r"\bin(\d+)\[", before))) <= {0, 1}
        assert not re.search(r"\bout\d+\[|\bws\[|\bwsb\[", before)
        assert "in2[" in k2[wait_at:]
        if kind == "mean" and sched.split == 1 and not sched.stream_k:
            # (a plain mean of the invariant tile is the tile: copied, no count, no finalize)
            assert not re.search(r"= \d+\.f \* \(", k2[wait_at:]), sched.short()
        else:
            assert f"= {_block_iterations(sched)}.f * (" in k2[wait_at:]


def test_a_loop_that_reads_another_kernels_output_waits_before_it(tmp_path: Path) -> None:
    """rmsnorm's winner shape: the library rms_norm of X, then X_normed·W streamed: the loop
    reads the first kernel's output, so the wait stays before the loop."""
    prog = parse_text(
        "ugraph {\n"
        "  %0 = input() {name='X'} : f16[2, 512]\n"
        "  %1 = input() {name='W'} : f16[512, 256]\n"
        "  %2 = rms_norm(%0) {eps=0.0} : f16[2, 512]\n"
        "  %3 = kernel(%1, %2) {forloop=4, grid=(4, 1, 1), threads=128} {\n"
        "    %b0 = iter() {fmap=1, imap=(-1, -1, -1), input=1} : f16[2, 128]\n"
        "    %b1 = iter() {fmap=0, imap=(1, -1, -1), input=0} : f16[128, 64]\n"
        "    %b2 = matmul(%b0, %b1) : f16[2, 64]\n"
        "    %b3 = accum(%b2) {fold=None, kind='sum'} : f16[2, 64]\n"
        "    save %b3 {omap=(1, -1, -1)}\n"
        "  }\n"
        "  %4 = get(%3) {index=0} : f16[2, 256]\n"
        "  return %4\n"
        "}\n")
    cg = compile_graph(prog, arch="sm_90", load=False, cache=tmp_path)
    k2 = _second_kernel(cg.source)
    assert k2.index("mf::grid_dep_wait();") < k2.index("for (int it0 = 0;")


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a GPU")
@pytest.mark.parametrize("kind", ["sum", "mean", "rms"])
def test_late_wait_kernels_validate(kind: str) -> None:
    from mirage_formal.codegen.validate import validate

    prog = _scaled_after_loop(kind, rows=8, k=1024, loop=8)
    second = launches(prog, 128)[1].graph
    for sched in (Schedule(), Schedule(threads=256), Schedule(split=2),
                  Schedule(gemv=True, threads=256), Schedule(split=4, evict_first=True)):
        cg = compile_graph(prog, schedules={second.key: sched})
        rep = validate(cg, trials=2)
        assert rep.ok, f"{sched.short()}: {rep}\n{cg.source}"


def test_a_program_outside_the_benchmarks_waits_after_its_loop(tmp_path: Path) -> None:
    """Written for this check: (X·W + X·V) / mean(X) per row, two streamed weights and a
    mean from a first kernel read through an invariant mean accumulator. The μGraph verifies
    against the program, and every candidate schedule of its second kernel compiles for sm_90
    with the wait after the loop."""
    from mirage_formal import Graph
    from mirage_formal.verify import Verifier
    from mirage_formal.verify.float64 import FloatRecheck

    g = Graph()
    x, w, v = g.input((4, 768), "f16", "X"), g.input((768, 384), "f16", "W"), g.input((768, 384), "f16", "V")
    g.output(g.div(g.add(g.matmul(x, w), g.matmul(x, v)), g.mean(x, axis=-1, keepdims=True)))
    prog = g.build()
    ug = parse_text(
        "ugraph {\n"
        "  %0 = input() {name='X'} : f16[4, 768]\n"
        "  %1 = input() {name='W'} : f16[768, 384]\n"
        "  %2 = input() {name='V'} : f16[768, 384]\n"
        "  %3 = kernel(%0) {forloop=4, grid=(4, 1, 1), threads=128} {\n"
        "    %b0 = iter() {fmap=1, imap=(0, -1, -1), input=0} : f16[1, 192]\n"
        "    %b1 = accum(%b0) {fold=1, kind='mean'} : f16[1, 1]\n"
        "    save %b1 {omap=(0, -1, -1)}\n"
        "  }\n"
        "  %4 = get(%3) {index=0} : f16[4, 1]\n"
        "  %5 = kernel(%0, %1, %2, %4) {forloop=4, grid=(12, 1, 1), threads=128} {\n"
        "    %b0 = iter() {fmap=1, imap=(-1, -1, -1), input=0} : f16[4, 192]\n"
        "    %b1 = iter() {fmap=0, imap=(1, -1, -1), input=1} : f16[192, 32]\n"
        "    %b2 = matmul(%b0, %b1) : f16[4, 32]\n"
        "    %b3 = iter() {fmap=0, imap=(1, -1, -1), input=2} : f16[192, 32]\n"
        "    %b4 = matmul(%b0, %b3) : f16[4, 32]\n"
        "    %b5 = add(%b2, %b4) : f16[4, 32]\n"
        "    %b6 = accum(%b5) {fold=None, kind='sum'} : f16[4, 32]\n"
        "    %b7 = iter() {fmap=-1, imap=(-1, -1, -1), input=3} : f16[4, 1]\n"
        "    %b8 = accum(%b7) {fold=None, kind='mean'} : f16[4, 1]\n"
        "    %b9 = div(%b6, %b8) : f16[4, 32]\n"
        "    save %b9 {omap=(1, -1, -1)}\n"
        "  }\n"
        "  %6 = get(%5) {index=0} : f16[4, 384]\n"
        "  return %6\n"
        "}\n")
    verdict = Verifier(prog, seed=5).check(ug)
    assert verdict.accepted and FloatRecheck(prog).error(ug, verdict.output_map) < 1e-9
    second = launches(ug, 128)[1].graph
    for sched in [Schedule(), Schedule(split=2), *candidate_schedules(second)]:
        cg = compile_graph(ug, arch="sm_90", load=False, cache=tmp_path, schedules={second.key: sched})
        k2 = _second_kernel(cg.source)
        wait_at = k2.index("mf::grid_dep_wait();")
        assert wait_at > k2.index("for (int it0 = 0;") and "in3[" not in k2[:wait_at], sched.short()
