"""The ``mirage_formal`` torch.compile backend on a machine without a GPU: it partitions,
superoptimizes each region (tiny budgets and spaces), caches the verified μGraph, runs the
regions with torch (one warning line each) and matches eager; a second run — a fresh backend
object, or a second process — finds every region in the cache and searches nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

import mirage_formal as mf  # noqa: E402
from mirage_formal.errors import MirageError  # noqa: E402
from mirage_formal.torch_bridge import region as region_mod  # noqa: E402
from mirage_formal.torch_bridge.region import FallbackWarning  # noqa: E402

from .small_model import TINY_SPACE, args, f  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def compiled(cache: Path, **kw: Any) -> Any:
    return mf.compile(f, budget_s=2, cache_dir=cache, overrides=TINY_SPACE, **kw)


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, list[str]]:
    cache = tmp_path_factory.mktemp("regions")
    fast = compiled(cache)
    with pytest.warns(FallbackWarning) as rec:
        out = fast(*args())
    torch.testing.assert_close(out, f(*args()), rtol=0, atol=0)  # the regions ran eagerly
    return cache, fast, [str(w.message) for w in rec]


def test_runs_without_gpu_and_matches_eager(first_run: tuple[Path, Any, list[str]]) -> None:
    _, fast, warned = first_run
    regions = fast.regions
    assert [r.ops for r in regions] == [9, 2]  # torch calls (the RMSNorm pattern is 5)
    assert [[n.op for n in r.program.nodes if n.op != "input"] for r in regions] == [
        ["rms_norm", "matmul", "silu", "matmul", "mul"],
        ["matmul", "sum"],
    ]
    assert all(r.runs_on == "torch" and r.source in ("search", "program") for r in regions)
    for r in regions:  # (the search's account is kept on the report: units, GPU stage, notes)
        assert r.search["budget_s"] == 2 and "/" in r.search["units"]
        assert r.search["gpu_measured_us"] == [] and isinstance(r.search["codegen_notes"], list)
    assert len(warned) == 2 and all("\n" not in w and "no GPU" in w for w in warned)
    assert [b.op for b in fast.backend.boundaries] == ["Tensor.view"]
    # a second call reuses the compiled graph: no new regions, no warnings
    fast(*args())
    assert len(fast.regions) == 2


def test_cached_results_are_verified_mugraphs(first_run: tuple[Path, Any, list[str]]) -> None:
    cache, fast, _ = first_run
    files = sorted(cache.glob("*.json"))
    assert len(files) == 2 and fast.backend.cache.stats == {"hits": 0, "misses": 2, "writes": 2}
    for r in fast.regions:
        assert r.ugraph is not None and r.program is not None
        v = mf.verify(r.program, r.ugraph, bound=2.0**-32, seed=3)
        assert v.accepted, v


def test_fresh_backend_hits_the_cache(
    first_run: tuple[Path, Any, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    cache, first, _ = first_run

    def no_search(*a: Any, **k: Any) -> Any:
        raise AssertionError("the search ran although the cache holds the region")

    monkeypatch.setattr(region_mod, "_search", no_search)
    torch._dynamo.reset()
    fast = compiled(cache, warn=False)
    torch.testing.assert_close(fast(*args()), f(*args()), rtol=0, atol=0)
    assert fast.backend.cache.stats == {"hits": 2, "misses": 0, "writes": 0}
    assert [r.source for r in fast.regions] == ["cache", "cache"]
    assert [r.ugraph.key for r in fast.regions] == [r.ugraph.key for r in first.regions]


def test_second_process_only_looks_up(first_run: tuple[Path, Any, list[str]]) -> None:
    cache, _, _ = first_run
    script = textwrap.dedent(f"""
        import json, sys, warnings
        sys.path.insert(0, {str(ROOT / "tests" / "torch_bridge")!r})
        import torch, mirage_formal as mf
        from mirage_formal.torch_bridge import region
        region._search = None   # any search would crash
        from small_model import TINY_SPACE, args, f
        fast = mf.compile(f, budget_s=2, cache_dir={str(cache)!r}, overrides=TINY_SPACE, warn=False)
        out = fast(*args())
        assert torch.equal(out, f(*args()))
        print(json.dumps({{"stats": fast.backend.cache.stats, "sources": [r.source for r in fast.regions]}}))
    """)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got == {"stats": {"hits": 2, "misses": 0, "writes": 0}, "sources": ["cache", "cache"]}


def test_registered_backend_name_and_options(tmp_path: Path) -> None:
    from mirage_formal.torch_bridge import register

    assert "mirage_formal" in torch._dynamo.list_backends()  # the package's entry point
    register()  # idempotent, for source trees on PYTHONPATH
    torch._dynamo.reset()
    g = torch.compile(
        lambda x, w: torch.softmax(x @ w, -1),
        backend="mirage_formal",
        dynamic=False,
        options={"budget_s": 1, "cache_dir": str(tmp_path), "warn": False, "overrides": TINY_SPACE},
    )
    x, w = torch.randn(4, 8), torch.randn(8, 16)
    torch.testing.assert_close(g(x, w), torch.softmax(x @ w, -1))
    assert len(list(tmp_path.glob("*.json"))) == 1


def test_dynamic_shapes_leave_everything_to_torch(tmp_path: Path) -> None:
    torch._dynamo.reset()
    g = torch.compile(
        lambda x, w: F.silu(x @ w),
        backend="mirage_formal",
        dynamic=True,
        options={"budget_s": 1, "cache_dir": str(tmp_path)},
    )
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    torch.testing.assert_close(g(x, w), F.silu(x @ w))
    assert not list(tmp_path.glob("*.json"))  # symbolic shapes: no region


def test_bad_options_are_refused() -> None:
    from mirage_formal.torch_bridge.backend import BackendOptions

    with pytest.raises(MirageError, match="unknown mirage_formal backend option"):
        BackendOptions.from_mapping({"budget": 3})
    for name in ("capture_softmax", "prefer_faster", "warn", "gpu"):
        with pytest.raises(MirageError, match=f"{name}='false' must be True"):
            BackendOptions.from_mapping({name: "false"})
    assert BackendOptions.from_mapping({"capture_softmax": False, "gpu": None}).capture_softmax is False
    with pytest.raises(MirageError, match="positive"):
        mf.compile(f, budget_s=0)


def test_workers_option_reaches_the_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """``workers`` is checked, defaults to this machine's cores less one (1 to 16), and is what
    the region's superoptimize call gets."""
    from mirage_formal import optimize
    from mirage_formal.torch_bridge.backend import BackendOptions

    for bad in (0, -2, True, 1.5, "4"):
        with pytest.raises(MirageError, match=r"workers=.* must be a positive whole number"):
            BackendOptions.from_mapping({"workers": bad})
    assert BackendOptions.from_mapping({"workers": 3}).settings().workers == 3
    for bad in (0, True, 2.5):
        with pytest.raises(MirageError, match=r"gpu_top=.* must be a positive whole number"):
            BackendOptions.from_mapping({"gpu_top": bad})
    opts = mf.compile(f, workers=2, gpu_top=3).backend.options
    assert (opts.workers, opts.gpu_top, opts.budget_s) == (2, 3, 90.0)
    for cores, want in ((None, 1), (1, 1), (2, 1), (8, 7), (128, region_mod.MAX_DEFAULT_WORKERS)):
        monkeypatch.setattr(region_mod.os, "cpu_count", lambda c=cores: c)
        assert region_mod.default_workers() == want

    seen: list[dict[str, Any]] = []

    class Stop(Exception):
        pass

    def spy(program: Any, preset: Any, **kw: Any) -> Any:
        seen.append(kw)
        raise Stop

    monkeypatch.setattr(optimize, "superoptimize", spy)
    monkeypatch.setattr(region_mod.os, "cpu_count", lambda: 6)
    g = mf.Graph()
    g.output(g.exp(g.input((16, 32), "f16", "X")))
    for settings, want in ((BackendOptions(workers=3).settings(), 3),
                           (BackendOptions().settings(), 5)):
        with pytest.raises(Stop):
            region_mod._search(g.build(), settings, gpu=False)
        assert seen[-1]["workers"] == want and seen[-1]["gpu_top"] == 8
