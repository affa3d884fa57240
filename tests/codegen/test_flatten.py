"""Row flattening (ir/flatten.py): a block graph on (batch, ..., rows, columns)
activations and the same kernel on their 2-D views compute the same elements (float64), on
library lowerings, the search's seeds and hand-built kernels; graphs it must not touch are
left alone."""

from __future__ import annotations

import numpy as np
import pytest
from graph_strategies import (
    ROW_ACTIVATION_PROGRAMS,
    block_programs,
    kernel_programs,
    row_activation_programs,
)
from hypothesis import given, settings
from hypothesis import strategies as st

import mirage_formal as mf
from mirage_formal import workloads
from mirage_formal.codegen import launches
from mirage_formal.codegen.lower import accums_pushed_down, default_block_graph
from mirage_formal.ir.flatten import flat_rows
from mirage_formal.ir.graph import KERNEL_OP, BlockGraph, KernelGraph, make_input, make_kernel
from mirage_formal.search.loop_seeds import loop_lifted_candidates
from mirage_formal.search.seeds import lifted_candidates
from mirage_formal.semantics import run_reference


def _same_on_views(bg: BlockGraph, flat: BlockGraph, seed: int) -> None:
    """Run ``bg`` and ``flat`` as one-kernel programs on the same elements (the flat one's
    inputs the 2-D views of ``bg``'s) and compare every output element."""
    rng = np.random.default_rng(seed)
    ins = [make_input(f"x{i}", s, d) for i, (s, d) in enumerate(bg.inputs)]
    flat_ins = [make_input(f"x{i}", s, d) for i, (s, d) in enumerate(flat.inputs)]
    vals = {f"x{i}": rng.uniform(0.5, 1.5, size=s) for i, (s, _) in enumerate(bg.inputs)}
    flat_vals = {f"x{i}": vals[f"x{i}"].reshape(s) for i, (s, _) in enumerate(flat.inputs)}
    want = run_reference(KernelGraph(tuple(ins), tuple(make_kernel(bg, ins))), vals)
    got = run_reference(KernelGraph(tuple(flat_ins), tuple(make_kernel(flat, flat_ins))), flat_vals)
    for w, g in zip(want, got, strict=True):
        assert g.shape == (int(np.prod(w.shape[:-1])), w.shape[-1])
        np.testing.assert_allclose(g.reshape(w.shape), w, rtol=1e-12, atol=1e-12)


def _kernels(prog: KernelGraph) -> list[BlockGraph]:
    """Every kernel of ``prog`` as launches() sees it before flattening."""
    out = []
    for n in prog.kernels:
        if n.op == KERNEL_OP:
            out.append(accums_pushed_down(n.attr("graph")))
        elif n.op not in ("input", "get"):
            out.append(default_block_graph(n))
    return out


@pytest.mark.parametrize("name", sorted(ROW_ACTIVATION_PROGRAMS))
def test_library_lowerings_and_seeds_flatten_to_the_same_elements(name: str) -> None:
    """The library lowering of every op of the program and the search's one-kernel lifts and
    loop seeds: each that flattens computes the same elements on the views, and the lowering's
    products all flatten (their weights are 2-D)."""
    prog = ROW_ACTIVATION_PROGRAMS[name]()
    graphs = _kernels(prog)
    sizes = (1, 2, 4, 8)
    for cand in lifted_candidates(prog, sizes) + loop_lifted_candidates(prog, sizes, sizes):
        graphs += _kernels(cand)
    flattened = 0
    for i, bg in enumerate(graphs):
        flat = flat_rows(bg)
        if flat is not None:
            flattened += 1
            _same_on_views(bg, flat, i)
        elif any(n.op == "matmul" for n in bg.nodes) and bg in _kernels(prog):
            pytest.fail(f"a library product of {name} did not flatten: {bg}")
    assert flattened


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([(8, 1), (4, 2), (2, 1, 3), (3, 4, 1)]), st.sampled_from([1, 2, 4]),
       st.sampled_from([1, 2, 4]), st.sampled_from(["f16", "f32"]))
