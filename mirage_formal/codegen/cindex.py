"""C index arithmetic and literals for emitted kernels: row-major offsets with compile-time
shapes, splitting a linear index into per-dimension names, broadcast alignment, float literals.

Imports ``ir`` only (its errors).
"""

from __future__ import annotations

from collections.abc import Sequence

from mirage_formal.errors import GraphError


def strides(shape: Sequence[int]) -> list[int]:
    out = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        out[d] = out[d + 1] * shape[d + 1]
    return out


def lin(shape: Sequence[int], idx: Sequence[str]) -> str:
    """Row-major linear offset of ``idx`` (C expressions) in a tile of ``shape``."""
    terms = []
    for s, st, i in zip(shape, strides(shape), idx, strict=True):
        if s == 1 or i == "0":
            continue
        terms.append(f"({i})" if st == 1 else f"({i})*{st}")
    return " + ".join(terms) if terms else "0"


def multi_index(shape: Sequence[int], var: str, prefix: str) -> tuple[list[str], list[str]]:
    """Declarations splitting linear index ``var`` into per-dimension names; and the names."""
    decls, names = [], []
    st = strides(shape)
    for d, s in enumerate(shape):
        if s == 1:
            names.append("0")
            continue
        name = f"{prefix}{d}"
        e = f"{var} / {st[d]}" if st[d] != 1 else var
        if d > 0:
            e = f"({e}) % {s}"
        decls.append(f"const int {name} = {e};")
        names.append(name)
    return decls, names


def align_idx(idx: Sequence[str], out_shape: Sequence[int], shape: Sequence[int]) -> list[str]:
    """Index of a right-aligned broadcast operand of ``shape`` read at ``idx`` of ``out_shape``."""
    off = len(out_shape) - len(shape)
    return ["0" if s == 1 else idx[off + j] for j, s in enumerate(shape)]


def fmt_float(x: float) -> str:
    r = repr(float(x))
    if r in ("inf", "-inf", "nan"):
        raise GraphError(f"codegen: attribute value {r} cannot be emitted as a C literal")
    return r if ("e" in r or "." in r) else r + ".0"
