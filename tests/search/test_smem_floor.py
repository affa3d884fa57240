"""The shared-memory floor on map configurations (``Enumerator._iter_bytes_floor``) is sound:
a kernel's map configuration is dropped only when no size variant of it (every grid size and
loop range ``size_variants`` could give it) fits its iterator tiles alone in shared memory."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest

from mirage_formal import workloads
from mirage_formal.errors import GraphError
from mirage_formal.ir.graph import make_iter
from mirage_formal.optimize import make_config
from mirage_formal.search.config import SearchConfig
from mirage_formal.search.space import Enumerator, MapConfig, Stats


def _configs(prog_name: str, cfg: SearchConfig) -> tuple[set[tuple[tuple[int, ...], MapConfig]], Stats]:
    prog = workloads.program(prog_name, 1)
    st = Stats()
    e = Enumerator(prog, cfg, lambda *a: True, lambda g: None, lambda: None, st)
    out = {(mv.args, mv.config) for mv in e.moves() if mv.kind == "kernel" and mv.config is not None}
    return out, st


def _smallest_iter_bytes(prog_name: str, cfg: SearchConfig, args: tuple[int, ...], mc: MapConfig) -> float:
    """The least shared memory the iterator tiles take over every size choice a size variant
    of this configuration may make (brute force over grid sizes and loop ranges)."""
    prog = workloads.program(prog_name, 1)
    sig = tuple((prog.inputs[i].shape, prog.inputs[i].dtype) for i in args)
    axis_opts = [list(cfg.grid_sizes) for _ in mc.axes] + [[1]] * (3 - len(mc.axes))
    f_opts = [f for f in cfg.forloop if f > 1] if mc.forloop > 1 else [1]
    best = math.inf
    for grid in itertools.product(*axis_opts):
        for f in f_opts:
            try:
                its = [make_iter(sig, i, mc.imap(i), mc.fmap(i), (grid[0], grid[1], grid[2]), f)
                       for i in range(len(args))]
            except GraphError:
                continue
            best = min(best, sum(math.prod(n.shape) * n.dtype.itemsize for n in its))
    return best


@pytest.mark.parametrize("prog_name", ["rmsnorm", "gqa", "qknorm_gqa", "lora"])
@pytest.mark.parametrize("limit", [16 * 1024, 96 * 1024, 232448])
def test_dropped_configurations_have_no_variant_that_fits(prog_name: str, limit: int) -> None:
    base = make_config(workloads.program(prog_name, 1))
    everything, _ = _configs(prog_name, dataclasses.replace(base, smem_limit=10**15))
    kept, stats = _configs(prog_name, dataclasses.replace(base, smem_limit=limit))
    dropped = everything - kept
    assert kept <= everything
    for args, mc in dropped:
        assert _smallest_iter_bytes(prog_name, base, args, mc) > limit, (args, mc)
    if limit == 16 * 1024:
        assert dropped and stats.pruned_smem > 0  # the floor does drop configurations
