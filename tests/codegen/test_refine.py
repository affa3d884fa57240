"""Block refinement (Schedule.refine_rows): one logical block runs as several CTAs over bands of rows.

- on any machine: where the rows divide, the refined (virtual) block graph is itself a
  μGraph with the original's float64 function, on hand-written kernels and on random ones;
  blocks that combine elements across the rows are refused; the tuner proposes refinements
  for kernels on few blocks with many rows (ViT's 197 tokens, a prime); the refined kernels
  address the real tensors (each band's start clamped to end inside them) and compile for
  sm_90 under every refined candidate schedule and their second-round variants;
- on the GPU: those kernels validate against the float64 program under each of them.
"""

from __future__ import annotations

import numpy as np
import pytest
from graph_strategies import block_programs
from hypothesis import given, settings

from mirage_formal.codegen import (
    Schedule,
    candidate_schedules,
    compile_graph,
    gpu_available,
    launches,
)
from mirage_formal.codegen.compiled import emit_graph
from mirage_formal.codegen.refine import refinable, refinable_dims, refined
from mirage_formal.codegen.tuning_rules import refinements
from mirage_formal.errors import GraphError
from mirage_formal.ir.graph import GET, KERNEL_OP, KernelGraph
from mirage_formal.ir.text import parse_text
from mirage_formal.semantics import F64, evaluate, random_inputs
from mirage_formal.semantics.evaluate import evaluate_block


def vit_attention(heads: int = 2, n: int = 197, d: int = 64, vsplit: int = 2,
                  batch: int = 1) -> KernelGraph:
    """exp(Q·K·0.125)·V / rowsum over ``n`` keys in one iteration, a block per head and V
    column group (the form the search finds for ViT's attention): all ``n`` query rows a block;
    ``batch`` > 1 on grid z."""
    dv, z = d // vsplit, 0 if batch > 1 else -1
    return parse_text(
        "ugraph {\n"
        f"  %0 = input() {{name='Q'}} : f16[{batch}, {heads}, {n}, {d}]\n"
        f"  %1 = input() {{name='K'}} : f16[{batch}, {heads}, {d}, {n}]\n"
        f"  %2 = input() {{name='V'}} : f16[{batch}, {heads}, {n}, {d}]\n"
        f"  %3 = kernel(%0, %1, %2) {{forloop=1, grid=({vsplit}, {heads}, {batch}), threads=128}} {{\n"
        f"    %b0 = iter() {{fmap=-1, imap=(-1, 1, {z}), input=0}} : f16[1, 1, {n}, {d}]\n"
        f"    %b1 = iter() {{fmap=3, imap=(-1, 1, {z}), input=1}} : f16[1, 1, {d}, {n}]\n"
        f"    %b2 = matmul(%b0, %b1) : f16[1, 1, {n}, {n}]\n"
        f"    %b3 = mul_scalar(%b2) {{scalar=0.125}} : f16[1, 1, {n}, {n}]\n"
        f"    %b4 = exp(%b3) : f16[1, 1, {n}, {n}]\n"
        f"    %b5 = iter() {{fmap=2, imap=(3, 1, {z}), input=2}} : f16[1, 1, {n}, {dv}]\n"
        f"    %b6 = matmul(%b4, %b5) : f16[1, 1, {n}, {dv}]\n"
        f"    %b7 = accum(%b6) {{fold=None, kind='sum'}} : f16[1, 1, {n}, {dv}]\n"
        f"    %b8 = accum(%b4) {{fold=1, kind='sum'}} : f16[1, 1, {n}, 1]\n"
        f"    %b9 = div(%b7, %b8) : f16[1, 1, {n}, {dv}]\n"
        f"    save %b9 {{omap=(3, 1, {z})}}\n"
        "  }\n"
        f"  %4 = get(%3) {{index=0}} : f16[{batch}, {heads}, {n}, {d}]\n"
        "  return %4\n"
        "}\n")


