"""benchmarks/cute_pieces_probe.py: our kernels with CUTLASS/CuTe's MMA, ldmatrix and TMA
atoms in place of mf_tile.cuh's helpers compile through NVRTC for sm_90 into the same machine
code (no GPU: NVRTC and nvdisasm), which is why the emitter keeps its own helpers
(docs/codegen.md, "CUTLASS/CuTe")."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import cute_pieces_probe as probe

import mirage_formal as mf
from mirage_formal import workloads
from mirage_formal.codegen import Schedule, candidate_schedules, compile_graph, launches

CUTLASS, CCCL = probe.default_includes()
#: the fused rmsnorm b=8 kernel on the TMA ring, as the table's winner is scheduled
TMA = Schedule(threads=128, warp_n=2, evict_first=True, min_blocks=1, dense_rows=True,
               mma_kpair=True, reg_epilogue=True, fold_fragments=True, tma_ring=True,
               async_stage_bytes=150 * 1024)


def _source() -> str:
    g = workloads.rmsnorm_fused(8, col_tile=64, k_tile=128)
    return compile_graph(g, schedules={la.graph.key: TMA for la in launches(g, 128)},
                         arch="sm_90", load=False).source


def test_every_piece_is_called_through_the_shim() -> None:
    """Each helper a variant names is called through ``mf_cute`` (none left as ``mf::``), the
    others stay ours, and the shim comes right after our header."""
    src = _source()
    for pieces in probe.VARIANTS.values():
        out, counts = probe.with_cute(src, pieces)
        assert counts["mma_16816"] and counts["ldsm_x4"] and counts["tma_load_2d"]
        for p in pieces:
            assert f"mf::{p}(" not in out and f"mf::{p}<" not in out
            assert (f"mf_cute::{p}(" in out or f"mf_cute::{p}<" in out) == bool(counts[p])
        assert "mf::grid_dep_wait();" in out  # (not a piece: stays ours)
        assert out.index("namespace mf_cute") > out.index('#include "mf_tile.cuh"')


@pytest.mark.skipif(CUTLASS is None or CCCL is None,
                    reason="nvidia-cutlass / nvidia-cuda-cccl not installed")
def test_cute_atoms_compile_to_the_same_machine_code() -> None:
    """Through CuTe's atoms the kernel's SASS is instruction for instruction ours; with
    CUTLASS's mbarriers too it compiles, its waits retrying through NANOSLEEP where ours
    spin."""
    assert CUTLASS is not None and CCCL is not None
    src = _source()
    includes = [CUTLASS, CCCL, str(Path(CCCL) / "cccl")]
    ours, _ = probe.nvrtc_compile(src, "sm_90", [])
    atoms, _ = probe.nvrtc_compile(probe.with_cute(src, probe.VARIANTS["cute atoms"])[0],
                                   "sm_90", includes)
    so, sa = probe.sass_instructions(ours), probe.sass_instructions(atoms)
    if so is None or sa is None:
        pytest.skip("nvdisasm missing")
    assert so and sa == so
    bars, _ = probe.nvrtc_compile(
        probe.with_cute(src, probe.VARIANTS["cute atoms + cutlass barriers"])[0], "sm_90", includes)
    sb = probe.sass_instructions(bars)
    assert sb is not None and any("NANOSLEEP" in i for i in sb)
    assert not any("NANOSLEEP" in i for i in so)


@pytest.mark.skipif(CUTLASS is None or CCCL is None,
                    reason="nvidia-cutlass / nvidia-cuda-cccl not installed")
def test_cute_gmma_atoms_compile_to_the_same_machine_code() -> None:
    """A warpgroup MMA kernel (Schedule.wgmma, sm_90a) through CuTe's GMMA atoms and
    warpgroup fence / commit / wait: the same HGMMA and warpgroup instructions as ours, and
    no fewer instructions in all (CuTe's atom takes its accumulate flag in a register, so
    each instruction's predicate is computed at run time; ours is an immediate)."""
    assert CUTLASS is not None and CCCL is not None
    from mirage_formal.codegen.nvrtc import feature_arch

    g = mf.Graph()
    x = g.input((128, 512), "f16", "X")
    w = g.input((512, 256), "f16", "W")
    kern = g.kernel([x, w], grid=(2, 2, 1), forloop=4)
    a = kern.iter(x, imap=(-1, 0, -1), fmap=1)
    b = kern.iter(w, imap=(1, -1, -1), fmap=0)
    kern.output(kern.accum(kern.op("matmul", a, b), kind="sum"), omap=(1, 0, -1))
    (y,) = kern.build()
    g.output(y)
    prog = g.build()
    (la,) = launches(prog, 128)
    sched = next(s for s in candidate_schedules(la.graph) if s.wgmma)
    src = compile_graph(prog, schedules={la.graph.key: sched}, arch="sm_90", load=False).source
    arch = feature_arch(src, "sm_90")
    assert arch == "sm_90a"
    out, counts = probe.with_cute(src, probe.VARIANTS["cute atoms"])
    assert counts["wgmma_m64nNk16"] == 1 and counts["wgmma_fence"] == 1
    includes = [CUTLASS, CCCL, str(Path(CCCL) / "cccl")]
    ours, _ = probe.nvrtc_compile(src, arch, [])
    atoms, _ = probe.nvrtc_compile(out, arch, includes)
    so, sa = probe.sass_instructions(ours), probe.sass_instructions(atoms)
    if so is None or sa is None:
        pytest.skip("nvdisasm missing")
    def key_ops(sass: list[str]) -> list[str]:
        return [i for i in sass if i.startswith(("HGMMA", "WARPGROUP"))]

    assert key_ops(so) and key_ops(sa) == key_ops(so) and len(so) <= len(sa)
