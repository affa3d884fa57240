"""The validation inputs and the program's float64 outputs drawn once per program
(``validate._program_draw``): the same arrays for every μGraph of the program, equal to a fresh
draw, and one evaluation giving both the outputs and the overflow verdict (no GPU needed)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from mirage_formal import workloads
from mirage_formal.codegen import lowered_graph
from mirage_formal.codegen.validate import _evaluate, _overflows, _program_draw
from mirage_formal.semantics.reference import run_reference


def test_program_draw_is_shared_and_equals_a_fresh_one() -> None:
    prog = workloads.program("rmsnorm", 1, rows=2, h=64, n=64)
    other = lowered_graph(prog)  # another μGraph of the same program: same inputs
    memo: dict[object, object] = {}
    xs, refs, over = _program_draw(prog, prog, 7, -0.5, 0.5, memo)
    again = _program_draw(prog, other, 7, -0.5, 0.5, memo)
    assert again[0] is xs and again[1] is refs and again[2] is over  # drawn once
    fresh = _program_draw(prog, other, 7, -0.5, 0.5, None)
    for a, b in zip(fresh[0], xs, strict=True):
        assert np.array_equal(a, b)
    for a, b in zip(fresh[1], refs, strict=True):
        assert np.array_equal(a, b)
    assert _program_draw(prog, prog, 8, -0.5, 0.5, memo)[0][0] is not xs[0]  # another seed


def test_one_evaluation_gives_outputs_and_overflow() -> None:
    prog = workloads.program("gqa", 1)
    rng = np.random.default_rng(3)
    for scale in (0.5, 40.0):  # exp(QK) overflows fp16 at the larger scale
        xs = [rng.uniform(-scale, scale, size=n.shape).astype(np.float16) for n in prog.inputs]
        outs, over = _evaluate(prog, xs)
        with np.errstate(all="ignore"):
            want = run_reference(prog, [x.astype(np.float64) for x in xs])
        assert over == _overflows(prog, xs) == (scale > 1)
        for a, b in zip(outs, want, strict=True):
            assert np.array_equal(a, b, equal_nan=True)


def test_program_draws_are_the_ones_validation_looks_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """``program_draws`` (what the GPU stage draws before its first step) fills exactly what
    validation's first draws look up: afterwards no μGraph of the program evaluates the
    program again for them."""
    # (the module, not the function ``mirage_formal.codegen`` exports under its name)
    v = importlib.import_module("mirage_formal.codegen.validate")
    prog = workloads.program("rmsnorm", 1, rows=2, h=64, n=64)
    other = lowered_graph(prog)
    memo: dict[object, object] = {}
    v.program_draws(prog, 2, 0, memo)
    calls: list[object] = []
    real = v._evaluate

    def counted(graph: object, xs: object) -> object:
        calls.append(graph)
        return real(graph, xs)
    monkeypatch.setattr(v, "_evaluate", counted)
    for s in v._trial_seeds(0, 2):  # the seeds validate(..., trials=2, seed=0) draws with
        v._program_draw(prog, other, s, -0.5, 0.5, memo)
    assert calls == []
    v._program_draw(prog, other, v._trial_seeds(1, 1)[0], -0.5, 0.5, memo)
    assert calls == [prog]  # another seed: drawn then


def test_a_block_tile_out_of_fp16_range_counts_as_an_overflow() -> None:
    """A kernel whose block tile exp(30·X) leaves fp16's range while its output, that tile
    times 1e-6, stays inside: those inputs overflow (a kernel may store the tile as fp16, as
    a register chain packs exp(Q·K)), so validation draws smaller ones; inputs that keep the
    tile in range do not."""
    from mirage_formal.ir.text import parse_text

    g = parse_text(
        "ugraph {\n"
        "  %0 = input() {name='X'} : f16[16, 64]\n"
        "  %1 = kernel(%0) {forloop=1, grid=(1, 1, 1), threads=128} {\n"
        "    %b0 = iter() {fmap=-1, imap=(-1, -1, -1), input=0} : f16[16, 64]\n"
        "    %b1 = mul_scalar(%b0) {scalar=30.0} : f16[16, 64]\n"
        "    %b2 = exp(%b1) : f16[16, 64]\n"
        "    %b3 = mul_scalar(%b2) {scalar=1e-06} : f16[16, 64]\n"
        "    %b4 = accum(%b3) {fold=None, kind='sum'} : f16[16, 64]\n"
        "    save %b4 {omap=(-1, -1, -1)}\n"
        "  }\n"
        "  %2 = get(%1) {index=0} : f16[16, 64]\n"
        "  return %2\n"
        "}\n")
    rng = np.random.default_rng(5)
    big = [rng.uniform(0.45, 0.5, size=(16, 64)).astype(np.float16)]  # exp(13.5..15) > 32752
    small = [rng.uniform(-0.25, 0.25, size=(16, 64)).astype(np.float16)]  # exp(7.5) = 1808
    (out,), over = _evaluate(g, big)
    assert over and np.all(np.abs(out) < 100)  # (the output itself is in range)
    assert not _overflows(g, small)