def rows_matmul(n: int = 197, k: int = 256, cols: int = 512, tile: int = 64,
                loop: int = 4) -> KernelGraph:
    """X·W + b with all ``n`` rows of X in each block (ViT's qkv projection's form), a block
    per ``tile`` columns, the contraction over ``loop`` iterations."""
    kt = k // loop
    return parse_text(
        "ugraph {\n"
        f"  %0 = input() {{name='X'}} : f16[{n}, {k}]\n"
        f"  %1 = input() {{name='W'}} : f16[{k}, {cols}]\n"
        f"  %2 = input() {{name='b'}} : f16[{cols}]\n"
        f"  %3 = kernel(%0, %1, %2) {{forloop={loop}, grid=({cols // tile}, 1, 1), threads=128}} {{\n"
        f"    %b0 = iter() {{fmap=1, imap=(-1, -1, -1), input=0}} : f16[{n}, {kt}]\n"
        f"    %b1 = iter() {{fmap=0, imap=(1, -1, -1), input=1}} : f16[{kt}, {tile}]\n"
        f"    %b2 = matmul(%b0, %b1) : f16[{n}, {tile}]\n"
        f"    %b3 = accum(%b2) {{fold=None, kind='sum'}} : f16[{n}, {tile}]\n"
        f"    %b4 = iter() {{fmap=-1, imap=(0, -1, -1), input=2}} : f16[{tile}]\n"
        f"    %b5 = accum(%b4) {{fold=None, kind='mean'}} : f16[{tile}]\n"
        f"    %b6 = add(%b3, %b5) : f16[{n}, {tile}]\n"
        "    save %b6 {omap=(1, -1, -1)}\n"
        "  }\n"
        f"  %4 = get(%3) {{index=0}} : f16[{n}, {cols}]\n"
        "  return %4\n"
        "}\n")


def centered_rows(n: int = 64) -> KernelGraph:
    """X minus its column means: every output row reads every input row (not refinable)."""
    return parse_text(
        "ugraph {\n"
        f"  %0 = input() {{name='X'}} : f16[{n}, 128]\n"
        "  %1 = kernel(%0) {forloop=1, grid=(2, 1, 1), threads=128} {\n"
        f"    %b0 = iter() {{fmap=-1, imap=(1, -1, -1), input=0}} : f16[{n}, 64]\n"
        f"    %b1 = accum(%b0) {{fold=None, kind='sum'}} : f16[{n}, 64]\n"
        "    %b2 = mean(%b1) {axis=0, keepdims=True} : f16[1, 64]\n"
        f"    %b3 = sub(%b1, %b2) : f16[{n}, 64]\n"
        "    save %b3 {omap=(1, -1, -1)}\n"
        "  }\n"
        f"  %2 = get(%1) {{index=0}} : f16[{n}, 128]\n"
        "  return %2\n"
        "}\n")


def _banded(graph: KernelGraph, dim: int, rows: int, xs: dict[str, np.ndarray]) -> list[np.ndarray]:
    """``graph``'s one kernel (over graph inputs) refined, emulated in float64 as the CTAs run
    it: each band's virtual block graph on the band's rows of the refined inputs (the last
    band shifted back to end at the dimension's end), its outputs stored at those rows."""
    (kn,) = [n for n in graph.nodes if n.op == KERNEL_OP]
    rf = refined(kn.attr("graph"), dim, rows)
    srcs = [xs[s.attr("name")] for s in kn.src]
    n = rf.real_outputs[0][dim]
    outs = [np.zeros(s) for s in rf.real_outputs]
    for j in range(rf.parts):
        start = min(j * rows, n - rows)
        band = range(start, start + rows)
        subs = []
        for x, (vshape, _) in zip(srcs, rf.graph.inputs, strict=True):
            d = next((i for i, (a, b) in enumerate(zip(vshape, x.shape, strict=True)) if a != b), None)
            subs.append(x if d is None else np.take(x, band, axis=d))
        for out, got in zip(outs, evaluate_block(rf.graph, subs, F64()), strict=True):
            idx = [slice(None)] * out.ndim
            idx[dim] = slice(start, start + rows)
            out[tuple(idx)] = got
    gets = {n.attr("index"): n for n in graph.nodes if n.op == GET and n.src[0] is kn}
    assert all(gets[i] is o for i, o in enumerate(graph.outputs))
    return outs


