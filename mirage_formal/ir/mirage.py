"""Importer for the μGraph JSON that Mirage publishes (benchmark/saved_mugraphs).

The format: a file is a JSON array of μGraphs; a
μGraph is an array of kernel operators in topological order, tensors linked by ``guid``.
Every operator type is mapped onto our registry (``KN_OPS``, ``TB_OPS``); accumulators become
``accum`` with attributes. Each built op's shape is checked against the dims the file
declares, so a file that disagrees with our semantics is rejected, not silently reinterpreted.
Loading only parses JSON (with :mod:`mirage_formal.safeload`'s depth and number limits):
nothing in a file is executed. Every field is type- and range-checked before use, so any
problem raises :class:`FormatError` naming the μGraph, the operator, the field and what it
must be.

Imports ``ir``, the errors and ``mirage_formal.safeload``.
"""

from __future__ import annotations

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
from mirage_formal.safeload import parse_json

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


MAX_DIM = 2**31 - 1
"""Largest size, grid dimension or loop range accepted (CUDA's own limit for grid.x)."""


def _obj(v: Any, where: str, what: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise FormatError(f"{where}: {what} must be a JSON object, not {_kind(v)}")
    return v


def _list(v: Any, where: str, what: str, nonempty: bool = False) -> list[Any]:
    if not isinstance(v, list):
        raise FormatError(f"{where}: {what} must be a JSON array, not {_kind(v)}")
    if nonempty and not v:
        raise FormatError(f"{where}: {what} is empty; it needs at least one entry")
    return v


def _field(d: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in d:
        raise FormatError(f"{where}: missing field {key!r}")
    return d[key]


def _int(v: Any, where: str, what: str, lo: int = 0, hi: int = MAX_DIM) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise FormatError(f"{where}: {what} must be an integer, not {_kind(v)}")
    if not lo <= v <= hi:
        raise FormatError(f"{where}: {what} = {v} is out of range; it must be {lo}..{hi}")
    return int(v)


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return f"the boolean {str(v).lower()}"
    if isinstance(v, (int, float)):
        return f"the number {v}"
    if isinstance(v, str):
        return f"the string {v[:40]!r}"
    return "an array" if isinstance(v, list) else "an object"


def _guid(t: Any, where: str, what: str) -> int:
    return _int(_field(_obj(t, where, what), "guid", where), where, f"{what}.guid", -(2**63), 2**63 - 1)


def _tensor(tensors: Mapping[int, Node], t: Any, where: str, what: str) -> Node:
    g = _guid(t, where, what)
    if g not in tensors:
        raise FormatError(f"{where}: {what} refers to tensor guid {g}, which no earlier operator produces")
    return tensors[g]


def _dims(t: Any, where: str) -> tuple[tuple[int, ...], DType]:
    t = _obj(t, where, "a tensor")
    n = _int(_field(t, "num_dims", where), where, "num_dims", 1, 8)
    dim = _list(_field(t, "dim", where), where, "dim")
    if len(dim) < n:
        raise FormatError(f"{where}: num_dims = {n} but dim lists only {len(dim)} sizes")
    dims = tuple(_int(d, where, f"dim[{i}]", 1) for i, d in enumerate(dim[:n]))
    code = _field(t, "data_type", where)
    if isinstance(code, bool) or not isinstance(code, int) or code not in DTYPES:
        raise FormatError(f"{where}: data_type {code!r} is not one we read "
                          f"({', '.join(f'{k} = {v}' for k, v in DTYPES.items())})")
    return dims, DTYPES[code]


def _first_output(op: Mapping[str, Any], where: str) -> Any:
    return _list(_field(op, "output_tensors", where), where, "output_tensors", nonempty=True)[0]


def _inputs(op: Mapping[str, Any], tensors: Mapping[int, Node], where: str) -> list[Node]:
    ts = _list(_field(op, "input_tensors", where), where, "input_tensors")
    return [_tensor(tensors, t, where, f"input_tensors[{i}]") for i, t in enumerate(ts)]


def _check(n: Node, declared: Any, where: str) -> None:
    dims, _dt = _dims(declared, where)
    if n.shape != dims:
        raise FormatError(
            f"{where}: the file declares shape {list(dims)} but our semantics give {list(n.shape)}"
        )


def _reduce_attrs(op_type: str, out: Any, in_rank: int, where: str) -> dict[str, Any]:
    axis = int(op_type.split("_")[2])
    out_dims, _ = _dims(out, where)
    return {"axis": axis, "keepdims": len(out_dims) == in_rank}


def _compute(op_type: str, table: Mapping[str, str], srcs: list[Node], op: Mapping[str, Any],
             level: str, where: str) -> Node:
    if op_type in table:
        return make_op(table[op_type], srcs, {}, level)
    if op_type.endswith("mul_scalar_op"):
        v = op.get("scalar", op.get("scale", 1.0))
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise FormatError(f"{where}: scalar must be a number, not {_kind(v)}")
        return make_op("mul_scalar", srcs, {"scalar": float(v)}, level)
    if op_type in _REDUCTIONS:
        return make_op("sum", srcs, _reduce_attrs(op_type, _first_output(op, where),
                                                   len(srcs[0].shape) if srcs else 0, where), level)
    raise FormatError(f"{where}: unsupported Mirage operator {op_type!r}; supported: {', '.join(SUPPORTED)}")


_REDUCTIONS = {f"{lv}_reduction_{a}_op" for lv in ("kn", "tb") for a in range(3)}


def _op_type(op: Mapping[str, Any], where: str) -> str:
    t = _field(op, "op_type", where)
    if not isinstance(t, str):
        raise FormatError(f"{where}: op_type must be a string such as 'kn_matmul_op', not {_kind(t)}")
    return t


def _grid(bg: Mapping[str, Any], where: str) -> tuple[int, int, int]:
    gd = _obj(_field(bg, "grid_dim", where), where, "grid_dim")
    return (_int(gd.get("x", 1), where, "grid_dim.x", 1), _int(gd.get("y", 1), where, "grid_dim.y", 1),
            _int(gd.get("z", 1), where, "grid_dim.z", 1))


def _threads(bg: Mapping[str, Any], where: str) -> int:
    bd = _obj(bg.get("block_dim", {"x": 128}), where, "block_dim")
    n = 1
    for ax in ("x", "y", "z"):
        n *= _int(bd.get(ax, 1), where, f"block_dim.{ax}", 1, 1024)
    if n > 1024:
        raise FormatError(f"{where}: block_dim gives {n} threads; a CUDA block has at most 1024")
    return n


def _block_graph(op: Mapping[str, Any], kin: list[Node], where: str) -> list[Node]:
    bg = _obj(_field(op, "bgraph", where), where, "bgraph")
    grid = _grid(bg, where)
    threads = _threads(bg, where)
    forloop = _int(_field(bg, "forloop_range", where), where, "forloop_range", 1)
    rdx = _int(bg.get("reduction_dimx", 64), where, "reduction_dimx", 1)
    in_guids = [_guid(t, where, f"input_tensors[{i}]")
                for i, t in enumerate(_list(_field(op, "input_tensors", where), where, "input_tensors"))]
    out_guids = [_guid(t, where, f"output_tensors[{i}]") for i, t in enumerate(
        _list(_field(op, "output_tensors", where), where, "output_tensors", nonempty=True))]
    sig = [(n.shape, n.dtype) for n in kin]
    tensors: dict[int, Node] = {}
    savers: list[tuple[int, BlockOutput]] = []
    for j, b in enumerate(_list(_field(bg, "operators", where), where, "bgraph.operators")):
        b = _obj(b, f"{where}, block operator {j}", "a block operator")
        t = _op_type(b, f"{where}, block operator {j}")
        w = f"{where}, block operator {j} ({t})"
        try:
            if t == "tb_input_op":
                g = _guid(_field(b, "dtensor", w), w, "dtensor")
                if g not in in_guids:
                    raise FormatError(f"{w}: dtensor {g} is not an input of the kernel")
                n = make_iter(sig, in_guids.index(g), _map(b, "input_map", w),
                              _int(_field(b, "forloop_dim", w), w, "forloop_dim", -1, 7), grid, forloop)
            elif t == "tb_output_op":
                g = _guid(_field(b, "dtensor", w), w, "dtensor")
                if g not in out_guids:
                    raise FormatError(f"{w}: dtensor {g} is not an output of the kernel")
                srcs = _inputs(b, tensors, w)
                if len(srcs) != 1:
                    raise FormatError(f"{w}: an output saver takes one input tensor, not {len(srcs)}")
                savers.append((out_guids.index(g), BlockOutput(srcs[0], _map(b, "output_map", w))))
                continue
            else:
                srcs = _inputs(b, tensors, w)
                if t in TB_ACCUMS:
                    kind, fold = TB_ACCUMS[t]
                    n = make_op("accum", srcs, {"kind": kind, "fold": rdx if fold == "x" else fold}, BLOCK)
                else:
                    n = _compute(t, TB_OPS, srcs, b, BLOCK, w)
            out = _first_output(b, w)
            _check(n, out, w)
            tensors[_guid(out, w, "output_tensors[0]")] = n
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


def _map(b: Mapping[str, Any], key: str, where: str) -> tuple[int, int, int]:
    m = _field(b, key, where)
    if isinstance(m, dict):
        vals = {k: m[k] for k in m}
        for k, v in vals.items():
            _int(v, where, f"{key}.{k}", -1, 7)
    elif isinstance(m, list):
        for i, v in enumerate(m):
            _int(v, where, f"{key}[{i}]", -1, 7)
    else:
        raise FormatError(f"{where}: {key} must be an object {{'x': .., 'y': .., 'z': ..}} or an "
                          f"array, not {_kind(m)}")
    try:
        return as_map(m, key)
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
        t = _op_type(op, f"{where}, operator {i}")
        w = f"{where}, operator {i} ({t})"
        try:
            if t == "kn_input_op":
                out = _first_output(op, w)
                dims, dt = _dims(out, w)
                k = len(inputs)
                name = input_names[k] if input_names and k < len(input_names) else f"in{k}"
                n = make_input(name, dims, dt)
                inputs.append(n)
                tensors[_guid(out, w, "output_tensors[0]")] = n
            elif t == "kn_output_op":
                srcs = _inputs(op, tensors, w)
                if len(srcs) != 1:
                    raise FormatError(f"{w}: an output operator takes one input tensor, not {len(srcs)}")
                outputs.append(srcs[0])
            elif t == "kn_customized_op":
                kin = _inputs(op, tensors, w)
                outs = _block_graph(op, kin, w)
                decls = _list(op["output_tensors"], w, "output_tensors")
                if len(decls) != len(outs):
                    raise FormatError(f"{w}: declares {len(decls)} output tensors but its block "
                                      f"graph saves {len(outs)}")
                for n, decl in zip(outs, decls, strict=True):
                    _check(n, decl, w)
                    tensors[_guid(decl, w, "an output tensor")] = n
            else:
                srcs = _inputs(op, tensors, w)
                n = _compute(t, KN_OPS, srcs, op, KERNEL, w)
                out = _first_output(op, w)
                _check(n, out, w)
                tensors[_guid(out, w, "output_tensors[0]")] = n
        except FormatError:
            raise
        except MirageError as e:
            raise FormatError(f"{w}: {e}") from None
    if not outputs:
        raise FormatError(f"{where}: has no kn_output_op, so it computes nothing")
    try:
        return KernelGraph(tuple(inputs), tuple(outputs))
    except MirageError as e:
        raise FormatError(f"{where}: {e}") from None


def mirage_from_data(data: Any, name: str, input_names: Sequence[str] | None = None) -> list[KernelGraph]:
    """Every μGraph of parsed Mirage JSON (an array of μGraphs, or one μGraph)."""
    if isinstance(data, list) and data and isinstance(data[0], dict):
        data = [data]  # a single μGraph rather than an array of them
    if not isinstance(data, list) or not data:
        raise FormatError(f"{name}: expected a non-empty JSON array of μGraphs")
    return [import_mugraph(g, input_names, f"{name}[{i}]") for i, g in enumerate(data)]


def load_mirage(path: str | Path, input_names: Sequence[str] | None = None) -> list[KernelGraph]:
    """Load every μGraph of a Mirage checkpoint file (a JSON array of μGraphs)."""
    p = Path(path)
    try:
        raw = p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise FormatError(f"{p}: cannot read Mirage JSON: {e}") from None
    return mirage_from_data(parse_json(raw, str(p)), p.name, input_names)


def is_mirage_json(data: Any) -> bool:
    """True when parsed JSON looks like Mirage's format (an array of operator arrays)."""
    if isinstance(data, list) and data:
        first = data[0]
        if isinstance(first, dict):
            return "op_type" in first
        return isinstance(first, list) and bool(first) and isinstance(first[0], dict) and "op_type" in first[0]
    return False
