"""benchmarks/tuning_kinds.py on a made-up tuning log: kinds are classed by the kernel that
has them (a register-chain kernel or another), a kind that alone reaches the best has a
regret above 1, one the others match has none."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from graph_strategies import attention_loop_program

from mirage_formal.codegen import Schedule, launches
from mirage_formal.ir.serialize import ugraph_to_json

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import tuning_kinds


def test_kinds_classed_by_kernel_with_regrets() -> None:
    prog = attention_loop_program(64, 64, 64, 64, 4)
    (la,) = launches(prog, 128)
    doc = ugraph_to_json(prog)

    def trial(s: Schedule, us: float) -> dict[str, object]:
        return {"graph": prog.key, "ugraph": doc, "valid": True, "us": us,
                "schedules": {la.graph.key: s.to_dict()}}

    rs = [trial(Schedule(), 10.0), trial(Schedule(threads=256), 9.0),
          trial(replace(Schedule(), chain_rows=2), 6.0),       # alone at the best
          trial(replace(Schedule(), async_stages=2), 9.0),    # matched by a plain trial
          trial(replace(Schedule(), warp_m=1, warp_n=1), 12.0)]
    rows = {(r["class"], r["kind"]): r for r in tuning_kinds.table({("log", prog.key): rs}, 0.02)}
    assert set(c for c, _ in rows) == {"chain"}
    assert rows["chain", "chain_rows=2"]["wins"] == 1
    assert rows["chain", "chain_rows=2"]["max_regret"] == 9.0 / 6.0
    assert rows["chain", "async_stages=2"]["max_regret"] == 1.0
    assert rows["chain", "plain"]["wins"] == 0  # threads and split are the grid, not a kind
