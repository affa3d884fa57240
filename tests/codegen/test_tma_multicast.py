"""Pairs of blocks that copy their shared ring tile once (Schedule.tma_multicast).

- on any machine: the layout takes the grid axis of even extent whose left-out tiles hold the
  most bytes, and nothing where no axis qualifies or the loop is split; the kernel runs as a
  cluster of two along that axis, each block's producer copies half of the shared tile's
  boxes into both blocks (multicast), every stage waits for both blocks' consumers, and
  producer and consumers pass the same cluster barriers; it compiles for sm_90a; the tuner
  proposes it as a second-round trial of a TMA ring winner (wgmma or not) where the shared
  bytes reach ``MULTICAST_MIN_SHARE``, and measures it only on sm_90;
- on the GPU: every TMA ring case the layout pairs, and the wgmma kernels of 512-row
  products, validate against the float64 program and equal the unpaired kernel bit for bit.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest
from graph_strategies import gated_program, gemm_program, matmul_loop_program, tma_ring_cases

from mirage_formal.codegen import candidate_schedules, compile_graph, gpu_available, launches
from mirage_formal.codegen.autotune import runs_here
from mirage_formal.codegen.layout import KernelLayout
from mirage_formal.codegen.nvrtc import MULTICAST_MARK, feature_arch
from mirage_formal.codegen.schedule import Schedule
from mirage_formal.codegen.tuning_rules import MULTICAST_MIN_SHARE, multicast_share, refinements
from mirage_formal.codegen.validate import validate
from mirage_formal.ir.graph import BlockGraph, KernelGraph

PAIRED = Schedule(tma_ring=True, dense_rows=True, min_blocks=1, tma_multicast=True)


def _block(prog: KernelGraph) -> BlockGraph:
    (la,) = launches(prog, 128)
    return la.graph


def _layout(bg: BlockGraph, sched: Schedule) -> KernelLayout:
    return KernelLayout(bg, "k", 227 * 1024, sched)


def _paired_cases() -> list[tuple[str, KernelGraph, Schedule]]:
    """The TMA ring cases the layout pairs once asked to (most: grid 2 over W's columns, X's
    tile the same for both blocks)."""
    out = []
    for name, prog, sched in tma_ring_cases():
        paired = replace(sched, tma_multicast=True)
        kernels = [la.graph for la in launches(prog, 128)]
        if any(_layout(bg, paired).mcast_axis is not None for bg in kernels):
            out.append((name, prog, paired))
    return out


def test_the_layout_pairs_along_the_axis_with_the_most_shared_bytes() -> None:
    bg = _block(gemm_program(64, 128, 128, 8, gm=4, gn=2))  # grid (2 column tiles, 4 row tiles)
    lay = _layout(bg, replace(PAIRED, threads=128, wgmma=True))
    # X's 64 x 128 tile is left out by axis x (the column tiles), W's 128 x 128 by axis y
    assert lay.mcast_axis == 1 and {n.attr("input") for n in lay.mcast} == {1}
    assert _layout(bg, replace(PAIRED, split=2)).mcast_axis is None
    assert _layout(bg, replace(PAIRED, tma_multicast=False)).mcast_axis is None
    odd = _block(gemm_program(64, 128, 128, 8, gm=3, gn=3))
    assert _layout(odd, PAIRED).mcast_axis is None
    assert multicast_share(odd) == 0.0
    assert multicast_share(bg) == pytest.approx(128 * 128 / (64 * 128 + 128 * 128))


def test_a_paired_kernel_prints_the_pair_protocol_and_compiles() -> None:
    prog = gemm_program(64, 128, 256, 8, gm=4, gn=2)
    bg = _block(prog)
    sched = replace(next(s for s in candidate_schedules(bg) if s.wgmma), tma_multicast=True)
    assert sched.split == 1
    (k,) = compile_graph(prog, schedules={bg.key: sched}, arch="sm_90", load=False).kernels
    src = k.source
    assert "__cluster_dims__(1, 2, 1)" in src and "blockIdx.y & 1u" in src
    producer, consumers = src.split("    return;\n  }\n", 1)
    # W's 128 x 256 tile: 4 boxes, two copied by each block into both
    rank0, rank1 = producer.split("        } else {\n")
    assert rank0.count(MULTICAST_MARK) == 2 and rank1.count(MULTICAST_MARK) == 2
    assert producer.count("mf::tma_load_2d<") == 2  # (X's own two boxes)
    warps = (sched.threads or 128) // 32
    assert f"mf::mbar_init(&mf_empty[s], {2 * warps});" in src
    assert "mf::mbar_wait(&mf_empty[s]" in producer
    assert consumers.count("mf::mbar_arrive_cluster(") == 2 and "mf::mbar_arrive(" not in consumers
    # one cluster barrier after the barriers' setup (every thread), one after each loop
    assert src.count("mf::cluster_sync();") == 3
    assert k.tensor_maps and feature_arch(src, "sm_90") == "sm_90a"
    assert feature_arch(src, "sm_100") == "sm_100"


def test_the_tuner_proposes_it_where_enough_is_shared_and_measures_it_only_on_sm_90() -> None:
    bg = _block(gemm_program(64, 128, 128, 8, gm=4, gn=2))
    assert not any(s.tma_multicast for s in candidate_schedules(bg))  # (second round only)
    ring = replace(PAIRED, tma_multicast=False, threads=128)
    assert replace(ring, tma_multicast=True) in refinements(ring, [ring], bg)
    wg = next(s for s in candidate_schedules(bg) if s.wgmma)
    assert replace(wg, tma_multicast=True) in refinements(wg, [wg], bg)
    both = [wg, replace(wg, tma_multicast=True), replace(ring, tma_multicast=True)]
    assert runs_here(both, "sm_90") == both and runs_here(both, "sm_100") == []
    # rmsnorm's fused kernel: a 2-row X beside the weight stream shares too little
    skinny = _block(matmul_loop_program(2, 256, 64, 8))
    assert multicast_share(skinny) < MULTICAST_MIN_SHARE
    assert not any(r.tma_multicast for r in refinements(ring, [ring], skinny))
    assert not any(s.tma_multicast for s in candidate_schedules(skinny))


def test_every_paired_ring_case_compiles() -> None:
    cases = _paired_cases()
    assert len(cases) >= 10
    for name, prog, sched in cases:
        cg = compile_graph(prog, opts=sched, arch="sm_90", load=False)
        assert re.search(r"__cluster_dims__\((2, 1|1, 2), 1\)", cg.source), name


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a GPU")
@pytest.mark.parametrize("i", range(len(_paired_cases())))
def test_paired_ring_cases_validate_and_equal_the_unpaired_kernels(i: int) -> None:
    name, prog, sched = _paired_cases()[i]
    paired = compile_graph(prog, opts=sched)
    assert MULTICAST_MARK in paired.source
    low, high = (0.5, 1.5) if name.startswith(("fold", "rmsnorm")) else (-0.5, 0.5)
    rep = validate(paired, low=low, high=high, trials=2)
    assert rep.ok, f"{name}: {rep}"
    plain = compile_graph(prog, opts=replace(sched, tma_multicast=False))
    rng = np.random.default_rng(7)
    xs = [rng.uniform(low, high, n.shape).astype(np.float16) for n in prog.inputs]
    assert all(np.array_equal(a, b) for a, b in zip(plain(*xs), paired(*xs), strict=True)), name


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a GPU")
@pytest.mark.parametrize("prog", [gemm_program(64, 128, 128, 8, gm=4, gn=2),
                                  gemm_program(128, 64, 256, 6, gm=2, gn=2, epilogue="gelu"),
                                  gated_program(gm=4, gn=2)],
                         ids=["64x128", "128x256 gelu", "gated"])
def test_paired_wgmma_kernels_validate(prog: KernelGraph) -> None:
    bg = _block(prog)
    scheds = [replace(s, tma_multicast=True) for s in candidate_schedules(bg) if s.wgmma]
    assert scheds
    for sched in scheds:
        cg = compile_graph(prog, schedules={bg.key: sched})
        rep = validate(cg, low=-0.5, high=0.5, trials=2)
        assert rep.ok, f"{sched.short()}: {rep}"
