"""A kernel that breaks the CUDA context (a sticky error: illegal instruction, trap, illegal
address) must not end the GPU work of the process: the runtime resets the context and
compiled graphs load again into the new one (the autotuner does this when a schedule's kernel
faults, so the other schedules and candidates still run).

The GPU part runs in a child process: the reset frees every allocation of the context, and
other tests of the session may hold some (or PyTorch's)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mirage_formal.codegen import gpu_available
from mirage_formal.codegen.runtime import STICKY_ERRORS, DriverError

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("code", sorted(STICKY_ERRORS))
def test_sticky_driver_errors_are_recognised(code: str) -> None:
    assert DriverError("cuCtxSynchronize failed", code=code).sticky


@pytest.mark.parametrize("code", ["", "CUDA_ERROR_OUT_OF_MEMORY", "CUDA_ERROR_INVALID_VALUE"])
def test_recoverable_driver_errors_are_not_sticky(code: str) -> None:
    assert not DriverError("cuMemAlloc failed", code=code).sticky


CHILD = textwrap.dedent('''
    import numpy as np
    from mirage_formal import workloads
    from mirage_formal.codegen import compile_graph
    from mirage_formal.codegen.nvrtc import compile_cubin
    from mirage_formal.codegen.runtime import DriverError, recover_runtime, runtime
    from mirage_formal.codegen.validate import validate

    g = workloads.program("rmsnorm", 1, h=256, n=512)
    cg = compile_graph(g)
    assert validate(cg).ok
    rt = runtime()
    cub = compile_cubin('extern "C" __global__ void mf_trap() { asm volatile("trap;"); }', rt.arch)
    f = rt.function(rt.load(cub), "mf_trap", 0)
    rt.launch(f, (1, 1, 1), 32, 0, 0, [])
    try:
        rt.sync()
        raise SystemExit("the trap did not fault")
    except DriverError as e:
        assert e.sticky, e.code
    try:  # the context is lost: the compiled graph cannot run in it
        validate(cg)
        raise SystemExit("a lost context still ran a kernel")
    except DriverError:
        pass
    fresh = recover_runtime()
    assert fresh is not rt and rt.lost
    rep = validate(cg)  # loads the module again into the new context
    assert rep.ok, rep
    print("recovered", rep)
''')


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a GPU")
def test_a_trapping_kernel_resets_the_context_and_compiled_graphs_run_again() -> None:
    res = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "recovered" in res.stdout
