"""The region cache (no torch needed): keys separate programs, architectures, versions and
settings; a hit returns the stored μGraph; corrupt or ill-fitting files are misses."""

from __future__ import annotations

import json
from pathlib import Path

from mirage_formal import workloads
from mirage_formal.torch_bridge.cache import RegionCache


def test_keys_separate_what_must_differ() -> None:
    p1 = workloads.program("rmsnorm", 1, rows=2, h=64, n=64)
    p8 = workloads.program("rmsnorm", 8, rows=2, h=64, n=64)
    k = RegionCache.key(p1, "sm_90", "0.1.0", {"bound": 1e-9})
    assert k == RegionCache.key(p1, "sm_90", "0.1.0", {"bound": 1e-9})
    others = [
        RegionCache.key(p8, "sm_90", "0.1.0", {"bound": 1e-9}),
        RegionCache.key(p1, "cpu", "0.1.0", {"bound": 1e-9}),
        RegionCache.key(p1, "sm_90", "0.2.0", {"bound": 1e-9}),
        RegionCache.key(p1, "sm_90", "0.1.0", {"bound": 1e-6}),
    ]
    assert len({k, *others}) == 5


def test_hit_miss_and_corrupt_files(tmp_path: Path) -> None:
    prog = workloads.program("rmsnorm", 1, rows=2, h=64, n=64)
    fused = workloads.handwritten("rmsnorm", 1, rows=2, h=64, n=64, col_tile=16, k_tile=16)
    cache = RegionCache(tmp_path)
    key = cache.key(prog, "cpu", "0.1.0", {})
    assert cache.get(key, prog) is None
    cache.put(key, fused, {"budget_s": 5.0})
    hit = RegionCache(tmp_path).get(key, prog)
    assert hit is not None and hit.graph.key == fused.key and hit.budget_s == 5.0
    other = workloads.program("rmsnorm", 1, rows=2, h=64, n=32)  # does not fit its μGraph
    assert cache.get(key, other) is None
    path = cache.path(key)
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "key": "0" * 64}))  # written for another key
    assert cache.get(key, prog) is None
    path.write_text("{ not json")
    assert cache.get(key, prog) is None
    assert cache.stats == {"hits": 0, "misses": 4, "writes": 1}
