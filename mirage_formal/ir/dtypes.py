"""Tensor element types.

Storage types of device tensors. Arithmetic inside kernels accumulates in fp32; the float64
interpreter ignores the storage type except to pick a comparison tolerance. Imports nothing
of ours but the errors.
"""

from __future__ import annotations

import enum

from mirage_formal.errors import GraphError


class DType(enum.Enum):
    """A storage dtype; the value is the canonical short name used in every text form."""

    F16 = "f16"
    BF16 = "bf16"
    F32 = "f32"

    def __str__(self) -> str:
        return self.value

    @property
    def itemsize(self) -> int:
        return 4 if self is DType.F32 else 2

    @property
    def rtol(self) -> float:
        """Relative tolerance for comparing a result stored in this dtype with float64."""
        return {DType.F16: 2e-2, DType.BF16: 5e-2, DType.F32: 1e-4}[self]

    @property
    def c_type(self) -> str:
        return {DType.F16: "half", DType.BF16: "nv_bfloat16", DType.F32: "float"}[self]


_ALIASES = {
    "f16": DType.F16, "fp16": DType.F16, "float16": DType.F16, "half": DType.F16,
    "bf16": DType.BF16, "bfloat16": DType.BF16,
    "f32": DType.F32, "fp32": DType.F32, "float32": DType.F32, "float": DType.F32,
}


def as_dtype(x: DType | str) -> DType:
    """Accept a DType or any common spelling of one."""
    if isinstance(x, DType):
        return x
    try:
        return _ALIASES[str(x).lower()]
    except KeyError:
        raise GraphError(
            f"unknown dtype {x!r}: use one of f16, bf16, f32"
        ) from None


def promote(a: DType, b: DType) -> DType:
    """Result type of a binary op: equal types stay, anything else widens to f32."""
    return a if a is b else DType.F32


def tensor_core_type(*dtypes: DType) -> DType | None:
    """The 16-bit float type tensor cores multiply operands of ``dtypes`` in: their common type
    if it is fp16 or bf16, else None (mixed or fp32 operands stay off the tensor cores)."""
    first = dtypes[0]
    return first if first is not DType.F32 and all(d is first for d in dtypes) else None
