"""From PyTorch to verified kernels: capture a function or module as a program
(:func:`from_torch`), and a torch.compile backend that swaps superoptimized kernels into the
largest regions the registry supports (:func:`compile`, ``backend="mirage_formal"``).

torch is an optional dependency (``pip install mirage-formal[torch]``): this package imports
it only when one of these functions is called, so ``import mirage_formal`` never loads torch.
Modules: :mod:`torch_ops` (torch's spellings), :mod:`translate` (FX graph -> program),
:mod:`capture` (``from_torch``), :mod:`partition` (regions), :mod:`cache` (on-disk results),
:mod:`region` (search, validation, kernel or torch), :mod:`backend` (the backend).

Imports the submodules lazily; they import torch, ``ir`` and (``region``) ``optimize``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from mirage_formal.torch_bridge.backend import Compiled
    from mirage_formal.torch_bridge.capture import Captured

#: a region's default ``superoptimize`` budget, seconds: the benchmark rows'. At 40 s a region
#: the ViT block's MLP region got kernels of 41.0 µs (its GPU stage had ~20 s and never reached
#: the warpgroup sizes), at 90 s the row's 24.2 (H200, s52 c2, c3). The region cache keeps the
#: result, so a model pays it once per distinct region
DEFAULT_BUDGET_S = 90.0


def _need_torch(what: str) -> None:
    try:
        import torch  # noqa: F401
    except ImportError as e:
        from mirage_formal.errors import MirageError

        raise MirageError(f"{what} needs PyTorch: pip install 'mirage-formal[torch]'") from e


def from_torch(fn: Callable[..., Any], *example_inputs: Any) -> Captured:
    """Capture ``fn`` (a function or ``torch.nn.Module``) on ``example_inputs`` as a program;
    see :func:`mirage_formal.torch_bridge.capture.from_torch`."""
    _need_torch("from_torch")
    from mirage_formal.torch_bridge.capture import from_torch as impl

    return impl(fn, *example_inputs)


def compile(
    fn: Callable[..., Any],
    *,
    budget_s: float = DEFAULT_BUDGET_S,
    cache_dir: str | Path | None = None,
    gpu: bool | None = None,
    bound: float = 2.0**-64,
    preset: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    warn: bool = True,
    max_region_ops: int | None = 6,
    prefer_faster: bool = True,
    capture_softmax: bool = True,
    workers: int | None = None,
    gpu_top: int = 8,
) -> Compiled:
    """``torch.compile(fn, backend="mirage_formal")`` with these options; see
    :func:`mirage_formal.torch_bridge.backend.compile`."""
    _need_torch("compile")
    from mirage_formal.torch_bridge.backend import compile as impl

    return impl(
        fn,
        budget_s=budget_s,
        cache_dir=cache_dir,
        gpu=gpu,
        bound=bound,
        preset=preset,
        overrides=overrides,
        warn=warn,
        max_region_ops=max_region_ops,
        prefer_faster=prefer_faster,
        capture_softmax=capture_softmax,
        workers=workers,
        gpu_top=gpu_top,
    )


def register() -> None:
    """Register ``backend="mirage_formal"`` with torch.compile; needed only when the package is
    used from a source tree (an installed one registers through its entry point)."""
    _need_torch("register")
    from mirage_formal.torch_bridge.backend import register as impl

    impl()


__all__ = ["compile", "from_torch", "register"]
