"""bf16 programs: their products run on tensor cores like fp16 ones (``codegen.float16``), and
the host rounds, uploads and reads back bf16 values (``runtime.host_values``).

- on any machine: the host's rounding to bf16 is round-to-nearest-even (against an
  independent rounding through ``math.frexp``); only operands of one 16-bit float type meet
  on the tensor cores; the benchmark programs and their handwritten μGraphs in bf16 compile
  for sm_90 under every first-round schedule, with bf16 MMAs and no fp16 instruction, and so
  do the warpgroup-MMA, TMA ring and fragment-fold kernels;
- on the GPU: bf16 arrays round-trip exactly; those kernels validate against the float64
  program on fresh random inputs (the registry's ops in bf16 are in ``test_codegen_gpu``).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from graph_strategies import SMALL_WORKLOADS, as_dtype_program, gated_program, gemm_program
from hypothesis import given, settings
from hypothesis import strategies as st

from mirage_formal import workloads
from mirage_formal.codegen import candidate_schedules, compile_graph, gpu_available, launches
from mirage_formal.codegen.float16 import FLOAT16
from mirage_formal.codegen.runtime import DeviceArray, bf16_bits, bf16_values, host_values
from mirage_formal.codegen.schedule import Schedule
from mirage_formal.codegen.validate import validate
from mirage_formal.ir.dtypes import DType, tensor_core_type
from mirage_formal.ir.graph import KernelGraph


def _rounded(x: float) -> float:
    """``x`` rounded to bf16 (8 significant bits, ties to even) without looking at bits."""
    if x == 0.0 or not math.isfinite(x):
        return x
    m, e = math.frexp(x)  # x = m 2^e, 0.5 <= |m| < 1
    return math.ldexp(round(m * 256.0), e - 8)  # (Python's round: half to even)


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=-2.0 ** 120, max_value=2.0 ** 120, allow_nan=False, width=32)
       .filter(lambda v: v == 0.0 or abs(v) >= 2.0 ** -120))
def test_host_rounding_to_bf16_is_to_nearest_even(x: float) -> None:
    got = float(bf16_values(bf16_bits(np.array([x], np.float32)))[0])
    assert got == _rounded(x)


def test_host_rounding_keeps_specials_and_overflows_to_infinity() -> None:
    a = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 3.4e38], np.float32)
    r = bf16_values(bf16_bits(a))
    assert np.isnan(r[0]) and r[1] == np.inf and r[2] == -np.inf and r[3] == 0.0
    assert np.signbit(r[4]) and r[5] == np.inf
    # ties: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 (odd last bit): down to 1
    assert bf16_values(bf16_bits(np.array([1 + 2.0 ** -8], np.float32)))[0] == 1.0
    assert host_values(np.array([1 + 3 * 2.0 ** -8]), DType.BF16)[0] == 1 + 2.0 ** -6


def test_only_operands_of_one_16_bit_type_meet_on_tensor_cores() -> None:
    assert tensor_core_type(DType.BF16, DType.BF16) is DType.BF16
    assert tensor_core_type(DType.F16, DType.F16) is DType.F16
    assert tensor_core_type(DType.F16, DType.BF16) is None
    assert tensor_core_type(DType.F32, DType.F32) is None
    assert set(FLOAT16) == {DType.F16, DType.BF16}


def _programs() -> dict[str, KernelGraph]:
    """The benchmark programs (small) and their handwritten μGraphs, in bf16."""
    out = {f"{name} program": as_dtype_program(workloads.program(name, 1, **kw), "bf16")
           for name, kw in SMALL_WORKLOADS.items()}
    for name in workloads.HANDWRITTEN:
        out[f"{name} handwritten"] = as_dtype_program(workloads.handwritten(name, 1), "bf16")
    return out


PROGRAMS = _programs()


def _first_round(prog: KernelGraph) -> list[dict[str, Schedule]]:
    """Each first-round schedule of each kernel (the others at their first), as mappings."""
    blocks = [la.graph for la in launches(prog, 128)]
    firsts = {bg.key: candidate_schedules(bg)[0] for bg in blocks}
    out = []
    for bg in blocks:
        for s in candidate_schedules(bg):
            out.append({**firsts, bg.key: s})
    return out


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_bf16_programs_compile_with_bf16_tensor_core_products(name: str) -> None:
    prog = PROGRAMS[name]
    mma = 0
    for sched in _first_round(prog):
        cg = compile_graph(prog, schedules=sched, arch="sm_90", load=False)
        for k in cg.kernels:
            assert "__half" not in k.source and "mma_16816(" not in k.source, k.source
            mma += k.source.count("mf::mma_16816_bf(") + k.source.count(", true>(")
    # (ntrans has no product)
    assert mma > 0 or "ntrans" in name


def _wgmma_kernels() -> dict[str, KernelGraph]:
    return {"gemm 128x64x128": gemm_program(128, 64, 128, 4, 2, 2, dtype="bf16"),
            "gemm 64x128x256 gelu": gemm_program(64, 128, 256, 3, 2, 1, "gelu", dtype="bf16"),
            "gated": gated_program(dtype="bf16")}


def _ring_schedules(prog: KernelGraph) -> list[dict[str, Schedule]]:
    """The program's wgmma candidates, and its TMA ring ones without wgmma."""
    (la,) = launches(prog, 128)
    scheds = [s for s in candidate_schedules(la.graph) if s.tma_ring]
    assert any(s.wgmma for s in scheds)
    return [{la.graph.key: s} for s in scheds]


