"""Checkpoints: a search interrupted mid-run and resumed yields the same accepted set as an
uninterrupted run; parallel workers yield the same set as one process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mirage_formal import workloads
from mirage_formal.errors import MirageError
from mirage_formal.ir.graph import KernelGraph
from mirage_formal.search import SearchConfig, run_search
from mirage_formal.search.reference_pruner import ExprPruner


def setup() -> tuple[KernelGraph, SearchConfig]:
    prog = workloads.program("rmsnorm", 1, rows=2, h=64, n=64)
    cfg = SearchConfig.from_preset("norm", grid_sizes=[2, 16], forloop=[1, 4], max_block_ops=6,
                                   checkpoint_every_s=0.0)
    return prog, cfg


class Interrupting:
    """Wraps a checker and raises KeyboardInterrupt (as Ctrl-C would) at its n-th call."""

    def __init__(self, inner: Any, n: int) -> None:
        self.inner = inner
        self.n = n

    def check(self, g: KernelGraph) -> Any:
        self.n -= 1
        if self.n == 0:
            raise KeyboardInterrupt
        return self.inner.check(g)


@pytest.mark.parametrize("interrupt_at", [3, 9])
def test_interrupted_then_resumed_equals_uninterrupted(tmp_path: Path, f64_checker: Any,
                                                       interrupt_at: int) -> None:
    prog, cfg = setup()
    full = run_search(prog, cfg, ExprPruner(prog), f64_checker(prog), progress=False)
    assert full.complete and len(full.accepted) >= 2
    ck = tmp_path / "search.ckpt.json"
    with pytest.raises(KeyboardInterrupt):
        run_search(prog, cfg, ExprPruner(prog), Interrupting(f64_checker(prog), interrupt_at),
                   checkpoint=ck, progress=False)
    doc = json.loads(ck.read_text())
    assert len(doc["done"]) < full.units_total
    resumed = run_search(prog, cfg, ExprPruner(prog), f64_checker(prog), checkpoint=ck, progress=False)
    assert resumed.complete
    assert resumed.extra["resumed_units"] == len(doc["done"])
    assert [a.graph.key for a in resumed.accepted] == [a.graph.key for a in full.accepted]


def test_checkpoint_of_another_program_is_refused(tmp_path: Path, f64_checker: Any) -> None:
    prog, cfg = setup()
    ck = tmp_path / "c.json"
    run_search(prog, cfg, ExprPruner(prog), f64_checker(prog), checkpoint=ck, progress=False,
               max_candidates=1)
    other = workloads.program("rmsnorm", 1, rows=2, h=64, n=32)
    with pytest.raises(MirageError, match="another program"):
        run_search(other, cfg, ExprPruner(other), f64_checker(other), checkpoint=ck, progress=False)


def test_two_workers_give_the_same_accepted_set(f64_checker: Any) -> None:
    prog, cfg = setup()
    one = run_search(prog, cfg, ExprPruner(prog), f64_checker(prog), progress=False)
    two = run_search(prog, cfg, ExprPruner(prog), f64_checker(prog), workers=2, progress=False)
    assert [a.graph.key for a in one.accepted] == [a.graph.key for a in two.accepted]
    assert one.stats.visited == two.stats.visited
