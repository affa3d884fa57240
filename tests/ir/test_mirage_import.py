"""Every μGraph Mirage published (../shared/mirage_checkpoints) imports and equals its
reference program in float64; malformed Mirage files are rejected with the reason."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from mirage_formal import FormatError, workloads
from mirage_formal.ir.mirage import import_mugraph, load_mirage
from mirage_formal.semantics import random_inputs, run_reference

CKPT = Path(__file__).resolve().parents[3] / "shared" / "mirage_checkpoints"
FILES = {"rmsnorm_bs1.json": ("rmsnorm", ["X", "W"], 18),
         "gated_mlp.json": ("gated_mlp", ["X", "W1", "W2"], 32),
         "gqa_bs1.json": ("gqa", ["Q", "K", "V"], 28)}

pytestmark = pytest.mark.skipif(not CKPT.is_dir(), reason="../shared/mirage_checkpoints not present")


@pytest.mark.parametrize("fname", sorted(FILES))
def test_checkpoints_import_and_match(fname: str) -> None:
    prog_name, names, count = FILES[fname]
    graphs = load_mirage(CKPT / fname, names)
    assert len(graphs) == count
    prog = workloads.program(prog_name, 1)
    for seed in (0, 1):
        x = random_inputs(prog, seed)
        ref = run_reference(prog, x)[0]
        for g in graphs:
            out = run_reference(g, x)[0]
            assert float(np.max(np.abs(out - ref)) / np.max(np.abs(ref))) <= 1e-9


def _first(fname: str) -> list[dict]:  # type: ignore[type-arg]
    return json.loads((CKPT / fname).read_text())[0]  # type: ignore[no-any-return]


def test_unknown_operator_rejected() -> None:
    g = copy.deepcopy(_first("rmsnorm_bs1.json"))
    g[2]["bgraph"]["operators"][3]["op_type"] = "tb_fancy_op"
    with pytest.raises(FormatError, match=r"unsupported Mirage operator 'tb_fancy_op'"):
        import_mugraph(g)


def test_inconsistent_dims_rejected() -> None:
    g = copy.deepcopy(_first("rmsnorm_bs1.json"))
    g[2]["bgraph"]["operators"][1]["output_tensors"][0]["dim"][1] = 48
    with pytest.raises(FormatError, match=r"declares shape \[128, 48\] but our semantics give \[128, 24\]"):
        import_mugraph(g)


def test_dangling_guid_and_bad_json(tmp_path: Path) -> None:
    g = copy.deepcopy(_first("gated_mlp.json"))
    g[-1]["input_tensors"][0]["guid"] = 1
    with pytest.raises(FormatError, match="refers to tensor guid 1, which no earlier operator produces"):
        import_mugraph(g)
    p = tmp_path / "bad.json"
    p.write_text("[{not json")
    with pytest.raises(FormatError, match="not valid JSON"):
        load_mirage(p)
