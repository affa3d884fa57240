"""Schedule.cc_rows / cc_cols: products off the tensor cores (fp32 operands) with several
outputs a thread, blocked in registers.

- on any machine: which block :func:`schedule.cc_block` gives a product (a property over
  shapes, blocks and thread counts, and worked examples), that the tuner tries the blocking
  on fp32 products and not on tensor-core ones, that a schedule's key is unchanged without
  it, and that every blocked kernel below compiles for sm_90 with the blocked loop in it;
- on the GPU: each of those kernels computes the program's float64 function.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from graph_strategies import fold_loop_program, gated_loop_program, matmul_loop_program
from hypothesis import given
from hypothesis import strategies as st

import mirage_formal as mf
from mirage_formal.codegen import (
    Schedule,
    candidate_schedules,
    compile_cubin,
    compile_graph,
    emit_graph,
    gpu_available,
    launches,
)
from mirage_formal.codegen.schedule import cc_block
from mirage_formal.ir.graph import KernelGraph


def _exp_product(m: int, k: int, n: int) -> KernelGraph:
    """exp(X · W) · 0.5 in fp32, X (m, k), W (k, n): a kernel-level program whose product's
    consumers print as its epilogue."""
    g = mf.Graph()
    x = g.input((m, k), "f32", "X")
    w = g.input((k, n), "f32", "W")
    g.output(g.op("mul_scalar", g.exp(g.matmul(x, w)), scalar=0.5))
    return g.build()


#: fp32 programs whose products run on the CUDA cores: rows and columns that the blocks
#: divide or not (24 rows, 12 and 3 columns), a batch, a loop-invariant A, an fp32 op before
#: the product, two products and a gate, a fold beside the product, a loop-free product with
#: an epilogue
PROGRAMS = {
    "loop_8x64x128": lambda: matmul_loop_program(8, 64, 128, 3, dtype="f32"),
    "loop_24x32x12": lambda: matmul_loop_program(24, 32, 12, 2, dtype="f32"),
    "loop_16x16x3": lambda: matmul_loop_program(16, 16, 3, 2, dtype="f32"),
    "loop_batch": lambda: matmul_loop_program(16, 16, 16, 3, batch=2, dtype="f32"),
    "loop_fixed_a": lambda: matmul_loop_program(32, 32, 32, 2, fixed_a=True, dtype="f32"),
    "loop_neg_a": lambda: matmul_loop_program(32, 32, 24, 3, pre_a=True, dtype="f32"),
    "gated": lambda: gated_loop_program(8, 64, 64, 4, dtype="f32"),
    "fold": lambda: fold_loop_program(8, 64, 3, n=32, dtype="f32"),
    "exp_product": lambda: _exp_product(32, 64, 96),
}
#: (cc_rows, cc_cols, threads)
BLOCKS = [(2, 2, None), (4, 4, None), (8, 8, 32), (1, 4, None), (4, 1, 256)]


def _blocked(prog: KernelGraph, rows: int, cols: int, threads: int | None) -> dict[str, Schedule]:
    return {la.graph.key: Schedule(cc_rows=rows, cc_cols=cols, threads=threads)
            for la in launches(prog, 128)}


def _blocks_some_product(prog: KernelGraph, sched: dict[str, Schedule]) -> bool:
    for la in launches(prog, 128):
        s = sched[la.graph.key]
        T = s.threads or la.graph.threads
        if any(n.op == "matmul" and cc_block(n.shape, s.cc_rows, s.cc_cols, T) != (1, 1)
               for n in la.graph.nodes):
            return True
    return False


@given(m=st.integers(1, 300), n=st.integers(1, 300), batch=st.integers(1, 4),
       rows=st.sampled_from([0, 1, 2, 4, 8]), cols=st.sampled_from([0, 1, 2, 4, 8]),
       threads=st.sampled_from([32, 64, 128, 256, 512, 1024]))
def test_cc_block_divides_the_product_and_keeps_every_thread_busy(
        m: int, n: int, batch: int, rows: int, cols: int, threads: int) -> None:
    shape = (batch, m, n) if batch > 1 else (m, n)
    br, bc = cc_block(shape, rows, cols, threads)
    assert m % br == 0 and n % bc == 0
    assert br <= max(rows, 1) and bc <= max(cols, 1)
    assert br & (br - 1) == 0 and bc & (bc - 1) == 0
    assert br * bc == 1 or batch * (m // br) * (n // bc) >= threads


@pytest.mark.parametrize(("shape", "rows", "cols", "threads", "want"), [
    ((8, 128), 4, 4, 256, (2, 2)),   # the fp32 gated MLP's block: 256 threads, 1024 outputs
    ((8, 128), 4, 4, 128, (2, 4)),   # halved rows first on a tie, then the larger
    ((24, 6), 8, 8, 32, (2, 2)),     # 24 takes 8, 6 takes 2, then halved to fill 32 threads
    ((64, 64), 8, 8, 64, (8, 8)),
    ((16, 16), 0, 0, 32, (1, 1)),    # the default: one output a thread
    ((3, 5), 4, 4, 32, (1, 1)),      # nothing divides
])
def test_cc_block_examples(shape: tuple[int, int], rows: int, cols: int, threads: int,
                           want: tuple[int, int]) -> None:
    assert cc_block(shape, rows, cols, threads) == want


def test_cc_fields_are_keyed_only_when_set() -> None:
    """(Tuning caches keyed before the fields existed keep their keys.)"""
    assert "cc_" not in Schedule().key and "cc_" not in Schedule(split=2).key
    assert '"cc_rows":2' in Schedule(cc_rows=2).key
    assert Schedule.from_dict(Schedule(cc_rows=4, cc_cols=2).to_dict()) == Schedule(cc_rows=4, cc_cols=2)


def test_tuner_tries_blocking_on_cuda_core_products_only() -> None:
    for dtype, want in (("f32", True), ("f16", False)):
        for la in launches(gated_loop_program(8, 64, 64, 4, dtype=dtype), 128):
            scheds = candidate_schedules(la.graph)
            assert any(s.cc_rows > 1 or s.cc_cols > 1 for s in scheds) is want, dtype


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_blocked_products_compile(name: str, block: tuple[int, int, int | None],
                                  tmp_path_factory: pytest.TempPathFactory) -> None:
    prog = PROGRAMS[name]()
    sched = _blocked(prog, *block)
    src, _, _ = emit_graph(prog, schedules=sched)
    # (a thread's second output: mf_s* in the loop step, mf_r<id>_* held through the loop)
    assert bool(re.search(r"\bmf_(s|r\d+_)(0_1|1_0)\b", src)) is _blocks_some_product(prog, sched)
    cache: Path = tmp_path_factory.getbasetemp() / "cc_cubin"
    assert compile_cubin(src, "sm_90", cache=cache)[:4] == b"\x7fELF"


def test_the_fp32_gated_block_is_blocked_two_by_two() -> None:
    """The outside fp32 gated MLP's fused kernel at its tuned size (8 x 128 outputs, 256
    threads): 2 x 2 outputs a thread, 64 columns apart (neighbouring lanes, neighbouring
    columns: no bank conflict), each value read from shared memory serving two products; its
    A rows (64 k, rows of 68 floats) are read four k at a time."""
    prog = gated_loop_program(8, 64, 128, 4, dtype="f32")
    (la,) = launches(prog, 128)
    sched = {la.graph.key: replace(Schedule(threads=256), cc_rows=4, cc_cols=4)}
    src, _, _ = emit_graph(prog, schedules=sched)
    # both products, each summed in registers through the loop
    assert len(re.findall(r"mf_r\d+_1_1 \+= mf_av1\.w \* mf_bv1_3;", src)) == 2
    assert src.count("const float4 mf_av1 = *reinterpret_cast<const float4*>(mf_pa1 + k);") == 2
    assert "(64 + t1)" in src and "mf_s2_" not in src and "mf_s0_2" not in src


def test_runs_of_four_columns_are_read_sixteen_bytes_at_a_time() -> None:
    """4 x 4 outputs a thread of a 32 x 32 product: B's columns in one run of four a thread
    (lane t1 at column 4 t1), A four k at a time; each run's four sums written 16 bytes at a
    time, after the loop from the registers that held them through it, or (without
    ``mma_registers``) added to the accumulator's tile every iteration. An A of 6 k stays on
    one-float reads while its B (16 columns) still takes runs of four."""
    prog = matmul_loop_program(32, 32, 32, 2, dtype="f32")
    src, _, _ = emit_graph(prog, schedules=_blocked(prog, 4, 4, 64))
    assert "const float4 mf_bv0_3 = *reinterpret_cast<const float4*>(mf_pb0 + (k + 3) * " in src
    assert re.search(r"mf_r(\d+)_3_3 \+= mf_av3\.w \* mf_bv0_3\.w;", src) and "(4 * t1)" in src
    assert re.search(r"make_float4\(mf_r\d+_3_0, mf_r\d+_3_1, mf_r\d+_3_2, mf_r\d+_3_3\)", src)
    assert "mf_s" not in src
    in_tile = {k: replace(v, mma_registers=False) for k, v in _blocked(prog, 4, 4, 64).items()}
    src, _, _ = emit_graph(prog, schedules=in_tile)
    assert "mf_s3_3 += mf_av3.w * mf_bv0_3.w;" in src and "mf_v.w += mf_s3_3;" in src
    odd_k = matmul_loop_program(16, 6, 16, 2, dtype="f32")
    src, _, _ = emit_graph(odd_k, schedules=_blocked(odd_k, 2, 4, 32))
    assert "float4 mf_av" not in src and "const float mf_av1 = mf_pa1[k];" in src
    assert re.search(r"mf_r\d+_1_3 \+= mf_av1 \* mf_bv0_0\.w;", src)


def test_register_sums_only_where_each_thread_has_one_block_of_outputs() -> None:
    """The sums stay in registers through the loop only when the blocking gives every thread
    exactly one block of outputs (a thread with two blocks would need two sets): a 64 x 64
    product at 4 x 4 on 256 threads does, on 128 threads (two blocks a thread) it does not;
    nor does a loop of one iteration."""
    prog = matmul_loop_program(64, 32, 64, 2, dtype="f32")
    src, _, _ = emit_graph(prog, schedules=_blocked(prog, 4, 4, 256))
    assert re.search(r"float mf_r\d+_3_3 = 0\.f;", src) and "mf_s" not in src
    src, _, _ = emit_graph(prog, schedules=_blocked(prog, 4, 4, 128))
    assert "mf_r" not in src and "mf_s3_3" in src
    one = matmul_loop_program(64, 32, 64, 1, dtype="f32")
    src, _, _ = emit_graph(one, schedules=_blocked(one, 4, 4, 256))
    assert "mf_r" not in src


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a GPU")
@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_blocked_products_validate(name: str, block: tuple[int, int, int | None]) -> None:
    from mirage_formal.codegen.validate import validate

    prog = PROGRAMS[name]()
    cg = compile_graph(prog, schedules=_blocked(prog, *block))
    rep = validate(cg, trials=2)
    assert rep.ok, f"{name} {block}: {rep}\n{cg.source}"
