"""benchmarks/merge_gpu_rows.py: a row replaces the table's row of the same (workload, b) and
carries its run's environment; a file measured on another GPU than the table's rows is refused,
and the table file is left as it was."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "merge_gpu_rows.py"


def _run_file(path: Path, gpu: str, workload: str, b: int, ratio: float) -> Path:
    row = {"workload": workload, "b": b, "validated_ok": True, "ours_graph_us": 10.0,
           "best_baseline_us": 10.0 * ratio, "best_baseline_over_ours": ratio}
    path.write_text(json.dumps({"env": {"gpu": gpu, "date": "2026-11-28T10:00+00:00"}, "rows": [row]}))
    return path


def _merge(table: Path, *files: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, files), "--latest", str(table)],
                          capture_output=True, text=True, check=False)


def test_rows_of_one_gpu_merge_and_another_gpus_are_refused(tmp_path: Path) -> None:
    table = tmp_path / "table.json"
    table.write_text("[]")
    first = _merge(table, _run_file(tmp_path / "a.json", "GPU A", "rmsnorm", 8, 1.25))
    assert first.returncode == 0, first.stderr
    again = _merge(table, _run_file(tmp_path / "b.json", "GPU A", "rmsnorm", 8, 1.5))
    assert again.returncode == 0, again.stderr
    rows = json.loads(table.read_text())
    assert [(r["workload"], r["b"], r["best_baseline_over_ours"], r["run_env"]["gpu"]) for r in rows] == \
        [("rmsnorm", 8, 1.5, "GPU A")]
    before = table.read_text()
    other = _merge(table, _run_file(tmp_path / "c.json", "GPU B", "gqa", 1, 2.0))
    assert other.returncode != 0
    assert "GPU B" in other.stderr and "--latest" in other.stderr and "Traceback" not in other.stderr
    assert table.read_text() == before
