"""``mirage-formal explain``: kept and pruned samples with reasons; axiom sets by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirage_formal.cli import main


def test_explain_gqa(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "gqa", "--samples", "3"]) == 0
    out = capsys.readouterr().out
    assert "KEEP" in out and "PRUNE" in out
    assert "exp(V)" in out and "subexpression of the reference by" in out
    assert "0 unknown" in out


def test_explain_axiom_sets_and_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["explain", "rmsnorm", "--axioms", "eq", "sub", "ext_exp_sqrt", "--list-axioms",
                 "--samples", "1"]) == 0
    out = capsys.readouterr().out
    assert "ext_exp_sqrt:exp_neg" in out and "[unsound:" in out
    assert main(["explain", "rmsnorm", "--axioms", "nope"]) == 2
    (tmp_path / "eq.toml").write_text("[set]\nkind = \"eq\"\n[[axiom]]\nname = \"x\"\n")
    (tmp_path / "sub.toml").write_text("[set]\nkind = \"sub\"\n")
    assert main(["explain", "rmsnorm", "--axioms-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "eq.toml:3" in err
