"""Cone seeds (search/cone_seeds.py): a program of several outputs as the join of its
outputs' cones. Every cone and every join computes the program in float64, a program of one
output has none, and the search accepts a join of a decoder-like region at once where its
enumeration finds only the direct lowering."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings

import mirage_formal as mf
from mirage_formal.ir.graph import INPUT, KERNEL_OP, rebuilt
from mirage_formal.search.cone_seeds import (
    CONE_LOOP_LIFTS,
    cone_joined_candidates,
    join_cones,
    output_cones,
)
from mirage_formal.search.config import SearchConfig
from mirage_formal.search.cost import estimate
from mirage_formal.search.loop_seeds import MAX_LOOP_SEEDS, loop_lifted_candidates
from mirage_formal.search.space import Enumerator, Stats
from mirage_formal.search.state import ranked_variants
from tests.graph_strategies import (
    MLP_DOWN_CASES,
    SEED_GRIDS,
    assert_computes_program,
    kernel_programs,
    layer_norm_program,
    mlp_down_cut_joins,
    mlp_down_program,
    product_chain_programs,
)


def decoder_region(heads: int = 4, d: int = 16, hidden: int = 64, ffn: int = 96,
                   batch: int = 1) -> mf.KernelGraph:
    """A decoder layer's middle as PyTorch's graph breaks return it: the attention output's
    projection summed over heads plus the residual, its rms_norm times a gain, and the MLP's
    first product, all three returned."""
    g = mf.Graph()
    x = g.input((batch, 1, 1, hidden), "f16", "x")
    r = g.input((batch, heads, 1, d), "f16", "r")
    wo = g.input((heads, d, hidden), "f16", "wo")
    gain = g.input((hidden,), "f16", "gain")
    wg = g.input((hidden, ffn), "f16", "wg")
    a = g.add(x, g.sum(g.matmul(r, wo), axis=-3, keepdims=True))
    h = g.mul(g.rms_norm(a), gain)
    g.output(a, h, g.matmul(h, wg))
    return g.build()


def _cheapest(g: mf.KernelGraph) -> tuple[mf.KernelGraph, float]:
    return g, estimate(g).seconds


def test_each_output_has_its_cone_and_reads_earlier_outputs_as_inputs() -> None:
    prog = decoder_region()
    cones = output_cones(prog)
    assert [o for o, _, _ in cones] == list(prog.outputs)
    (_, c0, s0), (_, c1, s1), (_, c2, s2) = cones
    assert not s0 and [x.attr("name") for x in c0.inputs] == ["x", "r", "wo"]
    # h's cone reads a (an earlier output) through an input standing for it, not its sources
    assert list(s1.values()) == [prog.outputs[0]] and {x.attr("name") for x in c1.inputs} >= {"gain"}
    assert all(x.op == INPUT for x in c1.inputs) and len(c1.kernels) == 2
    assert list(s2.values()) == [prog.outputs[1]] and len(c2.kernels) == 1
    # the cones' own lowerings joined are the program again
    assert_computes_program(prog, join_cones(prog, cones, [c for _, c, _ in cones]), 0)


def test_a_program_of_one_output_has_no_cones() -> None:
    prog = mf.workloads.program("rmsnorm", 1, rows=2, h=64, n=64)
    assert output_cones(prog) == []
    assert cone_joined_candidates(prog, SearchConfig(grid_sizes=SEED_GRIDS), _cheapest) == []


def test_joins_compute_the_program_and_are_cheaper_than_its_lowering() -> None:
    prog = decoder_region()
    joins = cone_joined_candidates(prog, SearchConfig(grid_sizes=SEED_GRIDS), _cheapest)
    assert joins
    for j in joins:
        assert_computes_program(prog, j, 1)
        assert any(n.op == KERNEL_OP for n in j.nodes)
    assert min(estimate(j).seconds for j in joins) < estimate(prog).seconds


@settings(max_examples=60, deadline=None)
@given(kernel_programs())
def test_every_join_of_a_random_program_computes_it(prog: mf.KernelGraph) -> None:
    """Random kernel-level programs, many of two outputs (one may be an input, or read by the
    other): each join (the enumerator's, at the cheapest size of each cone's lift) computes
    the program, and so do the cones' own lowerings joined."""
    e = Enumerator(prog, SearchConfig(grid_sizes=SEED_GRIDS), lambda *a: True, lambda g: None,
                   lambda: None, Stats())
    cones = output_cones(prog)
    if cones:
        assert_computes_program(prog, join_cones(prog, cones, [c for _, c, _ in cones]), 2)
    for j in cone_joined_candidates(prog, e.cfg, e._cheapest):
        assert_computes_program(prog, j, 3)


