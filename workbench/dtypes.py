"""Data types (the check's tolerances per dtype are in workbench.check.tolerance).

Importable without torch (the front end never imports it): `DType.torch` imports it on use.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING

from workbench.errors import UnknownNameError

if TYPE_CHECKING:
    import torch


class DType(StrEnum):
    """The dtypes a spec may name; readable in YAML and pytest ids."""

    float32 = "float32"
    float16 = "float16"
    bfloat16 = "bfloat16"
    # OCP 8-bit floats (OCP FP8 spec v1.0, 2023): e4m3fn (4 exponent bits, 3 mantissa bits, no inf,
    # max 448) and e5m2 (IEEE-like, inf, max 57344). Only ops that declare them take them
    # (STANDARD_DTYPES is every op's default), since they need fp8 tensor cores (sm_89+) or scales.
    float8_e4m3fn = "float8_e4m3fn"
    float8_e5m2 = "float8_e5m2"

    @property
    def torch(self) -> "torch.dtype":
        import torch

        return getattr(torch, self.value)

    @property
    def itemsize(self) -> int:
        """Bytes per element (IEEE 754 binary32 / binary16, bfloat16, fp8: 4, 2, 2, 1)."""
        return _ITEMSIZE[self]

    @property
    def is_fp8(self) -> bool:
        return self in FP8_DTYPES

    @classmethod
    def parse(cls, value: object) -> "DType":
        """Return the DType named by `value`; raises UnknownNameError naming the allowed ones."""
        if isinstance(value, DType):
            return value
        try:
            return cls(str(value))
        except ValueError:
            raise UnknownNameError("dtype", value, [d.value for d in cls]) from None


_ITEMSIZE = {DType.float32: 4, DType.float16: 2, DType.bfloat16: 2, DType.float8_e4m3fn: 1, DType.float8_e5m2: 1}
# The dtypes an op takes unless it declares its own (Op(dtypes=...)): fp8 only where declared.
STANDARD_DTYPES = (DType.float32, DType.float16, DType.bfloat16)
FP8_DTYPES = (DType.float8_e4m3fn, DType.float8_e5m2)


class Fp32Precision(StrEnum):
    """What a float32 matmul really computes with: IEEE fp32 or TF32 tensor cores (rule 7)."""

    ieee = "ieee"
    tf32 = "tf32"
