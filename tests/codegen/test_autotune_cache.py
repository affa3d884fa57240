"""The autotuner's schedule cache (CPU): an entry is used only for the same kernel graph,
architecture, GPU and toolchain, and only while the emitter prints the same source for it; a
tampered or stale entry is rejected (with a warning), never used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mirage_formal import workloads
from mirage_formal.codegen import Schedule, launches
from mirage_formal.codegen.autotune import Toolchain, TuningCache

TC = Toolchain(arch="sm_90", nvrtc="13.0", driver="13.0", gpu="test")


def _graph_and_schedules() -> tuple[object, dict[str, Schedule]]:
    g = workloads.handwritten("rmsnorm", 1)
    return g, {la.graph.key: Schedule(threads=256, split=4) for la in launches(g, 128)}


def test_entry_round_trips(tmp_path: Path) -> None:
    g, sched = _graph_and_schedules()
    cache = TuningCache(tmp_path)
    assert cache.lookup(g, TC) is None  # type: ignore[arg-type]
    cache.store(g, TC, sched, 12.5)  # type: ignore[arg-type]
    assert cache.lookup(g, TC) == sched  # type: ignore[arg-type]


@pytest.mark.parametrize("other", [
    Toolchain(arch="sm_100", nvrtc="13.0", driver="13.0", gpu="test"),
    Toolchain(arch="sm_90", nvrtc="13.0", driver="13.0", gpu="another GPU of the same arch"),
    Toolchain(arch="sm_90", nvrtc="13.1", driver="13.0", gpu="test"),
    Toolchain(arch="sm_90", nvrtc="13.0", driver="13.1", gpu="test"),
    Toolchain(arch="sm_90", nvrtc="13.0", driver="13.0", gpu="test", package="9.9.9"),
])
def test_other_arch_or_toolchain_misses(tmp_path: Path, other: Toolchain) -> None:
    g, sched = _graph_and_schedules()
    cache = TuningCache(tmp_path)
    cache.store(g, TC, sched, 12.5)  # type: ignore[arg-type]
    assert cache.lookup(g, other) is None  # type: ignore[arg-type]


def test_changed_kernel_source_is_rejected(tmp_path: Path) -> None:
    """An emitter change (simulated: the recorded source hash differs) rejects the entry."""
    g, sched = _graph_and_schedules()
    cache = TuningCache(tmp_path)
    cache.store(g, TC, sched, 12.5)  # type: ignore[arg-type]
    (entry,) = tmp_path.glob("*.json")
    e = json.loads(entry.read_text())
    key = next(iter(e["source_sha256"]))
    e["source_sha256"][key] = "0" * 64
    body = {k: e[k] for k in sorted(e) if k != "checksum"}
    import hashlib

    e["checksum"] = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    entry.write_text(json.dumps(e))
    with pytest.warns(UserWarning, match="different source"):
        assert cache.lookup(g, TC) is None  # type: ignore[arg-type]


@pytest.mark.parametrize("damage", ["garbage", "schedule", "truncate"])
def test_damaged_entry_is_rejected(tmp_path: Path, damage: str) -> None:
    g, sched = _graph_and_schedules()
    cache = TuningCache(tmp_path)
    cache.store(g, TC, sched, 12.5)  # type: ignore[arg-type]
    (entry,) = tmp_path.glob("*.json")
    text = entry.read_text()
    if damage == "garbage":
        entry.write_bytes(b"\x00\xff not json")
    elif damage == "truncate":
        entry.write_text(text[: len(text) // 2])
    else:  # a schedule edited by hand: checksum no longer matches
        e = json.loads(text)
        next(iter(e["schedules"].values()))["split"] = 2
        entry.write_text(json.dumps(e))
    with pytest.warns(UserWarning, match="rejected"):
        assert cache.lookup(g, TC) is None  # type: ignore[arg-type]