def test_rebuilt_binds_inputs_and_keeps_block_graphs() -> None:
    prog = decoder_region()
    (_, cone, _), *_ = output_cones(prog)
    lifts = Enumerator(cone, SearchConfig(grid_sizes=SEED_GRIDS), lambda *a: True, lambda g: None,
                       lambda: None, Stats()).loop_seeds()
    assert lifts
    g = lifts[0]
    same = rebuilt(g, {x: x for x in g.inputs})
    assert same == g.outputs  # (nodes are interned)


def test_the_search_accepts_a_join_where_the_enumeration_finds_only_the_lowering(
        f64_checker: Any) -> None:
    from mirage_formal.optimize import make_config
    from mirage_formal.search import run_search
    from mirage_formal.search.reference_pruner import ExprPruner

    prog = decoder_region()
    cfg = make_config(prog, None)
    # (the direct lowering's and the seeds' units come first: a few seconds of the space)
    r = run_search(prog, cfg, ExprPruner(prog), f64_checker(prog), progress=False, budget_s=10)
    joined = [a for a in r.accepted if any(n.op == KERNEL_OP for n in a.graph.nodes)]
    assert joined and all(a.verdict.accepted for a in joined)
    assert min(a.cost.seconds for a in joined) < estimate(prog).seconds


def qkv_region(heads: int = 8, hidden: int = 512, d: int = 64, batch: int = 1) -> mf.KernelGraph:
    """The start of a decoder layer at decode as the bridge cuts it: rms_norm (with an eps)
    times a gain, then per-head q and k projections, both returned."""
    g = mf.Graph()
    x = g.input((batch, 1, 1, hidden), "f16", "x")
    gain = g.input((hidden,), "f16", "gain")
    wq = g.input((heads, hidden, d), "f16", "wq")
    wk = g.input((heads, hidden, d), "f16", "wk")
    h = g.mul(g.rms_norm(x, eps=1e-6), gain)
    g.output(g.matmul(h, wq), g.matmul(h, wk))
    return g.build()


def test_each_cone_takes_the_near_cheapest_choice_that_reads_fewest_segments() -> None:
    """Per-head projections tiled (heads x columns) or (one head x more columns) can cost
    about the same in the model; a cone takes, of its choices within 1% of the cheapest, the
    one that reads the fewest DRAM segments (H200, s45 c3: decoder_qkv's projections tiled
    8 heads x 16 columns took 61 µs, 1 x 128 42.9, at one estimate). Here (8 heads, 512 x 64
    weights) the cheapest lift of a projection cone and one that reads a quarter of its
    segments are 0.05% apart: the join takes the latter, and computes the program."""
    from mirage_formal.optimize import make_config
    from mirage_formal.search.cost import NEAR_TIE, dram_segments
    from mirage_formal.search.loop_seeds import loop_lifted_candidates
    from mirage_formal.search.seeds import lifted_candidates

    prog = qkv_region()
    cfg = make_config(prog, None)
    e = Enumerator(prog, cfg, lambda *a: True, lambda g: None, lambda: None, Stats())
    best = cone_joined_candidates(prog, cfg, e._cheapest)[0]
    assert_computes_program(prog, best, 4)
    picked = {n for n in best.nodes if n.op == KERNEL_OP}
    for _, cone, _ in output_cones(prog):
        choices = [c for g in (*loop_lifted_candidates(cone, cfg.grid_sizes, cfg.forloop,
                                                       cfg.max_grid_axes, cfg.threads),
                               *lifted_candidates(cone, cfg.grid_sizes, cfg.max_grid_axes,
                                                  cfg.threads))
                   if (c := e._cheapest(g)) is not None]
        low = min(s for _, s in choices)
        near = [g for g, s in choices if s <= low * (1 + NEAR_TIE)]
        assert len(near) > 1 and len({dram_segments(g) for g in near}) > 1  # (not vacuous)
        fewest = min(near, key=dram_segments)
        assert dram_segments(fewest) < dram_segments(min(choices, key=lambda x: x[1])[0])
        # the join holds that choice's kernels (its inputs rebound to the program's)
        mine = {n.attr("graph") for n in fewest.nodes if n.op == KERNEL_OP}
        assert mine <= {n.attr("graph") for n in picked}


