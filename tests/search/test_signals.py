"""Signals and process lifetime of ``mirage-formal optimize`` (run as a subprocess): SIGTERM
saves the checkpoint, prints one line and exits 143, and the same command resumes to the
uninterrupted result; Ctrl-C (SIGINT to the whole process group) exits 130 without a
traceback from any process; pool workers die with a SIGKILLed parent; ``--workers 0`` and
non-finite or non-positive budgets are refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mirage_formal.cli import main

ARGS = [
    "optimize",
    "rmsnorm",
    "--size",
    "rows=2",
    "--size",
    "h=64",
    "--size",
    "n=64",
    "--preset",
    "norm",
    "--set",
    "grid_sizes=[2, 16]",
    "--set",
    "forloop=[1, 4]",
    "--set",
    "checkpoint_every_s=0.0",
    "--workers",
    "2",
    "--quiet",
    "--no-gpu",
    "--json",
]


def start(out: Path, **kw: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "mirage_formal.cli", *ARGS, "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )  # type: ignore[call-overload]


def done_units(out: Path) -> int:
    try:
        return len(json.loads((out / "checkpoint.json").read_text())["done"])
    except (OSError, ValueError, KeyError):
        return -1


def wait_for_units(p: subprocess.Popen[str], out: Path, n: int) -> None:
    for _ in range(12000):
        if done_units(out) >= n or p.poll() is not None:
            break
        time.sleep(0.01)
    assert p.poll() is None, "the search finished before it could be interrupted"


def children(pid: int) -> set[int]:
    out: set[int] = set()
    for t in Path(f"/proc/{pid}/task").iterdir():
        out |= {int(c) for c in (t / "children").read_text().split()}
    return out


def graphs(out: Path) -> list[object]:
    return [g["nodes"] for g in json.loads((out / "ugraphs.json").read_text())["ugraphs"]]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigterm_saves_then_the_same_command_resumes(tmp_path: Path) -> None:
    ref = tmp_path / "ref"
    p = start(ref)
    assert p.wait(timeout=600) == 0
    out = tmp_path / "run"
    p = start(out)
    wait_for_units(p, out, 5)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143, err
    saved = done_units(out)
    assert 5 <= saved < 50
    assert err.strip().splitlines()[-1] == (
        f"interrupted; {saved} units saved to {out}; run the same command to resume"
    )
    assert "Traceback" not in err
    p = start(out)
    res, err = p.communicate(timeout=600)
    assert p.returncode == 0, err
    assert json.loads(res)["resumed_units"] == saved
    assert graphs(out) == graphs(ref)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_ctrl_c_to_the_process_group_exits_130_without_tracebacks(tmp_path: Path) -> None:
    p = start(tmp_path, start_new_session=True)
    wait_for_units(p, tmp_path, 2)
    os.killpg(p.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: every process of the group
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert err.strip().splitlines()[-1].startswith("interrupted; ")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc and PR_SET_PDEATHSIG")
def test_pool_workers_die_with_a_sigkilled_parent(tmp_path: Path) -> None:
    p = start(tmp_path)
    wait_for_units(p, tmp_path, 1)
    workers = children(p.pid)
    assert len(workers) >= 2
    p.kill()
    p.wait(timeout=10)
    alive = set(workers)
    for _ in range(300):
        alive = {
            w
            for w in alive
            if Path(f"/proc/{w}").exists() and "zombie" not in Path(f"/proc/{w}/status").read_text()
        }
        if not alive:
            break
        time.sleep(0.01)
    assert not alive, f"workers {sorted(alive)} outlived their parent by 3 s"


@pytest.mark.parametrize(
    "opt",
    [
        ["--workers", "0"],
        ["--workers", "-3"],
        ["--budget", "nan"],
        ["--budget", "inf"],
        ["--budget", "0"],
        ["--budget", "-5"],
    ],
)
def test_bad_workers_and_budgets_are_refused(
    opt: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*ARGS, "--out", str(tmp_path), *opt]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and ("--workers" in err or "budget" in err)
    assert not (tmp_path / "checkpoint.json").exists()
