"""Test helper: write our μGraphs in the JSON format Mirage publishes (the inverse of
``mirage_formal.ir.mirage``), so that tests can keep Mirage-format files of their own.

Only what the importer reads is written (op types, tensors with dims, dtype and guid, the
block graph's maps, grid, loop range and reduction_dimx). Imports ``mirage_formal.ir``.
"""

from __future__ import annotations

from typing import Any

from mirage_formal.ir.graph import GET, INPUT, ITER, KERNEL_OP, BlockGraph, KernelGraph
from mirage_formal.ir.mirage import DTYPES, KN_OPS, TB_ACCUMS, TB_OPS
from mirage_formal.ir.node import Node

_DT = {v: k for k, v in DTYPES.items()}
_KN = {v: k for k, v in KN_OPS.items()}
_TB = {v: k for k, v in TB_OPS.items()}
_ACC = {v: k for k, v in TB_ACCUMS.items() if k.startswith("tb_forloop")}


class _Guids:
    def __init__(self) -> None:
        self.next = 1000
        self.of: dict[Any, int] = {}

    def tensor(self, key: Any, n: Node, shape: tuple[int, ...] | None = None) -> dict[str, Any]:
        if key not in self.of:
            self.of[key] = self.next
            self.next += 1
        dims = list(shape if shape is not None else n.shape)
        return {"data_type": _DT[n.dtype], "dim": dims + [1] * (4 - len(dims)),
                "num_dims": len(dims), "guid": self.of[key], "layout": 0}


def _axes(m: tuple[int, int, int]) -> dict[str, int]:
    return {"x": m[0], "y": m[1], "z": m[2]}


def _compute_type(n: Node, table: dict[str, str], prefix: str) -> dict[str, Any]:
    if n.op == "sum":
        assert n.attr("keepdims"), "Mirage reductions keep the reduced dimension"
        return {"op_type": f"{prefix}_reduction_{n.attr('axis') % len(n.src[0].shape)}_op"}
    if n.op == "mul_scalar":
        return {"op_type": f"{prefix}_mul_scalar_op", "scalar": n.attr("scalar")}
    return {"op_type": table[n.op]}


def _block(kn: Node, ids: _Guids, out_guids: list[int]) -> dict[str, Any]:
    bg: BlockGraph = kn.attr("graph")
    ops: list[dict[str, Any]] = []
    folds = {b.attr("fold") for b in bg.nodes if b.op == "accum"} - {None, 1}
    rdx = folds.pop() if folds else 64
    for b in bg.nodes:
        t = ids.tensor((kn, b), b)
        if b.op == ITER:
            src = kn.src[b.attr("input")]
            ops.append({"op_type": "tb_input_op", "input_tensors": [], "output_tensors": [t],
                        "dtensor": {"guid": ids.of[src]}, "input_map": _axes(b.attr("imap")),
                        "forloop_dim": b.attr("fmap")})
            continue
        ins = [ids.tensor((kn, s), s) for s in b.src]
        if b.op == "accum":
            fold = b.attr("fold")
            op = {"op_type": _ACC[(b.attr("kind"), "x" if fold not in (None, 1) else fold)]}
        else:
            op = _compute_type(b, _TB, "tb")
        ops.append({**op, "input_tensors": ins, "output_tensors": [t]})
    for i, o in enumerate(bg.outputs):
        ops.append({"op_type": "tb_output_op", "input_tensors": [ids.tensor((kn, o.node), o.node)],
                    "output_tensors": [], "dtensor": {"guid": out_guids[i]},
                    "output_map": _axes(o.omap)})
    return {"grid_dim": _axes(bg.grid), "block_dim": {"x": bg.threads, "y": 1, "z": 1},
            "forloop_range": bg.forloop, "reduction_dimx": rdx, "operators": ops}


def export_mugraph(g: KernelGraph) -> list[dict[str, Any]]:
    """One μGraph as Mirage's list of kernel operators (inputs in ``g.inputs`` order)."""
    ids = _Guids()
    ops: list[dict[str, Any]] = []
    for n in g.inputs:
        ops.append({"op_type": "kn_input_op", "input_tensors": [],
                    "output_tensors": [ids.tensor(n, n)], "input_strides": []})
    for n in g.nodes:
        if n.op in (INPUT, GET):
            continue
        if n.op == KERNEL_OP:
            gets = sorted((m for m in g.nodes if m.op == GET and m.src[0] is n),
                          key=lambda m: m.attr("index"))
            bg: BlockGraph = n.attr("graph")
            assert len(gets) == len(bg.outputs), "export needs every kernel output used"
            outs = [ids.tensor(m, m) for m in gets]
            ops.append({"op_type": "kn_customized_op",
                        "input_tensors": [ids.tensor(s, s) for s in n.src],
                        "output_tensors": outs,
                        "bgraph": _block(n, ids, [t["guid"] for t in outs])})
            continue
        ops.append({**_compute_type(n, _KN, "kn"), "input_tensors": [ids.tensor(s, s) for s in n.src],
                    "output_tensors": [ids.tensor(n, n)]})
    for o in g.outputs:
        ops.append({"op_type": "kn_output_op", "input_tensors": [ids.tensor(o, o)],
                    "output_tensors": []})
    return ops
