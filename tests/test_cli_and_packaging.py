"""The command line's main entry and the packaging of the data folders."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from mirage_formal.cli import main
from mirage_formal.errors import ResourceError
from mirage_formal.resources import data_dir

ROOT = Path(__file__).resolve().parents[1]


def test_show_program(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "lora"]) == 0
    out = capsys.readouterr().out
    assert "ugraph {" in out and "output 0: shape [16, 4096]" in out


def test_show_handwritten_and_bad_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["show", "gqa", "--handwritten"]) == 0
    assert "kernel(" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert main(["show", str(bad)]) == 2
    assert "error:" in capsys.readouterr().err


def test_data_dirs_found() -> None:
    for name in ("axioms", "search", "codegen"):
        assert data_dir(name).is_dir()
    with pytest.raises(ResourceError, match="unknown data folder"):
        data_dir("models")


def test_wheel_ships_data_folders(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp_path), str(ROOT)], check=True)
    (whl,) = tmp_path.glob("mirage_formal-*.whl")
    names = zipfile.ZipFile(whl).namelist()
    for folder in ("axioms", "search", "codegen"):
        assert any(n.startswith(f"mirage_formal/_data/{folder}/") for n in names), folder
