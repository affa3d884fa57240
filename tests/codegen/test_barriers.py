"""Barriers between printed steps (codegen.barriers): one exactly where a step writes memory
touched since the last barrier or touches memory written since it, on real kernels too."""

from __future__ import annotations

import mirage_formal as mf
from mirage_formal.codegen.barriers import BARRIER, with_barriers
from mirage_formal.codegen.compiled import emit_graph

EXTENTS = {"b1": ("smem", 0, 64), "b2": ("smem", 64, 128), "b3": ("smem", 0, 32),
           "b4": ("ws", 0, 64), "mf_red": ("red", 0, 1)}
NONE: frozenset[str] = frozenset()


def _barriers_before(chunks: list[tuple[list[str], frozenset[str]]]) -> list[int]:
    """Indices of the chunks that get a barrier in front of them."""
    out = with_barriers(chunks, EXTENTS, "", close=False)
    firsts = [c[0][0] for c in chunks]
    return [firsts.index(out[i + 1]) for i, line in enumerate(out) if line == BARRIER]


def test_disjoint_writes_need_no_barrier() -> None:
    assert _barriers_before([(["b1[i] = x;"], NONE), (["b2[i] = y;"], NONE),
                             (["b4[i] = z;"], NONE)]) == []


def test_read_after_write_and_write_after_read_get_one() -> None:
    assert _barriers_before([(["b1[i] = x;"], NONE), (["y = b1[i]; b2[i] = y;"], frozenset({"b1"}))]) == [1]
    assert _barriers_before([(["y = b1[i]; b2[i] = y;"], frozenset({"b1"})), (["b1[i] = x;"], NONE)]) == [1]


def test_readers_of_one_tile_share_a_barrier_interval() -> None:
    chunks = [(["b1[i] = x;"], NONE), (["b2[i] = b1[i];"], frozenset({"b1"})),
              (["s += b1[i];"], frozenset({"b1"}))]
    assert _barriers_before(chunks) == [1]


def test_buffers_sharing_addresses_collide_under_other_names() -> None:
    # b3 reuses b1's addresses (disjoint lifetimes): writing it waits for b1's readers
    assert _barriers_before([(["y = b1[0]; b2[0] = y;"], frozenset({"b1"})), (["b3[0] = 1;"], NONE)]) == [1]
    # a different memory space at the same offsets does not collide
    assert _barriers_before([(["b1[0] = 1;"], NONE), (["b4[0] = 2;"], NONE)]) == []


def test_names_match_whole_identifiers_and_the_reduction_scratch() -> None:
    assert _barriers_before([(["b1[0] = 1;"], NONE), (["b10 = 3; ab1 = 2;"], NONE)]) == []
    assert _barriers_before([(["mf_red[0] = s;"], NONE), (["mf_red[1] = t;"], NONE)]) == [1]


def test_a_loop_body_ends_with_a_barrier() -> None:
    out = with_barriers([(["b1[0] = 1;"], NONE)], EXTENTS, "  ")
    assert out[-1] == "  " + BARRIER


def test_a_loop_free_kernel_loads_its_inputs_without_barriers_between() -> None:
    """A loop-free kernel of three inputs (ntrans's fused shape): no barrier between the three
    loads (their global reads overlap), one before the first step that reads them."""
    g = mf.Graph()
    h, x, a = (g.input((8, 4096), "f16", n) for n in "HXA")
    kern = g.kernel([h, x, a], grid=(8, 1, 1), forloop=1)
    ht, xt, at = (kern.accum(kern.iter(t, imap=(0, -1, -1), fmap=-1), kind="sum") for t in (h, x, a))
    y = kern.op("add", xt, kern.op("mul", at, kern.op("add", kern.op("rms_norm", ht), xt)))
    kern.output(kern.op("rms_norm", y), omap=(0, -1, -1))
    g.output(*kern.build())
    src, _, _ = emit_graph(g.build())
    lines = [x.strip() for x in src.splitlines()]
    loads = [i for i, x in enumerate(lines) if x.startswith("mf::ld_vec(")]
    assert len(loads) == 3
    assert BARRIER not in lines[loads[0]:loads[-1]]
    assert BARRIER in lines[loads[-1]:]
