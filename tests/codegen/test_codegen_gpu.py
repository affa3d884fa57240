"""On a GPU (skipped elsewhere; run on the device by benchmarks/gpu_bench.py's companion
command): emitted kernels for random μGraphs and random kernel-level programs, both emitter
paths, agree with the float64 reference; device arrays pass without copies."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from graph_strategies import (
    A_OP_SCHEDULES,
    CHAIN_CASES,
    CUT_JOIN_CASES,
    ELEMENTWISE_LOOP_CASES,
    FOLD_LOOP_CASES,
    FRAGMENT_FOLD_SCHEDULES,
    GATED_LOOP_CASES,
    GEMV_LOOP_CASES,
    MATMUL_LOOP_CASES,
    NARROW_VECTOR_CASES,
    NORM_CHAIN_CASES,
    NORM_PROJECTION_CASES,
    ONE_KERNEL_ATTENTION_CASES,
    PADDED_CHAIN_CASES,
    ROW_ACTIVATION_PROGRAMS,
    SHARED_WEIGHT_CASES,
    SMALL_WORKLOADS,
    WARP_BLOCKINGS,
    a_expression_loop_program,
    a_expression_ops,
    attention_loop_program,
    block_programs,
    chained_matmul_program,
    counted_ring_cases,
    cut_join_case,
    defined_on_positive_inputs,
    elementwise_loop_program,
    fold_loop_program,
    gated_a_loop_program,
    gated_loop_program,
    kernel_programs,
    matmul_loop_program,
    norm_projection_loop_seeds,
    one_barrier_cases,
    product_program,
)
from hypothesis import assume, given, settings
from op_checks import one_op_program

from mirage_formal import workloads
from mirage_formal.codegen import (
    SIMPLE,
    CompiledGraph,
    EmitOptions,
    Schedule,
    candidate_schedules,
    compile_graph,
    emit_graph,
    gpu_available,
    launches,
)
from mirage_formal.codegen.autotune import Toolchain, TuningCache, device_sm_count, tune
from mirage_formal.codegen.nvrtc import nvrtc_version
from mirage_formal.codegen.runtime import runtime
from mirage_formal.codegen.schedule import stream_k_ok
from mirage_formal.codegen.tuning_rules import opening_schedule
from mirage_formal.codegen.validate import validate
from mirage_formal.ir.graph import KernelGraph
from mirage_formal.ir.occupancy import combine_groups
from mirage_formal.ir.ops import REGISTRY

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not gpu_available(), reason="needs a GPU")]
#: default (cp.async + ldmatrix), cp.async with scalar fragment reads, the fp32 tiles with
#: tensor cores and register prefetch (the path before cp.async), and the simple path
OPTS = [EmitOptions(), EmitOptions(ldmatrix=False), EmitOptions(async_copy=False, ldmatrix=False),
        SIMPLE]


@settings(max_examples=60, deadline=None)
@given(block_programs(max_ops=5))
def test_random_block_programs_validate(prog: object) -> None:
    assume(defined_on_positive_inputs(prog))
    for o in OPTS:
        cg = compile_graph(prog, opts=o)  # type: ignore[arg-type]
        rep = validate(cg, low=0.5, high=1.5)
        assert rep.ok, f"{rep}\n{cg.source}"


@settings(max_examples=40, deadline=None)
@given(kernel_programs())
def test_random_kernel_programs_validate(prog: object) -> None:
    assume(defined_on_positive_inputs(prog))
    for o in OPTS:
        cg = compile_graph(prog, opts=o)  # type: ignore[arg-type]
        rep = validate(cg, low=0.5, high=1.5)
        assert rep.ok, f"{rep}\n{cg.source}"


@pytest.mark.parametrize("l2", [128, 256])
def test_l2_fetch_hints_validate(l2: int) -> None:
    """The L2 fetch-size hints change how much DRAM brings into L2, never the values read."""
    cases = [(GEMV_LOOP_CASES[0], Schedule(gemv=True, async_copy=False, l2_fetch=l2)),
             (GEMV_LOOP_CASES[0], Schedule(gemv=True, l2_fetch=l2)),
             (MATMUL_LOOP_CASES[0], Schedule(l2_fetch=l2)),
             *[(c, Schedule(l2_fetch=l2)) for c in NARROW_VECTOR_CASES]]
    for case, sched in cases:
        cg = compile_graph(matmul_loop_program(*case), opts=sched)
        rep = validate(cg, trials=2)
        assert rep.ok, f"{case} {sched.short()}: {rep}"


def test_evict_first_policy_validates() -> None:
    """The L2 evict-first policy changes which lines L2 gives up first, never the values read."""
    cases = [(GEMV_LOOP_CASES[0], Schedule(gemv=True, async_copy=False, evict_first=True)),
             (GEMV_LOOP_CASES[0], Schedule(gemv=True, evict_first=True, l2_fetch=256)),
             (MATMUL_LOOP_CASES[0], Schedule(evict_first=True)),
             *[(c, Schedule(evict_first=True)) for c in NARROW_VECTOR_CASES]]
    for case, sched in cases:
        cg = compile_graph(matmul_loop_program(*case), opts=sched)
        rep = validate(cg, trials=2)
        assert rep.ok, f"{case} {sched.short()}: {rep}"


@functools.cache
def _dense_cases() -> list[tuple[str, KernelGraph, Schedule]]:
    """Programs whose loops read raw fp16 tiles from the cp.async ring, each under a schedule
    with dense ring rows: tensor-core matmuls (ldmatrix and scalar fragments, M not a
    multiple of 16, batches), gemv reading B from the ring, fold accumulators beside a
    matmul (rmsnorm's fused kernel), attention, a split loop, and the rmsnorm benchmark."""
    cases: list[tuple[str, KernelGraph, Schedule]] = []
    for c in MATMUL_LOOP_CASES:
        cases.append((f"matmul {c}", matmul_loop_program(*c), Schedule(dense_rows=True)))
    cases.append((f"matmul {MATMUL_LOOP_CASES[0]} scalar fragments", matmul_loop_program(*MATMUL_LOOP_CASES[0]),
                  Schedule(dense_rows=True, ldmatrix=False)))
    for c in GEMV_LOOP_CASES:
        cases.append((f"gemv {c}", matmul_loop_program(*c), Schedule(dense_rows=True, gemv=True, threads=256)))
    for c in FOLD_LOOP_CASES:
        cases.append((f"fold {c}", fold_loop_program(*c), Schedule(dense_rows=True)))
    for c in ONE_KERNEL_ATTENTION_CASES[:3]:
        cases.append((f"attention {c}", attention_loop_program(*c), Schedule(dense_rows=True)))
    cases.append(("split matmul", matmul_loop_program(16, 64, 64, 8), Schedule(dense_rows=True, split=4)))
    cases.append(("rmsnorm b=1", workloads.handwritten("rmsnorm", 1), Schedule(dense_rows=True, evict_first=True)))
    # only where dense rows change the kernel (a ring of raw tiles exists)
    return [(n, g, sc) for n, g, sc in cases
            if emit_graph(g, opts=sc)[0] != emit_graph(g, opts=replace(sc, dense_rows=False))[0]]


@pytest.mark.parametrize("case", MATMUL_LOOP_CASES)
def test_kpair_products_validate(case: tuple) -> None:
    """Two accumulator sets per register-summed product (Schedule.mma_kpair), alone, with
    dense rows, with a split loop and under stream-K, compute the same function."""
    prog = matmul_loop_program(*case)
    (la,) = launches(prog, 128)
    scheds = [Schedule(mma_kpair=True), Schedule(mma_kpair=True, dense_rows=True, async_stages=4,
                                                 async_stage_bytes=150 * 1024)]
    scheds += [Schedule(mma_kpair=True, split=s) for s in (2, 3) if la.graph.forloop % s == 0][:1]
    if stream_k_ok(la.graph, 3):  # (the second set is zeroed with the first, per segment)
        scheds.append(Schedule(mma_kpair=True, stream_k=3))
    for sc in scheds:
        cg = compile_graph(prog, opts=sc)
        rep = validate(cg, trials=2)
        assert rep.ok, f"{case} {sc.short()}: {rep}"


@functools.cache
def _kslice_cases() -> list[tuple[str, KernelGraph, Schedule]]:
    """Register products with their k-steps sliced over warps (Schedule.mma_kslice), only
    where the layout takes the slices: matmul loops (a batch, a loop-invariant A, an fp32 B),
    a fold beside the product (rmsnorm's fused kernel, and the benchmark's at b=8), with two
    chains, dense rows, a split loop."""
    from mirage_formal.codegen.layout import KernelLayout

    progs = [(f"matmul {c}", matmul_loop_program(*c)) for c in [*MATMUL_LOOP_CASES, (16, 256, 64, 4), (2, 512, 128, 4)]]
    progs += [(f"fold {c}", fold_loop_program(*c)) for c in FOLD_LOOP_CASES]
    progs.append(("rmsnorm b=8", workloads.handwritten("rmsnorm", 8)))
    cases = []
    for name, prog in progs:
        (la, *_) = launches(prog, 128)
        for kw in (2, 4, 8):
            for sc in (Schedule(threads=256, mma_kslice=kw),
                       Schedule(threads=256, mma_kslice=kw, mma_kpair=True, dense_rows=True, evict_first=True),
                       Schedule(threads=256, mma_kslice=kw, split=2)):
                if sc.split > 1 and la.graph.forloop % 2:
                    continue
                if KernelLayout(la.graph, "k", 227 * 1024, sc).kslice:
                    cases.append((f"{name} {sc.short()}", prog, sc))
    return cases


@pytest.mark.parametrize("i", range(len(_kslice_cases())))
def test_kslice_products_validate(i: int) -> None:
    """k-sliced register products compute the same function (each slice's partial sums added
    in slice order after the loop)."""
    name, prog, sched = _kslice_cases()[i]
    cg = compile_graph(prog, opts=sched)
    low, high = (0.5, 1.5) if name.startswith(("fold", "rmsnorm")) else (-0.5, 0.5)
    rep = validate(cg, low=low, high=high, trials=2)
    assert rep.ok, f"{name}: {rep}"


@functools.cache
def _register_epilogue_cases() -> list[tuple[str, KernelGraph, Schedule]]:
    """Outputs stored from register products (Schedule.reg_epilogue), only where the layout
    takes it: matmul loops (rows and columns not multiples of the fragment, batches, fp32
    operands), the product over a fold (rmsnorm's fused kernel, the benchmark's at b=1 and
    b=8), two gated products, with two chains and dense rows."""
    progs = [(f"matmul {c}", matmul_loop_program(*c)) for c in MATMUL_LOOP_CASES]
    progs += [(f"fold {c}", fold_loop_program(*c)) for c in FOLD_LOOP_CASES]
    progs += [(f"gated {c}", gated_loop_program(*c)) for c in GATED_LOOP_CASES]
    progs += [(f"rmsnorm b={b}", workloads.handwritten("rmsnorm", b)) for b in (1, 8)]
    scheds = (Schedule(reg_epilogue=True),
              Schedule(threads=256, reg_epilogue=True, mma_kpair=True, dense_rows=True, evict_first=True))
    return _cases_taken(progs, scheds, lambda lay: bool(lay.reg_saves))


def _cases_taken(progs: list[tuple[str, KernelGraph]], scheds: Sequence[Schedule],
                 taken: Callable[[Any], bool]) -> list[tuple[str, KernelGraph, Schedule]]:
    """(name, program, schedule) for each program's first kernel under each schedule where the
    layout ``taken`` says the schedule's field changes it (split schedules only where the loop
    divides)."""
    from mirage_formal.codegen.layout import KernelLayout

    cases = []
    for name, prog in progs:
        (la, *_) = launches(prog, 128)
        for sc in scheds:
            if sc.split > 1 and la.graph.forloop % sc.split:
                continue
            if taken(KernelLayout(la.graph, "k", 227 * 1024, sc)):
                cases.append((f"{name} {sc.short()}", prog, sc))
    return cases


def _assert_validates(name: str, prog: KernelGraph, sched: Schedule) -> None:
    """The kernel of ``prog`` under ``sched`` computes the program's function (positive inputs
    for programs that divide by a fold)."""
    cg = compile_graph(prog, opts=sched)
    low, high = (0.5, 1.5) if name.startswith(("fold", "rmsnorm")) else (-0.5, 0.5)
    rep = validate(cg, low=low, high=high, trials=2)
    assert rep.ok, f"{name} {sched.short()}: {rep}"


@pytest.mark.parametrize("i", range(len(_register_epilogue_cases())))
def test_register_epilogue_validates(i: int) -> None:
    """Outputs written from the accumulator registers compute the same function."""
    _assert_validates(*_register_epilogue_cases()[i])


@functools.cache
def _fragment_fold_cases() -> list[tuple[str, KernelGraph, Schedule]]:
    """Row folds summed from the product's A fragments (Schedule.fold_fragments), only where
    the layout takes them: the fold programs (rows not a multiple of 16, rms and sum), the
    benchmark's rmsnorm at b=1 and b=8, under the compile test's schedules (k slices, register
    outputs, a split loop)."""
    progs = [(f"fold {c}", fold_loop_program(*c)) for c in FOLD_LOOP_CASES]
    progs += [(f"rmsnorm b={b}", workloads.handwritten("rmsnorm", b)) for b in (1, 8)]
    return _cases_taken(progs, FRAGMENT_FOLD_SCHEDULES, lambda lay: bool(lay.frag_fold))


@pytest.mark.parametrize("i", range(len(_fragment_fold_cases())))
def test_fragment_folds_validate(i: int) -> None:
    """Row folds taken from the A fragments compute the same function."""
    _assert_validates(*_fragment_fold_cases()[i])


@functools.cache
def _one_barrier_cases() -> list[tuple[str, KernelGraph, Schedule]]:
    return one_barrier_cases()


@pytest.mark.parametrize("i", range(len(_one_barrier_cases())))
def test_one_barrier_loops_validate(i: int) -> None:
    """Loops with one barrier per iteration (Schedule.one_barrier: the ring's refill after
    it) compute the same function."""
    _assert_validates(*_one_barrier_cases()[i])


@pytest.mark.parametrize("case", ELEMENTWISE_LOOP_CASES)
@pytest.mark.parametrize("sched", [Schedule(), Schedule(prefetch=False),
                                   Schedule(threads=256, dense_rows=True, mma_kpair=True, evict_first=True)],
                         ids=["default", "no prefetch", "fast"])
def test_prefetched_elementwise_loop_tiles_validate(case: tuple, sched: Schedule) -> None:
    """op(X, Y) · W fused, with X and Y prefetched an iteration ahead (or read in place
    without prefetching), computes the same function."""
    _assert_validates(f"elementwise {case}", elementwise_loop_program(*case), sched)


@pytest.mark.parametrize("case", ELEMENTWISE_LOOP_CASES)
@pytest.mark.parametrize("ring", ["cp.async", "tma"])
def test_an_op_of_loop_tiles_on_the_a_fragments_validates(case: tuple, ring: str) -> None:
    """op(X, Y) · W with the op computed on the A fragments (Schedule.a_op_fragments), on the
    cp.async ring and on the TMA ring, computes the same function."""
    _assert_validates(f"elementwise {case} {ring}", elementwise_loop_program(*case),
                      A_OP_SCHEDULES[ring])


@pytest.mark.parametrize("rows", [16, 8])
@pytest.mark.parametrize("op", a_expression_ops())
def test_every_elementwise_op_on_a_fragments_validates(op: str, rows: int) -> None:
    """Each elementwise op of the registry computed on a product's A fragments (the TMA ring)
    computes its float64 rule (inputs over the op's domain), with an A of 16 rows and of 8
    (the fp32 ops then skip the padding rows' registers): a new op is validated without
    anyone writing a test."""
    from mirage_formal.ir.ops import REGISTRY

    cg = compile_graph(a_expression_loop_program(op, rows=rows), opts=A_OP_SCHEDULES["tma"])
    low, high = (0.5, 1.5) if REGISTRY[op].domain == "positive" else (-0.5, 0.5)
    rep = validate(cg, low=low, high=high, trials=2)
    assert rep.ok, f"{op}: {rep}"


@pytest.mark.parametrize("ring", ["cp.async", "tma"])
def test_an_expression_of_loop_tiles_on_the_a_fragments_validates(ring: str) -> None:
    """(silu(X) ⊙ Y) · W with both ops computed on the A fragments computes the same function."""
    _assert_validates(f"(silu(X)*Y)·W {ring}", gated_a_loop_program(8, 128, 64, 8),
                      A_OP_SCHEDULES[ring])


@pytest.mark.parametrize("ring", ["cp.async", "tma"])
def test_a_unary_op_of_a_loop_tile_on_the_a_fragments_validates(ring: str) -> None:
    """neg(X) · W with the op computed in fp32 on the A fragments computes the same function."""
    _assert_validates(f"neg(X)·W {ring}", matmul_loop_program(16, 128, 64, 8, pre_a=True),
                      A_OP_SCHEDULES[ring])


def _counted_ring_cases() -> list[tuple[str, KernelGraph, Schedule]]:
    return counted_ring_cases()


@pytest.mark.parametrize("i", range(len(_counted_ring_cases())))
def test_counted_ring_slots_validate(i: int) -> None:
    """Rings whose depth is not a power of two, their slots kept in loop counters
    (layout.ring_counted), compute the same function."""
    _assert_validates(*_counted_ring_cases()[i])


@pytest.mark.parametrize("i", range(len(_dense_cases())))
def test_dense_ring_rows_validate(i: int) -> None:
    """Raw fp16 ring tiles without row padding (Schedule.dense_rows) compute the same function
    (fragment reads with bank conflicts, every address still in its row)."""
    name, prog, sched = _dense_cases()[i]
    cg = compile_graph(prog, opts=sched)
    # (fold programs divide by the fold: positive inputs; attention's exp needs small ones)
    low, high = (0.5, 1.5) if name.startswith("fold") else (-0.5, 0.5)
    rep = validate(cg, low=low, high=high, trials=2)
    assert rep.ok, f"{name}: {rep}"


@pytest.mark.parametrize("case", MATMUL_LOOP_CASES + NARROW_VECTOR_CASES)
def test_matmul_loops_validate(case: tuple) -> None:
    """Raw fp16 cp.async tiles (ldmatrix or scalar fragments) under every option set."""
    prog = matmul_loop_program(*case)
    for o in OPTS:
        cg = compile_graph(prog, opts=o)
        rep = validate(cg, trials=2)
        assert rep.ok, f"{o}: {rep}\n{cg.source}"


@pytest.mark.parametrize("case", MATMUL_LOOP_CASES[-6:])
def test_matmul_warp_blockings_validate(case: tuple) -> None:
    """Every register blocking a schedule may force computes the same function (a blocking
    that does not divide the tile counts falls back to the rule)."""
    prog = matmul_loop_program(*case)
    for wm, wn in WARP_BLOCKINGS:
        for threads in (None, 256):
            cg = compile_graph(prog, opts=Schedule(warp_m=wm, warp_n=wn, threads=threads))
            rep = validate(cg, trials=2)
            assert rep.ok, f"warp {wm}x{wn}, threads {threads}: {rep}\n{cg.source}"


#: (m, k, n, forloop) of loop products whose rows end inside a 16-row tile and outnumber the
#: warps' row tiles: ViT's 197 tokens (prime: 13 row tiles), 100 and 37 rows
RAGGED_ROW_CASES = [(197, 64, 64, 4), (197, 64, 16, 3), (197, 32, 32, 2), (100, 64, 64, 2),
                    (37, 32, 64, 2)]


@pytest.mark.parametrize("case", RAGGED_ROW_CASES)
def test_ragged_row_groups_validate_under_every_tuner_schedule(case: tuple[int, ...]) -> None:
    """Warp tiles whose last group of 16-row tiles runs past the rows (schedule.warp_tiles'
    ragged blockings: loads clamped, stores skipped) compute the product under the opening
    schedule, every first-round schedule and forced blockings."""
    prog = matmul_loop_program(*case)
    (la,) = launches(prog, 128)
    forced = {Schedule(threads=t, warp_m=m, warp_n=n) for t in (128, 256)
              for m, n in ((2, 8), (4, 4), (4, 2), (2, 2))}
    for sched in {opening_schedule(la.graph), *candidate_schedules(la.graph), *forced}:
        rep = validate(compile_graph(prog, schedules={la.graph.key: sched}), trials=2)
        assert rep.ok, f"{sched.short()}: {rep}"


@pytest.mark.parametrize("name", sorted(ROW_ACTIVATION_PROGRAMS))
def test_row_activation_programs_validate_on_their_2d_views(name: str) -> None:
    """Programs on (batch, ..., rows, columns) activations against 2-D weights: their kernels
    run on the tensors' 2-D views (ir/flatten.py), the program's lowering and its one-kernel
    lifts under every first-round schedule, and compute the program."""
    from mirage_formal.search.seeds import lifted_candidates

    prog = ROW_ACTIVATION_PROGRAMS[name]()
    for g in [prog, *lifted_candidates(prog, (1, 2, 4, 8))]:
        for la in launches(g, 128):
            for sched in candidate_schedules(la.graph):
                rep = validate(compile_graph(g, schedules={la.graph.key: sched}), trials=2)
                assert rep.ok, f"{name} {sched.short()}: {rep}"


@pytest.mark.parametrize(("xs", "ws", "eps", "gain", "dt"), NORM_PROJECTION_CASES)
def test_norm_projection_loop_seeds_validate_under_every_tuner_schedule(
        xs: tuple[int, ...], ws: tuple[int, ...], eps: float, gain: bool, dt: str) -> None:
    """rms_norm(X) · W's loop seeds (the row's rms deferred past the loop, with or without an
    eps) under every first-round schedule compute the program."""
    prog, seeds = norm_projection_loop_seeds(xs, ws, eps, gain, dt)
    assert seeds
    for g in seeds:
        for la in launches(g, 128):
            for sched in candidate_schedules(la.graph):
                rep = validate(compile_graph(g, schedules={la.graph.key: sched}), prog, trials=2)
                assert rep.ok, f"{sched.short()}: {rep}"


@pytest.mark.parametrize(("family", "case"), CUT_JOIN_CASES)
def test_cut_joins_validate_under_every_tuner_schedule(family: str, case: tuple[Any, ...]) -> None:
    """A decode MLP's second half cut before its down projection, and a layer norm cut before
    its projection: each kernel of their cut joins under the opening schedule and every
    first-round schedule computes the program."""
    prog, joins = cut_join_case(family, case)
    assert joins
    for g in joins:
        for la in launches(g, 128):
            for sched in {opening_schedule(la.graph), *candidate_schedules(la.graph)}:
                rep = validate(compile_graph(g, schedules={la.graph.key: sched}), prog, trials=2)
                assert rep.ok, f"{sched.short()}: {rep}"


@pytest.mark.parametrize(("xs", "ws", "dt"), SHARED_WEIGHT_CASES)
def test_shared_weight_products_validate_under_every_tuner_schedule(
        xs: tuple[int, ...], ws: tuple[int, ...], dt: str) -> None:
    """A weight broadcast along the activations' batch dimensions: the lowering's blocks hold
    every batch element's rows against one tile of B; each first-round schedule computes the
    product."""
    prog = product_program(xs, ws, dt)
    (la,) = launches(prog, 128)
    for sched in candidate_schedules(la.graph):
        rep = validate(compile_graph(prog, schedules={la.graph.key: sched}), trials=2)
        assert rep.ok, f"{sched.short()}: {rep}"


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
@pytest.mark.parametrize("name", sorted(n for n in REGISTRY if n != "accum"))
def test_every_registry_op_validates(name: str, dtype: str) -> None:
    """Each op of the registry, applied to fresh inputs and compiled as the library kernel
    the lowering gives it, computes its float64 rule: a new op is checked on the GPU without
    anyone writing a test (inputs over the op's domain, wide enough to reach the tails of exp,
    silu and sigmoid)."""
    prog = one_op_program(name, dtype=dtype)
    low, high = (0.5, 2.0) if REGISTRY[name].domain == "positive" else (-4.0, 4.0)
    rep = validate(compile_graph(prog), trials=2, low=low, high=high)
    assert rep.ok, f"{name} {dtype}: {rep}"


def test_validation_shared_across_ugraphs_of_a_program() -> None:
    """One memo for several μGraphs of one program (superoptimize's GPU stage) gives each the
    report a memo of its own gives: same inputs, same errors, same ranges."""
    prog = workloads.program("gqa", 1)
    graphs = [prog, workloads.handwritten("gqa", 1)]
    shared: dict[object, object] = {}
    for g in graphs:
        cg = compile_graph(g)
        alone = validate(cg, prog, trials=2, seed=5, memo={})
        with_shared = validate(cg, prog, trials=2, seed=5, memo=shared)
        assert alone.ok and with_shared.ok
        assert (alone.errors, alone.seeds, alone.ranges) == \
            (with_shared.errors, with_shared.seeds, with_shared.ranges)


@pytest.mark.parametrize("name", sorted(workloads.PROGRAMS))
def test_small_workloads_validate(name: str) -> None:
    small = SMALL_WORKLOADS[name]
    tuned = [EmitOptions(threads=256, half_tiles=True, gemv=True),
             EmitOptions(split=2, gemv=True, async_stages=8, async_stage_bytes=160 * 1024)]
    for b in (1, 3):
        for o in [*OPTS[:3], *tuned]:
            if o.split > 1 and any(la.graph.forloop % o.split for la in
                                   launches(workloads.program(name, b, **small), 128)):
                o = EmitOptions(threads=256, half_tiles=True, gemv=True)
            cg = compile_graph(workloads.program(name, b, **small), opts=o)
            assert validate(cg, trials=2).ok, o


def test_torch_tensors_in_place() -> None:
    torch = pytest.importorskip("torch")
    prog = workloads.program("ntrans", 1, h=256)
    cg = compile_graph(prog)
    xs = [torch.rand(n.shape, device="cuda", dtype=torch.float16) - 0.5 for n in prog.inputs]
    out = torch.full(prog.outputs[0].shape, float("nan"), device="cuda", dtype=torch.float16)
    cg(*xs, out=[out])
    torch.cuda.synchronize()
    host = cg(*[x.cpu().numpy() for x in xs])[0]
    assert np.allclose(out.cpu().numpy().astype(np.float32), host.astype(np.float32), atol=1e-3)
    (d,) = cg(*xs)  # DeviceArray result, wrapped by torch without a copy
    t = torch.as_tensor(d, device="cuda")
    assert t.data_ptr() == d.ptr

    class DLPackOnly:  # exercises the DLPack path (no __cuda_array_interface__)
        def __init__(self, x: object) -> None:
            self.x = x

        def __dlpack__(self, stream: object = None) -> object:
            return self.x.__dlpack__()  # type: ignore[attr-defined]

    out2 = torch.full_like(out, float("nan"))
    cg(*[DLPackOnly(x) for x in xs], out=[DLPackOnly(out2)])
    torch.cuda.synchronize()
    assert torch.equal(out, out2)


def _split_schedules(prog: object) -> list[dict[str, Schedule]]:
    """Every split that divides a kernel's loop, and the tuner's candidates (splits forced by
    pretending the GPU has many SMs), one kernel at a time."""
    out = []
    for la in launches(prog, 128):  # type: ignore[arg-type]
        bg = la.graph
        tuner = candidate_schedules(bg, sm_count=4096)
        cands = [*tuner[1::3], tuner[-1]]  # a sample: every kind of schedule, in seconds
        cands += [Schedule(split=d, threads=t) for d in range(2, bg.forloop + 1)
                  if bg.forloop % d == 0 for t in (None, 256)][:4]
        out += [{bg.key: c} for c in cands if c.split == 1 or any(n.op == "accum" for n in bg.nodes)]
    return out


@pytest.mark.parametrize("case", MATMUL_LOOP_CASES)
def test_matmul_loops_every_schedule_validates(case: tuple) -> None:
    """Split loops (deterministic combine), 256 threads and short cp.async rings compute the
    same function; two launches each, so the split tickets' reset is exercised."""
    prog = matmul_loop_program(*case)
    for sched in _split_schedules(prog):
        cg = compile_graph(prog, schedules=sched)
        rep = validate(cg, trials=2)
        assert rep.ok, f"{sched}: {rep}\n{cg.source}"


@settings(max_examples=15, deadline=None)
@given(block_programs(max_ops=5))
def test_random_block_programs_every_schedule_validates(prog: object) -> None:
    assume(defined_on_positive_inputs(prog))
    for sched in _split_schedules(prog)[:6]:
        cg = compile_graph(prog, schedules=sched)  # type: ignore[arg-type]
        rep = validate(cg, low=0.5, high=1.5, trials=2)
        assert rep.ok, f"{sched}: {rep}\n{cg.source}"


@pytest.mark.parametrize("name", ["rmsnorm", "gqa"])
def test_handwritten_split_is_deterministic(name: str) -> None:
    """The split combine sums partials in a fixed order: bitwise-equal outputs on repeats."""
    g = workloads.handwritten(name, 1)
    sched = {la.graph.key: Schedule(split=2) for la in launches(g, 128) if la.graph.forloop % 2 == 0}
    cg = compile_graph(g, schedules=sched)
    rng = np.random.default_rng(3)
    xs = [rng.uniform(-0.5, 0.5, n.shape).astype(np.float16) for n in g.inputs]
    first = cg(*xs)[0]
    for _ in range(3):
        assert np.array_equal(cg(*xs)[0], first)


def _split_program(kind: str) -> KernelGraph:
    """A one-kernel program with a 48-iteration loop: a matmul, or an attention."""
    prog: KernelGraph = (matmul_loop_program(32, 32, 16, 48) if kind == "matmul"
                         else attention_loop_program(64, 64, 64, 64, 48))
    return prog


def _repeats_bitwise(cg: CompiledGraph, xs: list[np.ndarray], times: int) -> list[np.ndarray]:
    """``cg``'s outputs on ``xs``, after checking ``times`` more runs give the same bits."""
    first = cg(*xs)
    for _ in range(times):
        assert all(np.array_equal(a, b) for a, b in zip(cg(*xs), first, strict=True))
    return first


@pytest.mark.parametrize("pair", [(8, 2, 0, 0), (4, 1, 0, 3), (1, 1, 5, 3), (2, 4, 0, 0)])
def test_two_combining_kernels_in_one_graph(pair: tuple[int, int, int, int]) -> None:
    """Both kernels of a two-kernel graph split (or stream-K) their loops: each launch keeps
    its partials and tickets in its own workspace region, so the graph validates and repeats
    bitwise. (With one shared region the first kernel's partials landed on the second's
    tickets and the output was garbage.)"""
    s1, s2, p1, p2 = pair
    prog = chained_matmul_program()
    first, second = launches(prog, 128)
    cg = compile_graph(prog, schedules={first.graph.key: Schedule(split=s1, stream_k=p1),
                                        second.graph.key: Schedule(split=s2, stream_k=p2)})
    assert all(k.extra_ws_floats for k in cg.kernels)
    rep = validate(cg, trials=3)
    assert rep.ok, f"{pair}: {rep}"
    rng = np.random.default_rng(13)
    _repeats_bitwise(cg, [rng.uniform(-0.5, 0.5, n.shape).astype(np.float16) for n in prog.inputs], 3)


@pytest.mark.parametrize("split", [6, 8, 16])
@pytest.mark.parametrize("kind", ["matmul", "attention"])
def test_two_level_split_combine(kind: str, split: int) -> None:
    """Splits of 6 and more combine in two levels (groups of G, then the S/G group partials):
    the result validates and repeats bitwise (the fixed summation order), every launch
    leaving its tickets at zero for the next."""
    prog = _split_program(kind)
    (la,) = launches(prog, 128)
    cg = compile_graph(prog, schedules={la.graph.key: Schedule(split=split)})
    assert "mf_gcnt" in cg.source
    assert validate(cg, trials=2).ok
    rng = np.random.default_rng(5)
    _repeats_bitwise(cg, [rng.uniform(-0.5, 0.5, n.shape).astype(np.float16) for n in prog.inputs], 3)


@pytest.mark.parametrize("split", [2, 4, 8])
@pytest.mark.parametrize("kind", ["matmul", "attention"])
def test_cluster_split_combine_matches_the_global_one(kind: str, split: int) -> None:
    """A split combined through a thread-block cluster's shared memory validates, repeats
    bitwise, and equals the global-memory combine bit for bit where that one sums the S
    partial tiles in split order too (one level; from S = 6 it sums groups first)."""
    prog = _split_program(kind)
    (la,) = launches(prog, 128)
    clustered = compile_graph(prog, schedules={la.graph.key: Schedule(split=split, cluster_combine=True)})
    plain = compile_graph(prog, schedules={la.graph.key: Schedule(split=split)})
    assert "__cluster_dims__" in clustered.source and "__cluster_dims__" not in plain.source
    assert validate(clustered, trials=2).ok
    rng = np.random.default_rng(11)
    xs = [rng.uniform(-0.5, 0.5, n.shape).astype(np.float16) for n in prog.inputs]
    first = _repeats_bitwise(clustered, xs, 2)
    if combine_groups(split) == split:
        assert all(np.array_equal(a, b) for a, b in zip(plain(*xs), first, strict=True))


#: small row-wise programs whose lifts (search/seeds.py) exercise one-iteration accumulators
#: and block-wide row reductions (few rows per block, rows of >= 64)
LIFT_CASES = [("ntrans", {"rows": 2, "h": 512}), ("ntrans", {"rows": 8, "h": 256}),
              ("rmsnorm", {"rows": 2, "h": 128, "n": 64})]


@pytest.mark.parametrize("case", LIFT_CASES, ids=lambda c: f"{c[0]}-{'-'.join(map(str, c[1].values()))}")
def test_lifted_row_kernels_validate_under_every_thread_count(case: tuple) -> None:
    from mirage_formal.search.seeds import lifted_candidates

    name, sizes = case
    prog = workloads.program(name, 1, **sizes)
    cands = lifted_candidates(prog, (1, 2, 4, 8))
    assert cands
    for g in cands:
        for la in launches(g, 128):
            for t in (None, 256, 512, 1024):
                cg = compile_graph(g, schedules={la.graph.key: Schedule(threads=t)})
                rep = validate(cg, trials=2)
                assert rep.ok, f"threads={t}: {rep}\n{cg.source}"


@pytest.mark.parametrize("case", FOLD_LOOP_CASES, ids=str)
def test_fold_registers_validate(case: tuple) -> None:
    """Fold accumulators summed in registers through the loop (Schedule.fold_registers) and
    reduced once after it compute what the per-iteration block reductions compute: every way
    threads share the rows, with a split loop, at two block sizes (inputs in [0.5, 1.5]: the
    product is divided by the fold)."""
    prog = fold_loop_program(*case)
    (la,) = launches(prog, 128)
    for split in (s for s in (1, 2) if case[2] % s == 0):
        for threads in (None, 256):
            for regs in (True, False):
                s = Schedule(threads=threads, split=split, fold_registers=regs)
                cg = compile_graph(prog, schedules={la.graph.key: s})
                rep = validate(cg, trials=2, low=0.5, high=1.5)
                assert rep.ok, f"{s.short()}: {rep}\n{cg.source}"


@pytest.mark.parametrize("case", GEMV_LOOP_CASES)
def test_gemv_schedules_validate(case: tuple[int, int, int, int]) -> None:
    """Every schedule the tuner proposes for a skinny matmul (register-streamed B with N/8
    not a power of two, chunked long K slices, shared-memory cross-thread sums) computes the
    float64 program's function."""
    prog = matmul_loop_program(*case)
    (la,) = launches(prog, 128)
    for s in candidate_schedules(la.graph):
        cg = compile_graph(prog, schedules={la.graph.key: s})
        rep = validate(cg, trials=2)
        assert rep.ok, f"{s.short()}: {rep}"


def test_tune_stops_at_its_deadline(tmp_path: object) -> None:
    """A deadline already passed: the tuner measures its first variant (the opening schedule)
    and nothing more, returns it validated, and does not cache the cut-short result."""

    prog = matmul_loop_program(*MATMUL_LOOP_CASES[-6])
    cache = TuningCache(str(tmp_path))
    t = tune(prog, prog, cache=cache, deadline=time.monotonic())
    assert t is not None and len(t.trials) == 1 and t.trials[0].valid
    (la,) = launches(prog, 128)
    assert t.schedules == {la.graph.key: opening_schedule(la.graph, device_sm_count(runtime()))}
    assert cache.lookup(prog, _toolchain()) is None
    full = tune(prog, prog, cache=cache)
    assert full is not None and len(full.trials) > 1


def test_timing_on_given_inputs_matches_fresh_inputs() -> None:
    """The tuner times every schedule of a graph on one set of device inputs (drawn once): given
    inputs are used as they are (a kernel run on them leaves them unchanged and timing works),
    and inputs of the wrong shapes are refused."""
    from mirage_formal.codegen.runtime import DeviceArray
    from mirage_formal.codegen.timing import device_inputs, time_like_baselines

    prog = matmul_loop_program(*MATMUL_LOOP_CASES[-6])
    cg = compile_graph(prog)
    ins = device_inputs(cg, 3)
    before = [x.numpy() for x in ins]
    us = time_like_baselines(cg, seed=3, inputs=ins)
    assert np.isfinite(us) and us > 0
    assert all(np.array_equal(a, x.numpy()) for a, x in zip(before, ins, strict=True))
    bad = [DeviceArray((3, 5), n.dtype) for n in prog.inputs]
    with pytest.raises(ValueError, match="input shapes"):
        time_like_baselines(cg, inputs=bad)


def _toolchain() -> Toolchain:
    from mirage_formal.codegen.runtime import runtime

    rt = runtime()
    return Toolchain(rt.arch, nvrtc_version(), rt.driver_version, rt.name)


@pytest.mark.parametrize("case", CHAIN_CASES + NORM_CHAIN_CASES + ONE_KERNEL_ATTENTION_CASES)
def test_register_chain_validates(case: tuple) -> None:
    """The register chain (exp(QK) kept in registers between two tensor-core products, row
    sums in registers) computes the same function as the stored path, under every schedule
    the tuner may try and under a split of the loop."""
    prog = attention_loop_program(*case)
    (la,) = launches(prog, 128)
    scheds = [Schedule(), Schedule(mma_chain=False), Schedule(half_tiles=True),
              Schedule(async_copy=False), Schedule(threads=256, chain_rows=2),
              Schedule(threads=256, chain_rows=4), Schedule(ring_first=True),
              *candidate_schedules(la.graph)]
    if la.graph.forloop % 2 == 0:
        scheds.append(Schedule(split=2))
    for sched in scheds:
        cg = compile_graph(prog, schedules={la.graph.key: sched})
        rep = validate(cg, trials=2)
        assert rep.ok, f"{sched.short()}: {rep}\n{cg.source}"


@pytest.mark.parametrize("case", PADDED_CHAIN_CASES)
def test_padded_and_pass_by_pass_chains_validate(case: tuple) -> None:
    """Register chains over key counts that are not a multiple of 16 (the padded columns
    zeroed before the row sums and the second product) and run pass by pass over more keys
    than a warp's registers hold compute the program, at one, two and four row tiles a warp,
    without ldmatrix (the transposed K tile read as 4-byte pairs) or cp.async, and under every
    first-round schedule."""
    prog = attention_loop_program(*case)
    (la,) = launches(prog, 128)
    scheds = [Schedule(), *(Schedule(threads=t) for t in (128, 256, 512)),
              Schedule(threads=256, half_tiles=True), Schedule(threads=256, ldmatrix=False),
              Schedule(threads=256, async_copy=False), *candidate_schedules(la.graph)]
    for sched in scheds:
        cg = compile_graph(prog, schedules={la.graph.key: sched})
        rep = validate(cg, trials=2)
        assert rep.ok, f"{sched.short()}: {rep}\n{cg.source}"


def test_split_with_48k_dynamic_shared_memory_launches() -> None:
    """qknorm_gqa's last library matmul uses exactly 48 KiB of dynamic shared memory; split, it
    also declares a static ticket, so the launch needs the opt-in attribute (it failed with
    CUDA_ERROR_INVALID_VALUE before the runtime counted static bytes)."""
    prog = workloads.program("qknorm_gqa", 1)
    la = launches(prog, 128)[-1]
    for split in (4, 16):
        sched = Schedule(split=split)
        cg = compile_graph(prog, schedules={la.graph.key: sched})
        assert cg.kernels[-1].smem_bytes == 48 * 1024
        assert validate(cg, trials=1).ok


def test_dependent_launches_read_their_predecessors_results() -> None:
    """Kernels after the first start early (programmatic dependent launch) and wait for their
    predecessor inside: repeated runs of a chain of dependent kernels, eager and replayed as a
    CUDA graph, all give the float64 program's result."""
    from mirage_formal.codegen.runtime import runtime
    from mirage_formal.codegen.timing import device_inputs

    prog = workloads.program("rmsnorm", 1, rows=16, h=512, n=1024)  # rms_norm, then matmul
    cg = compile_graph(prog)
    assert len(cg.kernels) >= 2
    rep = validate(cg, trials=2)
    assert rep.ok, rep
    rt = runtime()
    ins = device_inputs(cg, seed=3)
    outs = [cg(*ins) for _ in range(20)]
    rt.sync()
    first = outs[0][0].numpy()
    for o in outs[1:]:
        np.testing.assert_array_equal(o[0].numpy(), first)
    stream = rt.stream()
    out = [type(outs[0][0])(n.shape, n.dtype, rt) for n in cg.graph.outputs]
    exe = rt.capture(stream, lambda: cg.launch([x.ptr for x in ins], [o.ptr for o in out], stream))
    for _ in range(20):
        rt.replay(exe, stream)
        rt.ck(rt.drv.cuStreamSynchronize(stream), "sync")
        np.testing.assert_array_equal(out[0].numpy(), first)


@pytest.mark.parametrize("method", ["memset", "fill"])
def test_both_flushes_time_a_kernel(method: str) -> None:
    """time_graph runs under either L2 flush (the fill kernel is compiled on first use) and
    returns a finite time; which one agrees with do_bench is measured, not asserted
    (benchmarks/timing_agreement.py)."""
    from mirage_formal.codegen.timing import time_graph

    cg = compile_graph(matmul_loop_program(*MATMUL_LOOP_CASES[0]))
    us = time_graph(cg, warmup=2, reps=5, graph=True, flush_l2=True, flush=method)
    assert 0 < us < float("inf")
