"""The backend on a GPU (skipped elsewhere): a region runs as its kernel only when the kernel
measured at most the region's torch time on the first call's inputs, and a region whose
kernel is slower stays on torch with both times in its warning and report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import mirage_formal as mf  # noqa: E402
from mirage_formal.codegen import gpu_available  # noqa: E402
from mirage_formal.torch_bridge import region as region_mod  # noqa: E402
from mirage_formal.torch_bridge.region import FallbackWarning  # noqa: E402

from .small_model import TINY_SPACE, args, f  # noqa: E402

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not gpu_available() or not torch.cuda.is_available(),
                                 reason="needs a GPU")]


def _cuda_args() -> tuple[Any, ...]:
    return tuple(a.to("cuda", torch.float16) for a in args())


def test_a_region_runs_as_its_kernel_only_when_that_is_faster(tmp_path: Path) -> None:
    fast = mf.compile(f, budget_s=10, cache_dir=tmp_path, overrides=TINY_SPACE)
    xs = _cuda_args()
    out = fast(*xs)
    torch.testing.assert_close(out.float(), f(*xs).float(), rtol=2e-2, atol=2e-2)
    timed = [r for r in fast.regions if r.kernel_us is not None]
    assert timed, [r.line() for r in fast.regions]
    for r in timed:
        assert r.torch_us is not None and r.kernel_us > 0 and r.torch_us > 0
        assert (r.runs_on == "kernel") == (r.kernel_us <= r.torch_us), r.line()


def test_a_slower_kernel_leaves_its_region_to_torch(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def stand_in(fn: Any, reps: int = 50) -> float:
        fn()  # (both callables still run)
        calls.append(1)
        return 20.0 if len(calls) % 2 else 10.0  # the kernel first, then torch

    monkeypatch.setattr(region_mod, "time_like_benchmarks", stand_in)
    slow = mf.compile(f, budget_s=10, cache_dir=tmp_path, overrides=TINY_SPACE)
    xs = _cuda_args()
    with pytest.warns(FallbackWarning, match="20.0 µs against torch's 10.0"):
        out = slow(*xs)
    torch.testing.assert_close(out, f(*xs), rtol=0, atol=0)  # every region ran with torch
    assert all(r.runs_on == "torch" for r in slow.regions)
    assert any(r.kernel_us == 20.0 and r.torch_us == 10.0 for r in slow.regions)
