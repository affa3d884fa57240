"""The torch.compile backend ``"mirage_formal"`` and ``mf.compile``.

    fast = mf.compile(model, budget_s=90)            # or:
    fast = torch.compile(model, backend="mirage_formal", dynamic=False,
                         options={"budget_s": 90, "cache_dir": "~/.cache/mf"})
    fast(x)                       # same results as model(x)
    fast.regions                  # (mf.compile) what each region became, with reasons

For each graph Dynamo hands over, the backend fuses the largest supported regions
(:mod:`partition`), gives each to :func:`region.compile_region` (cache lookup, else
superoptimize; on a GPU compile, validate, and run as a kernel) and leaves every other call to
torch's eager kernels. Options: ``budget_s`` (search seconds per region), ``max_region_ops``
(registry ops per region, default 6), ``cache_dir``,
``gpu`` (None: use one when present), ``bound``, ``preset``, ``overrides``, ``warn``,
``gpu_top``, ``workers``, ``prefer_faster``, ``capture_softmax``.

Imports torch, ``partition``, ``region`` and ``cache``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.fx

from mirage_formal.errors import MirageError
from mirage_formal.torch_bridge import DEFAULT_BUDGET_S
from mirage_formal.torch_bridge.cache import RegionCache
from mirage_formal.torch_bridge.partition import Boundary, partition
from mirage_formal.torch_bridge.region import Region, RegionReport, SearchSettings, compile_region

BACKEND_NAME = "mirage_formal"


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/mirage_formal/regions`` (``~/.cache`` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mirage_formal" / "regions"


#: options that take True or False only (a string such as "false" would read as true)
_BOOL_OPTIONS = ("warn", "prefer_faster", "capture_softmax")


@dataclass(frozen=True)
class BackendOptions:
    """How the backend searches and where it caches (a frozen config, passed in)."""

    budget_s: float = DEFAULT_BUDGET_S
    cache_dir: str | Path | None = None
    gpu: bool | None = None
    bound: float = 2.0**-64
    preset: str | None = None
    overrides: tuple[tuple[str, Any], ...] = ()
    warn: bool = True
    #: registry ops per region at most (the search completes on a few ops; None: no limit)
    max_region_ops: int | None = 6
    #: accepted μGraphs per region autotuned and timed on the GPU (as many as the benchmark
    #: rows time; the cost model ranks kernels it cannot time only roughly)
    gpu_top: int = 8
    #: processes each region's search runs on (None: this machine's cores less one, at most 16)
    workers: int | None = None
    #: a region whose kernel measures slower than its torch code runs with torch
    prefer_faster: bool = True
    #: capture softmax and scaled_dot_product_attention calls (programs without a row
    #: maximum: logits above ~11 overflow fp16 there; docs/torch.md); False leaves them to torch
    capture_softmax: bool = True

    @staticmethod
    def from_mapping(opts: Mapping[str, Any] | None) -> BackendOptions:
        d = dict(opts or {})
        known = set(BackendOptions.__dataclass_fields__)
        bad = sorted(set(d) - known)
        if bad:
            raise MirageError(
                f"unknown mirage_formal backend option(s) {bad}; known: {sorted(known)}"
            )
        if isinstance(d.get("overrides"), Mapping):
            d["overrides"] = tuple(sorted(d["overrides"].items()))
        if d.get("budget_s") is not None and float(d["budget_s"]) <= 0:
            raise MirageError(f"budget_s={d['budget_s']!r} must be positive")
        w = d.get("workers")
        if w is not None and (isinstance(w, bool) or not isinstance(w, int) or w < 1):
            raise MirageError(f"workers={w!r} must be a positive whole number of processes, or None "
                              "(this machine's cores less one, at most 16)")
        top = d.get("gpu_top", 1)
        if isinstance(top, bool) or not isinstance(top, int) or top < 1:
            raise MirageError(f"gpu_top={top!r} must be a positive whole number of μGraphs to tune")
        for name in _BOOL_OPTIONS:
            if name in d and not isinstance(d[name], bool):
                raise MirageError(f"{name}={d[name]!r} must be True or False")
        if "gpu" in d and d["gpu"] is not None and not isinstance(d["gpu"], bool):
            raise MirageError(f"gpu={d['gpu']!r} must be True, False or None (use one when present)")
        return BackendOptions(**d)

    def settings(self) -> SearchSettings:
        return SearchSettings(
            gpu_top=self.gpu_top,
            workers=self.workers,
            budget_s=self.budget_s,
            bound=self.bound,
            preset=self.preset,
            overrides=self.overrides,
            gpu=self.gpu,
            prefer_faster=self.prefer_faster,
        )


@dataclass
class MirageBackend:
    """A torch.compile backend object; keeps a report of every region it compiled."""

    options: BackendOptions = field(default_factory=BackendOptions)
    regions: list[RegionReport] = field(default_factory=list)
    boundaries: list[Boundary] = field(default_factory=list)
    cache: RegionCache = field(init=False)

    def __post_init__(self) -> None:
        root = self.options.cache_dir
        self.cache = RegionCache(
            Path(root).expanduser() if root is not None else default_cache_dir()
        )

    def __call__(
        self, gm: torch.fx.GraphModule, example_inputs: list[Any], **_: Any
    ) -> Callable[..., Any]:
        from mirage_formal import __version__

        fused, names, bounds = partition(gm, self.options.max_region_ops,
                                         capture_softmax=self.options.capture_softmax)
        self.boundaries += bounds
        if not names:
            return fused.forward
        values = _region_inputs(fused, names, example_inputs)
        base = len(self.regions)
        for i, name in enumerate(names):
            sub = fused.get_submodule(name)
            assert isinstance(sub, torch.fx.GraphModule)
            region = compile_region(
                f"region {base + i}",
                sub,
                values[name],
                self.options.settings(),
                self.cache,
                __version__,
                self.options.warn,
            )
            setattr(fused, name, region)
            self.regions.append(region.report)
        return fused.forward


class _Recorder(torch.nn.Module):
    """Stands in for a region submodule during one eager run, keeping its arguments."""

    def __init__(self, inner: torch.nn.Module, into: dict[str, tuple[Any, ...]], name: str) -> None:
        super().__init__()
        self.inner, self.into, self.name = inner, into, name

    def forward(self, *args: Any) -> Any:
        self.into[self.name] = args
        return self.inner(*args)


def _region_inputs(
    gm: torch.fx.GraphModule, names: list[str], example_inputs: list[Any]
) -> dict[str, tuple[Any, ...]]:
    """Each region's input values on the example inputs (one eager run of the graph)."""
    got: dict[str, tuple[Any, ...]] = {}
    subs = {name: gm.get_submodule(name) for name in names}
    for name, sub in subs.items():
        setattr(gm, name, _Recorder(sub, got, name))
    try:
        with torch.no_grad():
            gm(*example_inputs)
    finally:
        for name, sub in subs.items():
            setattr(gm, name, sub)
    return got


