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

    @property
    def torch(self) -> "torch.dtype":
        import torch

        return getattr(torch, self.value)

    @property
    def itemsize(self) -> int:
        """Bytes per element (IEEE 754 binary32 / binary16, bfloat16: 4, 2, 2)."""
        return _ITEMSIZE[self]

    @classmethod
    def parse(cls, value: object) -> "DType":
        """Return the DType named by `value`; raises UnknownNameError naming the allowed ones."""
        if isinstance(value, DType):
            return value
        try:
            return cls(str(value))
        except ValueError:
            raise UnknownNameError("dtype", value, [d.value for d in cls]) from None


_ITEMSIZE = {DType.float32: 4, DType.float16: 2, DType.bfloat16: 2}


class Fp32Precision(StrEnum):
    """What a float32 matmul really computes with: IEEE fp32 or TF32 tensor cores (rule 7)."""

    ieee = "ieee"
    tf32 = "tf32"
