"""Presets load, validate, take overrides, and impossible ones fail with our error."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirage_formal.search import SearchConfig, SearchConfigError, preset_names


def test_every_shipped_preset_loads() -> None:
    names = preset_names()
    for required in ("attention", "mlp", "norm", "lora", "default"):
        assert required in names
    for n in names:
        cfg = SearchConfig.from_preset(n)
        assert cfg.name == n
        assert cfg.block_ops or cfg.max_graph_kernels == 0


def test_base_inheritance_and_overrides() -> None:
    d = SearchConfig.from_preset("default")
    n = SearchConfig.from_preset("norm", max_block_ops=5, grid_sizes=[2, 4])
    assert n.max_block_ops == 5 and n.grid_sizes == (2, 4)
    assert n.threads == d.threads  # inherited from base
    assert n.replace(max_block_ops=6).max_block_ops == 6


@pytest.mark.parametrize("bad, words", [
    ({"block_ops": ["nosuchop"]}, "block_ops"),
    ({"kernel_ops": ["accum"]}, "kernel-level"),
    ({"forloop": []}, "forloop"),
    ({"grid_sizes": [1, 4]}, "grid_sizes"),
    ({"max_block_ops": 1}, "max_block_ops"),
    ({"accums": []}, "accumulator"),
    ({"max_grid_axes": 4}, "3 axes"),
    ({"threads": 4096}, "1024"),
    ({"max_graph_kernels": 5, "max_kernel_ops": 2}, "max_graph_kernels"),
])
def test_impossible_presets_are_rejected(bad: dict[str, object], words: str) -> None:
    with pytest.raises(SearchConfigError, match=words):
        SearchConfig.from_preset("default", **bad)


def test_unknown_key_and_missing_preset(tmp_path: Path) -> None:
    (tmp_path / "x.toml").write_text('max_block_opz = 3\n')
    with pytest.raises(SearchConfigError, match="unknown key"):
        SearchConfig.from_preset("x", directory=tmp_path)
    with pytest.raises(SearchConfigError, match="no search preset"):
        SearchConfig.from_preset("nope", directory=tmp_path)
    (tmp_path / "loop.toml").write_text('base = "loop"\n')
    with pytest.raises(SearchConfigError, match="loops"):
        SearchConfig.from_preset("loop", directory=tmp_path)


def test_default_preset_matches_workload_presets() -> None:
    from mirage_formal import workloads
    from mirage_formal.search import WORKLOAD_PRESETS, default_preset

    for name in ("gqa", "rmsnorm", "ntrans", "gated_mlp", "lora"):
        assert default_preset(workloads.program(name)) == WORKLOAD_PRESETS[name]


def test_command_line_overrides() -> None:
    from mirage_formal.search import parse_overrides

    o = parse_overrides(["max_block_ops=7", "grid_sizes=[2, 4]", "target=h200"])
    assert o == {"max_block_ops": 7, "grid_sizes": [2, 4], "target": "h200"}
    assert SearchConfig.from_preset("norm", **o).grid_sizes == (2, 4)
    with pytest.raises(SearchConfigError, match="KEY=VALUE"):
        parse_overrides(["max_block_ops"])
