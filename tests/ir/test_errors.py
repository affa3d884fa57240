"""Construction errors: each raises our own exception naming the op, the shapes and the fix."""

from __future__ import annotations

import pytest

import mirage_formal as mf


def test_shape_mismatch_matmul() -> None:
    g = mf.Graph()
    a, b = g.input((2, 3), "f16", "a"), g.input((4, 5), "f16", "b")
    with pytest.raises(mf.GraphError, match=r"matmul: inner dimensions differ: \[2, 3\] @ \[4, 5\]"):
        g.matmul(a, b)


def test_shape_mismatch_broadcast() -> None:
    g = mf.Graph()
    a, b = g.input((2, 3), "f16", "a"), g.input((2, 4), "f16", "b")
    with pytest.raises(mf.GraphError, match=r"add: shapes \[2, 3\] and \[2, 4\] do not broadcast"):
        g.add(a, b)


def test_non_divisible_partition_grid_and_loop() -> None:
    g = mf.Graph()
    x = g.input((6, 10), "f16", "x")
    k = g.kernel([x], grid=(4, 1, 1))
    with pytest.raises(mf.GraphError, match=r"not divisible by grid.x=4"):
        k.iter(x, imap=(0, -1, -1))
    k2 = g.kernel([x], grid=(1, 1, 1), forloop=3)
    with pytest.raises(mf.GraphError, match=r"not divisible by the for-loop range 3"):
        k2.iter(x, fmap=1)


def test_omap_leaves_grid_axis_unmapped() -> None:
    g = mf.Graph()
    x = g.input((8, 8), "f16", "x")
    k = g.kernel([x], grid=(2, 1, 1))
    t = k.accum(k.iter(x, imap=(0, -1, -1)))
    k.output(t, omap=(-1, -1, -1))
    with pytest.raises(mf.GraphError, match=r"grid.x=2 > 1 but omap leaves it unmapped"):
        k.build()


def test_path_without_accumulator() -> None:
    g = mf.Graph()
    x = g.input((8, 8), "f16", "x")
    k = g.kernel([x], grid=(1, 1, 1))
    k.output(k.exp(k.iter(x)))
    with pytest.raises(mf.GraphError, match=r"not accumulated; every path .* exactly one accum"):
        k.build()


def test_path_with_two_accumulators() -> None:
    g = mf.Graph()
    x = g.input((8, 8), "f16", "x")
    k = g.kernel([x], grid=(1, 1, 1))
    with pytest.raises(mf.GraphError, match=r"accum: its input is already accumulated"):
        k.accum(k.accum(k.iter(x)))
    k.output(k.accum(k.iter(x)))
    k.build()


def test_mixing_loop_and_accumulated_tiles() -> None:
    g = mf.Graph()
    x = g.input((8, 8), "f16", "x")
    k = g.kernel([x], grid=(1, 1, 1), forloop=2)
    t = k.iter(x, fmap=1)
    a = k.accum(t)
    with pytest.raises(mf.GraphError, match=r"add: mixes a per-iteration tile with an accumulated one"):
        k.add(t, a)


def test_tensor_from_another_graph() -> None:
    g1, g2 = mf.Graph(), mf.Graph()
    a = g1.input((2, 2), "f16", "a")
    b = g2.input((2, 2), "f16", "b")
    with pytest.raises(mf.GraphError, match=r"add: tensor .* belongs to another graph"):
        g1.add(a, b)
    k = g1.kernel([a], grid=1)
    with pytest.raises(mf.GraphError, match="belongs to another graph"):
        k.exp(a)  # a kernel-level tensor used as a block tile


def test_iter_of_non_input_and_bad_maps() -> None:
    g = mf.Graph()
    a = g.input((4, 4), "f16", "a")
    b = g.input((4, 4), "f16", "b")
    k = g.kernel([a], grid=(2, 2, 1))
    with pytest.raises(mf.GraphError, match="is not an input of this kernel"):
        k.iter(b)
    with pytest.raises(mf.GraphError, match="both split dimension 0"):
        k.iter(a, imap=(0, 0, -1))
    with pytest.raises(mf.GraphError, match="imap x->5 is not a dimension"):
        k.iter(a, imap=(5, -1, -1))


def test_block_only_and_level_errors() -> None:
    g = mf.Graph()
    x = g.input((4, 4), "f16", "x")
    with pytest.raises(mf.GraphError, match="accum is not allowed at the kernel level"):
        g.accum(x)
    with pytest.raises(mf.GraphError, match="fold=3 must divide the last dimension 4"):
        k = g.kernel([x], grid=1)
        k.accum(k.iter(x), fold=3)


def test_no_outputs_and_dtype_errors() -> None:
    g = mf.Graph()
    g.input((4,), "f16", "x")
    with pytest.raises(mf.GraphError, match="no outputs"):
        g.build()
    with pytest.raises(mf.GraphError, match="unknown dtype 'int8'"):
        g.input((4,), "int8", "y")
    with pytest.raises(mf.GraphError, match="already used"):
        g.input((4,), "f16", "x")
