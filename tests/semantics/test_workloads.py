"""The benchmark programs build at b=1 and b=8 and the hand-written μGraphs equal them."""

from __future__ import annotations

import numpy as np
import pytest

from mirage_formal import MirageError, workloads
from mirage_formal.semantics import random_inputs, run_reference


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


@pytest.mark.parametrize("name", sorted(workloads.HANDWRITTEN))
@pytest.mark.parametrize("batch", [1, 8])
def test_handwritten_equals_program(name: str, batch: int) -> None:
    prog, hand = workloads.program(name, batch), workloads.handwritten(name, batch)
    for seed in range(3):
        x = random_inputs(prog, seed)
        assert _rel(run_reference(hand, x)[0], run_reference(prog, x)[0]) <= 1e-9


@pytest.mark.parametrize("name", sorted(workloads.PROGRAMS))
def test_programs_shapes(name: str) -> None:
    for b in (1, 8):
        g = workloads.program(name, b)
        (out,) = g.outputs
        assert all(d > 0 for d in out.shape)
    want = {"gqa": (2, 256, 64), "mha": (32, 16, 64), "mqa": (1, 1024, 64), "qknorm_gqa": (2, 256, 64),
            "rmsnorm": (2, 6144), "lora": (16, 4096), "gated_mlp": (8, 4096), "ntrans": (8, 4096)}
    assert workloads.program(name, 1).outputs[0].shape == want[name]


def test_ntrans_matches_formula() -> None:
    g = workloads.program("ntrans", 1, rows=2, h=16)
    x = random_inputs(g, 0)
    H, X, a = x["H"], x["X"], x["alpha"]
    def rms(v: np.ndarray) -> np.ndarray:
        return v / np.sqrt((v * v).mean(-1, keepdims=True))
    np.testing.assert_allclose(run_reference(g, x)[0], rms(X + a * (rms(H) + X)), rtol=1e-12)


def test_unknown_workload() -> None:
    with pytest.raises(MirageError, match="unknown workload 'bert'"):
        workloads.program("bert")
    with pytest.raises(MirageError, match="batch size must be >= 1"):
        workloads.program("gqa", 0)
