"""Every code block of README.md is exercised.

Python blocks run in order in one namespace (they build on each other), from a temporary
working folder. Shell blocks are read line by line: ``./bootstrap VERB`` lines must name a verb
the script has, and the test verb must be what ``.ci/run`` runs; the manual route's test
command must equal the command ``./bootstrap test`` runs; every ``mirage-formal`` line runs
through the CLI, except the main job itself (``optimize`` of a full-size benchmark program,
about a minute), whose command line is parsed and checked to be the one ``./bootstrap demo``
runs.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from mirage_formal.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"^```(\w+)\n(.*?)^```", README, flags=re.M | re.S)
BOOTSTRAP = (ROOT / "bootstrap").read_text()


def _blocks(lang: str) -> list[str]:
    return [b for lg, b in BLOCKS if lg == lang]


def test_readme_has_blocks() -> None:
    assert len(_blocks("python")) >= 3 and len(_blocks("sh")) >= 3
    assert {lg for lg, _ in BLOCKS} <= {"python", "sh"}


def _bootstrap_command(verb: str) -> str:
    m = re.search(rf"^    {verb}\)\n(.*?);;", BOOTSTRAP, flags=re.M | re.S)
    assert m, verb
    return m.group(1)


def test_two_commands_and_ci_agree() -> None:
    lines = [ln for b in _blocks("sh") for ln in b.splitlines() if ln.startswith("./bootstrap")]
    assert lines[:2] == ["./bootstrap demo", "./bootstrap test"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "./bootstrap test" in ci and "HYPOTHESIS_PROFILE=ci" in ci and "rm -rf .venv" in ci
    test_cmd = _bootstrap_command("test")
    manual = [ln for b in _blocks("sh") for ln in b.splitlines() if "pytest" in ln]
    assert len(manual) == 1
    # the manual route's test command is the one ./bootstrap test runs
    m = re.search(r'-m pytest (.*?) "\$@"', test_cmd)
    assert m and manual[0].endswith(f"-m pytest {m.group(1)}")
    assert "HYPOTHESIS_PROFILE=ci" in manual[0]
    assert 'pip" install -q -e ".[dev,torch,ray]"' in BOOTSTRAP
    assert any('pip install -q -e ".[dev,torch,ray]"' in ln for b in _blocks("sh") for ln in b.splitlines())


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("readme")


@pytest.fixture(scope="module")
def python_ran(workdir: Path) -> dict[str, object]:
    old = os.getcwd()
    os.chdir(workdir)
    ns: dict[str, object] = {"__name__": "__readme__"}
    try:
        for i, block in enumerate(_blocks("python")):
            exec(compile(block, f"README.md python block {i}", "exec"), ns)
    finally:
        os.chdir(old)
    return ns


def test_python_blocks_run(python_ran: dict[str, object], workdir: Path) -> None:
    assert (workdir / "mirage_out" / "readme" / "ugraphs.json").is_file()
    drawn = list((workdir / "mirage_out" / "readme").glob("fused.*"))
    assert drawn
    result = python_ran["result"]
    assert result.accepted  # type: ignore[attr-defined]


def test_cli_lines_run(python_ran: dict[str, object], workdir: Path,
                       capsys: pytest.CaptureFixture[str]) -> None:
    demo = _bootstrap_command("demo")
    lines = [ln for b in _blocks("sh") for ln in b.splitlines() if "mirage-formal " in ln]
    assert lines
    old = os.getcwd()
    os.chdir(workdir)
    try:
        for ln in lines:
            argv = shlex.split(ln.split("mirage-formal", 1)[1])
            if argv[0] == "optimize":
                build_parser().parse_args(argv)
                assert f"optimize {argv[1]}" in demo, ln
                continue
            rc = main(argv)
            assert rc == 0, (ln, capsys.readouterr().err)
    finally:
        os.chdir(old)
