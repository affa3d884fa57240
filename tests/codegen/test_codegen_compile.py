"""CI without a GPU: every workload's kernel-level program (b = 1, 8), hand-written μGraphs,
μGraphs our search found (the recorded results of benchmarks/search_workloads.py) and
Mirage checkpoint μGraphs emit CUDA that NVRTC compiles for sm_90 (fast and simple paths);
compile errors surface with the NVRTC log and the .cu path; without a driver the runtime
raises NoGPUError (compile-only)."""

from __future__ import annotations

import functools
import itertools
import math
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

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
    WARP_BLOCKINGS,
    a_expression_loop_program,
    a_expression_ops,
    attention_loop_program,
    block_programs,
    chained_matmul_program,
    counted_ring_cases,
    cut_join_case,
    elementwise_loop_program,
    fold_loop_program,
    gated_a_loop_program,
    gated_loop_program,
    matmul_loop_program,
    norm_projection_loop_seeds,
    one_barrier_cases,
    product_program,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from op_checks import one_op_program

import mirage_formal as mf
from mirage_formal import workloads
from mirage_formal.codegen import (
    SIMPLE,
    CompileError,
    EmitOptions,
    NoGPUError,
    candidate_schedules,
    compile_cubin,
    compile_graph,
    emit_graph,
    gpu_available,
    launches,
)
from mirage_formal.codegen.layout import KernelLayout
from mirage_formal.codegen.schedule import WARP_TILES_MAX, Schedule, row_groups, warp_tiles
from mirage_formal.ir.mirage import load_mirage
from mirage_formal.ir.ops import REGISTRY
from mirage_formal.ir.serialize import load_ugraphs

CKPT = Path(__file__).resolve().parents[3] / "shared" / "mirage_checkpoints"
CKPT_FILES = {"rmsnorm_bs1.json": ["X", "W"], "gated_mlp.json": ["X", "W1", "W2"],
              "gqa_bs1.json": ["Q", "K", "V"]}
OPTS = {"fast": EmitOptions(), "simple": SIMPLE,
        "fp32_tiles": EmitOptions(async_copy=False, ldmatrix=False)}
SEARCHED = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "search_workloads_ugraphs"


@pytest.fixture(scope="session")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cubin")


def _is_cubin(b: bytes) -> bool:
    return b[:4] == b"\x7fELF"


@pytest.mark.parametrize("opts", sorted(OPTS))
@pytest.mark.parametrize("batch", [1, 8])
@pytest.mark.parametrize("name", sorted(workloads.PROGRAMS))
def test_program_compiles(name: str, batch: int, opts: str, cache: Path) -> None:
    cg = compile_graph(workloads.program(name, batch), arch="sm_90", load=False, cache=cache,
                       opts=OPTS[opts])
    assert _is_cubin(cg.cubin)
    assert len(cg.kernels) == len(cg.launches) >= 1
    for k in cg.kernels:
        assert f"void __launch_bounds__({k.threads}) {k.name}(" in cg.source
        assert k.smem_bytes <= 227 * 1024


@pytest.mark.parametrize("opts", sorted(OPTS))
@pytest.mark.parametrize("batch", [1, 8])
@pytest.mark.parametrize("name", sorted(workloads.HANDWRITTEN))
def test_handwritten_compiles(name: str, batch: int, opts: str, cache: Path) -> None:
    cg = compile_graph(workloads.handwritten(name, batch), arch="sm_90", load=False, cache=cache,
                       opts=OPTS[opts])
    assert _is_cubin(cg.cubin)


