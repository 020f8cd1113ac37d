"""Data types and the correctness tolerances per dtype (MEASUREMENT.md, rule 6)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

import torch

from workbench.errors import UnknownNameError


class DType(StrEnum):
    """The dtypes a spec may name; readable in YAML and pytest ids."""

    float32 = "float32"
    float16 = "float16"
    bfloat16 = "bfloat16"

    @property
    def torch(self) -> torch.dtype:
        return _TORCH[self]

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return _TORCH[self].itemsize

    @classmethod
    def parse(cls, value: object) -> "DType":
        """Return the DType named by `value`; raises UnknownNameError naming the allowed ones."""
        if isinstance(value, DType):
            return value
        try:
            return cls(str(value))
        except ValueError:
            raise UnknownNameError("dtype", value, [d.value for d in cls]) from None


_TORCH = {DType.float32: torch.float32, DType.float16: torch.float16, DType.bfloat16: torch.bfloat16}


class Fp32Precision(StrEnum):
    """What a float32 matmul really computes with: IEEE fp32 or TF32 tensor cores (rule 7)."""

    ieee = "ieee"
    tf32 = "tf32"


@dataclass(frozen=True)
class Tolerance:
    """Elementwise pass rule |out - ref| <= atol + rtol * |ref|."""

    atol: float
    rtol: float


# MEASUREMENT.md rule 6: (atol, rtol) per dtype; "tf32" is float32 inputs on TF32 tensor cores.
BASE_TOLERANCE = {
    "float32": Tolerance(1e-5, 1.3e-6),
    "tf32": Tolerance(1e-3, 1e-3),
    "float16": Tolerance(1e-3, 1e-3),
    "bfloat16": Tolerance(1.6e-2, 1.6e-2),
}


def tolerance(dtype: DType, *, tf32: bool = False, reduction_length: int | None = None,
              scale: float = 1.0) -> Tolerance:
    """Tolerance for one check.

    dtype: the spec's dtype; tf32: float32 inputs computed in TF32 (rule 7, P9);
    reduction_length: K for matmul-like ops, whose error grows with sqrt(K) (rule 6);
    scale: an implementation's declared extra factor (e.g. a fast-math variant), >= 1.
    """
    key = "tf32" if (tf32 and dtype == DType.float32) else dtype.value
    base = BASE_TOLERANCE[key]
    grow = math.sqrt(reduction_length) if reduction_length and reduction_length > 1 else 1.0
    return Tolerance(base.atol * grow * scale, base.rtol * grow * scale)
