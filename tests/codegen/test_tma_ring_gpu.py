"""On a GPU (skipped elsewhere): kernels whose ring a producer warp fills with tensor-map
copies (Schedule.tma_ring) compute their program's function, and a compiled graph called on
new input arrays encodes tensor maps for their addresses (no stale map reads old inputs)."""

from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np
import pytest
from graph_strategies import (
    elementwise_loop_program,
    fold_loop_program,
    gated_loop_program,
    matmul_loop_program,
    tma_ring_cases,
)

from mirage_formal.codegen import (
    Schedule,
    candidate_schedules,
    compile_graph,
    gpu_available,
    launches,
)
from mirage_formal.codegen.runtime import DeviceArray
from mirage_formal.codegen.validate import validate
from mirage_formal.ir.graph import KernelGraph
from mirage_formal.semantics.reference import run_reference

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not gpu_available(), reason="needs a GPU")]


@functools.cache
def _cases() -> list[tuple[str, KernelGraph, Schedule]]:
    return tma_ring_cases()


@pytest.mark.parametrize("i", range(len(tma_ring_cases())))
def test_tma_ring_kernels_validate(i: int) -> None:
    """Each case against the float64 program on fresh random inputs (positive ones where the
    program divides by a fold)."""
    name, prog, sched = _cases()[i]
    cg = compile_graph(prog, opts=sched)
    assert any(k.tensor_maps for k in cg.kernels)
    low, high = (0.5, 1.5) if name.startswith(("fold", "rmsnorm")) else (-0.5, 0.5)
    rep = validate(cg, low=low, high=high, trials=2)
    assert rep.ok, f"{name} {sched.short()}: {rep}"


def test_new_input_arrays_get_their_own_tensor_maps() -> None:
    """The same compiled graph on two different pairs of device arrays: each result is its own
    inputs' product (a map encoded for the first pair's addresses would read them again)."""
    prog = matmul_loop_program(16, 64, 64, 8)
    cg = compile_graph(prog, opts=Schedule(tma_ring=True, dense_rows=True, min_blocks=1))
    rng = np.random.default_rng(11)
    for _ in range(2):
        xs = [rng.uniform(-0.5, 0.5, n.shape).astype(np.float16) for n in prog.inputs]
        dev = []
        for n, x in zip(prog.inputs, xs, strict=True):
            d = DeviceArray(n.shape, n.dtype)
            d.copy_from(x)
            dev.append(d)
        (out,) = cg(*dev)
        want = run_reference(prog, [x.astype(np.float64) for x in xs])[0]
        got = out.numpy().astype(np.float64)
        assert np.max(np.abs(got - want)) <= 2e-2 * max(1.0, float(np.max(np.abs(want))))


#: programs whose loop a first-round TMA candidate streams: plain, an op of two loop tiles as
#: the product's A ((X + Y)·W, with 12 and 2 rows), A through an op, a fold beside, a gated pair
FIRST_ROUND_PROGRAMS = {
    "matmul": lambda: matmul_loop_program(16, 128, 64, 8),
    "(X + Y)·W 12 rows": lambda: elementwise_loop_program(12, 128, 64, 8, "add"),
    "(X * Y)·W 2 rows": lambda: elementwise_loop_program(2, 256, 64, 5, "mul"),
    "A through neg": lambda: matmul_loop_program(16, 128, 64, 6, pre_a=True),
    "fold rms": lambda: fold_loop_program(16, 128, 4, "rms", 1, n=64),
    "gated": lambda: gated_loop_program(16, 64, 64, 6),
}


@pytest.mark.parametrize("name", sorted(FIRST_ROUND_PROGRAMS))
def test_first_round_tma_candidates_validate(name: str) -> None:
    """The tuner's first-round TMA ring candidates (half the warps, register outputs; where
    the product's A is an add, sub or mul of loop tiles, also with that op on the A
    fragments) of each program compute its function."""
    prog = FIRST_ROUND_PROGRAMS[name]()
    (la,) = launches(prog, 128)
    scheds = [c for c in candidate_schedules(la.graph) if c.tma_ring]
    assert len(scheds) == (2 if "Y)·W" in name else 1)  # (neg: no half2 op, no first-round a_op)
    for sched in scheds:
        cg = compile_graph(prog, opts=sched)
        assert any(k.tensor_maps for k in cg.kernels)
        low, high = (0.5, 1.5) if name.startswith("fold") else (-0.5, 0.5)
        rep = validate(cg, low=low, high=high, trials=2)
        assert rep.ok, f"{name} {sched.short()}: {rep}"


def test_the_split_tma_candidate_of_a_small_grid_validates() -> None:
    """The first round's TMA ring at the split that fills a wave (each block copies its own
    iterations, the global combine sums the partials) computes the function, with a fold
    beside the product too."""
    for prog, (low, high) in ((matmul_loop_program(16, 64, 64, 16), (-0.5, 0.5)),
                              (fold_loop_program(16, 128, 8, "rms", 1, n=64), (0.5, 1.5))):
        (la,) = launches(prog, 128)
        split = [s for s in candidate_schedules(la.graph, sm_count=8) if s.tma_ring and s.split > 1]
        assert split
        for sched in split:
            cg = compile_graph(prog, opts=sched)
            assert any(k.tensor_maps for k in cg.kernels)
            rep = validate(cg, low=low, high=high, trials=2)
            assert rep.ok, f"{sched.short()}: {rep}"


@pytest.mark.parametrize("split", [2, 4])
def test_a_clustered_tma_split_validates_and_equals_the_global_combine(split: int) -> None:
    """The TMA ring with its split combined through the cluster (the producer warp passing
    the cluster barriers) computes the function, with a fold beside the product too, and
    equals the global combine bit for bit (both sum the partials in split order)."""
    for prog, (low, high) in ((matmul_loop_program(16, 64, 64, 16), (-0.5, 0.5)),
                              (fold_loop_program(16, 128, 8, "rms", 1, n=64), (0.5, 1.5))):
        base = Schedule(tma_ring=True, dense_rows=True, min_blocks=1, split=split)
        clustered = compile_graph(prog, opts=replace(base, cluster_combine=True))
        plain = compile_graph(prog, opts=base)
        assert all(k.tensor_maps for k in (*clustered.kernels, *plain.kernels))
        assert "__cluster_dims__" in clustered.source and "__cluster_dims__" not in plain.source
        rep = validate(clustered, low=low, high=high, trials=2)
        assert rep.ok, f"split {split}: {rep}"
        rng = np.random.default_rng(3)
        xs = [rng.uniform(low, high, n.shape).astype(np.float16) for n in prog.inputs]
        assert all(np.array_equal(a, b) for a, b in zip(plain(*xs), clustered(*xs), strict=True))
