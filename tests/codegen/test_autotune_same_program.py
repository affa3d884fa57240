"""The autotuner measures each compiled program once (``autotune.tune``, on the CPU: the GPU's
runtime, validation and timing replaced by stand-ins, the kernels really emitted and compiled
for sm_90): a schedule whose fields leave the kernels as an earlier schedule left them takes
that trial's verdict and time, is not validated, timed or logged again, and never replaces
the earlier schedule as the winner."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from graph_strategies import matmul_loop_program

from mirage_formal.codegen import autotune, launches
from mirage_formal.codegen.compiled import CompiledGraph
from mirage_formal.codegen.schedule import Schedule


def test_a_schedule_that_leaves_the_kernels_unchanged_is_not_measured_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a loop-free kernel: no cp.async ring, so one barrier per iteration changes nothing
    prog = matmul_loop_program(16, 64, 32, 1)
    (la,) = launches(prog, 128)
    plain, same, other = Schedule(), Schedule(one_barrier=True), Schedule(threads=256)
    assert autotune.emit_graph(prog, schedules={la.graph.key: same})[0] == \
        autotune.emit_graph(prog, schedules={la.graph.key: plain})[0]
    assert autotune.emit_graph(prog, schedules={la.graph.key: other})[0] != \
        autotune.emit_graph(prog, schedules={la.graph.key: plain})[0]

    fake_rt = SimpleNamespace(arch="sm_90", driver_version="fake", name="stand-in GPU")
    monkeypatch.setattr("mirage_formal.codegen.runtime.runtime", lambda: fake_rt)
    monkeypatch.setattr(autotune, "nvrtc_version", lambda: "13.0")
    monkeypatch.setattr(autotune, "candidate_schedules", lambda bg, sms: [plain, same, other])
    monkeypatch.setattr(autotune, "refinements", lambda *a, **k: [])
    monkeypatch.setattr("mirage_formal.codegen.probe.probe_enabled", lambda: False)
    monkeypatch.setattr(CompiledGraph, "load", lambda self: None)
    validated: list[str] = []

    def validate(cg: CompiledGraph, reference: Any, **kw: Any) -> Any:
        validated.append(cg.source)
        return SimpleNamespace(ok=True)

    monkeypatch.setattr(autotune, "validate", validate)
    monkeypatch.setattr(autotune, "device_inputs", lambda cg, seed: [])
    # the stand-in times: 10 µs for the plain program, 8 for the 256-thread one
    monkeypatch.setattr(autotune, "time_like_baselines",
                        lambda cg, seed=None, inputs=None: 8.0 if "256" in cg.source.split("{")[0] else 10.0)
    cache = autotune.TuningCache(tmp_path / "tuning")
    tuned = autotune.tune(prog, prog, sm_count=132, jobs=1, cache=cache,
                          cubin_cache=str(tmp_path / "cubins"))
    assert tuned is not None
    got = {next(iter(t.schedules.values())): t for t in tuned.trials}
    assert set(got) == {plain, same, other}
    assert got[same].valid and got[same].us == got[plain].us == 10.0
    assert len(validated) == 2 and len(set(validated)) == 2  # two programs, each validated once
    logged = [json.loads(line) for line in (tmp_path / "tuning" / "measurements.jsonl").read_text().splitlines()]
    assert len(logged) == 2
    assert tuned.us == 8.0 and next(iter(tuned.schedules.values())) == other