def mirage_formal_backend(
    gm: torch.fx.GraphModule,
    example_inputs: list[Any],
    options: Mapping[str, Any] | None = None,
    **_: Any,
) -> Callable[..., Any]:
    """The registered backend: ``torch.compile(f, backend="mirage_formal", options={...})``."""
    return MirageBackend(BackendOptions.from_mapping(options))(gm, example_inputs)


def register() -> None:
    """Register ``"mirage_formal"`` with torch.compile. An installed package needs no call (its
    ``torch_dynamo_backends`` entry point does it on first use); a source tree on PYTHONPATH
    does. Idempotent. (Not run at import: torch imports this module to load the entry point.)"""
    from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend

    if BACKEND_NAME not in _COMPILER_FNS:
        register_backend(mirage_formal_backend, name=BACKEND_NAME)


class Compiled:
    """What :func:`compile` returns: call it like the original; ``regions`` reports."""

    def __init__(self, fn: Callable[..., Any], backend: MirageBackend) -> None:
        self.backend = backend
        self.compiled = torch.compile(fn, backend=backend, dynamic=False)

    @property
    def regions(self) -> list[RegionReport]:
        return self.backend.regions

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with torch.no_grad():
            return self.compiled(*args, **kwargs)


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
    """``torch.compile(fn, backend="mirage_formal", dynamic=False)`` with these options, as an
    object that also reports its regions. Calls run under ``torch.no_grad()`` (inference).
    ``prefer_faster``: on a GPU, a region whose validated kernel measures slower than its
    torch code on the first call's inputs runs with torch (the report says both times).
    ``capture_softmax=False`` leaves softmax and scaled_dot_product_attention to torch (a
    captured one subtracts no row maximum: docs/torch.md). ``budget_s`` bounds each region's
    superoptimize call (default :data:`DEFAULT_BUDGET_S`), ``workers`` its search processes
    (None: this machine's cores less one, at most 16), ``gpu_top`` how many accepted μGraphs
    its GPU stage tunes."""
    if not callable(fn):
        raise MirageError(f"compile takes a function or nn.Module, not {type(fn).__name__}")
    opts = BackendOptions.from_mapping(
        {
            "budget_s": budget_s,
            "cache_dir": cache_dir,
            "gpu": gpu,
            "bound": bound,
            "preset": preset,
            "overrides": overrides or {},
            "warn": warn,
            "max_region_ops": max_region_ops,
            "prefer_faster": prefer_faster,
            "capture_softmax": capture_softmax,
            "workers": workers,
            "gpu_top": gpu_top,
        }
    )
    return Compiled(fn, MirageBackend(opts))


__all__ = [
    "BACKEND_NAME",
    "BackendOptions",
    "Compiled",
    "MirageBackend",
    "Region",
    "compile",
    "default_cache_dir",
    "mirage_formal_backend",
    "register",
]