@pytest.mark.parametrize("name", sorted(p.name for p in SEARCHED.iterdir() if p.is_dir()))
def test_searched_ugraphs_compile(name: str, cache: Path) -> None:
    graphs = load_ugraphs(SEARCHED / name / "ugraphs.json")
    if not graphs:
        pytest.skip(f"the recorded {name} search accepted no μGraph")
    picks = graphs[:4] + graphs[4::max(1, len(graphs) // 4)][:4]  # the best and a spread
    for g in picks:
        assert _is_cubin(compile_graph(g, arch="sm_90", load=False, cache=cache).cubin)


@pytest.mark.skipif(not CKPT.is_dir(), reason="../shared/mirage_checkpoints not present")
@pytest.mark.parametrize("fname", sorted(CKPT_FILES))
def test_mirage_checkpoints_compile(fname: str, cache: Path) -> None:
    graphs = load_mirage(CKPT / fname, CKPT_FILES[fname])
    for g in graphs[::3]:  # a third of them, to keep CI in minutes; the GPU bench runs all
        assert _is_cubin(compile_graph(g, arch="sm_90", load=False, cache=cache).cubin)


@pytest.mark.parametrize("name", sorted(n for n in REGISTRY if n != "accum"))
def test_every_registry_op_compiles(name: str, cache: Path) -> None:
    """Each op of the registry, alone on fp16 inputs, lowers to a kernel NVRTC compiles for
    sm_90 (the GPU suite validates the same programs)."""
    assert _is_cubin(compile_graph(one_op_program(name, dtype="f16"), arch="sm_90", load=False,
                                   cache=cache).cubin)


@settings(max_examples=8, deadline=None)
@given(block_programs())
def test_random_block_programs_compile(prog: object) -> None:
    # No cache fixture here: hypothesis forbids function-scoped fixtures; use a fixed dir.
    import tempfile

    cg = compile_graph(prog, arch="sm_90", load=False,  # type: ignore[arg-type]
                       cache=Path(tempfile.gettempdir()) / "mf-test-cubin")
    assert _is_cubin(cg.cubin)


@pytest.mark.parametrize("name", ["rmsnorm_hw", "gated_mlp"])
def test_async_copy_path_taken(name: str, cache: Path) -> None:
    """The weight tiles of these loops are fp16, change every iteration and feed only
    tensor-core matmuls: they stay raw fp16, filled by cp.async, read by ldmatrix."""
    g = workloads.handwritten("rmsnorm", 1) if name == "rmsnorm_hw" else workloads.program("gated_mlp")
    src, _, _ = emit_graph(g)
    assert "mf::cp_async16(" in src and "mf::cp_async_wait<" in src
    assert "mf::ldsm_x2_trans(" in src or "mf::ldsm_x4_trans(" in src
    assert _is_cubin(compile_cubin(src, "sm_90", cache=cache))
    src, _, _ = emit_graph(g, opts=EmitOptions(ldmatrix=False))
    assert "mf::cp_async16(" in src and "mf::ldsm_" not in src
    for o in (EmitOptions(async_copy=False), SIMPLE):
        src, _, _ = emit_graph(g, opts=o)
        assert "mf::cp_async16(" not in src and "mf::ldsm_" not in src


def test_async_copy_path_not_taken(cache: Path) -> None:
    """Not for: loop-invariant tiles (gqa's Q), operands that pass through an elementwise op
    first (fp32 tiles), tiles read by anything but a matmul or a fold accumulator summing
    them in registers (rmsnorm's X feeds the rms accumulator: in the ring with register folds,
    an fp32 tile without them), fp32 inputs, and loops of one iteration."""
    src, _, _ = emit_graph(matmul_loop_program(16, 32, 16, 2, pre_a=True, pre_b=True))
    assert "cp_async" not in src and "ldsm" not in src
    src, _, _ = emit_graph(matmul_loop_program(16, 32, 16, 1))
    assert "cp_async" not in src
    g = workloads.handwritten("rmsnorm", 1)
    (la,) = launches(g, 128)
    for regs in (False, True):
        src, _, _ = emit_graph(g, schedules={la.graph.key: Schedule(fold_registers=regs)})
        copies = [ln for ln in src.splitlines() if "mf::cp_async16(" in ln]
        assert any("&in1[" in ln for ln in copies)  # W's tile (in1) always
        assert any("&in0[" in ln for ln in copies) == regs  # X's (in0) with register folds


@pytest.mark.parametrize("case", MATMUL_LOOP_CASES + NARROW_VECTOR_CASES)
@pytest.mark.parametrize("opts", sorted(OPTS))
def test_matmul_loops_compile(case: tuple, opts: str, cache: Path) -> None:
    cg = compile_graph(matmul_loop_program(*case), arch="sm_90", load=False, cache=cache,
                       opts=OPTS[opts])
    assert _is_cubin(cg.cubin)


@pytest.mark.parametrize("case", NARROW_VECTOR_CASES)
def test_narrow_rows_move_whole_vectors(case: tuple, cache: Path) -> None:
    """Tiles whose rows are not a multiple of 16 bytes load, prefetch and store 8- or 4-byte
    vectors (the widest that divides the tile's and the tensor's rows), not one element at a
    time; every schedule the tuner may try compiles."""
    from mirage_formal.codegen import candidate_schedules, launches
    from mirage_formal.codegen.layout import KernelLayout

    prog = matmul_loop_program(*case)
    (la,) = launches(prog, 128)
    _, k, n = case[:3]
    want = {KernelLayout.row_vec(n, 2 * n, mf.DType.F16), KernelLayout.row_vec(k, k * case[3], mf.DType.F16)}
    src = compile_graph(prog, arch="sm_90", load=False, cache=cache).source
    for v in want - {0, 8}:
        assert f"mf::ld_rawn<{2 * v}>" in src or f"mf::ld_vecn<{2 * v}>" in src, v
    for sched in candidate_schedules(la.graph):
        cg = compile_graph(prog, arch="sm_90", load=False, cache=cache, schedules={la.graph.key: sched})
        assert _is_cubin(cg.cubin)


def _streamed_read_programs() -> list[tuple[Any, Schedule]]:
    """Programs and schedules whose streamed reads take every path: register prefetches of
    16-, 8- and 4-byte vectors, gemv vectors and cp.async copies."""
    return [(matmul_loop_program(*GEMV_LOOP_CASES[0]), Schedule(gemv=True, async_copy=False)),
            (matmul_loop_program(*GEMV_LOOP_CASES[0]), Schedule(gemv=True)),
            (matmul_loop_program(*MATMUL_LOOP_CASES[0]), Schedule()),
            *[(matmul_loop_program(*c), Schedule()) for c in NARROW_VECTOR_CASES[:3]]]


@pytest.mark.parametrize("l2", [128, 256])
def test_l2_fetch_hints_compile(l2: int, cache: Path) -> None:
    """Schedule.l2_fetch puts the PTX L2 fetch-size hint on every streamed read: register
    prefetches (16-, 8- and 4-byte vectors), gemv vectors and cp.async copies."""
    for prog, sched in _streamed_read_programs():
        plain = compile_graph(prog, arch="sm_90", load=False, cache=cache, opts=sched).source
        cg = compile_graph(prog, arch="sm_90", load=False, cache=cache,
                           opts=Schedule(**{**sched.to_dict(), "l2_fetch": l2}))
        assert _is_cubin(cg.cubin)
        assert f"_l2<{l2}>" in cg.source or f", {l2}>" in cg.source
        assert "_l2<" not in plain and f", {l2}>" not in plain


@pytest.mark.parametrize("l2", [0, 256])
def test_evict_first_policy_compiles(l2: int, cache: Path) -> None:
    """Schedule.evict_first puts an L2 evict-first cache policy on every streamed read (with or
    without a fetch-size hint): register prefetches of 16-, 8- and 4-byte vectors, gemv
    vectors and cp.async copies."""
    for prog, sched in _streamed_read_programs():
        plain = compile_graph(prog, arch="sm_90", load=False, cache=cache, opts=sched).source
        cg = compile_graph(prog, arch="sm_90", load=False, cache=cache,
                           opts=replace(sched, l2_fetch=l2, evict_first=True))
        assert _is_cubin(cg.cubin)
        assert "mf::l2_evict_first()" in cg.source and "_pol<" in cg.source
        assert "mf_pol" not in plain
        # every streamed read carries it: no plain raw load or copy is left
        assert not re.search(r"mf::(ld_raw\(|ld_rawn<\d+>\(|ld_rawn_l2<|cp_async16\(|cp_async16_l2<)", cg.source)


def test_large_read_once_streams_are_tuned_with_the_evict_first_policy() -> None:
    """A kernel streaming tens of MB that each block reads once (rmsnorm's and gated_mlp's
    weights, mha's K and V per head) gets the L2 evict-first policy in every rule's schedule;
    one whose streamed input every query-row block re-reads (gqa's K and V) or that streams
    little (lora) does not."""
    from mirage_formal.codegen import candidate_schedules, launches
    from mirage_formal.codegen.tuning_rules import EVICT_FIRST_MIN_BYTES, streamed_once_bytes

    def streaming_kernels(name: str, b: int) -> list[Any]:
        return [la.graph for la in launches(workloads.program(name, b), 128) if la.graph.forloop > 1]

    for name, b, want in (("rmsnorm", 1, True), ("gated_mlp", 1, True), ("mha", 1, True),
                          ("gqa", 1, False), ("lora", 1, False)):
        for bg in streaming_kernels(name, b):
            big = streamed_once_bytes(bg) >= EVICT_FIRST_MIN_BYTES
            scheds = candidate_schedules(bg)
            assert all(s.evict_first == big for s in scheds), (name, bg.key)
            assert big == want, (name, streamed_once_bytes(bg))


@pytest.mark.parametrize("blocking", WARP_BLOCKINGS)
def test_matmul_warp_blockings_compile(blocking: tuple[int, int], cache: Path) -> None:
    wm, wn = blocking
    for case in MATMUL_LOOP_CASES[-6:]:
        cg = compile_graph(matmul_loop_program(*case), arch="sm_90", load=False, cache=cache,
                           opts=Schedule(warp_m=wm, warp_n=wn))
        assert _is_cubin(cg.cubin)


def test_tiny_shared_memory_spills_to_workspace(cache: Path) -> None:
    src, _, kernels = emit_graph(workloads.handwritten("gqa", 1), smem_limit=4096)
    assert any(k.ws_floats > 0 for k in kernels)
    assert all(k.smem_bytes <= 4096 for k in kernels)
    assert _is_cubin(compile_cubin(src, "sm_90", cache=cache))


def test_cache_is_reused(cache: Path) -> None:
    g = workloads.program("ntrans", 1)
    a = compile_graph(g, arch="sm_90", load=False, cache=cache)
    files = sorted(p.name for p in cache.glob("*.cubin"))
    b = compile_graph(g, arch="sm_90", load=False, cache=cache)
    assert a.cubin == b.cubin and sorted(p.name for p in cache.glob("*.cubin")) == files


def test_compile_error_has_log_and_source_path(tmp_path: Path) -> None:
    src = '#include "mf_tile.cuh"\nextern "C" __global__ void k(float* x) { x[0] = undefined_name; }\n'
    with pytest.raises(CompileError) as e:
        compile_cubin(src, "sm_90", cache=tmp_path)
    msg = str(e.value)
    assert "undefined_name" in msg and "error" in msg
    cu = Path(msg.split("source written to ")[1].split(")")[0])
    assert cu.is_file() and cu.read_text() == src


@pytest.mark.skipif(gpu_available(), reason="this machine has a GPU")
def test_no_driver_is_compile_only(cache: Path) -> None:
    from mirage_formal.codegen.runtime import runtime

    with pytest.raises(NoGPUError, match="compile"):
        runtime()
    cg = compile_graph(workloads.program("lora", 1), cache=cache)  # load=None: compile-only
    assert not cg.loaded
    with pytest.raises(NoGPUError):
        cg.load()
    with pytest.raises(NoGPUError):
        compile_graph(workloads.program("lora", 1), cache=cache, load=True)


@pytest.mark.parametrize("name", sorted(workloads.PROGRAMS))
def test_every_candidate_schedule_compiles(name: str, cache: Path) -> None:
    """The schedules the autotuner may try for the program's kernels and the hand-written
    μGraph (splits forced by pretending the GPU has many SMs; every other one and the last,
    so each kind — split, gemv, threads, ring depth — is compiled), and its second round's
    on the first round's default (the policies only that round sets: 256-byte L2 fetches,
    evict-first, the cluster combine, the ring issued first, one barrier per iteration, folds
    from A fragments, outputs from registers, k slices, the TMA ring's trials, ops on A
    fragments; then a sample of the combinations), compile for sm_90."""
    from mirage_formal.codegen import Schedule, candidate_schedules, launches
    from mirage_formal.codegen.tuning_rules import refinements

    graphs = [workloads.program(name, 1)]
    if name in workloads.HANDWRITTEN:
        graphs.append(workloads.handwritten(name, 1))
    for g in graphs:
        for la in launches(g, 128):
            cands = candidate_schedules(la.graph, sm_count=4096)
            refs = refinements(cands[0], cands, la.graph)
            policies = [r for r in refs if r.l2_fetch or r.cluster_combine or r.ring_first
                        or r.evict_first != cands[0].evict_first or r.one_barrier
                        or r.fold_fragments or r.reg_epilogue or r.mma_kslice > 1
                        or r.tma_ring or r.a_op_fragments]
            # a sample that keeps CI in seconds
            for sched in {*cands[::2], cands[-1], *policies, *refs[len(policies)::4]}:
                cg = compile_graph(g, arch="sm_90", load=False, cache=cache,
                                   schedules={la.graph.key: sched})
                assert cg.kernels and all(isinstance(k.schedule, Schedule) for k in cg.kernels)


@pytest.mark.parametrize("batch", [1, 8])
def test_lifted_ntrans_compiles_under_every_tuner_schedule(batch: int, cache: Path) -> None:
    """The one-kernel lift of ntrans (search/seeds.py) at each grid the search may pick, under
    every schedule the autotuner may choose for it (512 and 1024 threads included)."""
    from mirage_formal.codegen import candidate_schedules, launches
    from mirage_formal.search.seeds import lifted_candidates

    prog = workloads.program("ntrans", batch)
    (lift,) = lifted_candidates(prog, (8,))  # 1 (b=1) or 8 (b=8) rows per block
    wide = []
    for la in launches(lift, 128):
        scheds = candidate_schedules(la.graph)
        assert {s.threads for s in scheds} >= {None, 512, 1024}
        for s in scheds:
            cg = compile_graph(lift, arch="sm_90", load=False, cache=cache, schedules={la.graph.key: s})
            assert _is_cubin(cg.cubin)
            wide.append("mf_red" in cg.source)
    assert any(wide)  # block-wide row reductions once the block has twice as many warps as rows


@pytest.mark.parametrize("name", sorted(ROW_ACTIVATION_PROGRAMS))
def test_row_activation_programs_compile_on_their_2d_views(name: str, cache: Path) -> None:
    """Programs on (batch, ..., rows, columns) activations against 2-D weights: every
    product's kernel runs on 2-D views (ir/flatten.py), and the schedules the tuner may try
    for the lowering and the one-kernel lifts (every other one and the last) compile for
    sm_90."""
    from mirage_formal.search.seeds import lifted_candidates

    prog = ROW_ACTIVATION_PROGRAMS[name]()
    for g in [prog, *lifted_candidates(prog, (1, 2, 4, 8))]:
        for la in launches(g, 128):
            if g is prog and any(n.op == "matmul" for n in la.graph.nodes):
                # (the lowering's products all flatten; a lift that splits the rows of each
                # batch element over the grid keeps its shapes)
                assert all(len(s) <= 2 for s, _ in la.graph.inputs), la.graph
            cands = candidate_schedules(la.graph, sm_count=4096)
            for sched in {*cands[::2], cands[-1]}:
                cg = compile_graph(g, arch="sm_90", load=False, cache=cache,
                                   schedules={la.graph.key: sched})
                assert _is_cubin(cg.cubin)


@pytest.mark.parametrize(("xs", "ws", "eps", "gain", "dt"), NORM_PROJECTION_CASES)
def test_norm_projection_loop_seeds_compile_under_every_tuner_schedule(
        xs: tuple[int, ...], ws: tuple[int, ...], eps: float, gain: bool, dt: str, cache: Path) -> None:
    """rms_norm(X) · W's loop seeds (the row's rms deferred past the loop; with an eps a mean
    accumulator of squares, ``add_scalar`` and ``sqrt``), at the size the GPU stage tunes
    first: the first-round schedules (every other one and the last) compile for sm_90."""
    _, seeds = norm_projection_loop_seeds(xs, ws, eps, gain, dt)
    assert seeds
    for g in seeds:
        for la in launches(g, 128):
            cands = candidate_schedules(la.graph)
            for sched in {*cands[::2], cands[-1]}:
                cg = compile_graph(g, arch="sm_90", load=False, cache=cache, schedules={la.graph.key: sched})
                assert _is_cubin(cg.cubin)


@pytest.mark.parametrize(("family", "case"), CUT_JOIN_CASES)
def test_cut_joins_compile_under_every_tuner_schedule(
        family: str, case: tuple[Any, ...], cache: Path) -> None:
    """Cut joins (``search.cone_seeds``): a decode MLP's second half cut before its down
    projection (one kernel for silu(gate) times h·Wu, one for the down product and the
    residual), and a layer norm cut before its projection (the norm as one row-wise kernel,
    the projection a loop lift). Each kernel at the size the GPU stage tunes first, under the
    opening schedule and a sample of the first round (every other one and the last),
    compiles for sm_90."""
    from mirage_formal.codegen.tuning_rules import opening_schedule

    _, joins = cut_join_case(family, case)
    assert joins
    for g in joins:
        for la in launches(g, 128):
            cands = candidate_schedules(la.graph)
            for sched in {opening_schedule(la.graph), *cands[::2], cands[-1]}:
                cg = compile_graph(g, arch="sm_90", load=False, cache=cache,
                                   schedules={la.graph.key: sched})
                assert _is_cubin(cg.cubin)


@pytest.mark.parametrize(("xs", "ws", "dt"), SHARED_WEIGHT_CASES)
def test_shared_weight_products_compile_under_every_tuner_schedule(
        xs: tuple[int, ...], ws: tuple[int, ...], dt: str, cache: Path) -> None:
    """A product whose weight is broadcast along the activations' batch dimensions lowers to
    blocks holding every batch element's rows (``codegen.lower``: batched tile products
    against one B tile); each schedule the tuner may try for it and a sample of its second
    round's compile for sm_90."""
    from mirage_formal.codegen.tuning_rules import refinements

    prog = product_program(xs, ws, dt)
    (la,) = launches(prog, 128)
    cands = candidate_schedules(la.graph, sm_count=4096)
    for sched in {*cands, *refinements(cands[0], cands, la.graph)[::3]}:
        cg = compile_graph(prog, arch="sm_90", load=False, cache=cache, schedules={la.graph.key: sched})
        assert _is_cubin(cg.cubin)


@pytest.mark.parametrize("case", GEMV_LOOP_CASES)
def test_gemv_schedules_compile_and_stream(case: tuple[int, int, int, int], cache: Path) -> None:
    """Every gemv schedule the tuner proposes for a skinny matmul compiles for sm_90, and at
    least one of them streams B through registers (no shared-memory or workspace tile for it),
    also when N/8 is not a power of two."""
    from mirage_formal.codegen import candidate_schedules, launches
    from mirage_formal.codegen.schedule import gemv_rows_ok

    prog = matmul_loop_program(*case)
    (la,) = launches(prog, 128)
    scheds = [s for s in candidate_schedules(la.graph) if s.gemv]
    assert scheds
    # more than 8 rows: only blocks whose registers hold the rows x 8 accumulators
    assert all(gemv_rows_ok(case[0], s.threads or la.graph.threads) for s in scheds)
    streamed = []
    for s in scheds:
        cg = compile_graph(prog, arch="sm_90", load=False, cache=cache, schedules={la.graph.key: s})
        assert _is_cubin(cg.cubin)
        streamed.append("float ga" in cg.source and "wsb" not in cg.source)
    assert any(streamed), [s.short() for s in scheds]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4), st.integers(1, 16), st.integers(1, 32), st.sampled_from([1, 2, 4, 8, 16]),
       st.sampled_from([0, 1, 2, 4]), st.sampled_from([0, 1, 2, 4, 8]))
