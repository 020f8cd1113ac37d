"""Data types (the check's tolerances per dtype are in workbench.tolerance)."""

from __future__ import annotations

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
