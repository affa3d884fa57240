"""The search on tiny spaces: it finds the expert μGraphs, produces each DAG once, prunes
soundly with the stand-in pruner, ranks by cost, and rejects bad input before starting."""

from __future__ import annotations

import math
from typing import Any

import pytest

from mirage_formal import workloads
from mirage_formal.errors import GraphError, MirageError, UnsupportedOpError
from mirage_formal.ir.builder import Graph
from mirage_formal.ir.graph import INPUT, KERNEL_OP, KernelGraph
from mirage_formal.ir.mirage import load_mirage
from mirage_formal.search import KeepAll, SearchConfig, estimate, run_search
from mirage_formal.search.cost import BUILTIN
from mirage_formal.search.reference_pruner import ExprPruner
from mirage_formal.search.state import SearchState

CK = "/work/shared/mirage_checkpoints"


def tiny_rmsnorm() -> KernelGraph:
    return workloads.program("rmsnorm", 1, rows=2, h=64, n=64)


def norm_cfg(**kw: Any) -> SearchConfig:
    base = dict(grid_sizes=[2, 16], forloop=[1, 4], max_block_ops=6)
    base.update(kw)
    return SearchConfig.from_preset("norm", **base)


def is_fused_rmsnorm(g: KernelGraph) -> bool:
    ks = g.kernels
    if len(ks) != 1 or ks[0].op != KERNEL_OP:
        return False
    bg = ks[0].attr("graph")
    accs = [n for n in bg.nodes if n.op == "accum"]
    return bg.forloop > 1 and {a.attr("kind") for a in accs} == {"sum", "rms"}


def test_tiny_rmsnorm_finds_the_fused_kernel(f64_checker: Any) -> None:
    prog = tiny_rmsnorm()
    r = run_search(prog, norm_cfg(), ExprPruner(prog), f64_checker(prog), progress=False)
    assert r.complete and r.accepted
    assert any(is_fused_rmsnorm(a.graph) for a in r.accepted)
    costs = [a.cost.seconds for a in r.accepted]
    assert costs == sorted(costs)
    assert all(a.verdict.accepted for a in r.accepted)


def test_pruning_keeps_what_no_pruning_accepts(f64_checker: Any) -> None:
    """The stand-in pruner must not lose any accepted μGraph on this space."""
    prog = tiny_rmsnorm()
    cfg = norm_cfg(max_block_ops=5)
    a = run_search(prog, cfg, ExprPruner(prog), f64_checker(prog), progress=False)
    b = run_search(prog, cfg, KeepAll(), f64_checker(prog), progress=False)
    assert {x.graph.key for x in a.accepted} == {x.graph.key for x in b.accepted}
    assert a.stats.visited < b.stats.visited


def test_each_candidate_is_produced_once() -> None:
    prog = tiny_rmsnorm()
    seen: list[str] = []

    class Rec:
        def check(self, g: KernelGraph) -> Any:
            seen.append(g.key)
            return type("V", (), {"accepted": False})()

    st = SearchState(prog, norm_cfg(max_block_ops=6, verify_variants=1), KeepAll(), Rec())
    reps: list[str] = []
    st.on_candidate = lambda g, *_: reps.append(g.key)  # type: ignore[method-assign]
    e = st.enumerator()
    for mv in e.moves():
        if mv.kind != "seed":  # (a seed may be a DAG the enumeration also reaches)
            e.run_move(mv)
    assert reps and len(reps) == len(set(reps))


def _candidates(prog: KernelGraph, cfg: SearchConfig, whole: bool) -> list[str]:
    """Every candidate the units produce (a multiset), from the units as split or from each
    kernel move as one unit (``whole``)."""
    import dataclasses

    reps: list[str] = []

    def state() -> SearchState:
        st = SearchState(prog, cfg, KeepAll(), None)  # type: ignore[arg-type]
        st.on_candidate = lambda g, *_: reps.append(g.key)  # type: ignore[method-assign]
        return st

    moves = state().enumerator().moves()
    if whole:
        moves = list(dict.fromkeys(dataclasses.replace(m, part=0, parts=1) for m in moves))
    for mv in moves:  # each unit in a state of its own, as on its own worker
        state().enumerator().run_move(mv)
    return sorted(reps)


