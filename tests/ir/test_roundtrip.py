"""Text and JSON forms round-trip to the identical graph (hypothesis), and malformed files
are rejected whole with the JSON path of the problem."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from graph_strategies import block_programs, kernel_programs
from hypothesis import given

import mirage_formal as mf
from mirage_formal import FormatError, workloads
from mirage_formal.ir.serialize import (
    dump_ugraphs,
    dumps_ugraphs,
    load_any,
    load_ugraph_records,
    load_ugraphs,
    ugraphs_from_json,
)
from mirage_formal.ir.text import parse_text, to_text


@given(kernel_programs())
def test_text_roundtrip_kernel_programs(g: mf.KernelGraph) -> None:
    t = to_text(g)
    assert parse_text(t) == g
    assert to_text(parse_text(t)) == t


@given(block_programs())
def test_text_and_json_roundtrip_ugraphs(g: mf.KernelGraph) -> None:
    assert parse_text(str(g)) == g
    (back,) = ugraphs_from_json(json.loads(dumps_ugraphs([g])))
    assert back[0] == g


@given(kernel_programs())
def test_json_roundtrip_kernel_programs(g: mf.KernelGraph) -> None:
    (back,) = ugraphs_from_json(json.loads(dumps_ugraphs([g])))
    assert back[0] == g


def test_file_roundtrip_with_meta(tmp_path: Path) -> None:
    gs = [workloads.handwritten("gqa"), workloads.program("lora")]
    p = tmp_path / "out" / "ugraphs.json"
    dump_ugraphs(gs, p, metas=[{"cost_us": 12.5}, {}])
    recs = load_ugraph_records(p)
    assert [g for g, _ in recs] == gs and recs[0][1] == {"cost_us": 12.5}
    assert load_any(p) == gs
    (tmp_path / "g.txt").write_text(to_text(gs[0]))
    assert load_any(tmp_path / "g.txt") == [gs[0]]


def _doc() -> dict:  # type: ignore[type-arg]
    return json.loads(dumps_ugraphs([workloads.handwritten("rmsnorm")]))  # type: ignore[no-any-return]


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda d: d.update(version=99), r"unsupported version 99"),
    (lambda d: d.update(version=True), r"unsupported version True"),  # (true == 1 in Python)
    (lambda d: d.update(format="other"), r"format: expected 'mirage-formal.ugraphs'"),
    (lambda d: d["ugraphs"][0]["nodes"][2].pop("grid"), r"ugraphs\[0\].nodes\[2\]: missing field 'grid'"),
    (lambda d: d["ugraphs"][0]["nodes"][2]["block"]["nodes"][2].update(src=[0, 9]),
     r"nodes\[2\].block.nodes\[2\].src: refers to node 9"),
    (lambda d: d["ugraphs"][0]["nodes"][2]["block"]["nodes"][2].update(op="softmax"), r"unknown op 'softmax'"),
    (lambda d: d["ugraphs"][0]["nodes"][3].update(shape=[2, 5]), r"declares f16\[2, 5\]"),
    (lambda d: d["ugraphs"][0]["nodes"][2].update(grid=[7, 1, 1]), r"not divisible by grid.x=7"),
    (lambda d: d["ugraphs"][0]["nodes"][2]["block"]["outputs"][0].update(omap=[-1, -1, -1]), r"omap leaves it unmapped"),
    (lambda d: d["ugraphs"][0].update(outputs=[]), r"no outputs"),
    (lambda d: d["ugraphs"][0]["nodes"][0].update(shape="2x4096"), r"expected list"),
])
def test_malformed_json_rejected(mutate, message: str) -> None:  # type: ignore[no-untyped-def]
    d = copy.deepcopy(_doc())
    mutate(d)
    with pytest.raises(FormatError, match=message):
        ugraphs_from_json(d, "f.json")


def test_malformed_text_rejected() -> None:
    t = to_text(workloads.handwritten("rmsnorm"))
    with pytest.raises(FormatError, match=r"must start with 'ugraph \{'"):
        parse_text("graph {\n}")
    with pytest.raises(FormatError, match=r"declares f16\[2, 9\]"):
        parse_text(t.replace("f16[2, 6144]", "f16[2, 9]"))
    with pytest.raises(FormatError, match="cannot parse attributes"):
        parse_text(t.replace("{name='X'}", "{name=__import__('os')}"))
    with pytest.raises(FormatError, match="undefined name"):
        parse_text(t.replace("return %3", "return %9"))


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="cannot read"):
        load_ugraphs(tmp_path / "missing.json")


@given(block_programs())
def test_node_lists_are_walked_once_and_handed_out_as_fresh_lists(g: mf.KernelGraph) -> None:
    """``nodes`` of a kernel graph and of each block graph is cached (the graphs are
    immutable): every call gives the same order, as a new list a caller may change, and a
    graph that went through pickling (the search's workers) gives it too."""
    import pickle

    from mirage_formal.ir.graph import KERNEL_OP

    graphs: list = [g, *[n.attr("graph") for n in g.nodes if n.op == KERNEL_OP]]
    for x in graphs:
        first = x.nodes
        first.append(first[0])
        first.reverse()
        again = x.nodes
        assert again == list(reversed(first[1:])) and again is not x.nodes
        assert pickle.loads(pickle.dumps(x)).nodes == again
    for bg in graphs[1:]:  # (block graphs: their phases too, computed once, handed out fresh)
        from mirage_formal.ir.graph import block_phases

        ph = bg.phases
        assert ph == block_phases(bg.nodes)
        ph.clear()
        assert bg.phases == block_phases(bg.nodes)