def test_hand_built_kernels_flatten_to_the_same_elements(
        lead: tuple[int, ...], gx: int, fl: int, dt: str) -> None:
    """A fused gated product over (lead..., 64) activations with grid x over the weight's
    columns, the loop over k, and (where it divides) grid y over the first leading dimension:
    the views compute the same; a grid split of an inner leading dimension is refused."""
    g = mf.Graph()
    x = g.input((*lead, 64), dt, "X")
    w1 = g.input((64, 32), dt, "W1")
    w2 = g.input((64, 32), dt, "W2")
    gy = lead[0] if lead[0] in (2, 4) else 1
    k = g.kernel([x, w1, w2], grid=(gx, gy, 1), threads=128, forloop=fl)
    xt = k.iter(x, imap=(-1, 0 if gy > 1 else -1, -1), fmap=len(lead))
    a = k.accum(k.matmul(xt, k.iter(w1, imap=(1, -1, -1), fmap=0)))
    b = k.accum(k.matmul(xt, k.iter(w2, imap=(1, -1, -1), fmap=0)))
    k.output(k.mul(k.silu(a), b), omap=(len(lead), 0 if gy > 1 else -1, -1))
    (y,) = k.build()
    g.output(y)
    (bg,) = _kernels(g.build())
    flat = flat_rows(bg)
    assert flat is not None
    assert all(len(s) == 2 for s, _ in flat.inputs)
    _same_on_views(bg, flat, gx * 10 + fl)


@settings(max_examples=150, deadline=None)
@given(st.one_of(block_programs(max_ops=5), kernel_programs()))
def test_random_kernels_flatten_to_the_same_elements_or_not_at_all(prog: KernelGraph) -> None:
    """Over random μGraphs and random programs' lowerings: flat_rows refuses (None) or gives
    a kernel that computes the same elements."""
    for i, bg in enumerate(_kernels(prog)):
        flat = flat_rows(bg)
        if flat is not None:
            with np.errstate(all="ignore"):
                _same_on_views(bg, flat, i)


@settings(max_examples=80, deadline=None)
@given(row_activation_programs())
def test_random_row_activation_programs_flatten_to_the_same_elements(prog: KernelGraph) -> None:
    """Random programs on (lead..., columns) activations against 2-D weights: every kernel of
    their lowering with a product flattens, and every kernel of the lowering, the lifts and
    the loop seeds that flattens computes the same elements on the views."""
    sizes = (1, 2, 4)
    lowering = _kernels(prog)
    graphs = lowering + [bg for c in lifted_candidates(prog, sizes) + loop_lifted_candidates(prog, sizes, sizes)
                         for bg in _kernels(c)]
    for i, bg in enumerate(graphs):
        flat = flat_rows(bg)
        if bg in lowering and any(n.op == "matmul" for n in bg.nodes):
            assert flat is not None, bg
        if flat is not None:
            with np.errstate(all="ignore"):
                _same_on_views(bg, flat, i)


def test_graphs_that_must_keep_their_shape_are_left_alone() -> None:
    """Batched products (B with a batch: attention), rank-2 programs, reductions over a
    leading axis, and a grid split of an inner leading dimension: no flattening."""
    for name in ("gqa", "mha", "mqa", "rmsnorm", "gated_mlp"):
        for bg in _kernels(workloads.program(name, 1)):
            assert flat_rows(bg) is None, name
    g = mf.Graph()
    x = g.input((4, 8, 64), "f16", "X")
    g.output(g.sum(x, axis=1, keepdims=True))
    assert all(flat_rows(bg) is None for bg in _kernels(g.build()))
    g = mf.Graph()
    x = g.input((2, 8, 64), "f16", "X")
    w = g.input((64, 32), "f16", "W")
    k = g.kernel([x, w], grid=(2, 4, 1), threads=128, forloop=1)
    xt = k.iter(x, imap=(0, 1, -1), fmap=-1)
    k.output(k.accum(k.matmul(xt, k.iter(w, imap=(-1, -1, -1), fmap=-1))), omap=(0, 1, -1))
    (y,) = k.build()
    g.output(y)
    (bg,) = _kernels(g.build())
    assert flat_rows(bg) is None  # grid y splits the 8 rows within each batch element


def test_launches_keep_the_kernel_level_tensors() -> None:
    """A flattened launch reads and writes the program's own tensors (same elements): its
    graph's inputs and outputs are their 2-D views."""
    prog = ROW_ACTIVATION_PROGRAMS["decode_mlp_b8"]()
    for la in launches(prog):
        for (shape, _), t in zip(la.graph.inputs, la.inputs, strict=True):
            assert int(np.prod(shape)) == int(np.prod(t.shape))
        for (shape, _), t in zip(la.graph.output_types(), la.outputs, strict=True):
            assert int(np.prod(shape)) == int(np.prod(t.shape))