def _same_function(graph: KernelGraph, dim: int, rows: int, seed: int = 0) -> bool:
    xs = random_inputs(graph, np.random.default_rng(seed))
    return all(np.allclose(x, y, rtol=1e-9, atol=1e-12) for x, y in
               zip(evaluate(graph, xs, F64()), _banded(graph, dim, rows, xs), strict=True))


def _bg(g: KernelGraph):  # type: ignore[no-untyped-def]
    (la,) = launches(g, 128)
    return la.graph


@pytest.mark.parametrize(("g", "dim"), [(vit_attention(), 2), (rows_matmul(), 0),
                                        (vit_attention(n=192), 2), (rows_matmul(n=192), 0)],
                         ids=["attention", "matmul", "attention_dividing", "matmul_dividing"])
def test_the_bands_of_a_refined_block_compute_the_same_function(g: KernelGraph, dim: int) -> None:
    """Bands of 16, 48, 64 and 112 rows over 197 (the last overlapping its neighbour) and 192."""
    bg = _bg(g)
    n = bg.outputs[0].node.shape[dim]
    assert [d for d, _ in refinable_dims(bg)] == [dim]
    for rows in (16, 48, 64, 112):
        rf = refined(bg, dim, rows)
        assert rf.parts == -(-n // rows) and rf.launch_grid[rf.axis] == bg.grid[rf.axis] * rf.parts
        assert rf.graph.grid == bg.grid
        assert _same_function(g, dim, rows)


@settings(max_examples=60, deadline=None)
@given(block_programs())
def test_refinement_keeps_the_function_wherever_it_is_allowed(graph: KernelGraph) -> None:
    (kn,) = [n for n in graph.nodes if n.op == KERNEL_OP]
    bg = kn.attr("graph")
    out = bg.outputs[0].node
    if any(s.op != "input" for s in kn.src):
        return
    for dim, size in enumerate(out.shape):
        for rows in range(1, size):
            if refinable(bg, dim, rows):
                assert _same_function(graph, dim, rows), (dim, rows, bg)


def test_a_grid_axis_of_one_block_that_a_map_names_is_not_taken() -> None:
    """One V column group a head: grid x is 1 but V's map names it, so the bands go on z."""
    rf = refined(_bg(vit_attention(heads=2, vsplit=1)), 2, 48)
    assert rf.axis == 2 and rf.launch_grid == (1, 2, 5)


def test_a_block_with_every_grid_axis_in_use_takes_its_bands_on_x() -> None:
    """ViT's attention at b=8 (batch on z, heads on y, V column groups on x): CTA i along x
    is block i / bands, band i % bands."""
    g = vit_attention(heads=3, vsplit=2, batch=2)
    bg = _bg(g)
    assert bg.grid == (2, 3, 2)
    rf = refined(bg, 2, 48)
    assert rf.axis == 0 and rf.launch_grid == (10, 3, 2)
    assert _same_function(g, 2, 48)
    src, _, (k,) = emit_graph(g, schedules={bg.key: Schedule(refine_rows=48, refine_dim=2)})
    assert k.grid == (10, 3, 2)
    assert "const int bx = blockIdx.x / 5, by = blockIdx.y, bz = blockIdx.z; const int mf_band = blockIdx.x % 5;" in src


def test_rows_that_an_op_combines_are_not_refined() -> None:
    bg = _bg(centered_rows())
    assert refinable_dims(bg) == []
    with pytest.raises(GraphError, match="combines elements"):
        refined(bg, 0, 16)
    # (and the contraction of attention's keys: its K and V rows are never split)
    rf = refined(_bg(vit_attention()), 2, 64)
    assert [s for s, _ in rf.graph.inputs] == [(1, 2, 64, 64), (1, 2, 64, 197), (1, 2, 197, 64)]


def test_refined_kernels_address_the_real_tensors_with_the_last_band_clamped() -> None:
    g = vit_attention(heads=12, vsplit=8)
    bg = _bg(g)
    src, _, (k,) = emit_graph(g, schedules={bg.key: Schedule(refine_rows=112, refine_dim=2)})
    assert k.grid == (8, 12, 2)
    # Q rows and output rows start at min(band * 112, 197 - 112), strides of 197 rows a head
    assert "const int bx = blockIdx.x, by = blockIdx.y, bz = 0; const int mf_band = blockIdx.z % 2;" in src
    assert "&in0[(by*1)*12608 + (min(mf_band*112, 85) + t2)*64" in src
    assert "&out0[(by*1)*12608 + (min(mf_band*112, 85) + t2)*64" in src
    with pytest.raises(GraphError, match="refine_rows comes without split"):
        emit_graph(g, schedules={bg.key: Schedule(refine_rows=112, refine_dim=2, split=2)})


def test_the_tuner_refines_kernels_on_few_blocks_and_each_refined_schedule_compiles() -> None:
    """ViT's qkv projection (36 blocks of 197 rows) and attention (a block per head and V
    column group); the rmsnorm row's 2-row kernel gets none."""
    for g in (rows_matmul(cols=2304), vit_attention(heads=12, vsplit=4)):
        bg = _bg(g)
        cands = candidate_schedules(bg, 132)
        refined_cands = [s for s in cands if s.refine_rows]
        assert refined_cands, bg.grid
        for s in refined_cands:
            cg = compile_graph(g, schedules={bg.key: s}, load=False)
            assert cg.kernels[0].grid[refined(bg, s.refine_dim, s.refine_rows).axis] > 1
            second = refinements(s, cands, bg, 132)
            # (the second round keeps the band, or tries the neighbouring ones)
            assert {r.refine_rows for r in second} - {s.refine_rows} <= {s.refine_rows - 16,
                                                                         s.refine_rows + 16}
            # (unless the first round tried it)
            assert s.refine_rows + 16 in {r.refine_rows for r in [*second, *cands]}
            for r in second[:4]:
                assert not r.refine_conflict
                compile_graph(g, schedules={bg.key: r}, load=False)
    from mirage_formal import workloads

    for la in launches(workloads.program("rmsnorm", 1), 128):
        assert not [s for s in candidate_schedules(la.graph, 132) if s.refine_rows]


def test_an_unrefined_schedule_keeps_its_key() -> None:
    assert "refine" not in Schedule(threads=256).key
    s = Schedule(refine_rows=48, refine_dim=2)
    assert Schedule.from_dict(s.to_dict()) == s
    with pytest.raises(GraphError):
        Schedule(refine_rows=-1)


#: (program, forced schedules) for the GPU check: bands of 16, 48 and 112 rows over 197
#: (the last clamped), the one-iteration chain and the looping product, and a dividing case
GPU_CASES = {
    "attention": (lambda: vit_attention(heads=3, vsplit=2), 2),
    "attention_one_group": (lambda: vit_attention(heads=2, vsplit=1), 2),
    "matmul": (lambda: rows_matmul(), 0),
    "matmul_dividing": (lambda: rows_matmul(n=128), 0),
    "attention_batched": (lambda: vit_attention(heads=3, vsplit=2, batch=2), 2),
}


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a GPU")
@pytest.mark.parametrize("case", sorted(GPU_CASES))
def test_refined_schedules_validate(case: str) -> None:
    from mirage_formal.codegen.validate import validate

    make, dim = GPU_CASES[case]
    g = make()
    bg = _bg(g)
    cands = candidate_schedules(bg, 132)
    scheds = [s for s in cands if s.refine_rows]
    scheds += [Schedule(refine_rows=r, refine_dim=dim, threads=t)
               for r in (16, 48, 112) if refinable(bg, dim, r) for t in (None, 256)]
    assert len(scheds) >= 6
    if scheds:
        scheds += refinements(scheds[0], cands, bg, 132)
    for s in scheds:
        rep = validate(compile_graph(g, schedules={bg.key: s}), trials=2)
        assert rep.ok, f"{s.short()}: {rep}"