@pytest.mark.parametrize("name", sorted(_wgmma_kernels()))
def test_bf16_warpgroup_and_ring_kernels_compile(name: str) -> None:
    prog = _wgmma_kernels()[name]
    for sched in _ring_schedules(prog):
        (k,) = compile_graph(prog, schedules=sched, arch="sm_90", load=False).kernels
        assert "__half" not in k.source
        assert ", true>(" in k.source or "mf::mma_16816_bf(" in k.source


def _fused_rmsnorm() -> tuple[KernelGraph, dict[str, Schedule]]:
    """rmsnorm's fused kernel in bf16 with its sum of squares taken from the A fragments."""
    prog = as_dtype_program(workloads.rmsnorm_fused(1, h=1024, n=512, col_tile=64, k_tile=128), "bf16")
    (la,) = launches(prog, 128)
    sched = Schedule(threads=128, warp_n=2, dense_rows=True, mma_kpair=True, reg_epilogue=True,
                     fold_fragments=True, tma_ring=True, evict_first=True)
    return prog, {la.graph.key: sched}


def test_a_bf16_fragment_fold_squares_bf16_fragments() -> None:
    prog, sched = _fused_rmsnorm()
    (k,) = compile_graph(prog, schedules=sched, arch="sm_90", load=False).kernels
    assert "mf::bf2_sq(" in k.source and "__nv_bfloat162" in k.source
    # on the tensor cores (Schedule.fold_mma): the bf16 product of X by Xᵀ
    mma = {key: replace(s, fold_mma=True) for key, s in sched.items()}
    (k,) = compile_graph(prog, schedules=mma, arch="sm_90", load=False).kernels
    assert "mf::bf2_sq(" not in k.source and "mf::mma_16816_bf(((k0 >> 4) & 1) ? fn" in k.source


def test_superoptimize_takes_a_bf16_program_to_bf16_kernels() -> None:
    """The whole CPU path on a bf16 program: search, verification, float64 re-check, and the
    best μGraph's kernels compiled for sm_90 with bf16 tensor-core products."""
    import mirage_formal as mf

    g = mf.Graph()
    x = g.input((2, 256), "bf16", "X")
    w = g.input((256, 512), "bf16", "W")
    g.output(g.matmul(g.rms_norm(x), w))
    res = mf.superoptimize(g.build(), budget_s=120, gpu=False)
    assert res.accepted and res.best is not None
    assert all(n.dtype is DType.BF16 for n in res.best.inputs)
    cg = compile_graph(res.best, arch="sm_90", load=False)
    assert "mf::mma_16816_bf(" in cg.source and "__half" not in cg.source


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a GPU")
def test_bf16_arrays_round_trip() -> None:
    rng = np.random.default_rng(3)
    a = host_values(rng.uniform(-3, 3, size=(7, 33)), DType.BF16)
    d = DeviceArray(a.shape, DType.BF16)
    d.copy_from(a)
    assert np.array_equal(d.numpy(), a)
    d.fill(1.5)
    assert np.all(d.numpy() == 1.5)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a GPU")
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_bf16_programs_validate(name: str) -> None:
    prog = PROGRAMS[name]
    for sched in _first_round(prog)[:4]:
        rep = validate(compile_graph(prog, schedules=sched), trials=2)
        assert rep.ok, f"{name}: {rep}"


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a GPU")
@pytest.mark.parametrize("name", sorted(_wgmma_kernels()))
def test_bf16_warpgroup_and_ring_kernels_validate(name: str) -> None:
    prog = _wgmma_kernels()[name]
    for sched in _ring_schedules(prog):
        rep = validate(compile_graph(prog, schedules=sched), low=-0.5, high=0.5, trials=2)
        assert rep.ok, f"{name} {next(iter(sched.values())).short()}: {rep}"


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a GPU")
@pytest.mark.parametrize("fold_mma", [False, True])
def test_a_bf16_fragment_fold_validates(fold_mma: bool) -> None:
    prog, sched = _fused_rmsnorm()
    sched = {key: replace(s, fold_mma=fold_mma) for key, s in sched.items()}
    rep = validate(compile_graph(prog, schedules=sched), trials=2)
    assert rep.ok, str(rep)
