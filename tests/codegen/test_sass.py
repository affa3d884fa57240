"""The machine code NVRTC makes of our kernels, read with nvdisasm (no GPU needed).

ptxas 13.0 miscompiled cp.async copies under an L2 cache policy when the shared address was
32 bits: it folded a uniform base into the copy and encoded the policy's 64-bit descriptor in
an odd uniform register that nothing had written (``LDGSTS [R43+UR0], desc[UR1][...]``); the
kernel faulted with CUDA_ERROR_ILLEGAL_INSTRUCTION on an H100 while the same kernel without
the policy ran. ``mf_tile.cuh`` now passes the address as 64 bits. These tests compile the
kernel that faulted and a sample of every schedule the tuner may give the benchmark programs'
kernels with the policy on, and look for a memory descriptor in an odd uniform register (a
64-bit descriptor lives in an aligned pair)."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from mirage_formal import workloads
from mirage_formal.codegen import Schedule, candidate_schedules, compile_graph, launches


def _nvdisasm() -> str | None:
    found = shutil.which("nvdisasm")
    if found:
        return found
    try:
        import nvidia  # type: ignore[import-untyped]
    except ImportError:
        return None
    for root in getattr(nvidia, "__path__", []):
        for p in sorted(Path(root).glob("cu*/bin/nvdisasm")):
            return str(p)
    return None


NVDISASM = _nvdisasm()
pytestmark = pytest.mark.skipif(NVDISASM is None, reason="nvdisasm (nvidia-cuda-nvdisasm) missing")
ODD_DESCRIPTOR = re.compile(r"desc\[UR\d*[13579]\]")


def _odd_descriptors(cubin: bytes, tmp: Path) -> list[str]:
    path = tmp / "k.cubin"
    path.write_bytes(cubin)
    assert NVDISASM is not None
    sass = subprocess.run([NVDISASM, "-c", str(path)], capture_output=True, text=True,
                          check=True).stdout
    assert "LDG" in sass  # the disassembly is there to search
    return [line.strip() for line in sass.splitlines() if ODD_DESCRIPTOR.search(line)]


def test_the_kernel_that_faulted_has_no_odd_descriptor(tmp_path: Path) -> None:
    # the rmsnorm benchmark (b=1) as written, its matmul kernel's schedule on the H100 run
    g = workloads.program("rmsnorm", 1)
    matmul = launches(g, 128)[-1].graph.key
    sched = Schedule(async_stage_bytes=73728, gemv=True, evict_first=True)
    cg = compile_graph(g, load=False, schedules={matmul: sched})
    assert "cp_async16_pol" in cg.source
    assert _odd_descriptors(cg.cubin, tmp_path) == []


SMALL = {"rmsnorm": {"h": 1024, "n": 2048}, "gated_mlp": {"k": 1024, "n": 1024},
         "gqa": {"kv": 1024}, "lora": {}}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_tuner_schedules_with_the_evict_first_policy_have_no_odd_descriptor(
        name: str, tmp_path: Path) -> None:
    g = workloads.program(name, 1, **SMALL[name])
    for la in launches(g, 128):
        cands = candidate_schedules(la.graph)
        # every third candidate, from the first: a sample that covers each kind the tuner
        # makes (block sizes, splits, gemv, cp.async stage rings, register prefetch)
        for s in cands[::3]:
            sched = replace(s, evict_first=True)
            cg = compile_graph(g, load=False, schedules={la.graph.key: sched})
            bad = _odd_descriptors(cg.cubin, tmp_path)
            assert bad == [], f"{name} {la.graph.key[:8]} {sched.short()}: {bad[:2]}"
