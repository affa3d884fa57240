"""Schedule.tf32x3: fp32 products on the tensor cores as three TF32 MMAs each.

- on any machine: how :func:`schedule.tf32_warp_tiling` shares a product among warps (a
  property over shapes and warp counts, and worked examples), which products the layout
  takes (fp32 operand tiles, 16-row and 8-column tiles, no batch but dimensions of 1), that
  the tuner tries it
  on fp32 products only, that a schedule's key is unchanged without it, and that every
  kernel below compiles for sm_90 with the TF32 products in it exactly where they apply;
- on the GPU: each of those kernels computes the program's float64 function, and a long k
  range (2048) stays within 2e-6 of the largest output: each loop step's MMAs sum into
  sums of their own that are added into the product's fp32 sums once per step (one chain
  through the loop measured 1.5e-5 at this size, fp32 FMAs 1.2e-6).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from graph_strategies import (
    as_dtype_program,
    attention_loop_program,
    fold_loop_program,
    gated_loop_program,
    matmul_loop_program,
)
from hypothesis import given
from hypothesis import strategies as st

import mirage_formal as mf
from mirage_formal.codegen import (
    Schedule,
    candidate_schedules,
    compile_cubin,
    compile_graph,
    emit_graph,
    gpu_available,
    launches,
)
from mirage_formal.codegen.schedule import TF32_MAX_TILES, tf32_product_dims, tf32_warp_tiling
from mirage_formal.ir.graph import KernelGraph


def _bias_product(m: int, k: int, n: int) -> KernelGraph:
    """relu(X · W) in fp32, X (m, k), W (k, n): a kernel-level program whose product's
    consumer prints as its epilogue (a loop-free product when lowered whole)."""
    g = mf.Graph()
    x = g.input((m, k), "f32", "X")
    w = g.input((k, n), "f32", "W")
    g.output(g.op("relu", g.matmul(x, w)))
    return g.build()


#: fp32 programs and whether their product can run as TF32 MMAs at some block size: a loop
#: summed in registers, a loop-invariant A, two products and a gate, a fold beside the
#: product, a loop-free product with an epilogue, attention's two products on per-head tiles;
#: and products it leaves on the CUDA cores (24 rows, 8 rows)
PROGRAMS = {
    "loop_32x64x64": (lambda: matmul_loop_program(32, 64, 64, 3, dtype="f32"), True),
    "loop_16x8x8": (lambda: matmul_loop_program(16, 8, 8, 2, dtype="f32"), True),
    "loop_fixed_a": (lambda: matmul_loop_program(32, 32, 32, 2, fixed_a=True, dtype="f32"), True),
    "loop_neg_b": (lambda: matmul_loop_program(32, 32, 32, 3, pre_b=True, dtype="f32"), True),
    "gated_16": (lambda: gated_loop_program(16, 64, 64, 4, dtype="f32"), True),
    "fold_16": (lambda: fold_loop_program(16, 64, 3, n=32, dtype="f32"), True),
    "relu_product": (lambda: _bias_product(64, 96, 128), True),
    # (a batch over the grid: per-head tiles [1, rows, k], both products of the attention loop)
    "attention_per_head": (lambda: as_dtype_program(
        attention_loop_program(16, 64, 64, 32, 2, batch=2, divide=True), "f32"), True),
    "rows_24": (lambda: matmul_loop_program(24, 32, 16, 2, dtype="f32"), False),
    "batch_over_grid": (lambda: matmul_loop_program(16, 16, 16, 3, batch=2, dtype="f32"), True),
    "rows_8": (lambda: gated_loop_program(8, 64, 64, 4, dtype="f32"), False),
}
THREADS = [None, 32, 256]
#: the fp32 tiles through prefetch registers (the default), or through the cp.async ring
RINGS = [False, True]


def _tf32(prog: KernelGraph, threads: int | None, ring: bool = False) -> dict[str, Schedule]:
    return {la.graph.key: Schedule(tf32x3=True, threads=threads, ring32=ring)
            for la in launches(prog, 128)}


def _takes_tf32(prog: KernelGraph, sched: dict[str, Schedule]) -> bool:
    """Whether some product of ``prog`` tiles for its kernel's warps under ``sched``."""
    for la in launches(prog, 128):
        T = sched[la.graph.key].threads or la.graph.threads
        for n in la.graph.nodes:
            dims = tf32_product_dims(n)
            if dims is not None and tf32_warp_tiling(*dims, T // 32):
                return True
    return False


@given(m=st.integers(1, 512), n=st.integers(1, 512), k=st.integers(1, 128),
       warps=st.sampled_from([1, 2, 4, 8, 16, 32]))
def test_tiling_covers_the_product_once(m: int, n: int, k: int, warps: int) -> None:
    t = tf32_warp_tiling(m, n, k, warps)
    if t is None:
        return
    wm, wn, gn = t
    assert m % 16 == 0 and n % 8 == 0 and k % 8 == 0
    assert wm * wn <= TF32_MAX_TILES
    # the warps' blocks, GN across and the rest down, are the product's tiles exactly
    assert gn * wn * 8 == n and (warps // gn) * wm * 16 == m and warps % gn == 0


@pytest.mark.parametrize(("mnk", "warps", "want"), [
    ((128, 128, 32), 8, (4, 4, 4)),    # the fp32 prefill product's 128 x 128 tile, 256 threads
    ((64, 128, 16), 4, (4, 4, 4)),
    ((64, 128, 32), 8, (4, 2, 8)),     # a tie between 2 x 4 and 4 x 2: fewer columns
    ((16, 8, 8), 1, (1, 1, 1)),
    ((128, 128, 32), 4, None),         # 32 tiles a warp: more sums than registers
    ((8, 64, 64), 4, None),            # 8 rows
    ((32, 32, 12), 2, None),           # k not a multiple of 8
    ((16, 8, 8), 2, None),             # fewer tiles than warps
])
def test_tiling_examples(mnk: tuple[int, int, int], warps: int,
                         want: tuple[int, int, int] | None) -> None:
    assert tf32_warp_tiling(*mnk, warps) == want


def test_tf32_is_keyed_only_when_set() -> None:
    """(Tuning caches keyed before the field existed keep their keys.)"""
    assert "tf32" not in Schedule().key and "tf32" not in Schedule(cc_rows=2).key
    assert '"tf32x3":true' in Schedule(tf32x3=True).key
    assert Schedule.from_dict(Schedule(tf32x3=True).to_dict()) == Schedule(tf32x3=True)


def test_tuner_tries_tf32_on_fp32_products_only() -> None:
    for dtype, want in (("f32", True), ("f16", False)):
        for la in launches(matmul_loop_program(32, 64, 64, 4, dtype=dtype), 128):
            scheds = candidate_schedules(la.graph)
            assert any(s.tf32x3 for s in scheds) is want, dtype


@pytest.mark.parametrize("ring", RINGS)
@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_tf32_products_compile(name: str, threads: int | None, ring: bool,
                               tmp_path_factory: pytest.TempPathFactory) -> None:
    make, possible = PROGRAMS[name]
    prog = make()
    sched = _tf32(prog, threads, ring)
    src, _, _ = emit_graph(prog, schedules=sched)
    takes = _takes_tf32(prog, sched)
    assert ("mf::mma_1688_tf32(" in src) is (takes and possible), src
    if takes and possible:
        # a product summed in registers through the loop (kernel-wide mf_t<id>): its step's
        # MMAs into sums of their own (mf_tc), added once a step
        assert "mf_tc" in src or not re.search(r"float mf_t\d+\[", src)
    cache: Path = tmp_path_factory.getbasetemp() / "tf32_cubin"
    assert compile_cubin(src, "sm_90", cache=cache)[:4] == b"\x7fELF"


def _prefill_tile() -> KernelGraph:
    """The fp32 prefill product X (512, 2048) · W (2048, 2048) as one kernel of 128 x 128
    tiles, k 32 an iteration."""
    g = mf.Graph()
    x = g.input((512, 2048), "f32", "X")
    w = g.input((2048, 2048), "f32", "W")
    kern = g.kernel([x, w], grid=(4, 16, 1), forloop=64)
    a = kern.iter(x, imap=(0, -1, -1), fmap=1)
    b = kern.iter(w, imap=(-1, 1, -1), fmap=0)
    kern.output(kern.accum(kern.matmul(a, b), kind="sum"), omap=(0, 1, -1))
    (y,) = kern.build()
    g.output(y)
    return g.build()


def test_the_prefill_tile_reads_a_in_pairs_and_b_rows_four_apart() -> None:
    """The fp32 prefill product's kernel at its tuned size (128 x 128 tiles of 32 k, 256
    threads): each warp owns 4 x 4 tiles of 16 x 8; A rows padded to 40 floats (8 mod 32:
    a half-warp's 8-byte pairs in distinct banks), read as pairs at column 2q; B rows at 132
    floats (4 mod 8), read at rows 2q and 2q + 1."""
    prog = _prefill_tile()
    src, _, _ = emit_graph(prog, schedules=_tf32(prog, 256))
    assert "(mf_m0 + mf_g) * 40 + 2 * mf_q" in src and "2 * mf_q * 132 + mf_n0 + mf_g" in src
    assert "float mf_tc[4][4][4] = {};" in src and "p + 320);" in src
    # (three MMA terms in each printed copy of the loop body)
    assert src.count("mf::mma_1688_tf32(") == 3 * src.count("const int it = it0 + ") > 0


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a GPU")
@pytest.mark.parametrize("ring", RINGS)
@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_tf32_products_validate(name: str, threads: int | None, ring: bool) -> None:
    from mirage_formal.codegen.validate import validate

    prog = PROGRAMS[name][0]()
    cg = compile_graph(prog, schedules=_tf32(prog, threads, ring))
    rep = validate(cg, trials=2)
    assert rep.ok, f"{name} {threads} ring={ring}: {rep}\n{cg.source}"


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a GPU")
@pytest.mark.parametrize("ring", RINGS)
def test_a_long_k_range_keeps_fp32_accuracy(ring: bool) -> None:
    from mirage_formal.codegen.validate import validate

    prog = matmul_loop_program(64, 64, 64, 32, dtype="f32")  # k = 2048
    cg = compile_graph(prog, schedules=_tf32(prog, 128, ring))
    assert "mf::mma_1688_tf32(" in cg.source and ("raw fp32" in cg.source) is ring
    for low, high in ((-0.5, 0.5), (0.0, 1.0)):
        rep = validate(cg, trials=2, low=low, high=high)
        assert rep.ok and max(rep.errors) < 2e-6, rep


def test_which_products_have_tf32_dimensions() -> None:
    """A product of two fp32 tiles whose leading dimensions are all 1 (a per-head tile) has
    its last two; a batch in the tile or an fp16 operand has none; a one-row product has its
    dimensions, and the warp tiling then refuses it (rows are taken 16 at a time)."""
    g = mf.Graph()
    x = g.input((1, 32, 64), "f32", "X")
    w = g.input((1, 64, 16), "f32", "W")
    xb = g.input((2, 32, 64), "f32", "XB")
    wb = g.input((2, 64, 16), "f32", "WB")
    r = g.input((1, 64), "f32", "R")
    h = g.input((64, 16), "f16", "H")
    hx = g.input((32, 64), "f16", "HX")
    outs = [g.matmul(x, w), g.matmul(xb, wb), g.matmul(r, g.input((64, 16), "f32", "W2")),
            g.matmul(hx, h)]
    g.output(*outs)
    dims = [tf32_product_dims(n) for n in g.build().nodes if n.op == "matmul"]
    assert dims == [(32, 16, 64), None, (1, 16, 64), None]
    assert tf32_warp_tiling(1, 16, 64, 1) is None


def _table_ugraphs_in_fp32() -> list[tuple[str, KernelGraph]]:
    """The μGraphs of the H200 table's fp16 rows (benchmark and outside programs), each with
    every tensor in fp32 instead: the structures the search finds, as an fp32 program has them."""
    import json

    from mirage_formal.ir.text import parse_text

    table = Path(__file__).resolve().parents[2] / "benchmarks/results/gpu_optimize_h200.json"
    out = []
    for row in json.loads(table.read_text()):
        text = row.get("best_ugraph") or ""
        if "f16[" in text and "bf16[" not in text:
            out.append((f"{row['workload']}:{row['b']}", as_dtype_program(parse_text(text), "f32")))
    return out


def test_the_tuners_tf32_candidates_for_the_tables_structures_compile(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every TF32 schedule the tuner's first round tries on the table's structures in fp32
    (attention chains, folds, gates, two-kernel splits), and the second round's from the
    first of them, compiles for sm_90, with the TF32 products in the kernel."""
    from mirage_formal.codegen.tuning_rules import refinements

    cache: Path = tmp_path_factory.getbasetemp() / "tf32_table_cubin"
    compiled = 0
    for _, g in _table_ugraphs_in_fp32():
        las = launches(g, 128)
        for la in las:
            cands = candidate_schedules(la.graph)
            tf32 = [s for s in cands if s.tf32x3]
            if not tf32:
                continue
            for s in [*tf32, *[r for r in refinements(tf32[0], cands, la.graph) if r.tf32x3][::3]]:
                sched = {x.graph.key: s if x.graph.key == la.graph.key else Schedule()
                         for x in las}
                src, _, _ = emit_graph(g, schedules=sched)
                assert "mf::mma_1688_tf32(" in src
                assert compile_cubin(src, "sm_90", cache=cache)[:4] == b"\x7fELF"
                compiled += 1
    assert compiled >= 20, compiled


def test_the_ring_carries_the_fp32_tiles_a_tf32_product_reads() -> None:
    """Under ``ring32`` the prefill tile's X and W tiles (128 x 32 and 32 x 128 fp32) are raw
    ring tiles: 16-byte cp.async copies of 4 floats, three stages of padded rows (X at 40
    floats, its A reads' padding; W at 132) in 128 KB, read by the TF32 product at this
    iteration's stage; no prefetch registers for them. Without a TF32 product (the FMA loop) or without the field,
    fp32 tiles keep the prefetch path."""
    prog = _prefill_tile()
    key = launches(prog, 128)[0].graph.key
    src, _, _ = emit_graph(prog, schedules={key: Schedule(threads=256, tf32x3=True, ring32=True,
                                                          async_stage_bytes=128 * 1024)})
    assert src.count("// raw fp32, 3 stages") == 2 and "pf0_" not in src
    # (3 stages: a counted ring, the refill into slot mf_sr, this iteration's stage mf_s)
    assert re.search(r"mf::cp_async16\(b\d+ \+ mf_sr \* 5120 \+ \(\(t0\)\)\*40 \+ \(t1\)", src)
    assert re.search(r"mf_pa = \(b\d+ \+ mf_s \* 5120\) \+ \(mf_m0 \+ mf_g\) \* 40", src)
    assert re.search(r"mf_pb = \(b\d+ \+ mf_s \* 4224\) \+ 2 \* mf_q \* 132", src)
    for sched in (Schedule(threads=256, ring32=True, cc_rows=8, cc_cols=8),
                  Schedule(threads=256, tf32x3=True)):
        src, _, _ = emit_graph(prog, schedules={key: sched})
        assert "raw fp32" not in src and "pf0_" in src


def test_tuner_tries_the_fp32_ring_with_tf32_products() -> None:
    (la,) = launches(matmul_loop_program(32, 64, 64, 4, dtype="f32"), 128)
    scheds = candidate_schedules(la.graph)
    assert any(s.ring32 and s.tf32x3 for s in scheds)
    assert not any(s.ring32 and not s.tf32x3 for s in scheds)