def test_a_product_chain_is_cut_where_the_second_product_reads_the_first() -> None:
    from mirage_formal.search.cone_seeds import chain_cuts

    prog = mlp_down_program(1, 64, 96, "f16", True)
    (cut,) = chain_cuts(prog)
    assert cut.op == "mul" and any(n.op == "matmul" and n.src[0] is cut for n in prog.nodes)
    assert chain_cuts(decoder_region()) == []  # (its chain is cut at an output already)


def test_cut_joins_compute_the_program_and_beat_its_lowering() -> None:
    """A decode MLP's second half has no one-kernel lift and one output; cut before its down
    product it is two launches (loop-lift kernels, each reading its weight once), estimated
    cheaper than the 4- or 5-kernel lowering, and every join computes the program in float64."""
    for case in MLP_DOWN_CASES:
        prog, joins = mlp_down_cut_joins(case)
        assert joins, case
        for j in joins:
            assert_computes_program(prog, j, 5)
        best = min(joins, key=lambda j: estimate(j).seconds)
        # (two launches: without the residual the down product alone may stay a library one)
        assert sum(n.op not in (INPUT, "get") for n in best.nodes) == 2
        assert any(n.op == KERNEL_OP for n in best.nodes)
        assert estimate(best).seconds < estimate(prog).seconds


@settings(max_examples=60, deadline=None)
@given(product_chain_programs())
def test_every_cut_join_of_a_random_product_chain_computes_it(prog: mf.KernelGraph) -> None:
    from mirage_formal.search.cone_seeds import chain_cuts, cut_joined_candidates

    assert chain_cuts(prog)  # (every such chain has its cut)
    e = Enumerator(prog, SearchConfig(grid_sizes=SEED_GRIDS), lambda *a: True, lambda g: None,
                   lambda: None, Stats())
    for j in cut_joined_candidates(prog, e.cfg, e._cheapest):
        assert len(j.outputs) == len(prog.outputs)
        assert_computes_program(prog, j, 6)


def test_the_search_accepts_a_cut_join_of_a_decode_mlp(f64_checker: Any) -> None:
    from mirage_formal.optimize import make_config
    from mirage_formal.search import run_search
    from mirage_formal.search.reference_pruner import ExprPruner

    # (at these sizes no one-kernel loop lift is estimated cheaper: recomputing h·Wu per
    # block of the down product's columns costs more than the cut's second launch)
    prog = mlp_down_program(1, 1024, 1376, "f16", True)
    r = run_search(prog, make_config(prog, None), ExprPruner(prog), f64_checker(prog),
                   progress=False, budget_s=10)
    two = [a for a in r.accepted if sum(n.op == KERNEL_OP for n in a.graph.nodes) == 2
           and all(n.op in (INPUT, KERNEL_OP, "get") for n in a.graph.nodes)]
    assert two and all(a.verdict.accepted for a in two)
    assert min(a.cost.seconds for a in two) < estimate(prog).seconds


