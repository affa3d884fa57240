"""Derived search spaces: every registry program's space contains its direct lowering; presets
are overrides and an impossible one raises from the API; accepted results are distinct
structures with no copy-only kernels."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given, settings

import mirage_formal as mf
from mirage_formal import workloads
from mirage_formal.errors import UnsupportedOpError
from mirage_formal.ir.graph import INPUT, KernelGraph
from mirage_formal.optimize import make_config, superoptimize
from mirage_formal.search import KeepAll, derive_config, run_search
from mirage_formal.search.canon import has_copy_only_kernel, structure_key
from mirage_formal.search.driver import check_program, inexpressible
from mirage_formal.search.reference_pruner import ExprPruner
from mirage_formal.search.state import SearchState
from tests.graph_strategies import kernel_programs

from .conftest import F64Checker


class _Reject:
    def check(self, g: KernelGraph) -> Any:
        return type("V", (), {"accepted": False})()


@settings(max_examples=30, deadline=None)
@given(kernel_programs(max_ops=5))
def test_derived_space_contains_the_direct_lowering(prog: KernelGraph) -> None:
    assume(all(o.op != INPUT for o in prog.outputs))
    cfg = derive_config(prog)
    assert inexpressible(prog, cfg) == []
    check_program(prog, cfg)
    got: list[KernelGraph] = []
    st = SearchState(prog, cfg, KeepAll(), _Reject())
    st.on_candidate = lambda g, *_: got.append(g)  # type: ignore[method-assign]
    e = st.enumerator()
    moves = e.moves()
    assert moves[0].kind == "direct"
    e.run_move(moves[0])
    # the direct lowering is the program itself: the same hash-consed nodes, so the same key
    assert [g.key for g in got] == [prog.key]


def test_benchmark_programs_get_spaces_that_express_them() -> None:
    for name in workloads.PROGRAMS:
        prog = workloads.program(name, 1)
        cfg = derive_config(prog)
        assert inexpressible(prog, cfg) == [], name
        assert cfg.max_kernel_inputs <= len(prog.inputs)


def test_a_named_preset_overrides_the_derived_space() -> None:
    prog = workloads.program("gqa", 1)
    cfg = derive_config(prog, "attention")
    assert cfg.max_block_ops == 8 and cfg.forloop == (1, 2, 4, 8, 16)
    assert derive_config(prog, overrides={"max_block_ops": 5}).max_block_ops == 5


def test_an_impossible_explicit_preset_raises_from_the_api() -> None:
    prog = workloads.program("qknorm_gqa", 1)
    with pytest.raises(UnsupportedOpError, match="rms_norm"):
        make_config(prog, "attention")
    with pytest.raises(UnsupportedOpError, match="rms_norm"):
        superoptimize(prog, "attention", budget_s=5, gpu=False)
    # the same program with default options gets a space that expresses it
    assert inexpressible(prog, make_config(prog)) == []


def test_a_user_preset_by_path(tmp_path: Any) -> None:
    prog = workloads.program("rmsnorm", 1)
    p = tmp_path / "mine.toml"
    p.write_text("max_block_ops = 5\nforloop = [1, 8]\n")
    cfg = make_config(prog, str(p))
    assert cfg.max_block_ops == 5 and cfg.forloop == (1, 8) and cfg.name == "derived+mine"
    p.write_text('block_ops = ["matmul"]\nkernel_ops = ["matmul"]\n')
    with pytest.raises(UnsupportedOpError, match="rms_norm"):
        make_config(prog, str(p))


def _norm_gain_program() -> KernelGraph:
    g = mf.Graph()
    x = g.input((4, 32), "f16", "X")
    w = g.input((32,), "f16", "G")
    m = g.input((32, 16), "f16", "W")
    g.output(g.matmul(g.rms_norm(x, w), m))
    return g.build()


def test_accepted_results_are_distinct_structures_without_copy_kernels() -> None:
    prog = _norm_gain_program()
    cfg = derive_config(prog)
    assert cfg.max_kernel_inputs == 3 and cfg.max_block_ops >= 8
    # a small slice of it, so the test is quick: one grid axis, one size, two loop ranges
    cfg = cfg.replace(max_grid_axes=1, grid_sizes=(2,), forloop=(1, 2))
    res = run_search(prog, cfg, ExprPruner(prog), F64Checker(prog), progress=False)
    assert res.complete and res.accepted
    keys = [structure_key(a.graph) for a in res.accepted]
    assert len(keys) == len(set(keys))
    assert not any(has_copy_only_kernel(a.graph) for a in res.accepted)
    # the direct lowering is among them, and the best is no worse
    direct = [a for a in res.accepted if a.graph.key == prog.key]
    assert direct and res.accepted[0].cost.seconds <= direct[0].cost.seconds
    # a fused single kernel reading all three inputs was found
    assert any(
        len(a.graph.kernels) == 1
        and a.graph.kernels[0].op == "kernel"
        and len(a.graph.kernels[0].src) == 3
        for a in res.accepted
    )


def _is_one_kernel_attention(bg: Any) -> bool:
    """div(loop-sum of exp(Q·K)·V, loop row-sum of the same exp(Q·K)), saved once."""
    if len(bg.outputs) != 1:
        return False
    d = bg.outputs[0].node
    if d.op != "div" or [s.op for s in d.src] != ["accum", "accum"]:
        return False
    num, den = d.src
    pv = num.src[0]
    if den.attr("fold") != 1 or pv.op != "matmul" or pv.src[0].op != "exp":
        return False
    return den.src[0] is pv.src[0] and pv.src[0].src[0].op == "matmul"


def test_the_attention_space_holds_the_single_kernel_flash_attention() -> None:
    """Three iterators, Q·K, exp, exp·V with its loop accumulator, the row-sum accumulator and
    the division after the loop: 9 block ops, one more than the two-kernel FlashDecoding's
    first kernel. The block search of a kernel over (Q, K, V) with its loop on the keys must
    produce it (the tuner's split then makes it FlashDecoding in one launch)."""
    from mirage_formal.search.space import BlockSearch

    prog = workloads.gqa(1, heads=2, q=32, d=16, kv=256)
    cfg = derive_config(prog)
    assert cfg.max_block_ops >= 9
    e = SearchState(prog, cfg, KeepAll(), _Reject()).enumerator()
    keys = e.lab[2][1]  # V's first dimension: the keys
    found = 0
    for mv in e.moves():
        if (mv.kind != "kernel" or mv.args != (0, 1, 2) or mv.config is None
                or mv.config.loop is None or mv.config.loop[0] != keys or mv.part):
            continue
        bs = BlockSearch(e, tuple(e.t[i] for i in mv.args), [e.lab[i] for i in mv.args],
                         mv.config, len(e.out_types))
        found = sum(1 for bg, _ in bs.run() if _is_one_kernel_attention(bg))
        break
    assert found >= 1


def _bias_gelu(rows: int = 16, k: int = 512, n: int = 512) -> KernelGraph:
    g = mf.Graph()
    x, w = g.input((rows, k), "f16", "X"), g.input((k, n), "f16", "W")
    c = g.input((n,), "f16", "C")
    g.output(g.gelu(g.add(g.matmul(x, w), c)))
    return g.build()


def _epilogue_kernels(graph: KernelGraph) -> list[Any]:
    """The block graphs of ``graph`` with a loop that add a loop-invariant iterator tile
    through a plain mean accumulator (an epilogue operand)."""
    return [n.attr("graph") for n in graph.nodes if n.op == "kernel"
            and n.attr("graph").forloop > 1 and any(
                b.op == "accum" and b.attr("kind") == "mean" and b.attr("fold") is None
                and b.src[0].op == "iter" and b.src[0].attr("fmap") == -1
                for b in n.attr("graph").nodes)]


def test_a_bias_after_a_product_joins_the_products_kernel() -> None:
    """An input with no dimension the loop splits (a bias row) reaches the epilogue of the
    product's loop through a plain mean of its invariant tile (the identity): the derived space
    offers that accumulator and room for it, the pruner keeps it (its abstract expression is
    the tile's own), and the search accepts one-kernel μGraphs of gelu(X·W + c). Programs
    without such an input keep their spaces."""
    prog = _bias_gelu()
    cfg = derive_config(prog)
    assert "mean" in cfg.accums and cfg.max_block_ops == 8
    assert "mean" not in derive_config(workloads.program("rmsnorm", 1)).accums
    res = superoptimize(prog, budget_s=120, workers=1, gpu=False, compile_best=False)
    fused = [a.graph for a in res.accepted if len(a.graph.kernels) == 1 and _epilogue_kernels(a.graph)]
    assert fused
    assert all(a.verdict.accepted for a in res.accepted)


@pytest.mark.parametrize("tokens", [197, 131, 263])
def test_a_prime_size_offers_its_one_split(tokens: int) -> None:
    """A prime dimension divides only into itself: the derived grid sizes hold it up to two
    waves of SMs (ViT's 197 tokens: a row-wise layer norm of 197 blocks), and no grid of
    another size that does not divide some dimension appears."""
    g = mf.Graph()
    x = g.input((tokens, 64), "f16", "X")
    c = g.sub(x, g.mean(x, axis=-1, keepdims=True))
    g.output(g.mul(c, g.rsqrt(g.add_scalar(g.mean(g.square(c), axis=-1, keepdims=True), 1e-5))))
    prog = g.build()
    sizes = derive_config(prog).grid_sizes
    assert (tokens in sizes) == (tokens <= 2 * 132)
    assert all(any(d % s == 0 for n in prog.nodes for d in n.shape) for s in sizes)


@pytest.mark.parametrize("shapes", [((1, 1), (1, 1)), ((1, 521), (521, 521))])
def test_a_program_with_no_size_to_split_gets_one_block_kernels(
        shapes: tuple[tuple[int, int], tuple[int, int]]) -> None:
    """Every dimension 1, or prime above two waves of SMs: no grid size divides any, so the
    derived space has no grid axes (one block a graph-defined kernel) instead of refusing
    itself ("max_grid_axes > 0 but grid_sizes is empty"), and the search returns a μGraph."""
    g = mf.Graph()
    x, w = g.input(shapes[0], "f32", "X"), g.input(shapes[1], "f32", "W")
    g.output(g.relu(g.matmul(g.tanh(x), w)))
    prog = g.build()
    cfg = derive_config(prog)
    assert cfg.grid_sizes == () and cfg.max_grid_axes == 0
    res = superoptimize(prog, budget_s=20, workers=1, gpu=False, compile_best=False)
    assert res.accepted and all(a.verdict.accepted for a in res.accepted)


def test_loop_ranges_leave_tiles_a_tensor_map_and_a_warpgroup_take() -> None:
    """Beside the powers of two, the loop ranges that leave k tiles of 64, 128 and 256: a k of
    768 gets 12, 6 and 3 (its powers of two leave tiles of 96 or 48, which no 64-column
    tensor-map box or warpgroup k step of 64 takes); a power-of-two k gets nothing new."""
    for k, want, never in ((768, {3, 6, 12}, set()), (4096, {16, 32, 64}, {3, 6, 12})):
        g = mf.Graph()
        g.output(g.matmul(g.input((197, k), "f16", "X"), g.input((k, 256), "f16", "W")))
        loops = set(derive_config(g.build()).forloop)
        assert want <= loops and not never & loops
        assert all(k % f == 0 for f in loops)


def test_chained_products_get_a_second_graph_defined_kernel() -> None:
    """A product of another product's (activated) output over a wide contraction, an MLP
    without any row reduction, gets two graph-defined kernels (each product with its
    epilogue); two products of one input (a gated MLP), a low-rank adapter's (X·A)·B (a
    contraction of 32) and exp(A·B)·C into 64 columns (one column tile) keep one."""
    def mlp(chained: bool) -> KernelGraph:
        g = mf.Graph()
        x = g.input((197, 256), "f16", "X")
        w1, w2 = g.input((256, 512), "f16", "W1"), g.input((512, 256) if chained else (256, 512), "f16", "W2")
        u = g.gelu(g.matmul(x, w1))
        g.output(g.matmul(u, w2) if chained else g.mul(u, g.matmul(x, w2)))
        return g.build()

    assert derive_config(mlp(True)).max_graph_kernels == 2
    assert derive_config(mlp(False)).max_graph_kernels == 1
    assert derive_config(workloads.program("lora", 1)).max_graph_kernels == 1
    g = mf.Graph()
    a, b = g.input((4, 64, 64), "f16", "A"), g.input((4, 64, 1024), "f16", "B")
    g.output(g.matmul(g.exp(g.matmul(a, b)), g.input((4, 1024, 64), "f16", "C")))
    assert derive_config(g.build()).max_graph_kernels == 1
