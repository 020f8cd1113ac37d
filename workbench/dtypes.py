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


# Rounding in a K-term float32 accumulation (every matmul-like kernel here accumulates in fp32,
# half-precision inputs included). With unit-variance inputs (the ops' make_inputs) the partial
# sums grow like sqrt(k), so the summed rounding error has rms about u*K/sqrt(2), u = 2**-24
# (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., section 3.1; Higham and Mary,
# SIAM J. Sci. Comput. 41(5), 2019, probabilistic rounding error analysis). It does not shrink
# with |ref|, so it is an absolute term: without it an element near zero of a large-K product
# fails (H200, cuBLAS float32 IEEE at M = N = K = 16384: max error 4.7e-3, about 4.8*u*K, against
# an atol of 1.3e-3). ACCUMULATION_ULPS = 16 covers the largest of ~1e9 elements (~6 sigma of
# u*K/sqrt(2) = 4.2*u*K) with margin, and stays ~20x under TF32's error, which P9 must catch.
FP32_UNIT_ROUNDOFF = 2.0 ** -24
ACCUMULATION_ULPS = 16.0


def tolerance(dtype: DType, *, tf32: bool = False, reduction_length: int | None = None,
              scale: float = 1.0) -> Tolerance:
    """Tolerance for one check.

    dtype: the spec's dtype; tf32: float32 inputs computed in TF32 (rule 7, P9);
    reduction_length: K for matmul-like ops: rtol and atol grow with sqrt(K) (rule 6), and atol
      gains the fp32 accumulation term ACCUMULATION_ULPS * u * K (see above);
    scale: an implementation's declared extra factor (e.g. a fast-math variant), >= 1.
    """
    key = "tf32" if (tf32 and dtype == DType.float32) else dtype.value
    base = BASE_TOLERANCE[key]
    if not reduction_length or reduction_length <= 1:
        return Tolerance(base.atol * scale, base.rtol * scale)
    grow = math.sqrt(reduction_length)
    accumulation = ACCUMULATION_ULPS * FP32_UNIT_ROUNDOFF * reduction_length
    return Tolerance((base.atol * grow + accumulation) * scale, base.rtol * grow * scale)
