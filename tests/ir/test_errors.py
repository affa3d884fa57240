"""Construction errors: each raises our own exception naming the op, the shapes and the fix."""

from __future__ import annotations

import re

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


@pytest.mark.parametrize("shape", [(1,), (3,), (5, 7)])
def test_a_reduction_to_a_scalar_is_refused_with_the_fix(shape: tuple[int, ...]) -> None:
    """A kernel-level value of no dimension (sum over every axis, keepdims=False) is refused
    when built: codegen stores tensors of at least one dimension, and its compile of such a
    program raised an IndexError (a random-program campaign, s52). keepdims=True builds."""
    g = mf.Graph()
    x = g.input(shape, "f32", "x")
    if len(shape) == 2:
        x = g.sum(x, axis=0, keepdims=False)
    with pytest.raises(mf.GraphError, match=r"gives a 0-d scalar, which a kernel cannot store; "
                                            r"keep a dimension of size 1 \(keepdims=True"):
        g.sum(x, axis=0, keepdims=False)
    assert g.sum(x, axis=0, keepdims=True).shape == (1,)


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


def _sample_attrs(op: str) -> dict[str, object]:
    from mirage_formal.ir.ops import REGISTRY

    sample = {float: 0.25, int: -1, bool: False, str: None}
    return {a.name: a.choices[0] if a.choices else sample[a.kind] if a.default is None
            else a.default for a in REGISTRY[op].attrs}


def _kernel_ops_with_attrs() -> list[str]:
    from mirage_formal.ir.ops import KERNEL, REGISTRY

    return sorted(n for n, d in REGISTRY.items() if d.attrs and KERNEL in d.levels)


@pytest.mark.parametrize("op", _kernel_ops_with_attrs())
def test_attributes_can_follow_the_operands_positionally(op: str) -> None:
    """``g.add_scalar(x, 1e-6)`` is ``g.add_scalar(x, scalar=1e-6)``: after an op's tensor
    operands, its attributes in the registry's order (every kernel-level op with attributes)."""
    g = mf.Graph()
    x = g.input((4, 8), "f32", "x")
    attrs = _sample_attrs(op)
    by_name = getattr(g, op)(x, **attrs)
    by_position = getattr(g, op)(x, *attrs.values())
    assert by_position.node.attr_dict == by_name.node.attr_dict
    first = next(iter(attrs))
    with pytest.raises(mf.GraphError, match=f"'{first}' given twice"):
        getattr(g, op)(x, attrs[first], **{first: attrs[first]})
    with pytest.raises(mf.GraphError, match=f"its attributes \\[.*'{first}'"):
        getattr(g, op)(x, *attrs.values(), 0.5)


@pytest.mark.parametrize(("op", "instead"), [("add", "add_scalar(x, c)"), ("sub", "add_scalar(x, -c)"),
                                            ("mul", "mul_scalar(x, c)"), ("div", "mul_scalar(x, 1 / c)")])
def test_an_elementwise_op_of_a_number_names_the_scalar_op(op: str, instead: str) -> None:
    g = mf.Graph()
    x = g.input((4, 8), "f32", "x")
    with pytest.raises(mf.GraphError, match=f"tensor operands only.*write g.{re.escape(instead)}"):
        getattr(g, op)(x, 2.0)
