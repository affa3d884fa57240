"""The core package never imports ray (an optional extra): importing the package, the
pipeline, the command line with every subcommand, and running a local search leave ``ray``
out of ``sys.modules``; asking for the Ray executor without ray installed is a package error."""

from __future__ import annotations

import subprocess
import sys

import pytest

CODE = """
import sys
import mirage_formal, mirage_formal.optimize
from mirage_formal.cli import build_parser
from mirage_formal import workloads
from mirage_formal.search import SearchConfig, run_search, KeepAll
from mirage_formal.search.executors import make_executor
build_parser()
prog = workloads.program("rmsnorm", 1, rows=2, h=64, n=64)
cfg = SearchConfig.from_preset("norm", grid_sizes=[16], forloop=[4], max_block_ops=5)

class Never:
    def check(self, g):
        return type("V", (), {"accepted": False})()

r = run_search(prog, cfg, KeepAll(), Never(), workers=2, progress=False, max_candidates=3)
assert r.extra["executor"] == "local", r.extra
make_executor("local", 3)
bad = [m for m in sys.modules if m == "ray" or m.startswith("ray.")]
assert not bad, bad
print("ok")
"""


def test_core_package_does_not_import_ray() -> None:
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_ray_executor_without_ray_is_a_package_error() -> None:
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "from mirage_formal.errors import MirageError\n"
        "from mirage_formal.search.executors import make_executor\n"
        "try:\n    make_executor('ray', 2)\nexcept MirageError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "mirage-formal[ray]" in out.stdout


@pytest.mark.parametrize("workers", [0, -1, True, 1.5])
def test_bad_worker_counts_are_refused(workers: object) -> None:
    from mirage_formal.errors import MirageError
    from mirage_formal.search.executors import make_executor

    with pytest.raises(MirageError, match="workers"):
        make_executor("local", workers)  # type: ignore[arg-type]
