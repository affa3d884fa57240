"""Tensor maps for the TMA ring (Schedule.tma_ring): what a kernel needs, and their bytes.

A kernel whose ring is filled by 2D tensor-map copies takes one ``CUtensorMap`` per ring tile
as a by-value (``__grid_constant__``) parameter after its workspace pointer. The emitter
records what each map describes (:class:`TensorMapSpec`: which kernel input, its 2D shape and
element type, the box of one copy); the host encodes it for the input's device address with
the driver's ``cuTensorMapEncodeTiled`` (:func:`encode`) at launch time, since the address is
only known then. Every map uses 64-column boxes (128 bytes of a 16-bit element) with the
128-byte swizzle, which is where the emitter's swizzled dense rows put each 16-byte chunk
(chunk c of row r at c ^ (r & 7), ``layout.raw_offset``).

Imports ``ir``; the driver through ctypes (only when encoding).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import cache
from typing import Any

from mirage_formal.errors import MirageError
from mirage_formal.ir.dtypes import DType

#: columns of every box: 128 bytes of a 16-bit element, the 128-byte swizzle's row
BOX_COLS = 64
#: the most rows of one box (every box dimension of a tensor map is at most 256)
BOX_ROWS_MAX = 256
def box_rows(rows: int) -> int | None:
    """Rows of each box a tile of ``rows`` rows is copied in: the whole tile when it fits one
    box; otherwise the most rows up to :data:`BOX_ROWS_MAX` that divide it and are a multiple
    of 8, so that each box after the first starts on a 1024-byte swizzle period and the
    boxes lie in shared memory exactly as one taller box would (a 384-row tile: two of 192).
    None when no such split exists."""
    if rows <= BOX_ROWS_MAX:
        return rows
    return next((d for d in range(BOX_ROWS_MAX, 7, -8) if rows % d == 0), None)


def tma_tile_ok(tile: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    """A tile of shape ``tile`` of an input of shape ``shape`` is a 2-D box a map over the
    input viewed as 2-D can copy: the same rank, at least 2, and a leading extent of 1 in
    every dimension before the last two (one slice of a batched input, attention's K or V
    tile of one head; the map's rows are the input's leading dimensions flattened, and the
    slice's rows are consecutive rows of that view)."""
    return len(tile) == len(shape) >= 2 and all(d == 1 for d in tile[:-2])


#: CUtensorMapDataType of the 16-bit element types a ring holds
_DATA_TYPE = {DType.F16: 6, DType.BF16: 9}
#: CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, no interleave, zero fill
_SWIZZLE_128B, _L2_PROMOTION_128B = 3, 2
#: a CUtensorMap's size and alignment
MAP_BYTES, MAP_ALIGN = 128, 64


@dataclass(frozen=True)
class TensorMapSpec:
    """One tensor map a kernel takes: kernel input ``input`` (a row-major ``rows`` x ``cols``
    matrix of ``dtype``: a batched input's leading dimensions flattened into its rows),
    copied in boxes of ``box_rows`` rows x 64 columns."""

    input: int
    rows: int
    cols: int
    box_rows: int
    dtype: DType


@cache
def _libcuda() -> Any:
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError as e:  # (no driver: a GPU launch could not have got here)
        raise MirageError(f"TMA ring: cannot load the CUDA driver library: {e}") from e


def encode(spec: TensorMapSpec, ptr: int) -> bytes:
    """The 128 bytes of ``spec``'s tensor map over the matrix at device address ``ptr``."""
    lib = _libcuda()
    buf = ctypes.create_string_buffer(MAP_BYTES + MAP_ALIGN)
    addr = -(-ctypes.addressof(buf) // MAP_ALIGN) * MAP_ALIGN
    item = spec.dtype.itemsize
    dims = (ctypes.c_uint64 * 2)(spec.cols, spec.rows)
    strides = (ctypes.c_uint64 * 1)(spec.cols * item)
    box = (ctypes.c_uint32 * 2)(BOX_COLS, spec.box_rows)
    unit = (ctypes.c_uint32 * 2)(1, 1)
    err = lib.cuTensorMapEncodeTiled(
        ctypes.c_void_p(addr), _DATA_TYPE[spec.dtype], 2, ctypes.c_void_p(ptr), dims, strides, box,
        unit, 0, _SWIZZLE_128B, _L2_PROMOTION_128B, 0)
    if err:
        raise MirageError(f"TMA ring: cuTensorMapEncodeTiled refused {spec} at {ptr:#x} "
                          f"(CUresult {err}); rebuild without Schedule.tma_ring")
    return ctypes.string_at(addr, MAP_BYTES)