@pytest.mark.parametrize("name, sizes", [
    ("rmsnorm", dict(rows=2, h=64, n=64)), ("gated_mlp", dict(m=2, k=64, n=64)),
])
def test_units_partition_the_space(name: str, sizes: dict[str, int]) -> None:
    """Splitting a kernel's unit by its block graphs, and a pre-defined op's unit by the moves
    after it (round robin), loses no candidate and produces none twice: the units'
    candidates equal those of the unsplit moves."""
    prog = workloads.program(name, 1, **sizes)
    from mirage_formal.optimize import make_config

    cfg = make_config(prog, None, dict(grid_sizes=[2, 16], forloop=[1, 4], max_block_ops=5))
    split = _candidates(prog, cfg, whole=False)
    assert split and split == _candidates(prog, cfg, whole=True)
    moves = SearchState(prog, cfg, KeepAll(), None).enumerator().moves()  # type: ignore[arg-type]
    assert any(m.parts > 1 for m in moves if m.kind == "kernel")
    assert any(m.parts > 1 for m in moves if m.kind == "op")  # split over the moves after it


def _one_kernel_program(kind: str) -> KernelGraph:
    """Programs whose derived space has one kernel op (as ntrans's): a matmul (two block ops,
    above the split at depth 2), a sum, a product of a sum and a norm of a sum (longer)."""
    g = Graph()
    x = g.input((4, 64), "f16", "X")
    if kind == "matmul":  # two block ops (matmul, then accumulate over the loop)
        g.output(x @ g.input((64, 16), "f16", "W"))
        return g.build()
    h = g.input((4, 64), "f16", "H")
    s = g.add(x, h)
    g.output({"sum": s, "product": g.mul(s, x), "norm": g.rms_norm(s)}[kind])
    return g.build()


