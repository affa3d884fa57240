"""Schedule values: every field a schedule holds is checked when it is made, with the
package's own exception naming the field, and a schedule survives its text key."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import pytest

from mirage_formal.codegen import Schedule
from mirage_formal.errors import GraphError, MirageError

BAD: list[tuple[str, Any]] = [
    ("threads", 33), ("threads", 2048), ("split", 0), ("chain_warps", -1), ("gemv_chunk", 0),
    ("gemv_depth", 1), ("warp_m", 3), ("warp_n", 16), ("async_stages", 1),
    ("prefetch_depth", 0), ("prefetch_regs", -1), ("l2_fetch", 64), ("evict_first", 1),
    ("chain_rows", 3), ("ring_first", 1), ("min_blocks", -1), ("min_blocks", 33),
    ("coarsen", 0), ("coarsen_axis", 3), ("dense_rows", 1), ("mma_kpair", 1),
    ("reg_epilogue", 1), ("fold_fragments", 1), ("one_barrier", 1), ("tma_ring", 1),
    ("wgmma", 1), ("fold_mma", 1), ("cc_rows", 3), ("cc_cols", 16),
]


@pytest.mark.parametrize(("name", "value"), BAD)
def test_a_bad_field_raises_the_packages_error_naming_it(name: str, value: Any) -> None:
    with pytest.raises(GraphError) as e:
        Schedule(**{name: value})
    assert isinstance(e.value, MirageError)
    assert name.split("_")[0] in str(e.value)


def test_every_field_survives_the_text_key_and_unknown_fields_are_refused() -> None:
    s = Schedule(threads=256, split=4, gemv=True, l2_fetch=256, chain_warps=2, warp_m=2,
                 evict_first=True, coarsen=2, coarsen_axis=1, dense_rows=True, mma_kpair=True,
                 mma_kslice=4, reg_epilogue=True, fold_fragments=True, one_barrier=True,
                 tma_ring=True, a_op_fragments=True, wgmma=True, tma_multicast=True,
                 wgmma_cols=2, pad_acc_rows=True, fold_mma=True, cc_rows=4, cc_cols=2,
                 tf32x3=True, ring32=True)
    assert Schedule.from_dict(s.to_dict()) == s
    t = Schedule(stream_k=132, gemv=True)  # (stream-K comes without a split)
    assert Schedule.from_dict(t.to_dict()) == t
    r = Schedule(refine_rows=48, refine_dim=2)  # (a refinement comes without a split)
    assert Schedule.from_dict(r.to_dict()) == r
    assert {f.name for f in fields(Schedule)} == set(s.to_dict()) | set(t.to_dict()) | set(r.to_dict())
    with pytest.raises(GraphError, match="unknown fields"):
        Schedule.from_dict({**s.to_dict(), "tma_rings": True})
