"""Stream-K schedules (Schedule.stream_k): a kernel's (grid block, iteration) units in equal
contiguous runs over P launched blocks, shared grid blocks combined in block order.

- on any machine: the partition covers every unit once, in runs of floor or ceil(U/P), each
  segment inside one grid block, and the printer's formulas (first and last block of a grid
  block) agree with the runs; schedules refuse stream-K with a split or on a loop-free
  kernel; the tuner's second round proposes it only where the winner's grid leaves SMs
  idle or runs a partial wave; stream-K kernels compile for sm_90 (fused rmsnorm with gemv,
  tensor-core matmul loops, a fold accumulator, a program outside the benchmarks);
- on the GPU: they validate against the float64 program (two launches, so the tickets'
  reset is exercised) and repeat bit for bit.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from graph_strategies import (
    FOLD_LOOP_CASES,
    MATMUL_LOOP_CASES,
    block_programs,
    defined_on_positive_inputs,
    fold_loop_program,
    matmul_loop_program,
)
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from mirage_formal.codegen import (
    Schedule,
    compile_cubin,
    compile_graph,
    emit_graph,
    gpu_available,
    launches,
)
from mirage_formal.codegen.schedule import stream_k_ok
from mirage_formal.codegen.stream_k import (
    block_of,
    longest_segment,
    max_parts,
    run_start,
    segments,
    tile_blocks,
)
from mirage_formal.codegen.tuning_rules import refinements, stream_k_blocks
from mirage_formal.codegen.validate import validate
from mirage_formal.errors import GraphError
from mirage_formal.ir.graph import BlockGraph, KernelGraph
from mirage_formal.ir.text import parse_text

needs_gpu = pytest.mark.skipif(not gpu_available(), reason="needs a GPU")


def fused_rmsnorm(rows: int = 2, k: int = 4096, n: int = 6144, cols: int = 64,
                  loop: int = 16) -> KernelGraph:
    """rmsnorm's fused one-kernel μGraph (the s22 table winner at b=1): X·W accumulated beside
    the rms of X over the loop, divided after it, on n / cols blocks."""
    kt = k // loop
    return parse_text(
        "ugraph {\n"
        f"  %0 = input() {{name='X'}} : f16[{rows}, {k}]\n"
        f"  %1 = input() {{name='W'}} : f16[{k}, {n}]\n"
        f"  %2 = kernel(%0, %1) {{forloop={loop}, grid=({n // cols}, 1, 1), threads=128}} {{\n"
        f"    %b0 = iter() {{fmap=1, imap=(-1, -1, -1), input=0}} : f16[{rows}, {kt}]\n"
        f"    %b1 = iter() {{fmap=0, imap=(1, -1, -1), input=1}} : f16[{kt}, {cols}]\n"
        f"    %b2 = matmul(%b0, %b1) : f16[{rows}, {cols}]\n"
        f"    %b3 = accum(%b2) {{fold=None, kind='sum'}} : f16[{rows}, {cols}]\n"
        f"    %b4 = accum(%b0) {{fold=1, kind='rms'}} : f16[{rows}, 1]\n"
        f"    %b5 = div(%b3, %b4) : f16[{rows}, {cols}]\n"
        "    save %b5 {omap=(1, -1, -1)}\n"
        "  }\n"
        f"  %3 = get(%2) {{index=0}} : f16[{rows}, {n}]\n"
        "  return %3\n"
        "}\n")


def gated_residual(rows: int = 8, k: int = 4096, n: int = 1536, cols: int = 64,
                   loop: int = 32) -> KernelGraph:
    """A program outside the benchmarks: relu(X·W) ⊙ (X·V) + X·U, three weight streams on
    n / cols blocks (24 on the defaults: a grid far below the SM count, with 24 x 32 units,
    enough for the tuner's stream-K trial)."""
    kt = k // loop
    body = "".join(
        f"    %b{1 + 3 * j} = iter() {{fmap=0, imap=(1, -1, -1), input={j + 1}}} : f16[{kt}, {cols}]\n"
        f"    %b{2 + 3 * j} = matmul(%b0, %b{1 + 3 * j}) : f16[{rows}, {cols}]\n"
        f"    %b{3 + 3 * j} = accum(%b{2 + 3 * j}) {{fold=None, kind='sum'}} : f16[{rows}, {cols}]\n"
        for j in range(3))
    return parse_text(
        "ugraph {\n"
        f"  %0 = input() {{name='X'}} : f16[{rows}, {k}]\n"
        + "".join(f"  %{j} = input() {{name='{w}'}} : f16[{k}, {n}]\n"
                  for j, w in ((1, "W"), (2, "V"), (3, "U")))
        + f"  %4 = kernel(%0, %1, %2, %3) {{forloop={loop}, grid=({n // cols}, 1, 1), threads=128}} {{\n"
        f"    %b0 = iter() {{fmap=1, imap=(-1, -1, -1), input=0}} : f16[{rows}, {kt}]\n"
        + body
        + f"    %b10 = relu(%b3) : f16[{rows}, {cols}]\n"
        f"    %b11 = mul(%b10, %b6) : f16[{rows}, {cols}]\n"
        f"    %b12 = add(%b11, %b9) : f16[{rows}, {cols}]\n"
        "    save %b12 {omap=(1, -1, -1)}\n"
        "  }\n"
        f"  %5 = get(%4) {{index=0}} : f16[{rows}, {n}]\n"
        "  return %5\n"
        "}\n")


def _kernel(g: KernelGraph) -> BlockGraph:
    (la,) = launches(g, 128)
    return la.graph


# ------------------------------------------------------------------ the partition


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 200), st.integers(2, 64), st.data())
def test_the_runs_cover_every_unit_once(tiles: int, forloop: int, data: st.DataObject) -> None:
    units = tiles * forloop
    blocks = data.draw(st.integers(2, units), label="blocks")
    seen = []
    for p in range(blocks):
        segs = segments(p, tiles, forloop, blocks)
        run = sum(n for _, _, n in segs)
        assert run in (units // blocks, -(-units // blocks))
        for tile, it0, n in segs:
            assert it0 >= 0 and n >= 1 and it0 + n <= forloop
            assert n <= longest_segment(tiles, forloop, blocks)
            seen += [tile * forloop + it0 + i for i in range(n)]
            # the printer's first and last block of a grid block hold this block
            first, last = tile_blocks(tile, forloop, units, blocks)
            assert first <= p <= last
            assert p - first < max_parts(tiles, forloop, blocks)
    assert seen == list(range(units))
    for u in range(0, units, max(1, units // 50)):
        p = block_of(u, units, blocks)
        assert run_start(p, units, blocks) <= u < run_start(p + 1, units, blocks)


def test_the_benchmark_partitions() -> None:
    """rmsnorm's 96 x 16 units over 132 blocks: runs of 11 or 12 iterations, at most two
    segments a block and three blocks a grid block."""
    assert max_parts(96, 16, 132) == 3
    assert all(len(segments(p, 96, 16, 132)) <= 2 for p in range(132))
    assert longest_segment(96, 16, 132) == 12


# ------------------------------------------------------------------ schedules and the tuner


def test_stream_k_schedules_are_checked() -> None:
    assert "stream_k" not in Schedule().to_dict()  # (keys of other schedules unchanged)
    assert Schedule(stream_k=132).to_dict()["stream_k"] == 132
    with pytest.raises(GraphError, match="stream_k"):
        Schedule(stream_k=132, split=2)
    with pytest.raises(GraphError, match="stream_k"):
        Schedule(stream_k=-1)
    loop_free = _kernel(matmul_loop_program(16, 32, 16, 1))
    assert not stream_k_ok(loop_free, 4)
    with pytest.raises(GraphError, match="stream-K"):
        emit_graph(matmul_loop_program(16, 32, 16, 1),
                   schedules={loop_free.key: Schedule(stream_k=4)})
    looped = _kernel(matmul_loop_program(16, 32, 16, 4))  # grid 2 x 4 iterations
    assert stream_k_ok(looped, 8) and not stream_k_ok(looped, 9)


def test_the_tuner_proposes_stream_k_where_sms_idle() -> None:
    bg = _kernel(fused_rmsnorm())
    assert stream_k_blocks(bg, 96, 132) == [132]
    best = Schedule(threads=256, gemv=True)
    assert Schedule(threads=256, gemv=True, stream_k=132) in refinements(best, [best], bg)
    # a split winner on 128 blocks (64 x 2, gated_mlp's): stream-K over the unsplit grid
    split = Schedule(threads=256, split=2)
    narrow = _kernel(fused_rmsnorm(n=64 * 64))
    assert any(r.stream_k == 132 and r.split == 1 for r in refinements(split, [split], narrow))
    assert not any(r.stream_k for r in refinements(split, [split], bg))  # (192 blocks)
    # a grid that fills the SMs gets none, nor a short loop
    wide = _kernel(fused_rmsnorm(n=132 * 64))
    assert stream_k_blocks(wide, 132, 132) == []
    assert not any(r.stream_k for r in refinements(best, [best], wide))
    assert stream_k_blocks(_kernel(fused_rmsnorm(loop=4)), 96, 132) == []


def _compiles(g: KernelGraph, sched: Schedule, tmp: Path) -> str:
    bg = _kernel(g)
    src, _, kernels = emit_graph(g, schedules={bg.key: sched})
    assert kernels[0].grid == (sched.stream_k, 1, 1)
    assert compile_cubin(src, "sm_90", cache=tmp)[:4] == b"\x7fELF"
    return src


@pytest.mark.parametrize("blocks", [132, 264])
def test_fused_rmsnorm_stream_k_compiles(blocks: int, tmp_path: Path) -> None:
    g = fused_rmsnorm(rows=16 if blocks == 264 else 2)
    src = _compiles(g, Schedule(threads=256, gemv=True, evict_first=True, stream_k=blocks),
                    tmp_path)
    assert "mf_ticket" in src and "mf_n" in src


@pytest.mark.parametrize("case", MATMUL_LOOP_CASES[:6])
def test_matmul_loop_stream_k_compiles(case: tuple, tmp_path: Path) -> None:
    g = matmul_loop_program(*case)
    units = 2 * (case[4] or 1) * case[3]
    _compiles(g, Schedule(stream_k=min(3, units)), tmp_path)


def _outside_schedules(bg: BlockGraph) -> list[Schedule]:
    """The tuner's stream-K trial for the outside program's kernel, and two more block counts
    (runs shorter than a grid block's loop, and crossing several grid blocks)."""
    tuner = [r for r in refinements(Schedule(), [Schedule()], bg) if r.stream_k]
    assert [r.stream_k for r in tuner] == [132]
    return [*tuner, Schedule(stream_k=7), Schedule(threads=256, stream_k=50)]


def test_outside_program_stream_k_compiles(tmp_path: Path) -> None:
    g = gated_residual()
    for sched in _outside_schedules(_kernel(g)):
        _compiles(g, sched, tmp_path)


# ------------------------------------------------------------------ on the GPU


def _stream_k_cases() -> list[tuple[str, KernelGraph, int]]:
    out = []
    for case in MATMUL_LOOP_CASES[:8]:
        g = matmul_loop_program(*case)
        units = 2 * (case[4] or 1) * case[3]
        out += [(f"matmul{case}", g, p) for p in sorted({2, 3, units - 1, units}) if p >= 2]
    for case in FOLD_LOOP_CASES:
        g = fold_loop_program(*case)
        out += [(f"fold{case}", g, p) for p in (3, 2 * case[2] - 1)]
    return out


@needs_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("label,g,blocks", _stream_k_cases(), ids=lambda v: str(v)[:40])
def test_stream_k_validates(label: str, g: KernelGraph, blocks: int) -> None:
    bg = _kernel(g)
    for base in (Schedule(), Schedule(threads=256), Schedule(mma=False, async_copy=False)):
        cg = compile_graph(g, schedules={bg.key: Schedule(**{**base.to_dict(), "stream_k": blocks})})
        rep = validate(cg, low=0.5, high=1.5, trials=2)
        assert rep.ok, f"{label} P={blocks} {base.short()}: {rep}\n{cg.source}"


@needs_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("rows,blocks", [(2, 132), (16, 132), (16, 264)])
def test_fused_rmsnorm_stream_k_validates_and_repeats(rows: int, blocks: int) -> None:
    g = fused_rmsnorm(rows=rows)
    bg = _kernel(g)
    cg = compile_graph(g, schedules={bg.key: Schedule(threads=256, gemv=True, evict_first=True,
                                                      stream_k=blocks)})
    assert validate(cg, trials=2).ok
    rng = np.random.default_rng(7)
    xs = [rng.uniform(-0.5, 0.5, n.shape).astype(np.float16) for n in g.inputs]
    first = cg(*xs)[0]
    for _ in range(3):
        assert np.array_equal(cg(*xs)[0], first)


@needs_gpu
@pytest.mark.gpu
def test_outside_program_stream_k_validates() -> None:
    g = gated_residual()
    bg = _kernel(g)
    for sched in _outside_schedules(bg):
        rep = validate(compile_graph(g, schedules={bg.key: sched}), trials=2)
        assert rep.ok, f"{sched.short()}: {rep}"


@needs_gpu
@pytest.mark.gpu
@settings(max_examples=10, deadline=None)
@given(block_programs(max_ops=5), st.integers(2, 7))
def test_random_block_programs_stream_k_validate(prog: KernelGraph, blocks: int) -> None:
    fits = [la.graph for la in launches(prog, 128) if stream_k_ok(la.graph, blocks)]
    assume(fits)  # (about a quarter of the drawn programs have a looped kernel it fits)
    assume(defined_on_positive_inputs(prog))
    for bg in fits:
        cg = compile_graph(prog, schedules={bg.key: Schedule(stream_k=blocks)})
        rep = validate(cg, low=0.5, high=1.5, trials=2)
        assert rep.ok, f"{rep}\n{cg.source}"
