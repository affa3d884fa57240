"""``mirage-formal verify``: verdict per μGraph, --json, and exit codes 0 / 1 / 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mirage_formal import workloads as W
from mirage_formal.cli import main
from mirage_formal.ir.serialize import dump_ugraphs
from mirage_formal.verify.examples import qknorm_fused

SIZES = ["--size", "kv=512", "--size", "q=32"]
HW = dict(kv=512, q=32, splits=2, row_blocks=2, kv_tile=64, combine_rows=16)
MIRAGE_CKPT = Path("/work/shared/mirage_checkpoints/gqa_bs1.json")


def _wrong_gqa() -> object:
    from mirage_formal.ir.builder import Graph

    ref = W.program("gqa", 1, kv=512, q=32)
    g = Graph()
    Q, K, V = (g.input(n.shape, n.dtype, n.attr("name")) for n in ref.inputs)
    g.output(g.matmul(g.exp(g.matmul(Q, K)), V))  # no softmax denominator
    return g.build()


def test_all_accepted_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "c.json"
    dump_ugraphs([W.handwritten("gqa", 1, **HW), W.program("gqa", 1, kv=512, q=32)], f)
    assert main(["verify", "gqa", str(f), *SIZES, "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert out.count("ACCEPTED") == 2 and "2/2 accepted" in out


def test_any_rejected_exits_1_and_json_lists_verdicts(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "c.json"
    dump_ugraphs([W.handwritten("gqa", 1, **HW), _wrong_gqa()], f)  # type: ignore[list-item]
    assert main(["verify", "gqa", str(f), *SIZES, "--json"]) == 1
    verdicts = json.loads(capsys.readouterr().out)
    assert [v["accepted"] for v in verdicts] == [True, False]
    assert verdicts[1]["status"] == "rejected" and verdicts[1]["first_difference"]["output"] == 0


def test_program_from_a_file_and_qknorm(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prog, cands = tmp_path / "p.json", tmp_path / "c.json"
    dump_ugraphs([W.program("qknorm_gqa", 1, q=16, d=4, kv=32)], prog)
    dump_ugraphs([qknorm_fused(), qknorm_fused(wrong=True)], cands)
    assert main(["verify", str(prog), str(cands), "--seed", "1"]) == 1
    out = capsys.readouterr().out
    assert "[0] ACCEPTED" in out and "[1] REJECTED" in out


@pytest.mark.skipif(not MIRAGE_CKPT.exists(), reason="needs ../shared/mirage_checkpoints")
def test_mirage_format_candidates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = tmp_path / "one.json"
    one.write_text(json.dumps(json.loads(MIRAGE_CKPT.read_text())[:1]))
    assert main(["verify", "gqa", str(one), "--batch", "1", "--no-float"]) == 0
    assert "1/1 accepted" in capsys.readouterr().out


def test_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["verify", "gqa", str(bad)]) == 2
    assert "bad.json" in capsys.readouterr().err
    assert main(["verify", "no_such_workload", str(bad)]) == 2
    assert "neither a workload" in capsys.readouterr().err
    assert main(["verify", "gqa", str(tmp_path / "missing.json")]) == 2
    capsys.readouterr()
    unknown = tmp_path / "unknown.json"
    t = {"data_type": 921, "dim": [2, 256, 64, 0], "num_dims": 3, "guid": 1, "layout": 0}
    unknown.write_text(json.dumps([[
        {"op_type": "kn_input_op", "input_tensors": [], "output_tensors": [t], "input_strides": []},
        {"op_type": "kn_frobnicate_op", "input_tensors": [t], "output_tensors": [{**t, "guid": 2}]},
    ]]))
    assert main(["verify", "gqa", str(unknown)]) == 2
    assert "kn_frobnicate_op" in capsys.readouterr().err
    f = tmp_path / "c.json"
    dump_ugraphs([W.program("gqa", 1, kv=256, q=32)], f)
    # a μGraph that cannot be compared is not bad input: it gets its own verdict (exit 1)
    assert main(["verify", "gqa", str(f), *SIZES]) == 1
    out = capsys.readouterr().out
    assert "NOT_APPLICABLE" in out and "shape-incompatible" in out
    assert main(["verify", "gqa", str(f), "--size", "kv"]) == 2
    assert "NAME=INT" in capsys.readouterr().err


DATA = Path(__file__).resolve().parents[1] / "data"
QK_SIZES = ["--size", "q=16", "--size", "d=4", "--size", "kv=32"]


def test_qknorm_shaped_mirage_file_gives_one_rejection_each(capsys: pytest.CaptureFixture[str]) -> None:
    """Our own Mirage-format file of wrong QKNorm-GQA-shaped μGraphs (kernels saving an exp
    beside plain copies that later feed rms_norm, tests/data/make_qknorm_wrong.py): one
    `verify --json` run gives each its own rejected verdict and exits 1 (it used to exit 2
    with no verdicts: the kernel was evaluated on the q side for all its outputs)."""
    f = DATA / "qknorm_gqa_wrong.mirage.json"
    rc = main(["verify", "qknorm_gqa", str(f), "--batch", "1", *QK_SIZES, "--seed", "5", "--json"])
    verdicts = json.loads(capsys.readouterr().out)
    assert rc == 1
    assert len(verdicts) == 4
    assert [v["status"] for v in verdicts] == ["rejected"] * 4
    assert all(v["first_difference"] is not None for v in verdicts)
    assert len({v["candidate"] for v in verdicts}) == 4


def test_one_bad_ugraph_never_costs_the_others(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A μGraph that cannot be compared (output shapes differ) gets a not_applicable verdict
    of its own; the μGraphs around it are still checked."""
    from mirage_formal.ir.builder import Graph

    ref = W.program("gqa", 1, kv=512, q=32)
    g = Graph()
    Q, K, _ = (g.input(n.shape, n.dtype, n.attr("name")) for n in ref.inputs)
    g.output(g.matmul(Q, K))  # another output shape
    f = tmp_path / "c.json"
    dump_ugraphs([W.handwritten("gqa", 1, **HW), g.build(), _wrong_gqa()], f)  # type: ignore[list-item]
    rc = main(["verify", "gqa", str(f), *SIZES, "--seed", "3", "--json"])
    verdicts = json.loads(capsys.readouterr().out)
    assert rc == 1
    assert [v["status"] for v in verdicts] == ["accepted", "not_applicable", "rejected"]
    assert "output shapes differ" in verdicts[1]["reason"]


def test_qknorm_data_file_is_what_its_generator_writes() -> None:
    """The committed Mirage-format file is reproducible from tests/data/make_qknorm_wrong.py
    (through the exporter), and every μGraph in it loads with the workload's shapes."""
    import importlib.util

    from mirage_formal.ir.mirage import load_mirage

    spec = importlib.util.spec_from_file_location("make_qknorm_wrong", DATA / "make_qknorm_wrong.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    f = DATA / "qknorm_gqa_wrong.mirage.json"
    assert json.loads(f.read_text()) == [mod.export_mugraph(g) for _, g in mod.cases()]
    ref = W.program("qknorm_gqa", 1, q=16, d=4, kv=32)
    graphs = load_mirage(f, [n.attr("name") for n in ref.inputs])
    assert [g.key for g in graphs] == [g.key for _, g in mod.cases()]