@pytest.mark.parametrize("kind", ["matmul", "sum", "product", "norm"])
@pytest.mark.parametrize("depth", [1, 2])
def test_one_kernel_units_partition_the_block_search(kind: str, depth: int,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """In a space of one kernel op, a kernel's unit is split by its second (or, at depth 2,
    third) block ops, round robin, and block graphs above that level belong to the first part:
    the parts' candidates equal the unsplit units' as a multiset, and on the norm parts other
    than the first find some of them."""
    from mirage_formal.optimize import make_config
    from mirage_formal.search import space

    monkeypatch.setattr(space, "ONE_KERNEL_SPLIT_DEPTH", depth)
    prog = _one_kernel_program(kind)
    cfg = make_config(prog, None, dict(grid_sizes=[2], forloop=[1, 4], max_block_ops=6))
    assert cfg.max_kernel_ops == 1
    split = _candidates(prog, cfg, whole=False)
    assert split and split == _candidates(prog, cfg, whole=True)
    st = SearchState(prog, cfg, KeepAll(), None)  # type: ignore[arg-type]
    found: list[int] = []
    st.on_candidate = lambda g, *_: found.append(1)  # type: ignore[method-assign]
    later = 0  # candidates of parts other than the first: the split divides real work
    for mv in st.enumerator().moves():
        before = len(found)
        st.enumerator().run_move(mv)
        later += (len(found) - before) if mv.kind == "kernel" and mv.part > 0 else 0
    assert later > 0 or kind != "norm"


@pytest.mark.parametrize("fname, names, workload", [
    ("rmsnorm_bs1.json", ["X", "W"], "rmsnorm"),
    ("gated_mlp.json", ["X", "W1", "W2"], "gated_mlp"),
    ("gqa_bs1.json", ["Q", "K", "V"], "gqa"),
])
def test_stand_in_pruner_keeps_every_tensor_of_mirage_mugraphs(fname: str, names: list[str],
                                                               workload: str) -> None:
    prog = workloads.program(workload)
    p = ExprPruner(prog)
    for g in load_mirage(f"{CK}/{fname}", names)[:8]:
        for n in g.nodes:
            if n.op == INPUT:
                continue
            if n.op == KERNEL_OP:
                bg = n.attr("graph")
                assert all(p.keep(b, list(n.src), bg.grid, bg.forloop) for b in bg.nodes)
            else:
                assert p.keep(n)


def test_stand_in_pruner_prunes_foreign_expressions() -> None:
    prog = workloads.program("gqa", 1, q=16, kv=64)
    p = ExprPruner(prog)
    g = Graph()
    q = g.input((2, 16, 64), "f16", "Q")
    assert not p.keep(g.exp(q).node)
    assert not p.keep(g.mul(q, q).node)


def test_cost_prefers_fusion_and_fewer_bytes() -> None:
    # the model's structure under the built-in physical constants (the fitted ones follow data)
    t = BUILTIN["h100"]
    fused = workloads.handwritten("rmsnorm", col_tile=32, k_tile=512)  # 192 blocks fill 132 SMs
    few_blocks = workloads.handwritten("rmsnorm", col_tile=512, k_tile=512)  # 12 blocks
    assert estimate(fused, t).seconds < estimate(few_blocks, t).seconds
    plain = workloads.program("rmsnorm")
    assert estimate(fused, t).seconds < estimate(plain, t).seconds
    assert estimate(fused, t).launches == 1 and estimate(plain, t).launches == 2


def test_bad_input_is_rejected_before_search(f64_checker: Any) -> None:
    prog = tiny_rmsnorm()
    cfg = norm_cfg()
    with pytest.raises(MirageError, match="graph-defined kernels"):
        run_search(workloads.handwritten("rmsnorm", rows=2, h=64, n=64, col_tile=16, k_tile=16),
                   cfg, KeepAll(), f64_checker(prog), progress=False)
    g = Graph()
    g.input((4, 4), "f16", "X")
    with pytest.raises(GraphError, match="no outputs"):
        g.build()
    g2 = Graph()
    x = g2.input((4, 4), "f16", "X")
    g2.output(g2.gelu(x))
    with pytest.raises(UnsupportedOpError, match="gelu"):
        run_search(g2.build(), cfg.replace(max_graph_kernels=0, kernel_ops=("add",)), KeepAll(),
                   f64_checker(prog), progress=False)
    g3 = Graph()
    g3.output(g3.input((4, 4), "f16", "X"))
    with pytest.raises(MirageError, match=r"is the input itself.*leave it out of g\.output"):
        run_search(g3.build(), cfg, KeepAll(), f64_checker(prog), progress=False)
    with pytest.raises(MirageError, match="KernelGraph"):
        run_search("rmsnorm", cfg, KeepAll(), f64_checker(prog), progress=False)  # type: ignore[arg-type]


def test_budget_returns_best_so_far(f64_checker: Any) -> None:
    prog = tiny_rmsnorm()
    r = run_search(prog, norm_cfg(), ExprPruner(prog), f64_checker(prog), progress=False,
                   max_candidates=1, seeds=False)  # the budget bounds each unit's candidates
    assert r.stopped is not None and not r.complete
    # one checker call per unit: at most one accepted μGraph from each unit (a unit the
    # candidate cap stopped still returns what it accepted, and is not counted as done)
    units = [a.unit for a in r.accepted]
    assert len(units) == len(set(units)) and all(0 <= u < r.units_total for u in units)


def test_chain_stops_at_first_rejection(f64_checker: Any) -> None:
    from mirage_formal.search import Chain

    prog = tiny_rmsnorm()
    calls: list[str] = []

    class Count:
        def check(self, g: KernelGraph) -> Any:
            calls.append(g.key)
            return type("V", (), {"accepted": True})()

    ch = Chain(f64_checker(prog), Count())
    assert ch.check(prog).accepted and len(calls) == 1
    wrong = workloads.program("rmsnorm", 1, rows=2, h=64, n=64)
    g = Graph()
    x = g.input((2, 64), "f16", "X")
    w = g.input((64, 64), "f16", "W")
    g.output(g.matmul(x, w))
    assert not ch.check(g.build()).accepted and len(calls) == 1
    assert wrong.key == prog.key


@pytest.mark.parametrize("name", sorted(workloads.PROGRAMS))
def test_prologue_units_come_first(name: str) -> None:
    """After the direct lowering and the loop seeds come exactly the units whose first move is
    a row-local op (a norm or unary elementwise op) the program itself applies to its inputs; every other
    pre-defined op's unit comes after every graph-defined kernel's."""
    from mirage_formal.search import derive, space

    prog = workloads.program(name, 1)
    e = space.Enumerator(prog, derive.derive_config(prog), lambda *a: True, lambda *a: None,
                         lambda *a: None, space.Stats())
    ms = e.moves()
    assert ms[0].kind == "direct"
    inputs = list(prog.inputs)
    own = {(n.op, tuple(inputs.index(s) for s in n.src)) for n in prog.nodes
           if n.op != INPUT and all(s.op == INPUT for s in n.src)
           and space.REGISTRY[n.op].label in space.PROLOGUE_LABELS}
    k = 1
    while ms[k].kind == "seed":
        k += 1
    assert [m.args for m in ms[1:k]] == [(j,) for j in range(len(e.loop_seeds()))]
    first = k
    while k < len(ms) and ms[k].kind == "op" and (ms[k].op, ms[k].args) in own:
        k += 1
    assert {(m.op, m.args) for m in ms[first:k]} == own
    kinds = [m.kind for m in ms[k:]]
    if "op" in kinds:
        assert "kernel" not in kinds[kinds.index("op"):]


def test_size_variants_cut_off_still_vary_every_kernel_axis() -> None:
    """``size_variants`` cut at ``max_variants`` starts with the graph itself and samples every
    grid axis and loop range of every kernel (a nested product cut off early varies only the
    last kernel), so the cheapest size of a structure is looked for everywhere."""
    import dataclasses

    from mirage_formal.optimize import make_config
    from mirage_formal.search.space import size_variants

    g = workloads.handwritten("gqa", 1)
    cfg = make_config(workloads.program("gqa", 1))
    full = list(size_variants(dataclasses.replace(cfg, max_variants=10**6), g))
    cut = list(size_variants(dataclasses.replace(cfg, max_variants=len(full) // 10), g))
    assert cut[0].key == g.key and len(cut) == len(full) // 10

    def sizes(gs: list[KernelGraph]) -> list[set[Any]]:
        per: list[set[Any]] = []
        for v in gs:
            ks = [n.attr("graph") for n in v.nodes if n.op == KERNEL_OP]
            per = per or [set() for _ in range(4 * len(ks))]
            for i, bg in enumerate(ks):
                for ax in range(3):
                    per[4 * i + ax].add(bg.grid[ax])
                per[4 * i + 3].add(bg.forloop)
        return per

    for seen_full, seen_cut in zip(sizes(full), sizes(cut), strict=True):
        assert len(seen_cut) > 1 or len(seen_full) == 1
    assert [v.key for v in cut] == [v.key for v in size_variants(
        dataclasses.replace(cfg, max_variants=len(full) // 10), g)]  # deterministic


def test_candidates_estimated_slower_than_the_input_are_not_verified(f64_checker: Any) -> None:
    """The checker is asked only about candidates estimated at most ``cost_ceiling`` times the
    input program's own cost (loop seeds aside: see the next test); the others are counted
    (``pruned_cost``), never accepted; with ``inf`` every candidate is checked."""
    from mirage_formal.search.cost import input_cost
    from mirage_formal.search.loop_seeds import loop_lifted_candidates
    from mirage_formal.search.state import ranked_variants

    prog = tiny_rmsnorm()
    calls: list[float] = []
    seeds = {v.key for s in loop_lifted_candidates(prog, norm_cfg().grid_sizes, norm_cfg().forloop)
             for v, _ in ranked_variants(norm_cfg(), s)}

    class Counting(f64_checker):  # type: ignore[misc, valid-type]
        def check(self, candidate: KernelGraph) -> Any:
            if candidate.key not in seeds:
                calls.append(estimate(candidate).seconds)
            return super().check(candidate)

    full = run_search(prog, norm_cfg(), ExprPruner(prog), Counting(prog), progress=False)
    assert full.complete and full.stats.pruned_cost >= 0
    ceiling = input_cost(prog).seconds
    assert all(c <= ceiling for c in calls)
    assert all(a.cost.seconds <= ceiling for a in full.accepted if a.graph.key not in seeds)
    # a ceiling just above the cheapest verified candidate: the rest are counted, not checked
    calls.clear()
    cheapest = min(a.cost.seconds for a in full.accepted)
    cut = run_search(prog, norm_cfg(cost_ceiling=cheapest * 1.0001 / ceiling), ExprPruner(prog),
                     Counting(prog), progress=False)
    assert calls and all(c <= cheapest * 1.0001 for c in calls)
    assert cut.stats.pruned_cost > full.stats.pruned_cost
    assert [a.graph.key for a in cut.accepted if a.graph.key not in seeds] == [
        a.graph.key for a in full.accepted
        if a.cost.seconds <= cheapest * 1.0001 and a.graph.key not in seeds]
    calls.clear()
    every = run_search(prog, norm_cfg(cost_ceiling=math.inf), ExprPruner(prog), Counting(prog),
                       progress=False)
    assert every.stats.pruned_cost == 0 and len(calls) >= len(cut.accepted)
    with pytest.raises(MirageError, match="cost_ceiling"):
        norm_cfg(cost_ceiling=0)


def test_a_loop_seed_is_verified_up_to_four_times_the_ceiling(f64_checker: Any) -> None:
    """With the ceiling just under a loop seed's estimate, a complete candidate is counted
    and not checked, but a loop seed (one of the program's few loop lifts, whose
    register-chain kernels the model overestimates: ViT-L's 257-token attention was never
    verified) is; with the ceiling under a quarter of its estimate, neither is."""
    from mirage_formal.search.cost import input_cost
    from mirage_formal.search.loop_seeds import loop_lifted_candidates
    from mirage_formal.search.state import SEED_CEILING, ranked_variants

    prog = workloads.program("gqa", 1, q=64, kv=256)
    base = SearchConfig(grid_sizes=(1, 2, 4), forloop=(1, 2, 4))
    (seed, *_) = loop_lifted_candidates(prog, base.grid_sizes, base.forloop)
    est = ranked_variants(base, seed)[0][1].seconds / input_cost(prog).seconds
    for ceiling, seed_verified in ((est * 0.99, True), (est / SEED_CEILING * 0.99, False)):
        cfg = SearchConfig(grid_sizes=(1, 2, 4), forloop=(1, 2, 4), cost_ceiling=ceiling)
        st = SearchState(prog, cfg, KeepAll(), f64_checker(prog))
        st.on_candidate(seed)
        assert (st.stats.verified, st.stats.pruned_cost) == (0, 1)
        st = SearchState(prog, cfg, KeepAll(), f64_checker(prog))
        st.on_candidate(seed, True)
        assert (st.stats.verified, st.stats.accepted) == ((1, 1) if seed_verified else (0, 0))


def test_an_output_other_kernels_read_can_come_from_a_fused_kernel(f64_checker: Any) -> None:
    """A program output that the program's own ops also read (a decoder region's q: returned,
    and multiplied by the key cache) need not dangle in a candidate: the search completes
    kernel graphs where another kernel reads that output's tensor. (Before, such programs got
    their direct lowering only: q = rms_norm(x)·Wq, s = q·K came out as three library kernels.)"""
    from mirage_formal.optimize import make_config

    g = Graph()
    x, wq, kc = g.input((2, 64), "f16", "x"), g.input((64, 32), "f16", "wq"), g.input((32, 16), "f16", "kc")
    q = g.matmul(g.rms_norm(x), wq)
    g.output(q)
    g.output(g.matmul(q, kc))
    prog = g.build()
    r = run_search(prog, make_config(prog, None), ExprPruner(prog), f64_checker(prog), progress=False)
    assert r.complete and all(a.verdict.accepted for a in r.accepted)
    for a in r.accepted:
        q_out, s_out = a.graph.outputs
        assert q_out.shape == (2, 32) and s_out.shape == (2, 16)
    # candidates other than the direct lowering where q's tensor is an output and read by the
    # kernel computing s (a fused rms_norm·Wq kernel, then the library product)
    read = [a.graph for a in r.accepted if len(a.graph.kernels) < len(prog.kernels)
            and any(a.graph.outputs[0] in n.src for n in a.graph.kernels)]
    assert read, [str(a.graph) for a in r.accepted]


def test_the_seeds_checked_here_stop_at_the_deadline_handed_to_the_checker(f64_checker: Any) -> None:
    """The lifted seeds are checked in this process, where no hard deadline kills a check:
    ``run_search`` hands the checker its deadline (``set_deadline``, through a Chain), a check
    that passes it raises DeadlinePassed, and the search ends within its budget with that
    candidate unaccepted ("time budget spent"); the deadline is taken back afterwards."""
    import time

    from mirage_formal.errors import DeadlinePassed
    from mirage_formal.search import Chain

    prog = tiny_rmsnorm()

    class Slow:
        """A check that takes 0.2 s a trial, ten trials, stopping between them at its deadline."""

        def __init__(self) -> None:
            self.deadline: float | None = None
            self.seen: list[float | None] = []
            self.stopped = self.finished = 0

        def set_deadline(self, d: float | None) -> None:
            self.deadline = d
            self.seen.append(d)

        def check(self, g: KernelGraph) -> Any:
            for _ in range(10):
                if self.deadline is not None and time.monotonic() > self.deadline:
                    self.stopped += 1
                    raise DeadlinePassed("past the deadline")
                time.sleep(0.2)
            self.finished += 1
            return type("V", (), {"accepted": True})()

    slow = Slow()
    r = run_search(prog, norm_cfg(), ExprPruner(prog), Chain(f64_checker(prog), slow),
                   progress=False, budget_s=1.0)
    assert slow.stopped >= 1 and slow.finished == 0
    assert r.stopped == "time budget spent" and not r.accepted
    assert slow.seen and slow.seen[0] is not None and slow.seen[-1] is None
