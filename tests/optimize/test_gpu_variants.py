"""The GPU stage's size variants (``optimize.variants_to_measure`` / ``_gpu_rank``), on the CPU:
which variants are measured, that each is the same structure and verifies, and that a faster
one replaces its structure's entry (the autotuner replaced by a stand-in with made-up times)."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mirage_formal as mf
from mirage_formal import gpu_sizes as sz
from mirage_formal import gpu_stage as gs
from mirage_formal import optimize as opt
from mirage_formal import optimized, superoptimize, workloads
from mirage_formal import recheck as rc
from mirage_formal.ir.graph import KernelGraph
from mirage_formal.search.canon import structure_key
from mirage_formal.verify import Verifier
from mirage_formal.verify.float64 import FloatRecheck
from mirage_formal.verify.verifier import run_float64

SPACE = {"grid_sizes": [2, 4, 8, 16], "forloop": [1, 2, 4], "max_block_ops": 6}


def program() -> KernelGraph:
    return workloads.program("rmsnorm", 1, rows=2, h=64, n=64)


@pytest.fixture(scope="module")
def result() -> Any:
    return superoptimize(program(), "norm", budget_s=120, overrides=SPACE, gpu=False)


def grids(g: KernelGraph) -> tuple[Any, ...]:
    return tuple(gr for gr, _ in sz.kernel_grids(g))


def test_variants_are_the_same_structure_with_other_grids_and_verify(result: Any) -> None:
    """Each measured variant is the structure itself at other sizes, on a grid not yet taken,
    and passes the same checks as the search's results."""
    cfg = opt.make_config(program(), "norm", SPACE)
    verifier = Verifier(program(), seed=3)
    recheck = FloatRecheck(program())
    tried = 0
    for a in result.accepted:
        vs = gs.variants_to_measure(cfg, a.graph, limit=3, n_sm=4)
        assert len(vs) <= 3
        seen = {grids(a.graph)}
        for v, cost in vs:
            assert v.key != a.graph.key
            assert structure_key(v) == structure_key(a.graph)
            assert grids(v) not in seen  # one per tile shape
            seen.add(grids(v))
            verdict = verifier.check(v)
            assert verdict.accepted
            assert recheck.error(v, verdict.output_map) < 1e-9
            assert cost.seconds > 0
            tried += 1
    assert tried, "the fused structure has size variants in this space"


def _fake_tune(times: dict[tuple[Any, ...], float], calls: list[Any] | None = None,
               second_round: float = 1.0, shared_seen: list[Any] | None = None,
               key: Any = grids) -> Any:
    """A stand-in for the tuner: each μGraph's time by ``key`` (its grids); the second round
    (``start`` given) takes ``second_round`` times as long. ``calls`` records (key, start),
    ``shared_seen`` the dict of drawn inputs each call was given."""
    def tune_one(graph: KernelGraph, program: KernelGraph, seed: Any, estimated_us: float,
                 deadline: float | None = None, start: Any = None, shared: Any = None) -> Any:
        if calls is not None:
            calls.append((key(graph), start))
        if shared_seen is not None:
            shared_seen.append(shared)
        us = times.get(key(graph), 50.0) * (second_round if start is not None else 1.0)
        return SimpleNamespace(us=us, trials=[], compiled=("kernel", graph.key, start is not None),
                               from_cache=False, default_us=None, describe=lambda: "stand-in",
                               schedules={"k": graph.key}, slow_compiles=0)
    return tune_one