def _heads_loop_reading_wo_once(g: mf.KernelGraph) -> bool:
    """``g``'s kernel walks the heads in its for-loop (Wo's iterator steps along its first
    axis) and no grid axis of more than one block re-reads Wo."""
    (k,) = g.kernels
    bg = k.attr("graph")
    (wo,) = [n for n in bg.nodes if n.op == "iter" and bg.inputs[n.attr("input")][0] == (4, 16, 64)]
    return wo.attr("fmap") == 0 and all(m != -1 for n, m in zip(bg.grid, wo.attr("imap"), strict=True)
                                        if n > 1)


def test_a_batched_projection_cone_gets_the_heads_loop_that_reads_its_weight_once() -> None:
    # At batch 8 the Wo cone's loop lifts over its contraction under every choice of split
    # dimensions come first, and MAX_LOOP_SEEDS ends the list before the lift over its heads
    # that splits only the columns; the cones compare more (only their join is verified)
    (_, cone, _), *_ = output_cones(decoder_region(batch=8))
    grid, loops = SEED_GRIDS, (2, 4)
    few = loop_lifted_candidates(cone, grid, loops, 3, 128)
    many = loop_lifted_candidates(cone, grid, loops, 3, 128, limit=CONE_LOOP_LIFTS)
    assert len(few) == MAX_LOOP_SEEDS and not any(map(_heads_loop_reading_wo_once, few))
    assert [g for g in many if _heads_loop_reading_wo_once(g)]
    for g in many:
        assert_computes_program(cone, g, 0)


def _replicated_weight_bytes(g: mf.KernelGraph) -> int:
    """Bytes of the kernels' 3-D inputs (the weights) that some grid axis of more than one
    block re-reads."""
    total = 0
    for k in g.kernels:
        bg = k.attr("graph")
        for it in (n for n in bg.nodes if n.op == "iter"):
            shape, dt = bg.inputs[it.attr("input")]
            if len(shape) == 3 and any(s > 1 and m == -1
                                       for s, m in zip(bg.grid, it.attr("imap"), strict=True)):
                total += math.prod(shape) * dt.itemsize
    return total


def test_a_cone_of_near_estimates_takes_the_choice_that_reads_its_weight_once() -> None:
    """At batch 8 a projection cone's lifts that split the batch over blocks, each block
    reading the whole weight, and those that keep the batch whole in each block cost about
    the same in the model (the re-reads at L2 bandwidth); the cone takes one that reads its
    weight once (the decoder layer at batch 8: 391 µs with the batch split, s46, against 348
    with it whole, s45). Llama-7B's q and k projections (32 heads, 4096 x 128 each)."""
    from mirage_formal.optimize import make_config
    from mirage_formal.search.cost import NEAR_TIE, reread_bytes

    prog = qkv_region(heads=32, hidden=4096, d=128, batch=8)
    cfg = make_config(prog, None)
    e = Enumerator(prog, cfg, lambda *a: True, lambda g: None, lambda: None, Stats())
    (_, cone, _), _ = output_cones(prog)
    lifts = loop_lifted_candidates(cone, cfg.grid_sizes, cfg.forloop, cfg.max_grid_axes,
                                   cfg.threads, limit=CONE_LOOP_LIFTS)
    ranked = [r for g in lifts for r in ranked_variants(cfg, g)]
    low = min(c.seconds for _, c in ranked)
    near = [g for g, c in ranked if c.seconds <= low * (1 + NEAR_TIE)]
    # (not vacuous: both kinds are within the window)
    assert {_replicated_weight_bytes(g) > 0 for g in near} == {True, False}
    assert all(reread_bytes(g) > 0 for g in near if _replicated_weight_bytes(g))
    join = cone_joined_candidates(prog, cfg, e._cheapest)[0]
    assert _replicated_weight_bytes(join) == 0


