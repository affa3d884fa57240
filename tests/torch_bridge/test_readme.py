"""README's "From PyTorch" code block runs as written (skipped without torch)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("torch")

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_from_pytorch_block_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = README.read_text()
    section = text.split("## From PyTorch", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # the region cache goes here
    monkeypatch.chdir(tmp_path)
    with pytest.warns(UserWarning, match="runs with torch"):
        exec(compile(blocks[0], "README.md[From PyTorch]", "exec"), {"__name__": "readme"})
    out = capsys.readouterr().out
    assert "ugraph {" in out and "region 0:" in out
    assert list((tmp_path / "mirage_formal" / "regions").glob("*.json"))
