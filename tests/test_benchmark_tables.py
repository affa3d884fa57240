"""The benchmark scripts' op tables cover the registry: a program written from any
kernel-level op can be timed beside PyTorch (``benchmarks/gpu_bench.torch_ops``, used by
``gpu_optimize.py`` for every row, outside programs included)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from gpu_bench import torch_ops

from mirage_formal.ir.ops import KERNEL, REGISTRY


def test_torch_ops_cover_every_kernel_level_op() -> None:
    ops = {name for name, d in REGISTRY.items() if KERNEL in d.levels}
    missing = ops - set(torch_ops(object()))
    assert not missing, f"benchmarks/gpu_bench.torch_ops lacks {sorted(missing)}"