def test_reread_bytes_leave_out_inputs_that_stay_in_l2(monkeypatch: Any) -> None:
    """A weight of 256 KB read by two blocks of a batch split counts no re-read bytes (it is
    under ``REREAD_MIN_BYTES``); with that bound at 0 it counts its bytes once more."""
    from mirage_formal.search import cost

    prog = qkv_region(heads=4, hidden=256, d=128, batch=8)
    (_, cone, _), _ = output_cones(prog)
    split = [g for g in loop_lifted_candidates(cone, SEED_GRIDS, (2, 4), 3, 128, limit=12)
             if _replicated_weight_bytes(g)]
    assert split
    weight = 4 * 256 * 128 * 2
    assert all(cost.reread_bytes(g) == 0 for g in split)
    monkeypatch.setattr(cost, "REREAD_MIN_BYTES", 0)
    assert all(cost.reread_bytes(g) >= weight for g in split)


def test_a_layer_norm_is_cut_before_its_projection() -> None:
    """A layer norm's centring keeps the loop lifts from walking its projection's k (no loop
    seed), and its one-kernel lift holds whole columns of W (2048 x 8 here, 16-byte rows); cut
    after the norm, the norm is one small kernel and the projection a loop lift streaming W in
    wide tiles: two launches estimated well under the lift, computing the program, and a seed
    of the search (cheaper than every other)."""
    from mirage_formal.optimize import make_config
    from mirage_formal.search.cone_seeds import chain_cuts, cut_joined_candidates
    from mirage_formal.search.seeds import lifted_candidates

    prog = layer_norm_program(4, 2048, 2048, "f16")
    (cut,) = chain_cuts(prog)
    assert cut.op == "mul" and cut.shape == (4, 2048)
    cfg = make_config(prog, None)
    e = Enumerator(prog, cfg, lambda *a: True, lambda g: None, lambda: None, Stats())
    joins = cut_joined_candidates(prog, cfg, e._cheapest)
    assert joins
    for j in joins:
        assert_computes_program(prog, j, 7)
    best = min(e._cheapest(j)[1] for j in joins)  # type: ignore[index]
    lifts = [c[1] for g in lifted_candidates(prog, cfg.grid_sizes, cfg.max_grid_axes, cfg.threads)
             if (c := e._cheapest(g)) is not None]
    assert lifts and best < 0.7 * min(lifts)
    assert set(joins) <= set(e.loop_seeds())


@pytest.mark.parametrize("reverse", [False, True])
def test_a_cut_after_a_returned_value_reads_it_rather_than_computing_it_again(reverse: bool) -> None:
    """A post-attention block that returns its residual sum and the MLP's first activation of
    the sum's layer norm (in either order): cut at the normed value, whose cone comes after
    the residual's, the join reads the residual from the kernel that returns it; Wo is read
    by one kernel in every cut join and cone join (the cut once came first and its cone
    recomputed the projection: a 2-block kernel estimated at 128 µs at GPT-2 sizes)."""
    from mirage_formal.search.cone_seeds import chain_cuts, cut_joined_candidates

    g = mf.Graph()
    x = g.input((2, 1, 1, 64), "f16", "x")
    a = g.input((2, 4, 1, 16), "f16", "a")
    wo = g.input((4, 16, 64), "f16", "wo")
    w1 = g.input((64, 96), "f16", "w1")
    r = g.add(x, g.sum(g.matmul(a, wo), axis=-3, keepdims=True))
    c = g.sub(r, g.mean(r, axis=-1, keepdims=True))
    h = g.mul(c, g.rsqrt(g.add_scalar(g.mean(g.square(c), axis=-1, keepdims=True), 1e-5)))
    outs = [r, g.gelu(g.matmul(h, w1))]
    g.output(*(outs[::-1] if reverse else outs))
    prog = g.build()
    assert [n.op for n in chain_cuts(prog)] == ["mul"]
    e = Enumerator(prog, SearchConfig(grid_sizes=SEED_GRIDS), lambda *a: True, lambda g: None,
                   lambda: None, Stats())
    joins = [*cut_joined_candidates(prog, e.cfg, e._cheapest),
             *cone_joined_candidates(prog, e.cfg, e._cheapest)]
    assert joins
    for j in joins:
        assert_computes_program(prog, j, 8)
        readers = [n for n in j.nodes if n.op not in (INPUT, "get") and wo.node in n.src]
        assert len(readers) == 1
