"""benchmarks/take_apart.py: each edit removes what it names from the kernels the emitter
prints for it, and the edited kernels still compile for sm_90 (CPU only: NVRTC, no GPU)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import take_apart
from graph_strategies import gemm_program

from mirage_formal.codegen import Schedule, launches
from mirage_formal.codegen.compiled import emit_graph
from mirage_formal.codegen.nvrtc import compile_cubin

#: the fused rmsnorm kernel's schedule as the table's b=8 row tuned it (s26)
FUSED = "threads=256,evict_first=True,dense_rows=True,mma_kpair=True,reg_epilogue=True"


def _fused_source(b: int = 8, fields: str = FUSED) -> str:
    (_, g, sched), = take_apart.targets("", f"{b}:64x128", take_apart.parse_fields(fields))
    return emit_graph(g, 128, schedules=sched)[0]


#: a product on warpgroup MMAs fed by the TMA ring (the edits of such loops need one)
WGMMA = "threads=128,reg_epilogue=True,async_stages=4,min_blocks=1,dense_rows=True,tma_ring=True,wgmma=True"


def _wgmma_source() -> str:
    g = gemm_program(64, 128, 128, 4, gm=2, gn=2)
    sched = take_apart.parse_fields(WGMMA)
    return emit_graph(g, 128, schedules={la.graph.key: Schedule(**sched) for la in launches(g, 128)})[0]


@pytest.mark.parametrize("name", sorted(take_apart.EDITS))
def test_each_edit_removes_its_piece_and_compiles(name: str) -> None:
    if name in ("no_wgmma", "no_ring_copies"):
        src = _wgmma_source()
    else:  # (the fold from the A fragments exists only under its schedule field)
        src = _fused_source(fields=FUSED + (",fold_fragments=True" if name == "no_fragment_folds" else ""))
    out = take_apart.edited(src, [name])
    assert out is not None and out != src
    gone = {"no_products": "mf::mma_16816(", "no_launch_dependency": "mf::grid_dep_",
            "no_cache_policy": "mf_pol)", "no_row_folds": "fr4[k] +=",
            "no_fragment_folds": "ff4[wm][0] +=", "no_wgmma": "mf::wgmma_m64nNk16<",
            "no_ring_copies": "mf::tma_load_2d<"}[name]
    assert gone in src and gone not in out
    if name == "no_wgmma":  # (no fence or wait left behind: the kernel compiles for sm_90)
        assert not any(f"mf::wgmma_{x}(" in out for x in ("fence", "commit", "wait_one", "wait_all"))
    if name == "no_ring_copies":  # (each stage's producer arrival stays, without bytes)
        assert "mf::mbar_expect_tx(&mf_full[s]" not in out and "mf::mbar_arrive(&mf_full[s]);" in out
    assert compile_cubin(out, "sm_90", name="take_apart_test.cu")


def test_edits_combine_and_an_absent_piece_is_not_applicable() -> None:
    src = _fused_source()
    both = take_apart.edited(src, ["no_products", "no_row_folds"])
    assert both is not None and "mf::mma_16816(" not in both and "fr4[k] +=" not in both
    # without the evict-first policy there is no policy to remove
    plain = _fused_source(fields="threads=256")
    assert "mf_pol" not in plain
    assert take_apart.edited(plain, ["no_cache_policy"]) is None


def test_a_field_the_schedule_lacks_is_refused() -> None:
    with pytest.raises(SystemExit, match="no schedule field"):
        take_apart.parse_fields("threads=256,stages_typo=3")
