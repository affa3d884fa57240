"""benchmarks/revalidate_failures.py (CPU only): it collects exactly the records a tuning log
marks as failing validation, once each, and rebuilds each one's μGraph and schedules so that
the current emitter compiles it for sm_90."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import revalidate_failures as rf
from graph_strategies import gemm_program

from mirage_formal.codegen import compile_graph, launches
from mirage_formal.codegen.schedule import Schedule
from mirage_formal.ir.serialize import ugraph_to_json


def _record(error: str, threads: int) -> dict[str, object]:
    g = gemm_program(64, 64, 64, 2)
    (la,) = launches(g, 128)
    return {"ugraph": ugraph_to_json(g), "error": error, "us": None,
            "schedules": {la.graph.key: Schedule(threads=threads).to_dict()}}


def test_failures_are_collected_once_and_rebuilt(tmp_path: Path) -> None:
    fail = "validation: FAIL (max-relative errors [1.0e+00], tolerances [0.02])"
    recs = [_record(fail, 128), _record(fail, 128), _record(fail, 256),
            _record("", 128), _record("DriverError: cuLaunchKernel failed", 128)]
    log = tmp_path / "tuning_measurements_x.jsonl.gz"
    with gzip.open(log, "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in recs)
    found = rf.failures([log])
    assert len(found) == 2 and all(r["log"] == log.name for r in found)
    for rec in found:
        g, sched = rf.rebuild(rec)
        (k,) = compile_graph(g, schedules=sched, arch="sm_90", load=False).kernels
        assert k.schedule.threads in (128, 256)
