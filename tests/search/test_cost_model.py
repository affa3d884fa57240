"""The cost model's parameters are data: loading, overriding, refusing bad files; the measured
dataset loads; the fitting script's statistics are right on known inputs."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mirage_formal import workloads
from mirage_formal.codegen.tuning_rules import candidate_schedules
from mirage_formal.errors import MirageError
from mirage_formal.ir.graph import KERNEL_OP
from mirage_formal.ir.occupancy import loop_splits
from mirage_formal.search import cost
from mirage_formal.search.cost import BUILTIN, FITTED, estimate, input_cost, load_targets, speedup

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import fit_cost_model  # noqa: E402
import kernel_times  # noqa: E402


def test_fitted_parameters_file_overrides_the_builtin(tmp_path: Path) -> None:
    p = tmp_path / "cm.json"
    p.write_text(json.dumps({"targets": {"h100": {"launch_s": 9e-6, "not_a_param": 1}}}))
    t = load_targets(p)["h100"]
    assert t.launch_s == 9e-6 and t.dram_bw == BUILTIN["h100"].dram_bw
    prog = workloads.program("rmsnorm", 1)
    # two launches more: 2 x 7.2 µs more than the built-in model on a two-kernel program
    assert estimate(prog, t).seconds - estimate(prog, BUILTIN["h100"]).seconds == pytest.approx(2 * 7.2e-6)
    p.write_text("{not json")
    with pytest.raises(MirageError, match="cannot read"):
        load_targets(p)


def test_input_cost_and_speedup() -> None:
    prog = workloads.program("gated_mlp", 1)
    c = input_cost(prog)
    assert c.seconds > 0 and c.launches == 4
    assert speedup(prog, c) == pytest.approx(1.0)


def test_the_dataset_loads_and_spans_programs() -> None:
    recs = kernel_times.load()
    assert len(recs) >= 150
    assert len({r.workload for r in recs}) >= 6
    assert all(r.measured_us > 0 for r in recs)


def test_a_bad_record_names_its_line(tmp_path: Path) -> None:
    good = kernel_times.load()[0]
    p = tmp_path / "k.jsonl"
    kernel_times.append([good], p)
    assert kernel_times.load(p, method_contains="no such method") == []
    with p.open("a") as f:
        f.write(json.dumps({**good.to_json(), "measured_us": -1.0}) + "\n")
    with pytest.raises(MirageError, match=r"k.jsonl:2"):
        kernel_times.load(p)


def test_fit_statistics_on_known_inputs() -> None:
    x = np.array([1.0, 2.0, 3.0, 4.0])
    assert fit_cost_model.spearman(x, x ** 3) == pytest.approx(1.0)
    assert fit_cost_model.spearman(x, -x) == pytest.approx(-1.0)
    best = fit_cost_model.nelder_mead(lambda v: float(np.sum((v - np.array([1.0, -2.0])) ** 2)),
                                      np.zeros(2), iters=400)
    assert np.allclose(best, [1.0, -2.0], atol=1e-2)
    assert set(FITTED) <= set(BUILTIN["h100"].__dataclass_fields__)


def _fused_kernel(col: int, k_tile: int) -> Any:
    g = workloads.rmsnorm_fused(1, col_tile=col, k_tile=k_tile)
    return next(n for n in g.nodes if n.op == KERNEL_OP).attr("graph")


@pytest.mark.parametrize(("col", "k_tile"), [(64, 128), (256, 64), (512, 32), (1024, 256)])
def test_a_kernel_is_costed_under_the_splits_the_autotuner_tries(col: int, k_tile: int) -> None:
    bg = _fused_kernel(col, k_tile)
    t = cost.TARGETS["h100"]
    tuner = sorted({s.split for s in candidate_schedules(bg, t.n_sm)})
    assert tuner == sorted({1, *loop_splits(math.prod(bg.grid), bg.forloop, t.n_sm)})
    per_split = [cost._kernel_cost(bg, t, s).seconds for s in tuner]
    assert cost.kernel_cost(bg, t).seconds == min(per_split)
    if math.prod(bg.grid) < t.n_sm and len(tuner) > 1:
        # a grid smaller than the SMs with a long loop is cheaper split than not
        assert min(per_split[1:]) < per_split[0]


def test_loads_too_large_to_double_buffer_pay_the_unpipelined_factor() -> None:
    t = cost.TARGETS["h100"]
    flat = t.with_params(unpipelined_scale=1.0)
    deep = _fused_kernel(64, 1024)  # one iteration loads 64 x 1024 fp16 of W: 128 KB
    assert cost.stage_bytes(deep) > cost.PIPELINE_STAGE_MAX
    assert cost.kernel_cost(deep, t.with_params(unpipelined_scale=2.0)).seconds > \
        cost.kernel_cost(deep, flat).seconds
    shallow = _fused_kernel(64, 128)
    assert cost.stage_bytes(shallow) <= cost.PIPELINE_STAGE_MAX
    assert cost.kernel_cost(shallow, t.with_params(unpipelined_scale=2.0)).seconds == \
        cost.kernel_cost(shallow, flat).seconds


@pytest.mark.parametrize("split", range(2, 65))
def test_the_combine_tail_reads_g_plus_s_over_g_partials(split: int) -> None:
    """A split's combine reads G + S/G partials on its serial tail (the emitter's two levels),
    never more than S, with G dividing S."""
    from mirage_formal.ir.occupancy import combine_groups, combine_reads

    g = combine_groups(split)
    assert split % g == 0
    assert combine_reads(split) <= split
    assert combine_reads(split) == (split if g == split else g + split // g)
    if split >= 9 and any(split % d == 0 for d in range(2, split)):  # a prime stays one level
        assert combine_reads(split) < split



def test_products_count_on_the_units_that_run_them() -> None:
    """A product of two fp16 or two bf16 tiles costs tensor-core flops (its tile padded to the
    MMA shape); an fp32 product, which codegen runs on CUDA cores, costs CUDA-core flops."""
    from mirage_formal.ir.builder import Graph

    def flops(dt: str) -> tuple[float, float]:
        g = Graph()
        x, w = g.input((2, 64), dt, "X"), g.input((64, 32), dt, "W")
        g.output(g.matmul(x, w))
        (mm,) = [n for n in g.build().nodes if n.op == "matmul"]
        return cost._op_flops(mm)

    assert flops("f16") == flops("bf16") == (2.0 * 16 * 32 * 64, 0.0)  # (2 rows padded to 16)
    assert flops("f32") == (0.0, 2.0 * 2 * 32 * 64)


def test_fp32_products_run_at_their_own_rate() -> None:
    """Products of two fp32 tiles count at ``f32_mm_flops`` (the autotuner blocks them in
    registers or runs them as TF32 MMAs), every other CUDA-core op at ``simt_flops``: the
    estimate of a compute-bound fp32 product follows the first and ignores the second."""
    import dataclasses

    from mirage_formal.ir.builder import Graph

    g = Graph()
    x, w = g.input((512, 1024), "f32", "X"), g.input((1024, 1024), "f32", "W")
    g.output(g.matmul(x, w))
    prog = g.build()
    (mm,) = [n for n in prog.nodes if n.op == "matmul"]
    assert cost._op_work(mm) == (0.0, 0.0, 2.0 * 512 * 1024 * 1024)
    t = cost.TARGETS["h200"]
    slow = dataclasses.replace(t, f32_mm_flops=t.f32_mm_flops / 10)
    assert cost.estimate(prog, slow).seconds > 5 * cost.estimate(prog, t).seconds
    other = dataclasses.replace(t, simt_flops=t.simt_flops / 10)
    assert cost.estimate(prog, other).seconds == cost.estimate(prog, t).seconds


@pytest.mark.parametrize(("rows", "keys", "kept"), [(197, 197, True), (64, 520, True),
                                                    (4096, 64, False)])
def test_register_chain_tiles_leave_shared_memory_only_where_a_block_holds_them(
        rows: int, keys: int, kept: bool) -> None:
    """A one-kernel attention's score tiles (S, exp(S)·0.125) count toward shared memory only
    where no block the tuner tries holds the chain in registers: ViT's 197 queries and keys
    (three tiles of 197 x 197, 233 KB of the block's 435) and 520 keys fit; 4096 query rows of a
    block (256 row tiles) do not, and keep their tiles in the count. The model's blocks per SM
    (``smem_bytes`` without ``chains``) still count every tile; codegen agrees (a chain at
    256 threads where the count leaves the tiles out)."""
    from mirage_formal.codegen import launches
    from mirage_formal.codegen.layout import KernelLayout
    from mirage_formal.codegen.schedule import Schedule
    from tests.graph_strategies import attention_loop_program

    prog = attention_loop_program(rows, 64, keys, 64, 1, 0, True, "sum", "", True)
    (la,) = launches(prog, 128)
    bg = la.graph
    chain = cost.register_chain_tiles(bg)
    assert bool(chain) == kept
    assert {n.op for n in chain} <= {"matmul", "mul_scalar", "exp"}
    scores = sum(math.prod(n.shape) * n.dtype.itemsize for n in chain)  # (in-loop tiles)
    assert cost.smem_bytes(bg, chains=True) == cost.smem_bytes(bg) - scores
    if kept:
        assert cost.smem_bytes(bg, chains=True) <= 227 * 1024 < cost.smem_bytes(bg)
        assert KernelLayout(bg, "k", 227 * 1024, Schedule(threads=256)).chains
