"""benchmarks/same_kernels.py: a recorded Mirage μGraph measurement is matched to the CUDA the
current code emits for the same μGraph and schedule (CPU only; Mirage's checkpoints come from
../shared)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import same_kernels
from gpu_bench import find_checkpoints


def _log(tmp: Path, lines: list[dict]) -> Path:
    d = tmp / "logs"
    d.mkdir()
    (d / "run.log").write_text("# tune_bench\n" + "\n".join(json.dumps(x) for x in lines) + "\nlast line\n")
    return d


def test_hashes_follow_the_emitted_source(tmp_path: Path) -> None:
    """Two schedules of one Mirage μGraph hash differently, a repeated line once; comparing
    a hash file with itself finds no difference and with an edited one names the pair."""
    if find_checkpoints() is None:
        pytest.skip("../shared/mirage_checkpoints not present")
    rows = [{"workload": "rmsnorm", "b": 1, "candidate": "mirage#0", "schedule": s}
            for s in ("", "*:threads=256", "*:threads=256", "*:threads=512")]
    logdir = _log(tmp_path, rows)
    assert len(same_kernels.recorded(logdir)) == 4
    out = tmp_path / "h.json"
    same_kernels.hash_sources(logdir, out)
    hashes = json.loads(out.read_text())
    # (an empty schedule is not a recorded choice; the repeated line is hashed once)
    assert len(hashes) == 2 and len(set(hashes.values())) == 2
    assert same_kernels.compare(out, out) == 0
    edited = tmp_path / "e.json"
    edited.write_text(json.dumps({k: "0" * 64 for k in hashes}))
    assert same_kernels.compare(out, edited) == 1
