"""The one owner of torch's float32 matmul precision (MEASUREMENT.md rule 7).

The engine sets it once per row, before the build (engine/execute.py), so no implementation sets
it inside its timed call; the ceilings' matmul (engine/ceilings.py) and the test harness use the
same context manager. It applies to matmul-like ops only (`Op.matmul_like`): every other op runs
at "ieee", so that e.g. torch.cdist's internal matmul is checked at float32 tolerance.
torch >= 2.9 (pyproject pins torch >= 2.11): `torch.backends.cuda.matmul.fp32_precision`, never
the deprecated `allow_tf32`, which must not be mixed with it.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

PRECISIONS = ("ieee", "tf32")


def effective_fp32_precision(op: Any, setting: str) -> str:
    """The precision a row of `op` runs at: the session's setting ("ieee" | "tf32") for a
    matmul-like op, "ieee" otherwise."""
    return "tf32" if getattr(op, "matmul_like", False) and setting == "tf32" else "ieee"


def set_fp32_precision(precision: str) -> None:
    """Set torch's CUDA float32 matmul precision ("ieee" or "tf32"; anything else is "ieee")."""
    import torch

    torch.backends.cuda.matmul.fp32_precision = "tf32" if precision == "tf32" else "ieee"


@contextlib.contextmanager
def fp32_precision(precision: str) -> Iterator[None]:
    """Run the block at `precision` and restore the previous value, so nothing leaks."""
    import torch

    previous = torch.backends.cuda.matmul.fp32_precision
    set_fp32_precision(precision)
    try:
        yield
    finally:
        torch.backends.cuda.matmul.fp32_precision = previous
