"""The 16-bit float types tensor cores multiply (fp16, bf16): what the printed CUDA calls each
one's storage type, conversions, fragment packing and MMA instructions.

A tensor-core product runs on operands of one such type (both fp16 or both bf16), kept raw in
the rings and fragments it reads; the device library (``mf_tile.cuh``) has each piece for both
types under the names below. Imports ``ir`` only.
"""

from __future__ import annotations

from dataclasses import dataclass

from mirage_formal.ir.dtypes import DType


@dataclass(frozen=True)
class Float16Names:
    """The C and device-library names of one 16-bit float type."""

    #: how comments in the printed code name it
    name: str
    #: the storage type of one element, and of an adjacent pair
    c_type: str
    pair_type: str
    #: one element to fp32, and one fp32 value to an element (round to nearest even)
    to_float: str
    from_float: str
    #: two fp32 values to a pair (round to nearest even)
    pair_from_floats: str
    #: m16n8k16 tensor-core product with fp32 accumulators
    mma: str
    #: pack two fp32 values, or the 8-byte aligned pair at a pointer, into a fragment register
    pack_floats: str
    pack_float_pair: str
    #: pack two raw elements into a fragment register
    pack_raw: str
    #: a raw zero (padding of a fragment past a tile's edge)
    zero: str
    #: a fragment register's two values: their sum, and the sum of their squares
    frag_sum: str
    frag_square_sum: str
    #: a fragment register holding two ones (the B operand that sums a fold's rows on the
    #: tensor cores, Schedule.fold_mma)
    one_pair: str
    #: the ``BF`` argument of ``mf::wgmma_m64nNk16<N, BF>`` ("" for the default, fp16)
    wgmma_flag: str


FLOAT16: dict[DType, Float16Names] = {
    DType.F16: Float16Names(
        name="fp16", c_type="__half", pair_type="__half2", to_float="__half2float",
        from_float="__float2half_rn", pair_from_floats="__floats2half2_rn", mma="mf::mma_16816",
        pack_floats="mf::pack_half2", pack_float_pair="mf::pack_f2", pack_raw="mf::pack_h2",
        zero="mf::hzero()", frag_sum="mf::h2_sum", frag_square_sum="mf::h2_sq", one_pair="0x3C003C00u",
        wgmma_flag=""),
    DType.BF16: Float16Names(
        name="bf16", c_type="__nv_bfloat16", pair_type="__nv_bfloat162",
        to_float="__bfloat162float", from_float="__float2bfloat16_rn",
        pair_from_floats="__floats2bfloat162_rn", mma="mf::mma_16816_bf",
        pack_floats="mf::pack_bf2", pack_float_pair="mf::pack_bf2", pack_raw="mf::pack_b2",
        zero="mf::bzero()", frag_sum="mf::bf2_sum", frag_square_sum="mf::bf2_sq",
        one_pair="0x3F803F80u", wgmma_flag=", true"),
}

