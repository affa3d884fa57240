"""One way to read PROGRAM for every subcommand; options that do not apply are refused; a
user's .py that fails is a package error (exit 2, naming their file and line); help texts
are for users; output files get the umask's mode; ``show --draw`` draws or falls back."""

from __future__ import annotations

import argparse
import os
import stat
from pathlib import Path

import pytest

from mirage_formal import draw, workloads
from mirage_formal.cli import build_parser, main
from mirage_formal.codegen import gpu_available
from mirage_formal.ir.serialize import dump_ugraphs

PY = """import mirage_formal as mf

def program(batch=1):
    g = mf.Graph()
    x = g.input((2 * batch, 64), "f16", "X")
    w = g.input((64, 64), "f16", "W")
    g.output(g.op("rms_norm", x) @ w)
    return g
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("progs")
    (d / "ok.py").write_text(PY)
    (d / "syntax.py").write_text("import mirage_formal as mf\nprogram = (\n")
    (d / "boom.py").write_text("x = 1\n\ndef f():\n    return 1 / 0\n\nprogram = f()\n")
    (d / "late.py").write_text("def program(batch=1):\n    raise ValueError('no such size')\n")
    g = workloads.program("rmsnorm", 1, rows=2, h=64, n=64)
    dump_ugraphs([g, g], d / "two.json")
    (d / "one.txt").write_text(str(g))
    return {p.stem: p for p in d.iterdir()}


@pytest.mark.parametrize("cmd", ["show", "codegen", "verify", "explain"])
def test_every_subcommand_reads_every_kind_of_program(cmd: str, files: dict[str, Path],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    for prog in (files["ok"], files["one"], files["two"]):
        argv = [cmd, str(prog)]
        if cmd == "verify":
            argv.append(str(files["two"]))
        if cmd == "explain":
            argv += ["--samples", "1"]
        assert main(argv) in (0, 1), capsys.readouterr().err
        assert "error" not in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["codegen", "{two}", "--index", "99"], "--index 99: .*two.json holds 2 μGraph"),
    (["show", "{two}", "--index", "-1"], "--index -1"),
    (["show", "rmsnorm", "--index", "1"], "--index picks one μGraph of a file"),
    (["show", "{ok}", "--index", "0"], "is a Python program"),
    (["show", "gated_mlp", "--batch", "4"], "does not depend on the batch size"),
    (["optimize", "lora", "--batch", "2", "--quiet"], "does not depend on the batch size"),
    (["show", "{two}", "--batch", "2"], "has fixed shapes"),
    (["show", "{two}", "--size", "h=8"], "--size applies to workload names only"),
    (["show", "lora", "--handwritten"], "no hand-written μGraph for 'lora'"),
    (["show", "rmsnorm", "--batch", "0"], "at least 1"),
    (["show", "{syntax}"], r"syntax.py:2: syntax error: .\(. was never closed"),
    (["verify", "{boom}", "{two}"], r"boom.py:4: running it raised ZeroDivisionError"),
    (["optimize", "{boom}", "--quiet"], r"boom.py:4: running it raised ZeroDivisionError"),
    (["show", "{late}"], r"late.py:2: calling program\(\) raised ValueError: no such size"),
    (["show", "{ok}", "--batch", "2"], None),
])
def test_options_apply_or_are_refused(argv: list[str], message: str | None, files: dict[str, Path],
                                      tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [a.format(**{k: str(v) for k, v in files.items()}) for a in argv]
    if args[0] == "optimize":
        args += ["--out", str(tmp_path / "o")]
    rc = main(args)
    err = capsys.readouterr().err
    if message is None:
        assert rc == 0, err
        return
    assert rc == 2
    assert "Traceback" not in err
    import re

    assert re.search(message, err), err


@pytest.mark.skipif(gpu_available(), reason="a GPU is present: --time applies")
def test_time_refused_without_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["codegen", "rmsnorm", "--size", "h=64", "--size", "n=64", "--time"]) == 2
    assert "--time needs a CUDA GPU" in capsys.readouterr().err


def _subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            return dict(a.choices)
    raise AssertionError("no subcommands")


def test_help_texts_are_for_users() -> None:
    top = build_parser()
    texts = [top.format_help()]
    for name, sp in _subparsers(top).items():
        texts.append(sp.format_help())
        for a in sp._actions:
            assert a.help, f"{name} {a.option_strings or a.dest} has no help"
    for t in texts:
        assert "``" not in t and "discovers" not in t
    assert "executed as Python" in texts[0]
    assert all("executed as Python" in t for t in texts[1:])


def test_output_files_follow_the_umask(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = os.umask(0o022)
    try:
        assert main(["codegen", "rmsnorm", "--size", "h=64", "--size", "n=64", "--out", str(tmp_path)]) == 0
    finally:
        os.umask(old)
    for f in tmp_path.iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o644, f


def test_show_draws(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                    monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "hw.svg"
    if draw.dot_available():
        assert main(["show", "rmsnorm", "--handwritten", "--no-run", "--draw", str(out)]) == 0
        svg = out.read_text()
        assert "<svg" in svg and "kernel 0: grid [96, 1, 1]" in svg and "imap" in svg and "omap" in svg
    monkeypatch.setattr(draw, "dot_available", lambda: False)
    assert main(["show", "rmsnorm", "--handwritten", "--no-run", "--draw", str(tmp_path / "x.svg")]) == 0
    assert "'dot' program is not installed" in capsys.readouterr().err
    src = (tmp_path / "x.dot").read_text()
    assert "cluster_k0" in src and "fmap dim 1" in src and "omap x→dim 1" in src
    assert main(["show", "rmsnorm", "--no-run", "--draw", str(tmp_path / "x.gif")]) == 2