def test_a_faster_variant_replaces_its_structure_and_a_slower_one_does_not(
        result: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = opt.make_config(program(), "norm", SPACE)
    accepted = [optimized.Optimized(a.graph, a.verdict, a.cost, a.found_at_s, a.float64_error)
                for a in result.accepted]
    best = accepted[0]
    vs = gs.variants_to_measure(cfg, best.graph, limit=2, n_sm=4)
    assert len(vs) == 2
    faster, slower = vs[0][0], vs[1][0]
    times = {grids(best.graph): 20.0, grids(faster): 10.0, grids(slower): 30.0}
    shared_seen: list[Any] = []
    monkeypatch.setattr(gs, "_tune_one", _fake_tune(times, shared_seen=shared_seen))
    ctx = gs.VariantContext(cfg, Verifier(program(), seed=5), FloatRecheck(program()), n_sm=4)
    ranked, kernel, notes = gs._gpu_rank(program(), accepted, 1, 0, None, ctx)
    assert not [n for n in notes if "FAILED" in n or "failed" in n]
    # every tuning of the stage (candidates, size variants, the second round) is given the
    # same dict: the validation inputs and the program's outputs are drawn once
    assert len(shared_seen) >= 3 and all(d is ctx.shared for d in shared_seen)
    # ... and the program's validation draws are in it before the first step (the stand-in
    # tuner never draws): their one-time cost is not counted as a step's
    assert sum(isinstance(k, tuple) and k[0] == "program" for k in ctx.shared) == 2
    assert ranked[0] is best and best.graph.key == faster.key  # replaced in place
    assert best.measured_us == 10.0 and kernel == ("kernel", faster.key, False)
    assert "size variant" in (best.validation or "")
    keys = [structure_key(a.graph) for a in ranked]
    assert len(keys) == len(set(keys))  # still one entry per structure


def test_half_the_variants_spread_towards_wide_tiles(result: Any) -> None:
    """Beyond the cost model's cheapest grids, the widest tiles whose split still fills the
    SMs are measured (the model ranks them worst)."""
    cfg = opt.make_config(program(), "norm", SPACE)
    looped = [a for a in result.accepted if any(f > 1 for _, f in sz.kernel_grids(a.graph))]
    assert looped
    g = looped[0].graph
    vs = gs.variants_to_measure(cfg, g, limit=4, n_sm=4)
    cheap = gs.variants_to_measure(cfg, g, limit=1, n_sm=4)
    spread = [vc for vc in vs[1:] if sz._blocks(vc[0]) <= sz._blocks(g) or sz._blocks(vc[0]) > 4]
    assert spread, [sz.kernel_grids(v) for v, _ in vs]
    for v, _ in spread:
        assert sz._split_fills(v, 4)
    assert min(sz._blocks(v) for v, _ in spread) <= min(sz._blocks(v) for v, _ in cheap)


def test_the_fullest_single_wave_is_measured_second(result: Any) -> None:
    """After the cost model's cheapest size, the size with the most blocks that still run in
    one wave (at most one per SM), more than the graph's own, is measured next, at the graph's
    own loop ranges where the space allows; tiles that read whole 128-byte lines come before
    those that split lines between blocks."""
    cfg = opt.make_config(program(), "norm", SPACE)
    checked = 0
    # each structure from each of its sizes (the search's own pick is often the largest grid)
    starts = [w for a in result.accepted for w, _ in sz.ranked_variants(cfg, a.graph)]
    for g in starts:
        own = sz._blocks(g)
        if sz._streams_weights(g):
            continue  # (measured first: the next test)
        for n_sm in (4, 8, 16):
            vs = gs.variants_to_measure(cfg, g, limit=4, n_sm=n_sm)
            full = [v for v, _ in sz.ranked_variants(cfg, g)
                    if own < sz._blocks(v) <= n_sm and grids(v) not in {grids(w) for w, _ in vs[:1]}]
            if len(vs) < 2 or not full:
                continue
            picked = vs[1][0]
            assert own < sz._blocks(picked) <= n_sm
            best = max((sz._whole_lines(v), sz._blocks(v)) for v in full)
            assert (sz._whole_lines(picked), sz._blocks(picked)) == best
            # at the graph's own loop ranges where the space has that grid with them
            loops = [f for _, f in sz.kernel_grids(g)]
            if any(grids(v) == grids(picked) and [f for _, f in sz.kernel_grids(v)] == loops
                   for v, _ in sz.ranked_variants(cfg, g)):
                assert [f for _, f in sz.kernel_grids(picked)] == loops
            checked += 1
    assert checked, "some structure of the fixture has a fuller single wave"


def _wave_first_cases(cfg: Any, starts: list[KernelGraph], monkeypatch: pytest.MonkeyPatch,
                      sms: tuple[int, ...] = (4, 8, 16)) -> int:
    """Check the wave-first rule on every streamed start at each of ``sms`` SM counts: the
    order with the rule against the order without it (``_streams_weights`` off). Returns how
    many moved."""
    moved = 0
    for g in (g for g in starts if sz._streams_weights(g)):
        for n_sm in sms:
            new = gs.variants_to_measure(cfg, g, limit=4, n_sm=n_sm)
            with monkeypatch.context() as m:
                m.setattr(sz, "_streams_weights", lambda _g: False)
                old = gs.variants_to_measure(cfg, g, limit=4, n_sm=n_sm)
            # a fullest wave exists: a grid other than the graph's own and the cheapest one's
            # with more blocks than the graph and at most one per SM (then old[1] is it)
            per_grid: dict[Any, Any] = {}
            for v, c in sz.ranked_variants(cfg, g):
                if grids(v) != grids(g):
                    per_grid.setdefault(grids(v), (v, c))
            others = list(per_grid.values())[1:]
            has_wave = any(sz._blocks(g) < sz._blocks(v) <= n_sm for v, _ in others)
            if (has_wave and sz._whole_lines(old[1][0]) and sz._blocks(old[1][0]) > sz._blocks(old[0][0])
                    and old[1][1].seconds <= sz.FULL_WAVE_FIRST_MAX_RATIO * old[0][1].seconds):
                assert [v.key for v, _ in new[:2]] == [old[1][0].key, old[0][0].key]
                assert [v.key for v, _ in new[2:]] == [v.key for v, _ in old[2:]]
                moved += 1
            else:
                assert [v.key for v, _ in new] == [v.key for v, _ in old]
    return moved


def test_a_weight_stream_measures_its_fullest_wave_first(result: Any,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Where a loop streams weights into a product, the fullest single wave is measured
    before the cost model's cheapest size when its tiles read whole lines, it has more blocks
    than the cheapest, and the model rates it at most FULL_WAVE_FIRST_MAX_RATIO times as
    costly; otherwise, and for the other sizes, the order stays. (The fixture's tiles are
    narrower than a line; with every tile counted as whole lines, some sizes move.)"""
    cfg = opt.make_config(program(), "norm", SPACE)
    starts = [w for a in result.accepted for w, _ in sz.ranked_variants(cfg, a.graph)]
    assert any(sz._streams_weights(g) for g in starts), "the fixture has a loop streaming weights"
    _wave_first_cases(cfg, starts, monkeypatch)  # (its cheapest sizes have the most blocks)
    # (X + Y)·W at its real size, where it happened: the model's cheapest size of the found
    # 40-block structure has 20 blocks, its fullest whole-line wave 80 (64 columns each)
    g = mf.Graph()
    x, y = g.input((12, 4096), "f16", "X"), g.input((12, 4096), "f16", "Y")
    w = g.input((4096, 5120), "f16", "W")
    g.output(g.matmul(g.add(x, y), w))
    prog = g.build()
    found = superoptimize(prog, budget_s=60, gpu=False)
    cfg = opt.make_config(prog, None, None)
    assert _wave_first_cases(cfg, [a.graph for a in found.accepted], monkeypatch, (132,))
    top = found.accepted[0].graph
    first = gs.variants_to_measure(cfg, top, n_sm=132)[0][0]
    assert sz._blocks(first) == 80 and sz._whole_lines(first)


def test_whole_lines_tells_tiles_that_split_lines() -> None:
    """rmsnorm b=8's fused structure: 64-column fp16 tiles (128 bytes a row) read whole lines,
    48-column ones do not."""
    from mirage_formal.ir.text import parse_text

    def fused(grid: int, loop: int) -> KernelGraph:
        tn, tk = 6144 // grid, 4096 // loop
        return parse_text(f"""ugraph {{
  %0 = input() {{name='X'}} : f16[16, 4096]
  %1 = input() {{name='W'}} : f16[4096, 6144]
  %2 = kernel(%0, %1) {{forloop={loop}, grid=({grid}, 1, 1), threads=128}} {{
    %b0 = iter() {{fmap=1, imap=(-1, -1, -1), input=0}} : f16[16, {tk}]
    %b1 = iter() {{fmap=0, imap=(1, -1, -1), input=1}} : f16[{tk}, {tn}]
    %b2 = matmul(%b0, %b1) : f16[16, {tn}]
    %b3 = accum(%b2) {{fold=None, kind='sum'}} : f16[16, {tn}]
    save %b3 {{omap=(1, -1, -1)}}
  }}
  %3 = get(%2) {{index=0}} : f16[16, 6144]
  return %3
}}""")
    assert sz._whole_lines(fused(96, 32)) and sz._whole_lines(fused(48, 16))
    assert not sz._whole_lines(fused(128, 16))


def test_structures_take_turns_and_library_only_ones_take_no_slot(
        result: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The size variants of the fastest structures are measured in turns (each one's first,
    then each one's second), and a μGraph of library kernels alone (nothing to resize) is not
    one of those structures even when it measured fastest."""
    cfg = opt.make_config(program(), "norm", SPACE)
    accepted = [optimized.Optimized(a.graph, a.verdict, a.cost, a.found_at_s, a.float64_error)
                for a in result.accepted]
    looping = [a for a in accepted if gs.variants_to_measure(cfg, a.graph, n_sm=4)]
    assert len(looping) >= 2
    first, second = looping[:2]
    queues = {a.graph.key: [v.key for v, _ in gs.variants_to_measure(cfg, a.graph, n_sm=4)]
              for a in (first, second)}
    library = SimpleNamespace(graph=program(), measured_us=1.0)  # stands for a library-only μGraph
    monkeypatch.setattr(gs, "kernel_grids", lambda g, real=sz.kernel_grids:
                        () if g is library.graph else real(g))
    assert gs._fastest_measured([library, first, second], workloads.program("gated_mlp", 1)) == []
    first.measured_us, second.measured_us = 10.0, 11.0
    got = gs._fastest_measured([library, first, second], workloads.program("gated_mlp", 1))
    assert got == [first, second]
    times = {first.graph.key: 10.0, second.graph.key: 11.0}
    calls: list[Any] = []
    monkeypatch.setattr(gs, "_tune_one", _fake_tune(times, calls, key=lambda g: g.key))
    monkeypatch.setattr(gs, "gpu_candidates", lambda acc, top, prog: [first, second])
    monkeypatch.setattr(gs, "grid_filling_variants", lambda *a, **k: [])
    monkeypatch.setattr(gs, "walk_step", lambda *a, **k: [])
    for a in accepted:
        a.measured_us = None
    ctx = gs.VariantContext(cfg, Verifier(program(), seed=5), FloatRecheck(program()), n_sm=4)
    gs._gpu_rank(program(), accepted, 2, 0, None, ctx)
    order = [k for k, start in calls if start is None][2:]  # after the two first tunings
    qa, qb = queues[first.graph.key], queues[second.graph.key]
    expect = [q[t] for t in range(max(len(qa), len(qb))) for q in (qa, qb) if t < len(q)]
    assert order[:len(expect)] == expect


@pytest.mark.parametrize(("structures", "margin", "expected"), [(2, 0.03, 2), (1, 0.03, 1), (2, -0.01, 1)])
def test_the_winner_and_close_runners_up_get_the_second_tuning_round(
        result: Any, monkeypatch: pytest.MonkeyPatch, structures: int, margin: float, expected: int) -> None:
    """Candidates and size variants are tuned once (first round); the fastest, and the next
    fastest within SECOND_ROUND_MARGIN of it (up to SECOND_ROUND_STRUCTURES in all), then get
    the second round, each from its own first-round schedules, and the fastest time and kernel
    are what is returned. (The stand-in times every μGraph alike: a tie is within any margin
    of at least zero, and outside a negative one.)"""
    cfg = opt.make_config(program(), "norm", SPACE)
    accepted = [optimized.Optimized(a.graph, a.verdict, a.cost, a.found_at_s, a.float64_error)
                for a in result.accepted]
    calls: list[Any] = []
    monkeypatch.setattr(gs, "_tune_one", _fake_tune({}, calls, second_round=0.5))
    monkeypatch.setattr(gs, "SECOND_ROUND_STRUCTURES", structures)
    monkeypatch.setattr(gs, "SECOND_ROUND_MARGIN", margin)
    ctx = gs.VariantContext(cfg, Verifier(program(), seed=5), FloatRecheck(program()), n_sm=4)
    ranked, kernel, _ = gs._gpu_rank(program(), accepted, 2, 0, None, ctx)
    seconds = [c for c in calls if c[1] is not None]
    assert len(seconds) == expected
    polished = [a for a in ranked if "second tuning round" in (a.validation or "")]
    assert len(polished) == expected and ranked[0] is polished[0]
    # each from its own first-round schedules
    assert sorted(c[1]["k"] for c in seconds) == sorted(a.graph.key for a in polished)
    assert ranked[0].measured_us == 25.0 and kernel == ("kernel", ranked[0].graph.key, True)


def test_grid_filling_variants_are_measured_and_can_win(
        result: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Structures whose cheapest size leaves a loop to a schedule split are also measured at
    their cheapest size whose grid fills the SMs alone; a faster one replaces its entry (also
    when the structure was not among the picked candidates)."""
    n_sm = 8
    cfg = opt.make_config(program(), "norm", SPACE)
    accepted = [optimized.Optimized(a.graph, a.verdict, a.cost, a.found_at_s, a.float64_error)
                for a in result.accepted]
    # the model picks the widest grids of this small space; make the best looping structure's
    # entry its smallest-grid size (as the model picks for long loops on large programs)
    best = next(a for a in accepted if any(f > 1 for _, f in sz.kernel_grids(a.graph)))
    small = min((vc for vc in sz.ranked_variants(cfg, best.graph) if not sz._grid_fills(vc[0], n_sm)),
                key=lambda vc: sz._blocks(vc[0]))
    verifier = Verifier(program(), seed=5)
    best.graph, best.cost, best.verdict = small[0], small[1], verifier.check(small[0])
    hedges = gs.grid_filling_variants(cfg, accepted, limit=2, n_sm=n_sm)
    assert hedges and hedges[0][0] is best
    for a, v, c in hedges:
        assert not sz._grid_fills(a.graph, n_sm) and sz._grid_fills(v, n_sm)
        assert structure_key(v) == structure_key(a.graph) and v.key != a.graph.key
        cheaper = [w for w, cw in sz.ranked_variants(cfg, a.graph)
                   if cw.seconds < c.seconds and sz._grid_fills(w, n_sm)]
        assert not cheaper  # the model's cheapest grid-filling size of that structure
    a, v, _ = hedges[-1]
    # (by key: another structure of the space, a loop seed, has the same grids)
    monkeypatch.setattr(gs, "_tune_one", _fake_tune({v.key: 5.0}, key=lambda g: g.key))
    ctx = gs.VariantContext(cfg, verifier, FloatRecheck(program()), n_sm=n_sm)
    ranked, kernel, notes = gs._gpu_rank(program(), accepted, 1, 0, None, ctx)
    assert not [n for n in notes if "FAILED" in n or "failed" in n]
    assert ranked[0] is a and a.graph.key == v.key and a.measured_us == 5.0
    assert kernel == ("kernel", v.key, False)
    assert "grid-filling size variant" in (a.validation or "")
    keys = [structure_key(x.graph) for x in ranked]
    assert len(keys) == len(set(keys))


def _three_slow_steps(result: Any, monkeypatch: pytest.MonkeyPatch, fake: Any,
                      step_s: float) -> list[Any]:
    """Three accepted candidates, each GPU tuning step of which sleeps ``step_s`` first."""
    import time

    def tune_one(*args: Any, **kwargs: Any) -> Any:
        time.sleep(step_s)
        return fake(*args, **kwargs)

    monkeypatch.setattr(gs, "_tune_one", tune_one)
    accepted = [optimized.Optimized(a.graph, a.verdict, a.cost, a.found_at_s, a.float64_error)
                for a in result.accepted][:3]
    assert len(accepted) == 3
    return accepted


def test_the_gpu_stage_does_not_begin_a_step_it_cannot_finish(
        result: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a deadline 1.5 steps away, the stage tunes one candidate and then stops: the
    second step would end past the deadline, the longest step so far says (a b=8 variant's
    verification alone takes seconds; checking only the clock overran a 110 s budget by 13 s)."""
    import time

    step_s = 0.4
    accepted = _three_slow_steps(result, monkeypatch, _fake_tune({}), step_s)
    ranked, _, notes = gs._gpu_rank(program(), accepted, 3, 0, time.monotonic() + 1.5 * step_s)
    assert sum(a.measured_us is not None for a in ranked) == 1
    assert any("2 candidate(s) not tuned" in n for n in notes)


def test_ranking_leaves_room_for_the_winners_second_round(
        result: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a deadline 3.9 steps away and three candidates, the stage ranks two, keeping the
    third step for the winner's second round (the round that tries the L2 policies); ranking
    all three would have left no time for it."""
    import time

    step_s = 0.4
    calls: list[Any] = []
    accepted = _three_slow_steps(result, monkeypatch, _fake_tune({}, calls, second_round=0.5), step_s)
    ranked, _, notes = gs._gpu_rank(program(), accepted, 3, 0, time.monotonic() + 3.9 * step_s)
    assert sum(c[1] is None for c in calls) == 2  # two first-round tunings
    assert sum(c[1] is not None for c in calls) == 1  # and the second round
    assert any("1 candidate(s) not tuned" in n for n in notes)
    assert "second tuning round" in (ranked[0].validation or "")


def test_a_slow_step_elsewhere_does_not_cost_the_winner_its_second_round(
        result: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second round is expected to take as long as the winner's own first round, not as
    the longest step: here the winner tunes in 0.1 s, a slower candidate in 1.0 s, and 0.5 s
    are left after both (gated_mlp b=1 on the H200: one size variant took 56 s, and its
    winner lost the second round)."""
    import time

    calls: list[Any] = []
    first: list[str] = []

    def tune_one(graph: KernelGraph, program: KernelGraph, seed: Any, estimated_us: float,
                 deadline: float | None = None, start: Any = None, shared: Any = None) -> Any:
        first.append(first[0] if first else graph.key)
        fast = graph.key == first[0]
        time.sleep(0.1 if fast or start is not None else 1.0)
        times = {graph.key: 10.0 if fast else 50.0}
        return _fake_tune(times, calls, second_round=0.5, key=lambda g: g.key)(
            graph, program, seed, estimated_us, deadline, start, shared)

    monkeypatch.setattr(gs, "_tune_one", tune_one)
    accepted = [optimized.Optimized(a.graph, a.verdict, a.cost, a.found_at_s, a.float64_error)
                for a in result.accepted][:2]
    ranked, _, _ = gs._gpu_rank(program(), accepted, 2, 0, time.monotonic() + 1.6)
    assert [c[1] is not None for c in calls] == [False, False, True]
    assert ranked[0].measured_us == 5.0 and "second tuning round" in (ranked[0].validation or "")


def test_sizes_near_a_graph_are_those_within_the_radius(result: Any) -> None:
    """``size_variants(radius=r)`` is exactly the full enumeration's variants whose summed
    per-kernel ``size_distance`` from the graph's own sizes is at most r, the graph left out."""
    import dataclasses

    from mirage_formal.search.space import size_distance, size_variants

    cfg = dataclasses.replace(opt.make_config(program(), "norm", SPACE), max_variants=10**6)
    checked = 0
    for a in result.accepted:
        own = sz.kernel_grids(a.graph)

        def dist(v: KernelGraph, own: Any = own) -> float:
            return sum(size_distance(o, s) for o, s in zip(own, sz.kernel_grids(v), strict=True))

        full = [v for v in size_variants(cfg, a.graph) if v.key != a.graph.key]
        for radius in (1.0, 2.0):
            near = list(size_variants(cfg, a.graph, radius=radius))
            assert all(structure_key(v) == structure_key(a.graph) for v in near)
            assert sorted(v.key for v in near) == sorted(v.key for v in full if dist(v) <= radius + 1e-9)
            checked += len(near)
    assert checked, "this space has near sizes"


def test_the_walk_follows_faster_neighbours_and_stops_when_none_is(
        result: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """After the size variants, the fastest structure steps to a faster size among its
    neighbours, again from there, and stops at a size none of whose neighbours is faster; a
    size two steps away (never among the variants measured before) is reached that way."""
    cfg = opt.make_config(program(), "norm", SPACE)
    accepted = [optimized.Optimized(a.graph, a.verdict, a.cost, a.found_at_s, a.float64_error)
                for a in result.accepted]
    best = next(a for a in accepted if any(f > 1 for _, f in sz.kernel_grids(a.graph)))
    start = best.graph
    first = gs.walk_step(cfg, start, {start.key})
    assert first and all(v.key != start.key for v, _ in first)
    mid = first[-1][0]  # the step's last pick: not the one the cost model likes best
    second = gs.walk_step(cfg, mid, {start.key} | {v.key for v, _ in first})
    sizes = sz.kernel_grids
    far = [v for v, _ in second if sizes(v) != sizes(start)]
    assert far
    goal = far[-1]
    times = {sizes(start): 20.0, sizes(mid): 15.0, sizes(goal): 9.0}
    calls: list[Any] = []
    monkeypatch.setattr(gs, "_tune_one", _fake_tune(times, calls, key=sizes))
    for a in accepted:  # only ``best`` is tuned and walked in this test
        if a is not best:
            a.measured_us = None
    monkeypatch.setattr(gs, "gpu_candidates", lambda acc, top, prog: [best])
    monkeypatch.setattr(gs, "variants_to_measure", lambda *a, **k: [])
    monkeypatch.setattr(gs, "grid_filling_variants", lambda *a, **k: [])
    ctx = gs.VariantContext(cfg, Verifier(program(), seed=5), FloatRecheck(program()), n_sm=4)
    _, kernel, notes = gs._gpu_rank(program(), accepted, 1, 0, None, ctx)
    assert not [n for n in notes if "FAILED" in n or "failed" in n]
    assert best.graph.key == goal.key and best.measured_us == 9.0
    assert kernel == ("kernel", goal.key, False)
    assert "walk variant" in (best.validation or "")
    first_round = [c[0] for c in calls if c[1] is None]
    assert first_round[0] == sizes(start) and sizes(mid) in first_round and sizes(goal) in first_round
    # from the goal, one more step found nothing faster, and the walk stopped there
    last = gs.walk_step(cfg, goal, {start.key, mid.key, goal.key} | {v.key for v, _ in first + second})
    assert all(sizes(v) in first_round for v, _ in last)
    assert len(first_round) == len(set(first_round))  # no size tuned twice


def test_with_time_left_a_third_structure_gets_size_variants_too(
        result: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The two fastest structures are walked first; with time left, the third fastest gets
    its size variants measured as well, and a much faster size of it wins."""
    cfg = opt.make_config(program(), "norm", SPACE)
    accepted = [optimized.Optimized(a.graph, a.verdict, a.cost, a.found_at_s, a.float64_error)
                for a in result.accepted]
    looping = [a for a in accepted if gs.variants_to_measure(cfg, a.graph, n_sm=4)]
    assert len(looping) >= 3, "the fixture has three structures with size variants"
    first, second, third = looping[:3]
    own = third.graph
    goal = gs.variants_to_measure(cfg, own, n_sm=4)[0][0]
    times = {first.graph.key: 10.0, second.graph.key: 12.0, third.graph.key: 14.0, goal.key: 5.0}
    monkeypatch.setattr(gs, "_tune_one", _fake_tune(times, key=lambda g: g.key))
    monkeypatch.setattr(gs, "gpu_candidates", lambda acc, top, prog: [first, second, third])
    monkeypatch.setattr(gs, "grid_filling_variants", lambda *a, **k: [])
    for a in accepted:
        a.measured_us = None
    ctx = gs.VariantContext(cfg, Verifier(program(), seed=5), FloatRecheck(program()), n_sm=4)
    ranked, kernel, notes = gs._gpu_rank(program(), accepted, 3, 0, None, ctx)
    assert not [n for n in notes if "FAILED" in n or "failed" in n]
    assert ranked[0] is third and third.graph.key == goal.key and third.measured_us == 5.0
    assert kernel == ("kernel", goal.key, False)
    # with the stage's time spent after the first three tunings, nothing more is measured
    for a in accepted:
        a.measured_us = None
    calls: list[Any] = []
    monkeypatch.setattr(gs, "_tune_one", _fake_tune(times, calls, key=lambda g: g.key))
    third.graph = own
    ranked, _, notes = gs._gpu_rank(program(), accepted, 3, 0, time.monotonic() - 1.0, ctx)
    assert len(calls) <= 1 and any("budget spent" in n for n in notes)


def test_with_a_gpu_the_tail_is_rechecked_beside_the_stage_and_nothing_is_lost(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """superoptimize's GPU branch (stand-ins for the device and the tuner): only the μGraphs the
    stage may pick (the first ``GPU_GRID_FILLING_POOL`` by cost and the first of each kernel
    count) are re-checked before it starts; the others are re-checked beside it and join the
    result, best-first by cost after the measured ones; one whose re-check fails is flagged,
    never returned."""
    import mirage_formal.codegen as codegen
    import mirage_formal.codegen.runtime as rt
    from mirage_formal.verify import float64

    plain = superoptimize(program(), "norm", budget_s=120, overrides=SPACE, gpu=False)
    assert len(plain.accepted) >= 5
    monkeypatch.setattr(sz, "GPU_GRID_FILLING_POOL", 2)
    monkeypatch.setattr(codegen, "gpu_available", lambda: True)
    monkeypatch.setattr(rt, "runtime", lambda: SimpleNamespace(name="stand-in GPU"))
    calls: list[Any] = []
    monkeypatch.setattr(gs, "_tune_one", _fake_tune({}, calls, key=lambda g: g.key))
    found = [a for a in plain.accepted if a.graph.key != program().key]  # the search's own
    head, tail = rc._gpu_stage_pool(found, 2, pool=2)
    assert tail
    # the cost model's last μGraph of the tail fails its float64 re-check
    wrong = tail[-1].graph.key
    real_error = float64.FloatRecheck.error

    def error(self: Any, candidate: KernelGraph, output_map: Any = None) -> float:
        return 1.0 if candidate.key == wrong else real_error(self, candidate, output_map)

    monkeypatch.setattr(float64.FloatRecheck, "error", error)
    # the stage sizes its variants for this GPU's SM count, not the H100's
    import mirage_formal.codegen.autotune as autotune
    monkeypatch.setattr(autotune, "device_sm_count", lambda rt: 108)
    n_sms: list[Any] = []
    monkeypatch.setattr(gs, "variants_to_measure", lambda *a, **k: n_sms.append(k.get("n_sm")) or [])
    monkeypatch.setattr(gs, "grid_filling_variants", lambda *a, **k: n_sms.append(k.get("n_sm")) or [])
    monkeypatch.setattr(gs, "walk_step", lambda *a, **k: [])
    out = superoptimize(program(), "norm", budget_s=120, overrides=SPACE, gpu=True, gpu_top=2)
    assert n_sms and set(n_sms) == {108}
    tuned = {k for k, start in calls if start is None}
    assert tuned and tuned <= {a.graph.key for a in head} | {program().key}
    keys = [a.graph.key for a in out.accepted]
    assert wrong not in keys and wrong in {a.graph.key for a in out.flagged}
    assert set(keys) >= {a.graph.key for a in plain.accepted} - {wrong}
    assert len(keys) == len(set(keys))
    measured = [a for a in out.accepted if a.measured_us is not None]
    assert out.accepted[:len(measured)] == measured
    rest = out.accepted[len(measured):]
    assert [a.cost.seconds for a in rest] == sorted(a.cost.seconds for a in rest)
    assert all(a.float64_error is not None and a.float64_error <= optimized.RECHECK_RTOL for a in out.accepted)
    assert "float64_recheck_beside_gpu" in out.seconds and out.gpu == "stand-in GPU"
    assert out.kernel is not None and not out.not_rechecked


def _gemm(dtype: str = "f16") -> KernelGraph:
    g = mf.Graph()
    x = g.input((256, 1024), dtype, "X")
    w = g.input((1024, 512), dtype, "W")
    g.output(g.matmul(x, w))
    return g.build()


#: (the derived space: a smaller one keeps only the program's own library matmul)
GEMM_SPACE: dict[str, Any] = {}


def _searched(prog: KernelGraph, space: dict[str, Any]) -> tuple[Any, list[Any]]:
    """The search space of ``prog`` under ``space`` and its accepted μGraphs (no GPU), as
    the GPU stage receives them."""
    res = superoptimize(prog, budget_s=60, overrides=space, gpu=False)
    return opt.make_config(prog, None, space), [
        optimized.Optimized(a.graph, a.verdict, a.cost, a.found_at_s, a.float64_error)
        for a in res.accepted]


def test_warpgroup_mma_sizes_are_measured_and_can_win(monkeypatch: pytest.MonkeyPatch) -> None:
    """Structures with a size whose every looping product runs as warpgroup MMAs are also
    measured at such a size, the most blocks one wave holds (the cost model knows only
    mma.sync); a faster one replaces its structure's entry."""
    from mirage_formal.codegen.schedule import wgmma_threads

    cfg, accepted = _searched(_gemm(), GEMM_SPACE)
    n_sm = 8
    found = gs.wgmma_variants(cfg, accepted, n_sm=n_sm)
    assert found
    for a, v, _ in found:
        loops = [n.attr("graph") for n in v.nodes if n.op == "kernel" and n.attr("graph").forloop > 1]
        assert loops and all(wgmma_threads(bg) is not None for bg in loops)
        assert structure_key(v) == structure_key(a.graph) and sz._blocks(v) <= n_sm
        eligible = [w for w, _ in sz.ranked_variants(cfg, a.graph)
                    if sz._blocks(w) <= n_sm and sz._loop_blocks(w)
                    and all(sz._wgmma_kernel(bg) is not None for bg in sz._loop_blocks(w))]
        assert sz._blocks(v) == max(sz._blocks(w) for w in eligible)
    # (not for a program of 16-row products)
    assert not gs.wgmma_variants(opt.make_config(program(), "norm", SPACE), [
        optimized.Optimized(a.graph, a.verdict, a.cost, a.found_at_s, a.float64_error)
        for a in superoptimize(program(), "norm", budget_s=60, overrides=SPACE, gpu=False).accepted])
    a, v, _ = found[0]
    _variant_wins(monkeypatch, _gemm(), cfg, accepted, a, v, n_sm, "warpgroup-MMA size", grids)


def _variant_wins(monkeypatch: pytest.MonkeyPatch, prog: KernelGraph, cfg: Any,
                  accepted: list[Any], a: Any, v: KernelGraph, n_sm: int, kind: str,
                  key: Any) -> None:
    """With a stand-in tuner that times ``v`` (by ``key``) at 5 µs and everything else at 50,
    the GPU stage ranks ``a``'s structure first with ``v`` as its graph, noted as a ``kind``
    variant."""
    monkeypatch.setattr(gs, "_tune_one", _fake_tune({key(v): 5.0}, key=key))
    ctx = gs.VariantContext(cfg, Verifier(prog, seed=5), FloatRecheck(prog), n_sm=n_sm)
    ranked, kernel, notes = gs._gpu_rank(prog, accepted, 1, 0, None, ctx)
    assert kernel == ("kernel", v.key, False)
    assert not [n for n in notes if "FAILED" in n or "failed" in n]
    assert ranked[0] is a and a.graph.key == v.key and a.measured_us == 5.0
    assert f"{kind} variant" in (a.validation or "")


def test_a_structure_that_is_two_kinds_of_hedge_is_walked_once(
        result: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A structure both a grid-filling and a warpgroup-MMA hedge walks its sizes once."""
    cfg = opt.make_config(program(), "norm", SPACE)
    accepted = [optimized.Optimized(a.graph, a.verdict, a.cost, a.found_at_s, a.float64_error)
                for a in result.accepted]
    a = next(x for x in accepted if sz.ranked_variants(cfg, x.graph))
    v, c = next((w, cw) for w, cw in sz.ranked_variants(cfg, a.graph) if w.key != a.graph.key)
    monkeypatch.setattr(gs, "grid_filling_variants", lambda *args, **kw: [(a, v, c)])
    monkeypatch.setattr(gs, "wgmma_variants", lambda *args, **kw: [(a, v, c)])
    monkeypatch.setattr(gs, "_fastest_measured", lambda *args, **kw: [])
    walked: list[str] = []
    step = gs.walk_step

    def counting_step(config: Any, graph: KernelGraph, *args: Any, **kw: Any) -> Any:
        walked.append(structure_key(graph))
        return step(config, graph, *args, **kw)

    monkeypatch.setattr(gs, "walk_step", counting_step)
    monkeypatch.setattr(gs, "_tune_one", _fake_tune({}))
    ctx = gs.VariantContext(cfg, Verifier(program(), seed=5), FloatRecheck(program()), n_sm=4)
    gs._gpu_rank(program(), accepted, 1, 0, None, ctx)
    assert walked.count(structure_key(a.graph)) == 1


@pytest.mark.parametrize(("floor_us", "full_round"), [(100.0, False), (15.0, True)])
def test_the_inputs_own_lowering_is_timed_quickly_unless_it_may_win(
        result: Any, monkeypatch: pytest.MonkeyPatch, floor_us: float, full_round: bool) -> None:
    """The input program's own lowering, behind the cost model's pick, is tuned with a deadline
    of now (its first schedules only); a full first round follows only where that time is
    within FLOOR_FULL_ROUND_WITHIN of the best other candidate's."""
    cfg = opt.make_config(program(), "norm", SPACE)
    a0 = result.accepted[0]
    first = optimized.Optimized(a0.graph, a0.verdict, a0.cost, a0.found_at_s, a0.float64_error)
    own = optimized.Optimized(program(), a0.verdict, a0.cost, a0.found_at_s, a0.float64_error)
    calls: list[Any] = []
    stand_in = _fake_tune({first.graph.key: 10.0, own.graph.key: floor_us}, key=lambda g: g.key)

    def tune_one(graph: KernelGraph, prog: KernelGraph, seed: Any, estimated_us: float,
                 deadline: float | None = None, start: Any = None, shared: Any = None) -> Any:
        quick = deadline is not None and deadline <= time.monotonic()
        calls.append((graph.key, start is None, quick))
        return stand_in(graph, prog, seed, estimated_us, deadline, start, shared)

    monkeypatch.setattr(gs, "_tune_one", tune_one)
    monkeypatch.setattr(gs, "gpu_candidates", lambda acc, top, prog: [first, own])
    ctx = gs.VariantContext(cfg, Verifier(program(), seed=5), FloatRecheck(program()), n_sm=4)
    far = time.monotonic() + 3600
    monkeypatch.setattr(gs, "grid_filling_variants", lambda *a, **k: [])
    monkeypatch.setattr(gs, "walk_step", lambda *a, **k: [])
    gs._gpu_rank(program(), [first, own], 2, 0, far, ctx)
    firsts = [(k, q) for k, first_round, q in calls if first_round and k == own.graph.key]
    assert firsts[0] == (own.graph.key, True)  # timed at its first schedules only
    assert firsts[1:] == ([(own.graph.key, False)] if full_round else [])
    assert [q for k, first_round, q in calls if k == first.graph.key and first_round] == [False]
    assert own.measured_us == floor_us


def _gemm32() -> KernelGraph:
    return _gemm("f32")


#: (the derived space, as for the fp16 product)
GEMM32_SPACE: dict[str, Any] = {}


def test_fp32_loops_are_measured_at_longer_loop_ranges_and_can_win(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the fastest structure's loops multiply fp32 tiles, its own grids at 2x and 4x its
    loop range (shorter k tiles) are measured too (the search keeps the cost model's range
    only); a faster one replaces its structure's entry. Not for fp16 loops."""
    cfg, accepted = _searched(_gemm32(), GEMM32_SPACE)
    looping = [a for a in accepted if any(f > 1 for _, f in sz.kernel_grids(a.graph))]
    assert looping
    a = looping[0]
    own = sz.kernel_grids(a.graph)
    found = gs.loop_range_variants(cfg, a.graph, set())
    for v, _ in found:
        assert structure_key(v) == structure_key(a.graph) and grids(v) == grids(a.graph)
        assert any(sz.kernel_grids(v) == tuple((gr, f * m if f > 1 else f) for gr, f in own)
                   for m in sz.GPU_LOOP_RANGE_FACTORS)
        assert sz._loop_k_at_least(v, sz.LOOP_RANGE_MIN_K)
    # every factor whose k tiles stay at least LOOP_RANGE_MIN_K long, past the space's own
    # ranges too (the search's stop at 64)
    k = 1024
    assert len(found) == sum(all(k // (f * m) >= sz.LOOP_RANGE_MIN_K for _, f in own if f > 1)
                             for m in sz.GPU_LOOP_RANGE_FACTORS)
    assert any(f > max(cfg.forloop) for v, _ in found for _, f in sz.kernel_grids(v)) or \
        all(f * max(sz.GPU_LOOP_RANGE_FACTORS) <= max(cfg.forloop) for _, f in own)
    assert not gs.loop_range_variants(cfg, a.graph, {v.key for v, _ in found})
    f16, f16_accepted = _searched(_gemm(), GEMM_SPACE)
    for b in f16_accepted:
        assert not gs.loop_range_variants(f16, b.graph, set())
    if not found:
        return
    _variant_wins(monkeypatch, _gemm32(), cfg, [a], a, found[0][0], 8, "loop range", sz.kernel_grids)


def test_tf32_split_sizes_are_measured_and_can_win(monkeypatch: pytest.MonkeyPatch) -> None:
    """Structures whose loops multiply fp32 tiles are also measured at the size with the most
    TF32 tiles a warp whose blocks the tuner's wave split fills within one wave (then the
    squarest tiles); a faster one replaces its structure's entry. Not for fp16 products."""
    from mirage_formal.codegen.schedule import Schedule

    cfg, accepted = _searched(_gemm32(), GEMM32_SPACE)
    n_sm = 16
    found = gs.tf32_split_variants(cfg, accepted, n_sm=n_sm)
    assert found
    for a, v, _ in found:
        assert structure_key(v) == structure_key(a.graph)
        assert 0 < sz._split_wave_blocks(v, n_sm) <= n_sm
        tiles = sz._tf32_warp_tiles(v)
        assert tiles >= sz.TF32_SIZE_MIN_TILES
        emits = sz._wave_sizes_that_emit(cfg, a.graph, n_sm, Schedule(tf32x3=True, threads=256))
        assert v.key in {w.key for w, _ in emits}
        rivals = [w for w, _ in emits if sz._split_wave_blocks(w, n_sm) and sz._tf32_sizes(w)]
        assert tiles == max(sz._tf32_warp_tiles(w) for w in rivals)
        assert sz._operand_rows(v) == min(sz._operand_rows(w) for w in rivals
                                          if sz._tf32_warp_tiles(w) == tiles)
    assert not gs.tf32_split_variants(*_searched(_gemm(), GEMM_SPACE))
    a, v, _ = found[0]
    monkeypatch.setattr(gs, "tf32_variants", lambda *args, **kw: [])
    _variant_wins(monkeypatch, _gemm32(), cfg, accepted, a, v, n_sm, "TF32 split size",
                  sz.kernel_grids)


def test_tf32_sizes_are_measured_and_can_win(monkeypatch: pytest.MonkeyPatch) -> None:
    """Structures whose loops multiply fp32 tiles are also measured at the size whose every
    looping fp32 product gives 256 threads at least 8 TF32 tiles a warp, the most blocks one
    wave holds; a faster one replaces its structure's entry. Not for fp16 products."""
    from mirage_formal.codegen.emit import SMEM_LIMIT_BYTES, emit_block_graph
    from mirage_formal.codegen.schedule import Schedule, tf32_warp_tiling

    cfg, accepted = _searched(_gemm32(), GEMM32_SPACE)
    n_sm = 8
    found = gs.tf32_variants(cfg, accepted, n_sm=n_sm)
    assert found
    for a, v, _ in found:
        for bg in (n.attr("graph") for n in v.nodes if n.op == "kernel" and n.attr("graph").forloop > 1):
            for x in (x for x in bg.nodes if x.op == "matmul"):
                wm, wn, _ = tf32_warp_tiling(x.shape[0], x.shape[1], x.src[0].shape[1], 8) or (0, 0, 0)
                assert wm * wn >= sz.TF32_SIZE_MIN_TILES
        assert structure_key(v) == structure_key(a.graph) and sz._blocks(v) <= n_sm
        # the sizes the emitter fits (not the cost model's shared-memory count, which holds
        # every tile): at least the space's eligible ones, the fullest wave among them
        emits = sz._wave_sizes_that_emit(cfg, a.graph, n_sm, Schedule(tf32x3=True, threads=256))
        assert v.key in {w.key for w, _ in emits}
        eligible = [w for w, _ in emits if sz._tf32_sizes(w)]
        assert sz._blocks(v) == max(sz._blocks(w) for w in eligible)
        for w, _ in emits:
            for n in (n for n in w.nodes if n.op == "kernel"):
                e = emit_block_graph(n.attr("graph"), "k", opts=Schedule(tf32x3=True, threads=256))
                assert e.ws_floats == 0 and e.smem_bytes <= SMEM_LIMIT_BYTES
    assert not gs.tf32_variants(*_searched(_gemm(), GEMM_SPACE))
    a, v, _ = found[0]
    _variant_wins(monkeypatch, _gemm32(), cfg, accepted, a, v, n_sm, "TF32 size", sz.kernel_grids)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mkn=st.sampled_from([(128, 2048, 256), (256, 1024, 512), (256, 2048, 256),
                            (512, 1024, 256)]),
       seed=st.integers(0, 2**31 - 1))
def test_fp32_size_hedges_compute_the_program(mkn: tuple[int, int, int], seed: int) -> None:
    """Every size the fp32 hedges pick (loop ranges past the space, TF32 sizes from the
    emitter's fit) computes the program's function: the float64 semantics of the variant and
    of the program agree on fresh random inputs (the GPU stage verifies them too before it
    times them; this checks the rules build nothing else)."""
    m, k, n = mkn
    g = mf.Graph()
    x = g.input((m, k), "f32", "X")
    w = g.input((k, n), "f32", "W")
    g.output(g.matmul(x, w))
    prog = g.build()
    cfg, accepted = _searched(prog, GEMM32_SPACE)
    picked = [v for _, v, _ in gs.tf32_variants(cfg, accepted, n_sm=16)]
    picked += [v for _, v, _ in gs.tf32_split_variants(cfg, accepted, n_sm=16)]
    for a in accepted[:3]:
        picked += [v for v, _ in gs.loop_range_variants(cfg, a.graph, set())]
    assert picked  # (these products' searches return a looping fp32 structure)
    rng = np.random.default_rng(seed)
    inputs = {"X": rng.uniform(-1, 1, (m, k)), "W": rng.uniform(-1, 1, (k, n))}
    want = run_float64(prog, inputs)[0]
    for v in picked:
        got = run_float64(v, inputs)[0]
        assert np.allclose(got, want, rtol=1e-9, atol=1e-9 * np.abs(want).max()), sz.kernel_grids(v)


def test_variants_verified_ahead_get_the_stage_verifiers_verdicts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The stage's verify-ahead thread gives each size variant the verdict the stage's own
    verifier gives (a twin: same seed and trials), in any order asked, a graph not asked for
    included; a verification that raises raises where the stage asks for that verdict, and
    the thread goes on with the others."""
    prog = _gemm()
    cfg, accepted = _searched(prog, GEMM_SPACE)
    a = next(x for x in accepted if sz.kernel_grids(x.graph))
    sizes = [v for v, _ in sz.ranked_variants(cfg, a.graph)[:4]]
    assert len(sizes) == 4
    verifier = Verifier(prog, seed=5)
    ctx = gs.VariantContext(cfg, verifier, FloatRecheck(prog), n_sm=8)
    ahead = gs._VerifyAhead(ctx)
    ahead.ask(sizes[:3])
    for v in [sizes[3], *reversed(sizes[:3])]:  # (the last one never asked for)
        verdict, err = ahead.result(v)
        want = Verifier(prog, seed=5).check(v)
        assert (verdict.accepted, verdict.output_map) == (want.accepted, want.output_map)
        assert verdict.accepted and err <= optimized.RECHECK_RTOL
    boom = gs._VerifyAhead(ctx)
    real = boom._verifier.check

    def check(g: KernelGraph) -> Any:
        if g.key == sizes[1].key:
            raise RuntimeError("a verification that fails")
        return real(g)

    monkeypatch.setattr(boom._verifier, "check", check)
    boom.ask(sizes[:3])
    with pytest.raises(RuntimeError, match="a verification that fails"):
        boom.result(sizes[1])
    assert boom.result(sizes[2])[0].accepted
    for t in (ahead, boom):  # closed, the thread ends (and frees its twin verifier)
        t.ask(sizes)
        t.close()
        t._thread.join(timeout=60)
        assert not t._thread.is_alive()
    # the stage closes its own
    monkeypatch.setattr(gs, "_tune_one", _fake_tune({}, key=lambda g: g.key))
    gs._gpu_rank(prog, accepted, 1, 0, None, ctx)
    for t in [t for t in threading.enumerate() if t.name == "verify-ahead"]:
        t.join(timeout=60)
        assert not t.is_alive()


def test_a_verdict_not_ready_by_the_stages_deadline_is_not_waited_for(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The stage asks for a size variant's verdict with its deadline: a verification still
    running then is not waited for (None: the variant is skipped, the budget holds); asked
    again without a deadline, the verdict is the verifier's."""
    prog = _gemm()
    cfg, accepted = _searched(prog, GEMM_SPACE)
    a = next(x for x in accepted if sz.kernel_grids(x.graph))
    (v, _), *_ = sz.ranked_variants(cfg, a.graph)
    ctx = gs.VariantContext(cfg, Verifier(prog, seed=5), FloatRecheck(prog), n_sm=8)
    ahead = gs._VerifyAhead(ctx)
    real = ahead._verifier.check
    release = threading.Event()

    def slow_check(g: KernelGraph) -> Any:
        release.wait(timeout=60)
        return real(g)

    monkeypatch.setattr(ahead._verifier, "check", slow_check)
    t = time.monotonic()
    assert ahead.result(v, until=t + 0.3) is None
    assert time.monotonic() - t < 5
    release.set()
    got = ahead.result(v)
    assert got is not None and got[0].accepted
    ahead.close()


#: ViT-Base's MLP as the search's two-kernel structure (s50): each product with its bias
#: epilogue (gelu; the residual), all 197 rows in every block, at sizes no warpgroup takes
VIT_MLP_TWO_KERNELS = """ugraph {
  %0 = input() {name='X'} : f16[1, 197, 768]
  %1 = input() {name='H'} : f16[1, 197, 768]
  %2 = input() {name='W1'} : f16[768, 3072]
  %3 = input() {name='B1'} : f16[3072]
  %4 = input() {name='W2'} : f16[3072, 768]
  %5 = input() {name='B2'} : f16[768]
  %6 = kernel(%1, %2, %3) {forloop=8, grid=(64, 1, 1), threads=128} {
    %b0 = iter() {fmap=2, imap=(-1, -1, -1), input=0} : f16[1, 197, 96]
    %b1 = iter() {fmap=0, imap=(1, -1, -1), input=1} : f16[96, 48]
    %b2 = matmul(%b0, %b1) : f16[1, 197, 48]
    %b3 = accum(%b2) {fold=None, kind='sum'} : f16[1, 197, 48]
    %b4 = iter() {fmap=-1, imap=(0, -1, -1), input=2} : f16[48]
    %b5 = accum(%b4) {fold=None, kind='mean'} : f16[48]
    %b6 = add(%b3, %b5) : f16[1, 197, 48]
    %b7 = gelu(%b6) : f16[1, 197, 48]
    save %b7 {omap=(2, -1, -1)}
  }
  %7 = get(%6) {index=0} : f16[1, 197, 3072]
  %8 = kernel(%0, %4, %5, %7) {forloop=32, grid=(24, 1, 1), threads=128} {
    %b0 = iter() {fmap=-1, imap=(2, -1, -1), input=0} : f16[1, 197, 32]
    %b1 = accum(%b0) {fold=None, kind='mean'} : f16[1, 197, 32]
    %b2 = iter() {fmap=2, imap=(-1, -1, -1), input=3} : f16[1, 197, 96]
    %b3 = iter() {fmap=0, imap=(1, -1, -1), input=1} : f16[96, 32]
    %b4 = matmul(%b2, %b3) : f16[1, 197, 32]
    %b5 = accum(%b4) {fold=None, kind='sum'} : f16[1, 197, 32]
    %b6 = iter() {fmap=-1, imap=(0, -1, -1), input=2} : f16[32]
    %b7 = accum(%b6) {fold=None, kind='mean'} : f16[32]
    %b8 = add(%b5, %b7) : f16[1, 197, 32]
    %b9 = add(%b1, %b8) : f16[1, 197, 32]
    save %b9 {omap=(2, -1, -1)}
  }
  %9 = get(%8) {index=0} : f16[1, 197, 768]
  return %9
}
"""


def _vit_mlp() -> KernelGraph:
    g = mf.Graph()
    x, h = g.input((1, 197, 768), "f16", "X"), g.input((1, 197, 768), "f16", "H")
    w1, b1 = g.input((768, 3072), "f16", "W1"), g.input((3072,), "f16", "B1")
    w2, b2 = g.input((3072, 768), "f16", "W2"), g.input((768,), "f16", "B2")
    u = g.gelu(g.add(g.matmul(h, w1), b1))
    g.output(g.add(x, g.add(g.matmul(u, w2), b2)))
    return g.build()


def test_each_kernel_of_a_structure_gets_its_warpgroup_band_size() -> None:
    """Two kernels of 197-row products: the warpgroup-MMA hedge resizes each looping kernel
    in turn (``size_variants`` with ``vary`` changes that kernel only) to its size with the
    most blocks up to one wave whose 64-row bands run as warpgroup MMAs, so both kernels of
    ViT's MLP get one (the whole-graph list, cut at 256, varied the second kernel only)."""
    import dataclasses
    import math

    from mirage_formal.ir.graph import KERNEL_OP
    from mirage_formal.ir.text import parse_text
    from mirage_formal.search.space import size_variants

    prog = _vit_mlp()
    cfg = opt.make_config(prog, None, {})
    start = parse_text(VIT_MLP_TWO_KERNELS)
    grids = sz.kernel_grids(start)
    for j in range(2):
        for v in size_variants(dataclasses.replace(cfg, max_variants=64), start, vary=j):
            assert sz.kernel_grids(v)[1 - j] == grids[1 - j]
    found = sz._kernelwise_wave_size(cfg, start, sz._wgmma_kernel, 132)
    assert found is not None
    v, cost = found
    assert structure_key(v) == structure_key(start) and cost.seconds > 0
    kernels = [n.attr("graph") for n in v.nodes if n.op == KERNEL_OP]
    assert all(sz._wgmma_kernel(bg) is not None for bg in kernels)
    for j, bg in enumerate(kernels):  # (no wgmma-able size of that kernel has more blocks)
        sizes = [[n for n in w.nodes if n.op == KERNEL_OP][j].attr("graph")
                 for w in size_variants(dataclasses.replace(cfg, max_variants=4096), v, vary=j)]
        most = max(math.prod(b.grid) for b in sizes
                   if math.prod(b.grid) <= 132 and sz._wgmma_kernel(b) is not None)
        assert math.prod(bg.grid) == most