def test_warp_tiles_rule(batch: int, mt: int, nt: int, warps: int, want_m: int, want_n: int) -> None:
    """The register blocking divides the tile counts, stays within the register budget, keeps
    every warp busy whenever the unblocked tiles can, honours a dividing explicit choice, and
    never reads more fragment bytes in all than the unblocked tiles."""
    wm, wn = warp_tiles(batch, mt, nt, warps, want_m, want_n)
    assert mt % wm == 0 and nt % wn == 0 and wm * wn <= WARP_TILES_MAX
    if (want_m or want_n) and mt % (want_m or 1) == 0 and nt % (want_n or 1) == 0 and \
            (want_m or 1) * (want_n or 1) <= WARP_TILES_MAX:
        assert (wm, wn) == (want_m or 1, want_n or 1)
        return
    tiles = batch * (mt // wm) * (nt // wn)
    if batch * mt * nt >= warps:
        assert tiles >= warps
    assert tiles * (2 * wm + wn) <= batch * mt * nt * 3


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4), st.integers(1, 16), st.integers(1, 32), st.sampled_from([1, 2, 4, 8, 16]))
def test_ragged_warp_tiles_rule(batch: int, mt: int, nt: int, warps: int) -> None:
    """With rows that end inside a 16-row tile (ragged): the rule's own blocking where it gives
    each warp at most one warp tile; else a blocking whose row groups may run past the rows
    that gives each warp at most one (the most such warp tiles), when any does; WN always
    divides the column tiles and the registers stay within budget."""
    plain = warp_tiles(batch, mt, nt, warps)
    wm, wn = warp_tiles(batch, mt, nt, warps, ragged=True)
    assert nt % wn == 0 and wm * wn <= WARP_TILES_MAX
    tiles = batch * row_groups(mt, wm) * (nt // wn)
    if batch * (mt // plain[0]) * (nt // plain[1]) <= warps:
        assert (wm, wn) == plain
        return
    static = [batch * row_groups(mt, m) * (nt // n) for m in (1, 2, 4) for n in (1, 2, 4, 8)
              if nt % n == 0 and m * n <= WARP_TILES_MAX
              and batch * row_groups(mt, m) * (nt // n) <= warps]
    if static:
        assert tiles == max(static)
    else:
        assert (wm, wn) == plain


@pytest.mark.parametrize(("rows", "cols", "threads"), [(197, 64, 256), (197, 16, 256),
                                                       (197, 32, 128), (100, 64, 256)])
def test_a_loop_product_of_ragged_rows_keeps_its_sums_in_registers(
        rows: int, cols: int, threads: int) -> None:
    """A loop product whose rows end inside a 16-row tile and outnumber the warps' row tiles
    (197 rows: 13 tiles on 8 warps) keeps every warp's sums in registers through the loop
    (one warp tile each, the last group of row tiles running past the rows), where it summed
    into shared memory every k step; the kernel compiles for sm_90."""
    prog = matmul_loop_program(rows, 64, cols, 4)
    (la,) = launches(prog)
    sched = Schedule(threads=threads)
    lay = KernelLayout(la.graph, "k", 227 * 1024, sched)
    (mm,) = [n for n in la.graph.nodes if n.op == "matmul"]
    assert mm in lay.reg_acc and lay.static_warp_tiles(mm)
    assert _is_cubin(compile_graph(prog, arch="sm_90", load=False, opts=sched).cubin)


@pytest.mark.parametrize("case", CHAIN_CASES + ONE_KERNEL_ATTENTION_CASES)
def test_register_chain_compiles(case: tuple, cache: Path) -> None:
    """Attention-shaped kernels keep exp(QK) in registers (Schedule.mma_chain: no score tile
    in shared memory) when every warp can own whole rows, not when mma_chain is off or the
    block has more 16-row tiles than warps; every schedule the tuner may try compiles."""
    from mirage_formal.codegen import candidate_schedules, launches

    prog = attention_loop_program(*case)
    (la,) = launches(prog, 128)
    m = case[0]
    chain = m // 16 <= 4 * (la.graph.threads // 32)  # at most 4 row tiles per warp
    for sched in [Schedule(), Schedule(mma_chain=False), *candidate_schedules(la.graph)]:
        cg = compile_graph(prog, arch="sm_90", load=False, cache=cache,
                           schedules={la.graph.key: sched})
        assert _is_cubin(cg.cubin)
        if sched == Schedule():
            assert ("unsigned ea" in cg.source) == chain, sched
        if not sched.mma_chain:
            assert "unsigned ea" not in cg.source


def _padded_chain_schedules(la: Any) -> list[Schedule]:
    """The schedules a padded or pass-by-pass register chain is checked under: the thread
    counts that give it one, two and four row tiles a warp, and every first-round one."""
    from mirage_formal.codegen import candidate_schedules

    return [Schedule(), *(Schedule(threads=t) for t in (128, 256, 512)),
            Schedule(threads=256, ldmatrix=False), Schedule(threads=256, async_copy=False),
            *candidate_schedules(la.graph)]


@pytest.mark.parametrize("case", PADDED_CHAIN_CASES)
def test_padded_and_pass_by_pass_chains_compile(case: tuple, cache: Path) -> None:
    """Register chains over key counts that are not a multiple of 16, or longer than a warp's
    registers hold, compile for sm_90 under every schedule they are checked under, and at 256
    or 512 threads (otherwise the defaults) the scores stay in registers (no score tile)."""
    from mirage_formal.codegen import launches

    prog = attention_loop_program(*case)
    (la,) = launches(prog, 128)
    chained = []
    for sched in _padded_chain_schedules(la):
        cg = compile_graph(prog, arch="sm_90", load=False, cache=cache,
                           schedules={la.graph.key: sched})
        assert _is_cubin(cg.cubin)
        if sched in (Schedule(threads=256), Schedule(threads=512)):
            chained.append("unsigned ea" in cg.source)
    assert all(chained)


def test_a_chain_whose_last_row_group_runs_past_its_rows_clamps_and_skips_them() -> None:
    """112 query rows a block are 7 row tiles; on 4 warps each owns two, so the last warp's
    second tile (rows 112-127) lies past the rows although 112 is a multiple of 16: its A
    fragments read row 111 and its sums and stores are skipped (they overran shared memory
    and faulted, s49 c2, before :meth:`KernelLayout.rows_past`)."""
    from mirage_formal.codegen import launches
    from mirage_formal.codegen.compiled import emit_graph

    prog = attention_loop_program(112, 64, 64, 64, 2)
    (la,) = launches(prog, 128)
    src, _, _ = emit_graph(prog, schedules={la.graph.key: Schedule()})
    assert "unsigned ea" in src  # (the register chain)
    assert "(r0 < 112 ? pa[" in src  # (Q's fragments: zeros past the rows)
    assert "if (r0 < 112)" in src and "q == 0 && r < 112" in src


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 300), st.sampled_from([16, 32, 64, 128]), st.integers(1, 600),
       st.sampled_from([8, 16, 32, 64, 128]), st.sampled_from([1, 2, 3]),
       st.sampled_from([128, 256, 416, 512, 1024]))
def test_a_chosen_register_chain_covers_its_keys_within_its_warps_and_registers(
        rows: int, d: int, keys: int, dv: int, forloop: int, threads: int) -> None:
    """Whatever the shapes, a register chain the layout chooses pads its columns to a
    multiple of 16 at or above the keys (within PASS_PADDING when it runs in passes), its
    passes and warps cover those columns exactly, its warps own every row tile, and its
    fragments stay within the registers the block leaves a thread; without passes the
    padding is under 16 columns."""
    from mirage_formal.codegen import launches
    from mirage_formal.codegen.layout import PASS_PADDING, KernelLayout
    from mirage_formal.codegen.schedule import row_groups
    from mirage_formal.ir.occupancy import chain_register_budget, chain_registers

    prog = attention_loop_program(rows, d, keys, dv, forloop, 0, True, "sum", "", True)
    (la,) = launches(prog, 128)
    lay = KernelLayout(la.graph, "k", 227 * 1024, Schedule(threads=threads))
    for ch in lay.chains.values():
        n1, m = ch.tile.shape[-1], ch.tile.shape[-2]
        tiles = math.prod(ch.tile.shape[:-2]) * row_groups(-(-m // 16), ch.wm)
        assert ch.cols >= n1 and ch.cols % 16 == 0 and ch.chunk % 16 == 0
        assert ch.passes * ch.chunk * ch.kw == ch.cols
        assert tiles * ch.kw <= threads // 32
        assert chain_registers(ch.wm, ch.chunk, dv, d) <= chain_register_budget(threads)
        if ch.passes == 1:
            assert ch.cols - n1 < 16 * ch.kw
        else:
            assert ch.kw == 1 and ch.cols <= -(-n1 // 16) * 16 * PASS_PADDING


def test_vit_attention_chain_pads_its_keys_and_runs_in_passes_where_registers_ask() -> None:
    """ViT-Base's 197 keys in one iteration: the chain's columns padded (the padding zeroed)
    and its passes as wide as the registers allow: 416 threads (one 16-row tile a warp) 2
    passes of 112 columns (224: the fewest passes within PASS_PADDING); 256 threads (two row tiles a warp, the last group
    running past the rows) and 512 (128 registers a thread) 7 passes of 32; at 128 threads
    (four a warp) none fits and the scores are stored."""
    from mirage_formal.codegen import launches
    from mirage_formal.codegen.layout import KernelLayout

    prog = attention_loop_program(197, 64, 197, 64, 1, 0, True, "sum", "", True)
    (la,) = launches(prog, 128)
    got = {}
    for t in (128, 256, 416, 512):
        lay = KernelLayout(la.graph, "k", 227 * 1024, Schedule(threads=t))
        got[t] = [(c.wm, c.kw, c.cols, c.chunk, c.passes) for c in lay.chains.values()]
    assert got == {128: [], 256: [(2, 1, 224, 32, 7)], 416: [(1, 1, 224, 112, 2)],
                   512: [(1, 1, 224, 32, 7)]}


@pytest.mark.parametrize("case", CHAIN_CASES)
@pytest.mark.parametrize("threads", [128, 256])
def test_register_chain_k_slices_keep_every_warp_busy(case: tuple, threads: int) -> None:
    """When a block has fewer 16-row tiles than warps, the warps left over share each row
    tile's score columns (k slices of the second product, Chain.kw): as many warps as divide
    the block and the 16-column steps, and the slices are added after the loop in a fixed
    order (one barrier between slices)."""
    from mirage_formal.codegen import launches
    from mirage_formal.codegen.layout import KernelLayout

    prog = attention_loop_program(*case)
    (la,) = launches(prog, 128)
    lay = KernelLayout(la.graph, "k", 227 * 1024, Schedule(threads=threads))
    m, _, kv = case[:3]
    for ch in lay.chains.values():
        rows = math.prod(ch.tile.shape[:-2]) * -(-m // 16) // ch.wm
        warps = threads // 32
        want = max(k for k in (1, 2, 4, 8) if rows * k <= warps and (kv // 16) % k == 0)
        assert ch.kw == want
        _, wn, tiles = lay.warp_blocking(ch.first)
        assert wn * ch.kw * 8 == kv and tiles == rows * ch.kw <= warps
    src = compile_graph(prog, arch="sm_90", load=False,
                        schedules={la.graph.key: Schedule(threads=threads)}).source
    if any(ch.kw > 1 for ch in lay.chains.values()):
        assert "kq = tile %" in src


@pytest.mark.parametrize("case", CHAIN_CASES)
@pytest.mark.parametrize("rows", [2, 4])
def test_register_chain_rows_per_warp(case: tuple, rows: int) -> None:
    """Schedule.chain_rows gives each warp that many 16-row tiles when they divide the
    block's row tiles and the rule would give fewer; the warps left over take k slices, and
    the chain's registers stay within its budget (else no chain at all)."""
    from mirage_formal.codegen import launches
    from mirage_formal.codegen.layout import KernelLayout

    prog = attention_loop_program(*case)
    (la,) = launches(prog, 128)
    rule = KernelLayout(la.graph, "k", 227 * 1024, Schedule(threads=256))
    lay = KernelLayout(la.graph, "k", 227 * 1024, Schedule(threads=256, chain_rows=rows))
    m = case[0]
    for mm, ch in lay.chains.items():
        want = rows if -(-m // 16) % rows == 0 else rule.chains[mm].wm
        assert ch.wm == max(want, rule.chains[mm].wm)
        # every warp tile (wm row tiles, one k slice of kw) on its own warp of the 8
        assert math.prod(ch.tile.shape[:-2]) * (-(-m // 16) // ch.wm) * ch.kw <= 8
    cg = compile_graph(prog, arch="sm_90", load=False,
                       schedules={la.graph.key: Schedule(threads=256, chain_rows=rows)})
    assert _is_cubin(cg.cubin)


@pytest.mark.parametrize("case", CHAIN_CASES[:2])
def test_ring_first_issues_the_ring_before_the_invariant_loads(case: tuple) -> None:
    """Schedule.ring_first moves the cp.async ring's first stages ahead of the loop-invariant
    tile loads (attention's Q); by default they follow them. Both compile for sm_90, the
    kernels differ only in that order, and the tuner's second round offers the flag."""
    from mirage_formal.codegen import launches
    from mirage_formal.codegen.tuning_rules import refinements

    prog = attention_loop_program(*case)
    (la,) = launches(prog, 128)
    srcs = {}
    for first in (False, True):
        cg = compile_graph(prog, arch="sm_90", load=False,
                           schedules={la.graph.key: Schedule(ring_first=first)})
        assert _is_cubin(cg.cubin)
        src = cg.source
        loop = src.index("for (int it0")
        ring, invariant = src.index("mf::cp_async16"), src.index("mf::ld_vec")
        assert ring < loop and invariant < loop
        assert (ring < invariant) == first
        srcs[first] = src
    assert sorted(srcs[False].splitlines()) == sorted(srcs[True].splitlines())
    assert any(r.ring_first for r in refinements(Schedule(), [Schedule()], la.graph))
    assert all(r.ring_first for r in refinements(Schedule(ring_first=True),
                                                 [Schedule(ring_first=True)], la.graph))


@pytest.mark.parametrize("case", NORM_CHAIN_CASES)
def test_normed_operands_take_the_fast_paths(case: tuple, cache: Path) -> None:
    """An rms_norm of a tile that a tensor-core product reads runs one warp per row
    (KernelLayout.rms_rowwise) up to rows of 512: an in-loop source stays in the cp.async ring,
    a loop-invariant one is read straight from global memory, and with half_tiles the result
    is an fp16 tile read with ldmatrix; every schedule the tuner may try compiles."""
    from mirage_formal.codegen import candidate_schedules, launches
    from mirage_formal.codegen.layout import KernelLayout

    prog = attention_loop_program(*case)
    (la,) = launches(prog, 128)
    bg = la.graph
    norms = [n for n in bg.nodes if n.op == "rms_norm"]
    lay = KernelLayout(bg, "k", 227 * 1024, Schedule(half_tiles=True))
    for n in norms:
        rowwise = n.shape[-1] <= 512
        assert lay.rms_rowwise(n) == rowwise
        x = n.src[0]
        if not rowwise:
            continue
        assert (n in lay.half) == (n.shape[-1] % 8 == 0 and n.shape[-1] >= 16)
        if x.shape[-1] % 8:
            continue  # no 16-byte rows: an fp32 tile loaded by the threads
        if x.attr("fmap") == -1:
            assert x in lay.direct and x not in lay.raw
            # loop-invariant: computed once, before the loop
            steps, p, _, _ = lay.plan()
            assert any(type(st).__name__ == "Op" and st.node is n for st in steps[:p])
        else:
            assert x in lay.raw and x not in lay.direct
    scheds = [Schedule(), Schedule(half_tiles=True), Schedule(async_copy=False),
              *candidate_schedules(bg)]
    assert any(sc.half_tiles and sc.mma_chain for sc in candidate_schedules(bg)) == any(
        lay.rms_rowwise(n) for n in norms)
    for sched in scheds:
        cg = compile_graph(prog, arch="sm_90", load=False, cache=cache,
                           schedules={la.graph.key: sched})
        assert _is_cubin(cg.cubin)


def test_loop_free_accumulators_share_their_source_tile() -> None:
    """A lowered library op's plain accumulator (one iteration) is its source tile when that
    is stored (rms_norm's: no copy step, no buffer of its own); an inlined elementwise source
    (exp's) is still computed into the accumulator."""
    from mirage_formal.codegen import launches
    from mirage_formal.codegen.layout import KernelLayout

    g = mf.Graph()
    x = g.input((64, 256), "f16", "X")
    g.output(g.rms_norm(g.exp(x)))
    for la in launches(g.build(), 128):
        lay = KernelLayout(la.graph, "k", 227 * 1024, Schedule())
        steps, _, _, bufs = lay.plan()
        accs = [n for n in la.graph.nodes if n.op == "accum"]
        assert accs
        for a in accs:
            shared = a.src[0].op == "rms_norm"
            assert (a in lay.alias) == shared
            assert (f"b{lay.ids[a]}" not in bufs) == shared
            assert any(type(st).__name__ == "Accumulate" and st.node is a for st in steps) != shared


def test_refinements_combine_kinds_with_the_winner() -> None:
    """The tuner's second round puts each tried kind of choice on the winner's threads and
    split, skipping combinations already tried or invalid for the kernel (besides the
    winner's own variants: the TMA ring first where its tiles allow it, then L2 policies, for
    an unsplit winner on fewer blocks than SMs its loop split through a cluster, and stream-K
    where it leaves SMs idle)."""
    from mirage_formal.codegen import candidate_schedules, launches
    from mirage_formal.codegen.tuning_rules import refinements

    for name in ("rmsnorm", "gated_mlp", "gqa"):
        for la in launches(workloads.program(name, 8 if name != "gated_mlp" else 1), 128):
            tried = [Schedule(), *candidate_schedules(la.graph)]
            keys = {s.key for s in tried}
            for best in tried[:6]:
                refs = refinements(best, tried, la.graph)
                # the TMA ring's trials lead (test_tma_ring checks them)
                lead = next((i for i, r in enumerate(refs) if not r.tma_ring), len(refs))
                assert not any(r.tma_ring for r in refs[lead:]) or best.tma_ring
                refs = refs[lead:]
                # first: the winner itself with 256-byte L2 fetches, then evicted first from L2
                # (unless already tried: a large read-once stream's rules carry the policy)
                first = [r for r in (replace(best, l2_fetch=256), replace(best, evict_first=True))
                         if r != best and r.key not in keys]
                assert refs[:len(first)] == first
                for r in refs:
                    assert r.key not in keys
                    assert la.graph.forloop % r.split == 0
                    if r.stream_k != best.stream_k:  # stream-K over one or two blocks per SM
                        assert r.stream_k == 132 and r.split == 1
                        assert replace(r, stream_k=0, split=best.split) == best
                        continue
                    if r.split != best.split:  # the winner clustered over more blocks
                        assert best.split == 1 and r.cluster_combine
                        assert replace(r, split=1, cluster_combine=False) == best
                        continue
                    assert r.threads == best.threads


def test_later_kernels_wait_for_their_predecessor_before_touching_its_results(cache: Path) -> None:
    """Programmatic dependent launch: every kernel waits (griddepcontrol.wait) before it reads
    anything but graph inputs and before it writes global memory; a later kernel's cp.async
    copies of graph inputs may go first (they overlap the previous kernel), and each kernel
    lets its dependent launch after its main loop."""
    import re

    prog = workloads.program("rmsnorm", 1, rows=16, h=256, n=256)  # rms_norm, then matmul
    cg = compile_graph(prog, arch="sm_90", load=False, cache=cache)
    assert _is_cubin(cg.cubin)
    assert len(cg.kernels) == 2
    ahead = 0
    for i, (la, k) in enumerate(zip(cg.launches, cg.kernels, strict=True)):
        body = k.source.split("\n")
        wait = next(j for j, ln in enumerate(body) if "mf::grid_dep_wait();" in ln)
        trigger = next(j for j, ln in enumerate(body) if "mf::grid_dep_launch();" in ln)
        one_wave = k.grid[0] * k.grid[1] * k.grid[2] <= 132
        assert (trigger < wait) == one_wave
        early = {j for j, n in enumerate(la.inputs) if n.op == "input"} if i else set()
        for ln in body[:wait]:
            reads = set(map(int, re.findall(r"\bin(\d+)\[", ln)))
            assert not re.search(r"\bout\d+\[", ln) and "ws[" not in ln and "wsb[" not in ln, ln
            if reads:
                assert "cp_async16" in ln and reads <= early, ln
                ahead += 1
    assert ahead, "the matmul's weight copies go out before the wait"


@pytest.mark.parametrize("split", [2, 8, 16])
def test_cluster_combine_compiles_and_falls_back_past_the_cluster_limit(split: int, cache: Path) -> None:
    """``cluster_combine``: a split of at most CLUSTER_MAX blocks runs as one cluster that
    needs no global partials (no combine workspace, no ticket); a larger split keeps the
    global-memory combine. Both compile for sm_90; the tuner's second round tries the cluster
    variant on a split winner (its first round does not: slower on the H100)."""
    from mirage_formal.codegen import Schedule, candidate_schedules, launches
    from mirage_formal.codegen.schedule import CLUSTER_MAX
    from mirage_formal.codegen.tuning_rules import refinements

    prog = attention_loop_program(64, 64, 64, 64, 48)
    (la,) = launches(prog, 128)
    cg = compile_graph(prog, arch="sm_90", load=False, cache=cache,
                       schedules={la.graph.key: Schedule(split=split, cluster_combine=True)})
    (k,) = cg.kernels
    if split <= CLUSTER_MAX:
        assert f"__cluster_dims__({split}, 1, 1)" in cg.source and "mf::ld_cluster" in cg.source
        assert k.extra_ws_floats == 0 and "mf_ticket" not in cg.source
    else:
        assert "__cluster_dims__" not in cg.source and "mf_ticket" in cg.source
    assert not any(c.cluster_combine for c in candidate_schedules(la.graph, sm_count=4096))
    best = Schedule(split=2)
    assert any(r.cluster_combine and r.split == 2 for r in refinements(best, [best], la.graph))
    # an unsplit winner on fewer blocks than SMs: its loop split 2 and 4 ways through a
    # cluster in the second round; none on a grid that fills the SMs
    few = la.graph.grid[0] * la.graph.grid[1] * la.graph.grid[2]
    clustered = [r for r in refinements(Schedule(), [Schedule()], la.graph, sm_count=few + 1)
                 if r.split > 1 and r.cluster_combine]
    assert {r.split for r in clustered} == {sp for sp in (2, 4) if la.graph.forloop % sp == 0}
    for r in clustered:
        compile_graph(prog, arch="sm_90", load=False, cache=cache, schedules={la.graph.key: r})
    assert not [r for r in refinements(Schedule(), [Schedule()], la.graph, sm_count=few)
                if r.split > 1]


def test_phase_probe_instrumentation_compiles_with_every_mark(cache: Path) -> None:
    """benchmarks/phase_probe.py's probes (a device-side measurement tool): a split kernel
    after another (rms_norm, then a split matmul) gets its entry, wait, loop, after-loop,
    ticket and exit marks, an early-leaving split block marks its exit, and the source
    compiles for sm_90."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from phase_probe import instrument

    prog = workloads.program("rmsnorm", 1, rows=16, h=256, n=256)
    keys = [la.graph.key for la in launches(prog, 128)]
    cg = compile_graph(prog, arch="sm_90", load=False, cache=cache,
                       schedules={keys[-1]: Schedule(split=2)})
    names = list(dict.fromkeys(k.name for k in cg.kernels))
    src = instrument(cg.source, names)
    for k in range(len(names)):
        for slot in (0, 1, 4):
            assert f"mf_mark({k}, {slot});" in src
    last = len(names) - 1
    assert f"mf_mark({last}, 2);" in src and f"mf_mark({last}, 3);" in src
    assert f"mf_mark({last}, 5);" in src and f"{{ mf_mark({last}, 4); return; }}" in src
    assert _is_cubin(compile_cubin(src, "sm_90", cache=cache, name="probe.cu"))


def test_phase_probe_times_a_tma_ring_loops_waits_in_cycles(cache: Path) -> None:
    """In a TMA ring kernel (a wgmma one here) the probe wraps the consumer loop's wait for
    each stage in SM-cycle reads, stores the waits' and the loop's cycles after it, leaves the
    producer's loop alone, and the source compiles (for sm_90a)."""
    import sys

    from graph_strategies import gemm_program

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from phase_probe import RING_WAIT, instrument

    from mirage_formal.codegen import candidate_schedules

    prog = gemm_program(64, 128, 128, 8, gm=2, gn=2)
    (la,) = launches(prog, 128)
    sched = next(s for s in candidate_schedules(la.graph) if s.wgmma)
    cg = compile_graph(prog, arch="sm_90", load=False, cache=cache, schedules={la.graph.key: sched})
    assert cg.source.count(RING_WAIT) == 1
    src = instrument(cg.source, [k.name for k in cg.kernels])
    assert RING_WAIT not in src and src.count("mf_cw += clock64() - mf_c0;") == 1
    assert "mf_cycles(0, mf_cw, clock64() - mf_cl);" in src
    assert src.count("mf::mbar_wait(&mf_empty[s]") == 1  # (the producer's, as it was)
    assert _is_cubin(compile_cubin(src, "sm_90", cache=cache, name="probe_ring.cu"))


def _main_loop(source: str) -> str:
    """The text of a kernel's main loop (from its header to the wait for the last cp.async
    group after it, or to the end of the kernel)."""
    start = source.index("for (int it0 = 0;")
    end = source.find("\n  mf::cp_async_wait<0>();", start)
    return source[start:end if end > 0 else None]


@pytest.mark.parametrize("case", FOLD_LOOP_CASES, ids=str)
def test_fold_accumulators_exchange_nothing_inside_the_loop(case: tuple, cache: Path) -> None:
    """With fold_registers (the default) a fold accumulator's loop body adds into the thread's
    registers only, reading its tile from the matmul's cp.async ring: no warp shuffles and no
    shared scratch until after the loop; without it, the block reduces every iteration (the
    path it replaces). Both compile for sm_90."""
    prog = fold_loop_program(*case)
    (la,) = launches(prog, 128)
    on = compile_graph(prog, schedules={la.graph.key: Schedule()}, arch="sm_90", cache=cache, load=False)
    off = compile_graph(prog, schedules={la.graph.key: Schedule(fold_registers=False)},
                        arch="sm_90", cache=cache, load=False)
    loop_on, loop_off = _main_loop(on.source), _main_loop(off.source)
    # the fold reads X from the same cp.async ring as the tensor-core matmul (raw fp16; the
    # slot as it % stages, or the loop's slot counter when the depth is not a power of two)
    assert re.search(r"fr\d+\[k\] \+= __half2float\(b\d+\[(\(it % \d+\)|mf_s \*)", loop_on)
    assert "warp_sum" not in loop_on and "mf_red" not in loop_on
    assert "float fr" not in off.source
    if case[1] // case[4] >= 32:  # rows of >= 32 terms: the per-iteration path reduces by warps
        assert "warp_sum" in loop_off


#: (first kernel's schedule, second kernel's): both loops split, split with stream-K, both
#: stream-K (the split combines keep partials and tickets in the workspace)
CHAINED_WORKSPACE_SCHEDULES = [(Schedule(split=8), Schedule(split=2)),
                               (Schedule(split=4), Schedule(stream_k=3)),
                               (Schedule(stream_k=5), Schedule(stream_k=3))]


@pytest.mark.parametrize("pair", range(len(CHAINED_WORKSPACE_SCHEDULES)))
def test_each_launch_has_its_own_workspace(pair: int, cache: Path) -> None:
    """Two combining kernels in one graph get disjoint workspace regions: with one shared
    region the first kernel's partial records covered the second's tickets, which then did
    not start at zero (the tuner's two-kernel gated_mlp candidates failed validation, s23).
    The second kernel's ticket offset lies inside the first's partials, so sharing would
    overlap here; and both kernels compile for sm_90."""
    from mirage_formal.codegen.compiled import WORKSPACE_ALIGN, workspace_offsets

    prog = chained_matmul_program()
    first, second = launches(prog, 128)
    scheds = dict(zip((first.graph.key, second.graph.key), CHAINED_WORKSPACE_SCHEDULES[pair], strict=True))
    _, _, kernels = emit_graph(prog, schedules=scheds)
    offsets, total = workspace_offsets(kernels)
    assert all(k.extra_ws_floats for k in kernels)
    tickets = [int(t) for t in re.findall(r"reinterpret_cast<unsigned\*>\(ws \+ (\d+)\)", kernels[1].source)]
    assert tickets and min(tickets) * 4 < kernels[0].ws_bytes  # a shared region would overlap
    regions = sorted(zip(offsets, (k.ws_bytes for k in kernels), strict=True))
    for (a, size), (b, _) in itertools.pairwise(regions):
        assert a + size <= b
    assert all(o % WORKSPACE_ALIGN == 0 for o in offsets)
    assert regions[-1][0] + regions[-1][1] <= total
    compile_graph(prog, arch="sm_90", load=False, cache=cache, schedules=scheds)


@pytest.mark.parametrize("case", MATMUL_LOOP_CASES[:8] + GEMV_LOOP_CASES[:3])
def test_dense_ring_rows_compile(case: tuple, cache: Path) -> None:
    """Schedule.dense_rows: ring tiles of 64-column multiples lose their 8-half row padding
    (stride = the tile's columns, smaller stages) and swizzle their 16-byte chunks; the kernel
    compiles for sm_90; the schedule's key keeps its old form when the field is off (cached
    entries stay valid)."""
    prog = matmul_loop_program(*case)
    gemv = case in GEMV_LOOP_CASES
    base = Schedule(gemv=gemv, threads=256 if gemv else None)
    dense = replace(base, dense_rows=True)
    padded_src, _, padded = emit_graph(prog, opts=base)
    dense_src, _, kernels = emit_graph(prog, opts=dense)
    assert "dense_rows" not in base.key and '"dense_rows":true' in dense.key
    # a tile whose rows are whole groups of eight 16-byte chunks, read through ldmatrix or
    # by a gemv, is swizzled; every other tile keeps its padded rows (the same source)
    if dense_src != padded_src:
        assert "& 7)) << 3)" in dense_src and kernels[0].smem_bytes < padded[0].smem_bytes
    if case[2] % 64 == 0 and case[4] == 0 and not case[6] and case[3] > 1:
        assert dense_src != padded_src
    compile_graph(prog, arch="sm_90", load=False, cache=cache, opts=dense)


@pytest.mark.parametrize("case", FOLD_LOOP_CASES, ids=str)
def test_dense_rows_swizzle_tiles_a_fold_reads(case: tuple, cache: Path) -> None:
    """A ring tile that a register fold accumulator reads beside the matmul (rmsnorm's fused X
    tile, summed for its rms) swizzles under dense_rows where its rows are whole groups of
    eight 16-byte chunks, and keeps padded rows otherwise; the fold reads each element where
    the copies put it: KernelLayout.addr, evaluated as the C expression it is, agrees with the
    copies' raw_offset for every element and is a permutation of the dense tile."""
    from mirage_formal.codegen.layout import KernelLayout

    prog = fold_loop_program(*case)
    src, _, _ = emit_graph(prog, opts=Schedule(dense_rows=True))
    (la,) = launches(prog, 128)
    lay = KernelLayout(la.graph, "k", 227 * 1024, Schedule(dense_rows=True))
    x = next(n for n in la.graph.nodes if n.op == "iter" and n.attr("input") == 0)
    rows, cols = x.shape
    assert (x in lay.swz) == (cols % 64 == 0 and x in lay.raw)
    assert ("& 7)) << 3)" in src) == (x in lay.swz)
    if x in lay.swz:
        assert any(c in lay.reg_fold for c in lay.consumers[x])
        read = lay.addr(x, ["R", "C"])
        copy = lay.raw_offset(x, "R", "CH")
        seen = set()
        for r in range(rows):
            for c in range(cols):
                at = eval(read, {"R": r, "C": c})
                assert at == eval(copy, {"R": r, "CH": c >> 3}) + (c & 7)
                seen.add(at)
        assert seen == set(range(rows * cols))
    compile_graph(prog, arch="sm_90", load=False, cache=cache, opts=Schedule(dense_rows=True))


def test_dense_rows_is_a_second_round_trial() -> None:
    """The tuner's second round tries the winner with dense ring rows on a loop that streams
    fp16 tiles into a matmul, and not on a loop-free kernel."""
    from mirage_formal.codegen.tuning_rules import refinements

    (la,) = launches(matmul_loop_program(*MATMUL_LOOP_CASES[0]), 128)
    best = Schedule(evict_first=True)
    assert any(r == replace(best, dense_rows=True) for r in refinements(best, [best], la.graph))
    (flat,) = launches(matmul_loop_program(2, 2048, 8, 1), 128)
    assert not any(r.dense_rows for r in refinements(Schedule(), [Schedule()], flat.graph))


@pytest.mark.parametrize("case", MATMUL_LOOP_CASES)
def test_kpair_products_compile(case: tuple, cache: Path) -> None:
    """Schedule.mma_kpair: a register-summed tensor-core product adds odd k-steps into a
    second accumulator set (summed after the loop) over a whole-unrolled k-loop; off, no
    second set. Compiles for sm_90, with dense rows too."""
    prog = matmul_loop_program(*case)
    plain, _, _ = emit_graph(prog, opts=Schedule())
    paired, _, _ = emit_graph(prog, opts=Schedule(mma_kpair=True))
    assert "? rb" not in plain
    if "? rb" in paired:
        assert re.search(r"\(&ra\d+\[0\]\[0\]\[0\]\)\[x\] \+= \(&rb\d+", paired)
    compile_graph(prog, arch="sm_90", load=False, cache=cache, opts=Schedule(mma_kpair=True, dense_rows=True))


@pytest.mark.parametrize("case", [*MATMUL_LOOP_CASES, (16, 256, 64, 4), (2, 512, 128, 4)])
def test_kslice_products_compile(case: tuple, cache: Path) -> None:
    """Schedule.mma_kslice: where the layout takes it, warp tile tile / kw of a register
    product runs k slice kq = tile % kw (its k-steps kq * KS / kw ...), the slices' partial
    sums go to a scratch tile after the loop and are added in slice order; with kpair the
    parity of the slice's own k-step picks the accumulator set. Where it does not apply the
    kernel is the plain one. Compiles for sm_90."""
    from mirage_formal.codegen.layout import KernelLayout

    prog = matmul_loop_program(*case)
    (la,) = launches(prog, 128)
    plain, _, _ = emit_graph(prog, opts=Schedule(threads=256))
    for kw in (2, 4, 8):
        sched = Schedule(threads=256, mma_kslice=kw, mma_kpair=True, dense_rows=True)
        lay = KernelLayout(la.graph, "k", 227 * 1024, sched)
        src, _, _ = emit_graph(prog, opts=sched)
        if lay.kslice:
            (m, got), = lay.kslice.items()
            assert got == kw and m in lay.reg_acc
            assert f"kq = tile % {kw}" in src and f"kq * {m.src[0].shape[-1] // 16 // kw} + ks" in src
            assert re.search(r"\(k\d+ \+ kq \* \d+\)\[", src)  # the slices' scratch tile
            assert lay.warp_blocking(m)[2] <= 8
        else:
            assert src == emit_graph(prog, opts=replace(sched, mma_kslice=1))[0]
        compile_graph(prog, arch="sm_90", load=False, cache=cache, opts=sched)
    assert "kq" not in plain
    assert Schedule(mma_kslice=1).key == Schedule().key


def test_kslice_is_a_second_round_trial_of_skinny_products() -> None:
    """The second round tries k slices (2, 4, 8 warps per warp tile) on a winner whose loop
    streams a product of at most 16 rows, and not on one of 64 rows."""
    from mirage_formal.codegen.tuning_rules import refinements

    (la,) = launches(matmul_loop_program(16, 256, 64, 4), 128)
    best = Schedule(threads=256)
    assert {r.mma_kslice for r in refinements(best, [best], la.graph)} >= {2, 4, 8}
    (wide,) = launches(matmul_loop_program(64, 64, 64, 4), 128)
    assert all(r.mma_kslice == 1 for r in refinements(best, [best], wide.graph))
    with pytest.raises(mf.GraphError, match="mma_kslice"):
        Schedule(mma_kslice=3)


def _register_epilogue_programs() -> list[tuple[str, Any]]:
    return ([(f"matmul {c}", matmul_loop_program(*c)) for c in MATMUL_LOOP_CASES]
            + [(f"fold {c}", fold_loop_program(*c)) for c in FOLD_LOOP_CASES]
            + [(f"gated {c}", gated_loop_program(*c)) for c in GATED_LOOP_CASES]
            + [("rmsnorm b=8", workloads.handwritten("rmsnorm", 8))])


@pytest.mark.parametrize("i", range(len(_register_epilogue_programs())))
def test_register_epilogue_compiles(i: int, cache: Path) -> None:
    """Schedule.reg_epilogue: an output computed from register products (the product itself,
    rmsnorm's product over its rms, gated_mlp's silu(X·W1) ⊙ (X·W2)) is stored from each
    warp's accumulator registers: the products' accumulator tiles are never written, the
    output is; with two chains both sets are added first. Off, or with a split loop, the
    kernel is the plain one. Compiles for sm_90."""
    from mirage_formal.codegen.layout import KernelLayout

    name, prog = _register_epilogue_programs()[i]
    (la,) = launches(prog, 128)
    for base in (Schedule(), Schedule(threads=256, mma_kpair=True, dense_rows=True, evict_first=True)):
        on = replace(base, reg_epilogue=True)
        lay = KernelLayout(la.graph, "k", 227 * 1024, on)
        src, _, _ = emit_graph(prog, opts=on)
        plain, _, _ = emit_graph(prog, opts=base)
        if not lay.reg_saves:
            assert src == plain
            continue
        assert src != plain and "acc0[e" in src and "out0[" in src
        for ms in lay.reg_saves.values():
            for m in ms:
                acc = lay.fused[m]
                assert all(n.op == "accum" and n.attr("kind") == "sum" for n in (acc,))
                if f"rb{lay.ids[m]}[" in src:  # (two chains: not where A's fragments are hoisted)
                    assert f"(&ra{lay.ids[m]}[0][0][0])[x] += (&rb{lay.ids[m]}" in src
        if name.startswith("gated"):
            assert "acc1[e" in src
        if la.graph.forloop % 2 == 0:
            split, _, _ = emit_graph(prog, opts=replace(on, split=2))
            assert split == emit_graph(prog, opts=replace(base, split=2))[0]
        compile_graph(prog, arch="sm_90", load=False, cache=cache, opts=on)
    assert "reg_epilogue" not in Schedule().key


def test_register_epilogue_is_a_second_round_trial() -> None:
    """The second round tries outputs stored from registers on an unsplit winner whose loop
    has a product, and not on a split winner."""
    from mirage_formal.codegen.tuning_rules import refinements

    (la,) = launches(gated_loop_program(*GATED_LOOP_CASES[0]), 128)
    best = Schedule()
    assert replace(best, reg_epilogue=True) in refinements(best, [best], la.graph)
    split = Schedule(split=2)
    assert not any(r.reg_epilogue for r in refinements(split, [split], la.graph))


def _fragment_fold_programs() -> list[tuple[str, Any]]:
    return ([(f"fold {c}", fold_loop_program(*c)) for c in FOLD_LOOP_CASES]
            + [(f"rmsnorm b={b}", workloads.handwritten("rmsnorm", b)) for b in (1, 8)])


@pytest.mark.parametrize("i", range(len(_fragment_fold_programs())))
def test_fragment_folds_compile(i: int, cache: Path) -> None:
    """Schedule.fold_fragments: a row fold (sum, mean, rms; one value per row) of the tile a
    register product streams as A adds its terms from the product's A fragments (h2_sum /
    h2_sq in the k-step, quad shuffles after the loop) and has no register or shared-memory
    pass of its own in the loop; a fold of groups of columns, and every kernel with the
    field off, is the plain kernel. Compiles for sm_90."""
    from mirage_formal.codegen.layout import KernelLayout

    name, prog = _fragment_fold_programs()[i]
    (la,) = launches(prog, 128)
    for on in FRAGMENT_FOLD_SCHEDULES:
        if on.split > 1 and la.graph.forloop % 2:
            continue
        off = replace(on, fold_fragments=False)
        lay = KernelLayout(la.graph, "k", 227 * 1024, on)
        src, _, _ = emit_graph(prog, opts=on)
        plain, _, _ = emit_graph(prog, opts=off)
        folds = [n for n in la.graph.nodes if n.op == "accum" and n.attr("fold") is not None]
        if not lay.frag_fold:
            assert src == plain
            assert all(a.attr("fold") != 1 for a in folds), name
            continue
        assert src != plain, name
        for a, m in lay.frag_fold.items():
            assert a in folds and a.attr("fold") == 1 and m.src[0] is a.src[0] and a not in lay.reg_fold
            if on.fold_mma:  # (the terms as tensor-core products on the A fragments)
                xt = "const unsigned xt[2] = {fas[wm][0], fas[wm][2]};"
                assert (xt if a.attr("kind") == "rms" else "const unsigned ones[2]") in src, name
                assert f"fm{lay.ids[a]}[wm][0]" in src and f"ff{lay.ids[a]}[wm][0] = " in src
                assert f"ff{lay.ids[a]}[wm][0] += " not in src
            else:
                term = "mf::h2_sq" if a.attr("kind") == "rms" else "mf::h2_sum"
                assert f"ff{lay.ids[a]}[wm][0] += {term}(fas[wm][0])" in src
            # (an A of at most 8 rows: only its rows' fragments are loaded)
            assert ("mf::ldsm_x2_rows8(" in src) == (m.shape[-2] <= 8 and "mf::ldsm_x4(" not in src), name
            assert f"fr{lay.ids[a]}[" not in src
            if m in lay.kslice:  # the slices' row sums meet in order through a scratch tile
                assert f"k{lay.ids[a]}[kq * " in src
        compile_graph(prog, arch="sm_90", load=False, cache=cache, opts=on)
    assert "fold_fragments" not in Schedule().key and "fold_mma" not in Schedule().key


@functools.cache
def _one_barrier_cases() -> list[tuple[str, Any, Schedule]]:
    return one_barrier_cases()


@pytest.mark.parametrize("i", range(len(_one_barrier_cases())))
def test_one_barrier_loops_compile(i: int, cache: Path) -> None:
    """Schedule.one_barrier: each iteration waits for its stage leaving S - 2 groups pending,
    passes one barrier, then refills the ring; the body ends without a barrier, and one
    follows the loop. Compiles for sm_90."""
    name, prog, sched = _one_barrier_cases()[i]
    src, _, _ = emit_graph(prog, opts=sched)
    plain, _, _ = emit_graph(prog, opts=replace(sched, one_barrier=False))
    assert src.count("__syncthreads();") <= plain.count("__syncthreads();") + 1, name
    waits = {int(w) for w in re.findall(r"cp_async_wait<(\d+)>", src)}
    plain_waits = {int(w) for w in re.findall(r"cp_async_wait<(\d+)>", plain)} - {0}
    assert plain_waits and all(w - 1 in waits and w not in waits for w in plain_waits), name
    compile_graph(prog, arch="sm_90", load=False, cache=cache, opts=sched)
    assert "one_barrier" not in Schedule().key


def test_one_barrier_is_a_second_round_trial() -> None:
    """The second round tries one barrier per iteration on a winner whose loop goes through
    the cp.async ring, and not on a loop-free kernel."""
    from mirage_formal.codegen.tuning_rules import refinements

    (la,) = launches(matmul_loop_program(16, 64, 64, 8), 128)
    best = Schedule()
    assert replace(best, one_barrier=True) in refinements(best, [best], la.graph)
    (flat,) = launches(matmul_loop_program(16, 64, 64, 1), 128)
    assert not any(r.one_barrier for r in refinements(best, [best], flat.graph))


def test_fragment_folds_are_second_round_trials() -> None:
    """The second round tries the fold from A fragments (alone, with the register outputs,
    with the widest k slices) on a winner whose loop folds its streamed A tile by rows, and
    not on a plain matmul loop nor where the fold takes groups of columns."""
    from mirage_formal.codegen.tuning_rules import refinements

    (la,) = launches(workloads.handwritten("rmsnorm", 8), 128)
    best = Schedule(threads=256, dense_rows=True, mma_kpair=True)
    trials = [r for r in refinements(best, [best], la.graph) if r.fold_fragments]
    assert replace(best, fold_fragments=True) in trials
    assert replace(best, fold_fragments=True, reg_epilogue=True) in trials
    assert any(r.mma_kslice == 8 for r in trials)
    from mirage_formal.codegen.autotune import REFINE_MAX

    assert all(r in refinements(best, [best], la.graph)[:REFINE_MAX] for r in trials)
    for prog in (matmul_loop_program(16, 256, 64, 4), fold_loop_program(4, 128, 4, "mean", 4)):
        (other,) = launches(prog, 128)
        assert not any(r.fold_fragments for r in refinements(best, [best], other.graph))


def test_streamed_products_get_the_dense_two_chain_candidate() -> None:
    """A loop streaming weights into a tensor-core product (no register chain) gets a
    first-round candidate with a 4-stage ring of dense rows and two-chain products on the
    grid's own blocks, and the second round tries two-chain products on the winner."""
    from mirage_formal.codegen.tuning_rules import refinements

    (la,) = launches(matmul_loop_program(16, 64, 64, 8), 128)
    cands = candidate_schedules(la.graph)
    assert any(c.dense_rows and c.mma_kpair and c.split == 1 and c.async_stages == 4 for c in cands)
    best = Schedule(split=2)
    assert replace(best, mma_kpair=True) in refinements(best, [best], la.graph)
    (att,) = launches(attention_loop_program(64, 64, 64, 64, 4), 128)
    assert not any(c.mma_kpair for c in candidate_schedules(att.graph))


def test_a_first_round_ranks_sizes_a_tensor_map_can_copy_with_the_tma_ring() -> None:
    """A loop streaming 64-column-multiple tiles of 2-D inputs into a product gets a
    first-round TMA ring candidate (the dense two-chain ring, half the warps, register
    outputs, min_blocks=1) whose kernel really takes the ring, also where an op of the loop's
    tiles is the product's A; a tile width no tensor-map box divides gets none, and neither do
    a kernel without a loop and attention's product of products."""
    prog = matmul_loop_program(16, 128, 64, 8)
    (la,) = launches(prog, 128)
    tma = [c for c in candidate_schedules(la.graph) if c.tma_ring]
    assert len(tma) == 1
    (t,) = tma
    assert (t.dense_rows, t.mma_kpair, t.min_blocks, t.reg_epilogue, t.warp_n) == (True, True, 1, True, 2)
    assert "mf::tma_load_2d" in emit_graph(prog, opts=t)[0]
    through_op = matmul_loop_program(16, 128, 64, 8, pre_a=True)
    (lo,) = launches(through_op, 128)
    (t,) = [c for c in candidate_schedules(lo.graph) if c.tma_ring and not c.a_op_fragments]
    assert "mf::tma_load_2d" in emit_graph(through_op, opts=t)[0]
    for other in (matmul_loop_program(16, 96, 64, 8), matmul_loop_program(16, 128, 64, 1),
                  attention_loop_program(64, 64, 64, 64, 4)):
        (lo,) = launches(other, 128)
        assert not any(c.tma_ring for c in candidate_schedules(lo.graph))


def test_carveout_probe_kernels_compile(cache: Path) -> None:
    """benchmarks/carveout_probe.py's empty kernel and large-shared flush compile for sm_90."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import carveout_probe

    assert compile_cubin(carveout_probe.PROBE_SOURCE, "sm_90", cache=cache,
                         name="carveout_probe.cu")[:4] == b"\x7fELF"


def test_stream_probe_kernels_compile(cache: Path) -> None:
    """benchmarks/stream_probe.py's read kernels (a device-side measurement tool) compile for
    sm_90 on both weight shapes, every kind of read, the two-matrix rings and the 2D
    tensor-map copies included."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import stream_probe

    for _, k, n in stream_probe.SHAPES:
        full = stream_probe.variants(k, n, quick=False)
        vs = stream_probe.variants(k, n, quick=True)
        vs += [next(v for v in full if v["kind"] == kind) for kind in ("contig", "band", "ring", "bulk", "tma")]
        vs += [v for v in full if v["kind"] == "ring2"][:3]
        for i, v in enumerate(vs):
            v["name"] = f"probe_{i}"
        assert {v["kind"] for v in vs} >= {"contig", "band", "ring", "bulk", "tma"}
        src = stream_probe.HEAD + "\n".join(stream_probe.source(v, k, n) for v in vs)
        assert _is_cubin(compile_cubin(src, "sm_90", cache=cache, name="stream_probe.cu"))


def test_flush_methods(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The timing's L2 flush: the driver memset by default, the PyTorch-shaped fill kernel
    (which compiles for sm_90) under MF_FLUSH=fill, and the package's own error naming the
    choices for anything else."""
    from mirage_formal.codegen.timing import FLUSH_FILL_SOURCE, flush_method
    from mirage_formal.errors import MirageError

    monkeypatch.delenv("MF_FLUSH", raising=False)
    assert flush_method() == "memset"
    monkeypatch.setenv("MF_FLUSH", "fill")
    assert flush_method() == "fill"
    monkeypatch.setenv("MF_FLUSH", "zero")
    with pytest.raises(MirageError, match="memset, fill"):
        flush_method()
    assert _is_cubin(compile_cubin(FLUSH_FILL_SOURCE, "sm_90", cache=cache, name="mf_flush.cu"))


@pytest.mark.parametrize("case", ONE_KERNEL_ATTENTION_CASES, ids=str)
def test_dense_rows_in_attention_chains_compile(case: tuple, cache: Path) -> None:
    """Attention's K and V ring tiles (batched: a leading head dimension) swizzle under
    dense_rows where their rows are 64-column multiples and each head's slice is a multiple of
    8 rows: the copies XOR by the row within the slice, the chain's ldmatrix reads by the
    same row; compiles for sm_90."""
    prog = attention_loop_program(*case)
    sched = Schedule(dense_rows=True)
    src, _, _ = emit_graph(prog, opts=sched)
    swizzled = "& 7)) << 3)" in src
    (la,) = launches(prog, 128)
    tiles = [n for n in la.graph.nodes if n.op == "iter" and n.attr("fmap") != -1]
    assert swizzled == any(n.shape[-1] % 64 == 0 and (n.shape[-2] % 8 == 0 or math.prod(n.shape[:-2]) == 1)
                           for n in tiles)
    compile_graph(prog, arch="sm_90", load=False, cache=cache, opts=sched)


@settings(max_examples=40, deadline=None)
@given(rows=st.sampled_from([8, 16, 64, 128, 256]), groups=st.integers(1, 4), batch=st.sampled_from([1, 2, 3]))
def test_swizzled_offsets_are_a_permutation_without_ldmatrix_conflicts(rows: int, groups: int, batch: int) -> None:
    """The printed swizzle (KernelLayout.raw_offset, evaluated as the C expression it is):
    within every row it permutes the row's 16-byte chunks (nothing lost or shared), and the 8
    rows one ldmatrix reads at one logical chunk land in 8 distinct 16-byte bank groups; in a
    batched tile the XOR by the row within its slice equals the XOR by the buffer's row."""
    cols = 64 * groups
    prog = matmul_loop_program(16, rows, cols, 2, batch=batch if batch > 1 else 0)
    (la,) = launches(prog, 128)
    from mirage_formal.codegen.layout import KernelLayout

    lay = KernelLayout(la.graph, "k", 227 * 1024, Schedule(dense_rows=True))
    b = next(n for n in lay.raw if n.shape[-1] == cols) if lay.raw else None
    if b is None or b not in lay.swz:
        return
    expr = lay.raw_offset(b, "R", "CH", "LR")
    ld = lay.ld[b]
    assert ld == cols
    # the buffer's rows, as if the tile held `batch` slices of its rows (the swizzle's rule
    # for several slices: a multiple of 8 rows each)
    slice_rows = b.shape[-2]
    tile_rows = batch * slice_rows if slice_rows % 8 == 0 else slice_rows
    for r in range(tile_rows):
        offs = {eval(expr, {"R": r, "CH": c, "LR": r % slice_rows}) for c in range(cols // 8)}
        assert offs == {r * ld + 8 * c for c in range(cols // 8)}
        assert offs == {eval(expr, {"R": r, "CH": c, "LR": r}) for c in range(cols // 8)}
    for r0 in range(0, tile_rows, 8):
        for c in range(cols // 8):
            banks = {(eval(expr, {"R": r, "CH": c, "LR": r}) * 2 // 16) % 8 for r in range(r0, r0 + 8)}
            assert len(banks) == 8


@pytest.mark.parametrize("case", counted_ring_cases(), ids=lambda c: c[0])
def test_counted_ring_slots_replace_the_remainder_in_the_loop(case: tuple, cache: Path) -> None:
    """A ring of a depth that is not a power of two reads and refills its slots from the
    loop's counters (no ``it % stages`` left in the loop), and compiles for sm_90; a ring of
    a power-of-two depth keeps the remainder (one AND) and no counter."""
    _, prog, sched = case
    cg = compile_graph(prog, opts=sched, arch="sm_90", cache=cache, load=False)
    loop = _main_loop(cg.source)
    assert "mf_s *" in loop and "mf_sr *" in loop
    assert "(it % " not in loop and f")) % {sched.async_stages}) *" not in loop
    pow2 = compile_graph(prog, opts=replace(sched, async_stages=4), arch="sm_90", cache=cache, load=False)
    assert "mf_slot" not in pow2.source


@pytest.mark.parametrize("case", ELEMENTWISE_LOOP_CASES)
@pytest.mark.parametrize("ring", sorted(A_OP_SCHEDULES))
def test_an_op_of_loop_tiles_is_computed_on_the_a_fragments(case: tuple, ring: str,
                                                             cache: Path) -> None:
    """op(X, Y) · W with Schedule.a_op_fragments: X and Y stay raw in the ring, each k-step
    loads both A fragments with ldmatrix and applies the op to the four half2 registers; the
    op has no tile and no step (nothing prefetched, no shared-memory tile for it); a TMA ring
    copies X, Y and W (three tensor maps) where their tiles are 64-column multiples. Without
    the field the kernel is as before. Each compiles for sm_90."""
    from mirage_formal.codegen.layout import KernelLayout
    from mirage_formal.codegen.schedule import FRAGMENT_OPS

    prog = elementwise_loop_program(*case)
    (la,) = launches(prog, 128)
    sched = A_OP_SCHEDULES[ring]
    cg = compile_graph(prog, schedules={la.graph.key: sched}, arch="sm_90", cache=cache, load=False)
    lay = KernelLayout(la.graph, "k", 227 * 1024, sched)
    (op,) = lay.frag_op
    assert {x.attr("input") for x in lay.raw} == {0, 1, 2}
    helper = FRAGMENT_OPS[case[-1]]
    assert cg.source.count(f"{helper}(fx[") == 4 and cg.source.count("mf::ldsm_x4(f") == 2
    assert f"b{lay.ids[op]} =" not in cg.source and "pf0_" not in cg.source
    tma = case[1] % 64 == 0 and case[2] % 64 == 0
    assert sum(len(k.tensor_maps) for k in cg.kernels) == (3 if ring == "tma" and tma else 0)
    off = compile_graph(prog, schedules={la.graph.key: replace(sched, a_op_fragments=False)},
                        arch="sm_90", cache=cache, load=False)
    assert "mf::h2_" not in off.source and not KernelLayout(
        la.graph, "k", 227 * 1024, replace(sched, a_op_fragments=False)).frag_op


@pytest.mark.parametrize("ring", sorted(A_OP_SCHEDULES))
def test_a_unary_op_of_a_loop_tile_is_computed_in_fp32_on_the_a_fragments(ring: str,
                                                                        cache: Path) -> None:
    """neg(X) · W with Schedule.a_op_fragments: X stays raw, its fragments are negated half by
    half in fp32 through the op's own C expression and packed back (no half2 helper for a
    unary op); it compiles for sm_90 and takes the TMA ring's tensor maps where set."""
    prog = matmul_loop_program(16, 128, 64, 8, pre_a=True)
    cg = compile_graph(prog, opts=A_OP_SCHEDULES[ring], arch="sm_90", cache=cache, load=False)
    assert cg.source.count("mf::pack_half2((-mf::h2_lo(fx[") == 4 and "unsigned fx[4];" in cg.source
    assert sum(len(k.tensor_maps) for k in cg.kernels) == (2 if ring == "tma" else 0)


@pytest.mark.parametrize("ring", sorted(A_OP_SCHEDULES))
def test_an_expression_of_two_loop_tiles_is_computed_on_the_a_fragments(ring: str,
                                                                      cache: Path) -> None:
    """(silu(X) ⊙ Y) · W with Schedule.a_op_fragments: both ops are one expression on the A
    fragments (silu of X's half inside the product with Y's), no step or tile for either op,
    and with 8 rows not on the padding rows' registers; X, Y and W stay raw (three tensor maps
    on the TMA ring); compiles for sm_90."""
    from mirage_formal.codegen.layout import KernelLayout

    prog = gated_a_loop_program(8, 128, 64, 8)
    (la,) = launches(prog, 128)
    lay = KernelLayout(la.graph, "k", 227 * 1024, A_OP_SCHEDULES[ring])
    (root,) = lay.frag_op
    assert root.op == "mul" and [x.op for x in lay.frag_inner] == ["silu"]
    assert len(lay.raw) == 3 and len(lay.frag_leaves[root]) == 2
    cg = compile_graph(prog, opts=A_OP_SCHEDULES[ring], arch="sm_90", cache=cache, load=False)
    # (8 rows: the expression fills registers 0 and 2; 1 and 3, rows 8-15, are zero padding)
    assert cg.source.count("mf::pack_half2(((mf::h2_lo(fx[") == 2 and "mf::exp_fast(-mf::h2_hi(fx[" in cg.source
    assert "fa[1] = 0u;" in cg.source and "fa[3] = 0u;" in cg.source
    wide = compile_graph(gated_a_loop_program(16, 128, 64, 8), opts=A_OP_SCHEDULES[ring],
                         arch="sm_90", cache=cache, load=False)
    assert wide.source.count("mf::pack_half2(((mf::h2_lo(fx[") == 4 and "fa[1] = 0u;" not in wide.source
    assert sum(len(k.tensor_maps) for k in cg.kernels) == (3 if ring == "tma" else 0)
    # (silu is no half2 op: the first round leaves it to the second, which tries any op)
    assert not any(c.a_op_fragments for c in candidate_schedules(la.graph))


@pytest.mark.parametrize("op", a_expression_ops())
def test_every_elementwise_op_of_the_registry_runs_on_a_fragments(op: str, cache: Path) -> None:
    """Each elementwise op of the registry, as a product's A over loop tiles with
    Schedule.a_op_fragments on the TMA ring: the layout takes it (no tile or step for the op,
    its tiles raw) and the kernel compiles for sm_90 (a new op is covered without a test)."""
    from mirage_formal.codegen.layout import KernelLayout

    prog = a_expression_loop_program(op)
    (la,) = launches(prog, 128)
    lay = KernelLayout(la.graph, "k", 227 * 1024, A_OP_SCHEDULES["tma"])
    (root,) = lay.frag_op
    assert root.op == op and len(lay.raw) == len(prog.inputs)
    cg = compile_graph(prog, opts=A_OP_SCHEDULES["tma"], arch="sm_90", cache=cache, load=False)
    assert "unsigned fx[4]" in cg.source and sum(len(k.tensor_maps) for k in cg.kernels) == len(prog.inputs)


def test_the_tuner_computes_an_op_of_loop_tiles_on_the_a_fragments() -> None:
    """A loop whose product's A is an add, sub or mul of loop tiles gets first-round
    candidates with Schedule.a_op_fragments (the dense cp.async ring, and the TMA ring where
    it fits); any op of one or two loop tiles gets a second-round trial on a winner without
    it (neg(X)·W: only that); a plain product loop and attention's product of products get
    none."""
    from mirage_formal.codegen.tuning_rules import refinements

    (la,) = launches(elementwise_loop_program(12, 128, 64, 8, "add"), 128)
    first = [c for c in candidate_schedules(la.graph) if c.a_op_fragments]
    assert sorted(c.tma_ring for c in first) == [False, True]
    assert any(r.a_op_fragments for r in refinements(Schedule(), [], la.graph))
    (lu,) = launches(matmul_loop_program(16, 128, 64, 8, pre_a=True), 128)
    assert not any(c.a_op_fragments for c in candidate_schedules(lu.graph))
    assert any(r.a_op_fragments for r in refinements(Schedule(), [], lu.graph))
    (lp,) = launches(matmul_loop_program(16, 128, 64, 8), 128)
    assert not any(c.a_op_fragments for c in candidate_schedules(lp.graph))
    assert not any(r.a_op_fragments for r in refinements(Schedule(), [], lp.graph))
    (lt,) = launches(attention_loop_program(64, 64, 64, 64, 4), 128)
    assert not any(c.a_op_fragments for c in candidate_schedules(lt.graph))


@pytest.mark.parametrize("case", ELEMENTWISE_LOOP_CASES)
def test_loop_tiles_read_by_elementwise_ops_are_prefetched(case: tuple, cache: Path) -> None:
    """Tiles that change every iteration and that only an elementwise op reads (X, Y of
    op(X, Y) · W) are loaded into prefetch registers an iteration ahead, not read in place by
    the op's expression (a global-memory round trip in every iteration); without prefetching
    they are read in place as before. Both compile for sm_90."""
    prog = elementwise_loop_program(*case)
    (la,) = launches(prog, 128)
    on = compile_graph(prog, schedules={la.graph.key: Schedule()}, arch="sm_90", cache=cache, load=False)
    off = compile_graph(prog, schedules={la.graph.key: Schedule(prefetch=False)}, arch="sm_90",
                        cache=cache, load=False)
    in_place = re.compile(r"to_f\(in[01]\[")
    assert not in_place.search(_main_loop(on.source)) and "pf0_" in on.source and "pf1_" in on.source
    assert in_place.search(_main_loop(off.source))
