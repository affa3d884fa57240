"""A kernel that breaks the CUDA context (a sticky error: illegal instruction, trap, illegal
address) must not end the GPU work of the process: the autotuner runs each new variant first
in a child process (codegen/probe.py), which takes the fault; the parent drops that variant
and goes on with the rest."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mirage_formal import workloads
from mirage_formal.codegen import gpu_available
from mirage_formal.codegen.runtime import STICKY_ERRORS, DriverError


@pytest.mark.parametrize("code", sorted(STICKY_ERRORS))
def test_sticky_driver_errors_are_recognised(code: str) -> None:
    assert DriverError("cuCtxSynchronize failed", code=code).sticky


@pytest.mark.parametrize("code", ["", "CUDA_ERROR_OUT_OF_MEMORY", "CUDA_ERROR_INVALID_VALUE"])
def test_recoverable_driver_errors_are_not_sticky(code: str) -> None:
    assert not DriverError("cuMemAlloc failed", code=code).sticky


@pytest.mark.skipif(gpu_available(), reason="the no-GPU answer")
def test_the_fault_probe_child_answers_without_a_gpu() -> None:
    """The child process starts, receives a compiled graph and answers (here: no GPU)."""
    from mirage_formal.codegen import compile_graph
    from mirage_formal.codegen.probe import FaultProbe

    cg = compile_graph(workloads.program("rmsnorm", 1, h=256, n=512), load=False)
    probe = FaultProbe(timeout_s=120)
    try:
        err = probe.check(cg)
    finally:
        probe.close()
    assert err is not None and ("GPU" in err or "CUDA driver" in err), err
    assert probe.faults == 0


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a GPU")
def test_the_fault_probe_takes_a_trapping_kernel_and_this_process_keeps_its_gpu() -> None:
    from mirage_formal.codegen import compile_graph
    from mirage_formal.codegen.nvrtc import compile_cubin
    from mirage_formal.codegen.probe import FaultProbe
    from mirage_formal.codegen.validate import validate

    good = compile_graph(workloads.program("rmsnorm", 1, h=256, n=512), load=False)
    src = good.source
    name = good.kernels[0].name
    # the same graph whose first kernel traps: rename the real one, add a trapping one
    bad_src = src.replace(f" {name}(", f" {name}_real(", 1) + (
        f'extern "C" __global__ void {name}() {{ asm volatile("trap;"); }}\n')
    bad = replace(good, source=bad_src, cubin=compile_cubin(bad_src, good.arch))
    probe = FaultProbe(timeout_s=120)
    try:
        assert probe.check(good) is None
        err = probe.check(bad)
        assert err is not None and "CUDA_ERROR" in err, err
        assert probe.faults == 1
        assert probe.check(good) is None  # a new child took over
    finally:
        probe.close()
    assert validate(good).ok  # and this process never ran the trap
