"""The vectorized block-graph interpreter against a naive loop-over-blocks interpreter
written from the μGraph semantics (docs/internals.md), on random μGraphs (hypothesis) and the workloads."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
from graph_strategies import block_programs
from hypothesis import given

import mirage_formal as mf
from mirage_formal import workloads
from mirage_formal.ir.graph import GET, INPUT, ITER, KERNEL_OP, BlockGraph
from mirage_formal.ir.ops import REGISTRY
from mirage_formal.semantics import random_inputs, run_reference


def _tile_slices(shape: tuple[int, ...], imap: tuple[int, ...], fmap: int, grid: tuple[int, ...],
                 forloop: int, b: tuple[int, ...], i: int) -> tuple[slice, ...]:
    out = []
    for d, n in enumerate(shape):
        start, length = 0, n
        for a in range(3):
            if imap[a] == d:
                length //= grid[a]
                start += b[a] * length
        if fmap == d:
            length //= forloop
            start += i * length
        out.append(slice(start, start + length))
    return tuple(out)


def _accum_step(x: np.ndarray, kind: str, fold: int | None) -> np.ndarray:
    v = x * x if kind == "rms" else x
    if fold is not None:
        v = sum(v[..., k * fold:(k + 1) * fold] for k in range(x.shape[-1] // fold))
    return np.asarray(v)


def naive_block(bg: BlockGraph, ins: list[np.ndarray]) -> list[np.ndarray]:
    outs = [np.full(s, np.nan) for s, _ in bg.output_types()]
    # which elements some block wrote (NaN is a legal value: sqrt of a negative, 0/0)
    written = [np.zeros(s, dtype=bool) for s, _ in bg.output_types()]
    nodes = bg.nodes
    for b in itertools.product(*(range(gs) for gs in bg.grid)):
        acc: dict[Any, np.ndarray] = {}
        for i in range(bg.forloop):
            val: dict[Any, np.ndarray] = {}
            for n in nodes:
                if n.op == ITER:
                    t = ins[n.attr("input")]
                    val[n] = t[_tile_slices(t.shape, n.attr("imap"), n.attr("fmap"), bg.grid, bg.forloop, b, i)]
                elif n.op == "accum":
                    step = _accum_step(val[n.src[0]], n.attr("kind"), n.attr("fold"))
                    acc[n] = acc[n] + step if n in acc else step
                elif all(s in val for s in n.src):
                    val[n] = REGISTRY[n.op].f64([val[s] for s in n.src], n.attr_dict)
        post: dict[Any, np.ndarray] = {}
        for n in nodes:
            if n.op == "accum":
                src = n.src[0].shape[-1]
                count = bg.forloop * (src // n.attr("fold") if n.attr("fold") else 1)
                s = acc[n]
                post[n] = s if n.attr("kind") == "sum" else (s / count if n.attr("kind") == "mean" else np.sqrt(s / count))
            elif n.op != ITER and n.src and all(s in post for s in n.src):
                post[n] = REGISTRY[n.op].f64([post[s] for s in n.src], n.attr_dict)
        for k, o in enumerate(bg.outputs):
            sl = []
            for d, size in enumerate(o.node.shape):
                start = sum(b[a] * size for a in range(3) if o.omap[a] == d)
                sl.append(slice(start, start + size))
            assert not written[k][tuple(sl)].any(), "two blocks wrote the same element"
            written[k][tuple(sl)] = True
            outs[k][tuple(sl)] = post[o.node]
    for w in written:
        assert w.all(), "some output element was written by no block"
    return outs


def naive_run(g: mf.KernelGraph, x: dict[str, np.ndarray]) -> list[np.ndarray]:
    val: dict[Any, Any] = {}
    for n in g.nodes:
        if n.op == INPUT:
            val[n] = x[n.attr("name")]
        elif n.op == KERNEL_OP:
            val[n] = naive_block(n.attr("graph"), [val[s] for s in n.src])
        elif n.op == GET:
            val[n] = val[n.src[0]][n.attr("index")]
        else:
            val[n] = REGISTRY[n.op].f64([val[s] for s in n.src], n.attr_dict)
    return [val[o] for o in g.outputs]


def _close(a: list[np.ndarray], b: list[np.ndarray]) -> None:
    for u, v in zip(a, b, strict=True):
        np.testing.assert_allclose(u, v, rtol=1e-10, atol=1e-12)  # NaNs must coincide


@given(block_programs())
def test_vectorized_equals_naive_on_random_ugraphs(g: mf.KernelGraph) -> None:
    x = random_inputs(g, 7, low=0.5, high=1.5)
    _close(run_reference(g, x), naive_run(g, x))


def test_vectorized_equals_naive_on_handwritten() -> None:
    for g in (workloads.handwritten("gqa", kv=512, q=32, splits=2, row_blocks=2, kv_tile=64, combine_rows=8),
              workloads.handwritten("rmsnorm", h=256, n=128, k_tile=32)):
        x = random_inputs(g, 3)
        _close(run_reference(g, x), naive_run(g, x))
