"""Importer for the μGraph JSON that Mirage publishes (benchmark/saved_mugraphs).

The format (../shared/mirage_checkpoints/README.md): a file is a JSON array of μGraphs; a
μGraph is an array of kernel operators in topological order, tensors linked by ``guid``.
Every operator type is mapped onto our registry (``KN_OPS``, ``TB_OPS``); accumulators become
``accum`` with attributes. Each built op's shape is checked against the dims the file
declares, so a file that disagrees with our semantics is rejected, not silently reinterpreted.
Loading only parses JSON: nothing in a file is executed. Any problem raises
:class:`FormatError` naming the μGraph, the operator and the reason.

Imports ``ir`` only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mirage_formal.errors import FormatError, GraphError, MirageError
from mirage_formal.ir.dtypes import DType
from mirage_formal.ir.graph import (
    BlockGraph,
    BlockOutput,
    KernelGraph,
    as_map,
    make_input,
    make_iter,
    make_kernel,
    make_op,
)
from mirage_formal.ir.node import Node
from mirage_formal.ir.ops import BLOCK, KERNEL

#: Mirage's DataType enum values (mirage/include/mirage/type.h)
DTYPES = {921: DType.F16, 922: DType.BF16, 930: DType.F32}

# op_type -> (our op, fixed attributes). Reductions and accumulators are handled below.
_ELEMENTWISE = {
    "matmul": "matmul", "exp": "exp", "add": "add", "sub": "sub", "mul": "mul", "div": "div",
    "silu": "silu", "sigmoid": "sigmoid", "gelu": "gelu", "relu": "relu", "sqrt": "sqrt",
    "square": "square", "rsqrt": "rsqrt", "neg": "neg", "rms_norm": "rms_norm",
}
KN_OPS = {f"kn_{k}_op": v for k, v in _ELEMENTWISE.items()}
TB_OPS = {f"tb_{k}_op": v for k, v in _ELEMENTWISE.items()}
#: accumulator op types -> (kind, fold); fold "x" means the bgraph's reduction_dimx
TB_ACCUMS: dict[str, tuple[str, int | str | None]] = {
    "tb_accum_nored_op": ("sum", None),
    "tb_accum_red_ld_sum_op": ("sum", 1),
    "tb_accum_red_ld_mean_op": ("mean", 1),
    "tb_accum_red_ld_rms_op": ("rms", 1),
    "tb_accum_redtox_ld_sum_op": ("sum", "x"),
    "tb_forloop_accum_nored_op": ("sum", None),
    "tb_forloop_accum_red_ld_sum_op": ("sum", 1),
    "tb_forloop_accum_red_ld_mean_op": ("mean", 1),
    "tb_forloop_accum_red_ld_rms_op": ("rms", 1),
    "tb_forloop_accum_redtox_ld_sum_op": ("sum", "x"),
}
SUPPORTED = sorted([*KN_OPS, *TB_OPS, *TB_ACCUMS, "kn_input_op", "kn_output_op",
                    "kn_customized_op", "tb_input_op", "tb_output_op", "kn_mul_scalar_op",
                    "tb_mul_scalar_op", "kn_reduction_0_op", "kn_reduction_1_op",
                    "kn_reduction_2_op", "tb_reduction_0_op", "tb_reduction_1_op",
                    "tb_reduction_2_op"])


def _dims(t: Mapping[str, Any], where: str) -> tuple[tuple[int, ...], DType]:
    try:
        n = int(t["num_dims"])
        dims = tuple(int(d) for d in t["dim"][:n])
        dt = DTYPES[int(t["data_type"])]
    except KeyError as e:
        raise FormatError(f"{where}: tensor lacks field or has unknown data_type {e}") from None
    except (TypeError, ValueError) as e:
        raise FormatError(f"{where}: malformed tensor {t!r}: {e}") from None
    return dims, dt


def _check(n: Node, declared: Mapping[str, Any], where: str) -> None:
    dims, _dt = _dims(declared, where)
    if n.shape != dims:
        raise FormatError(
            f"{where}: the file declares shape {list(dims)} but our semantics give {list(n.shape)}"
        )


def _reduce_attrs(op_type: str, out_dims: Sequence[int], in_rank: int) -> dict[str, Any]:
    axis = int(op_type.split("_")[2])
    return {"axis": axis, "keepdims": len(out_dims) == in_rank}


def _compute(op_type: str, table: Mapping[str, str], srcs: list[Node], op: Mapping[str, Any],
             level: str) -> Node:
    if op_type in table:
        return make_op(table[op_type], srcs, {}, level)
    if op_type.endswith("mul_scalar_op"):
        return make_op("mul_scalar", srcs, {"scalar": float(op.get("scalar", op.get("scale", 1.0)))}, level)
    if "_reduction_" in op_type:
        out = op["output_tensors"][0]
        return make_op("sum", srcs, _reduce_attrs(op_type, out["dim"][: out["num_dims"]], len(srcs[0].shape)), level)
    raise FormatError(f"unsupported Mirage operator {op_type!r}; supported: {', '.join(SUPPORTED)}")


def _block_graph(op: Mapping[str, Any], kin: list[Node], where: str) -> list[Node]:
    bg = op["bgraph"]
    grid = (int(bg["grid_dim"]["x"]), int(bg["grid_dim"]["y"]), int(bg["grid_dim"]["z"]))
    bd = bg.get("block_dim", {"x": 128})
    threads = int(bd.get("x", 1)) * int(bd.get("y", 1)) * int(bd.get("z", 1))
    forloop = int(bg["forloop_range"])
    rdx = int(bg.get("reduction_dimx", 64))
    in_guids = [int(t["guid"]) for t in op["input_tensors"]]
    out_guids = [int(t["guid"]) for t in op["output_tensors"]]
    sig = [(n.shape, n.dtype) for n in kin]
    tensors: dict[int, Node] = {}
    savers: list[tuple[int, BlockOutput]] = []
    for j, b in enumerate(bg["operators"]):
        t = b["op_type"]
        w = f"{where}, block operator {j} ({t})"
        try:
            if t == "tb_input_op":
                g = int(b["dtensor"]["guid"])
                if g not in in_guids:
                    raise FormatError(f"{w}: dtensor {g} is not an input of the kernel")
                n = make_iter(sig, in_guids.index(g), as_map(b["input_map"], "imap"),
                              int(b["forloop_dim"]), grid, forloop)
            elif t == "tb_output_op":
                g = int(b["dtensor"]["guid"])
                if g not in out_guids:
                    raise FormatError(f"{w}: dtensor {g} is not an output of the kernel")
                src = tensors[int(b["input_tensors"][0]["guid"])]
                savers.append((out_guids.index(g), BlockOutput(src, as_map(b["output_map"], "omap"))))
                continue
            else:
                srcs = [tensors[int(x["guid"])] for x in b["input_tensors"]]
                if t in TB_ACCUMS:
                    kind, fold = TB_ACCUMS[t]
                    n = make_op("accum", srcs, {"kind": kind, "fold": rdx if fold == "x" else fold}, BLOCK)
                else:
                    n = _compute(t, TB_OPS, srcs, b, BLOCK)
            _check(n, b["output_tensors"][0], w)
            tensors[int(b["output_tensors"][0]["guid"])] = n
        except KeyError as e:
            raise FormatError(f"{w}: missing field or unknown tensor {e}") from None
        except GraphError as e:
            raise FormatError(f"{w}: {e}") from None
    savers.sort(key=lambda s: s[0])
    if [i for i, _ in savers] != list(range(len(out_guids))):
        raise FormatError(f"{where}: output savers do not match the kernel's {len(out_guids)} outputs")
    try:
        block = BlockGraph(grid, threads, forloop, tuple(sig), tuple(s for _, s in savers))
        return make_kernel(block, kin)
    except GraphError as e:
        raise FormatError(f"{where}: {e}") from None


def import_mugraph(ops: Sequence[Mapping[str, Any]], input_names: Sequence[str] | None = None,
                   where: str = "μGraph") -> KernelGraph:
    """Convert one Mirage μGraph (a list of kernel operators) to a KernelGraph."""
    if not isinstance(ops, list) or not all(isinstance(o, dict) for o in ops):
        raise FormatError(f"{where}: expected a JSON array of operator objects")
    tensors: dict[int, Node] = {}
    inputs: list[Node] = []
    outputs: list[Node] = []
    for i, op in enumerate(ops):
        t = op.get("op_type")
        w = f"{where}, operator {i} ({t})"
        try:
            if t == "kn_input_op":
                out = op["output_tensors"][0]
                dims, dt = _dims(out, w)
                k = len(inputs)
                name = input_names[k] if input_names and k < len(input_names) else f"in{k}"
                n = make_input(name, dims, dt)
                inputs.append(n)
                tensors[int(out["guid"])] = n
            elif t == "kn_output_op":
                outputs.append(tensors[int(op["input_tensors"][0]["guid"])])
            elif t == "kn_customized_op":
                kin = [tensors[int(x["guid"])] for x in op["input_tensors"]]
                outs = _block_graph(op, kin, w)
                for n, decl in zip(outs, op["output_tensors"], strict=True):
                    _check(n, decl, w)
                    tensors[int(decl["guid"])] = n
            else:
                srcs = [tensors[int(x["guid"])] for x in op["input_tensors"]]
                n = _compute(str(t), KN_OPS, srcs, op, KERNEL)
                _check(n, op["output_tensors"][0], w)
                tensors[int(op["output_tensors"][0]["guid"])] = n
        except KeyError as e:
            raise FormatError(f"{w}: missing field or unknown tensor guid {e}") from None
        except FormatError:
            raise
        except (GraphError, ValueError, TypeError) as e:
            raise FormatError(f"{w}: {e}") from None
    try:
        return KernelGraph(tuple(inputs), tuple(outputs))
    except MirageError as e:
        raise FormatError(f"{where}: {e}") from None


def load_mirage(path: str | Path, input_names: Sequence[str] | None = None) -> list[KernelGraph]:
    """Load every μGraph of a Mirage checkpoint file (a JSON array of μGraphs)."""
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise FormatError(f"{p}: cannot read Mirage JSON: {e}") from None
    if isinstance(data, list) and data and isinstance(data[0], dict):
        data = [data]  # a single μGraph rather than an array of them
    if not isinstance(data, list):
        raise FormatError(f"{p}: expected a JSON array of μGraphs")
    return [import_mugraph(g, input_names, f"{p.name}[{i}]") for i, g in enumerate(data)]


def is_mirage_json(data: Any) -> bool:
    """True when parsed JSON looks like Mirage's format (an array of operator arrays)."""
    if isinstance(data, list) and data:
        first = data[0]
        if isinstance(first, dict):
            return "op_type" in first
        return isinstance(first, list) and bool(first) and isinstance(first[0], dict) and "op_type" in first[0]
    return False
