"""What the op files share (the way Liger-Kernel keeps one ops/utils.py): the common spec shape
and test shapes, the elementwise cost, ceiling division, the num_warps rule, and the timed
callables around a Triton launch (seeded inputs: workbench.check.inputs.seeded_normal).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from workbench.cost import Cost
from workbench.dtypes import DType
from workbench.errors import LimitError
from workbench.kernel_source import TritonLaunch
from workbench.spec import Spec


@dataclass(frozen=True)
class MatrixSpec(Spec):
    """An (M, N) matrix in `dtype`; an op subclasses it with its own docstring (and defaults)."""

    M: int = 16384
    N: int = 16384
    dtype: DType = DType.float32


# Awkward (M, N) shapes every matrix op is tested at: one row of 1000 columns (not a multiple of a
# block), a square 257 (one past a power of two), 4097 columns (one past a block of 4096).
MATRIX_TEST_SPECS = ({"M": 1, "N": 1000}, {"M": 257, "N": 257}, {"M": 3, "N": 4097})


def elementwise_cost(spec: MatrixSpec, flops_per_element: int, inputs: int = 1) -> Cost:
    """An elementwise or row-wise op over (M, N): each input read once, the output written once."""
    numel = spec.M * spec.N
    return Cost(
        bytes_read=inputs * numel * spec.dtype.itemsize,   # every input, read once
        bytes_written=numel * spec.dtype.itemsize,         # the output, written once
        flops=flops_per_element * numel,
    )


def cdiv(a: int, b: int) -> int:
    """Ceiling division (triton.cdiv): programs or blocks needed to cover a elements b at a time."""
    return -(-a // b)


def num_warps_for(block_size: int) -> int:
    """Warps for a block that holds one row of block_size elements: more warps for longer rows
    keep the values per thread bounded (Triton's fused-softmax tutorial)."""
    return 4 if block_size < 2048 else 8 if block_size < 4096 else 16


def elementwise_runner(launch: TritonLaunch) -> Callable[..., torch.Tensor]:
    """The timed callable of an elementwise kernel f(in_ptr..., out_ptr, ...): the inputs made
    contiguous, one output like the first, one `launch.run`."""
    def run(*inputs: torch.Tensor) -> torch.Tensor:
        inputs = tuple(x.contiguous() for x in inputs)
        out = torch.empty_like(inputs[0])
        launch.run(*inputs, out)
        return out
    return run


def matrix_runner(launch: TritonLaunch, rows: int, cols: int, out_dtype: torch.dtype | None = None,
                  where: str = "triton") -> Callable[..., torch.Tensor]:
    """The timed callable of a kernel f(in_ptr..., out_ptr, ...) writing a (rows, cols) matrix:
    inputs made contiguous, one `launch.run`. Triton's OutOfResources (shared memory over the
    device's limit) becomes a LimitError naming the knobs."""
    def run(*inputs: torch.Tensor) -> torch.Tensor:
        inputs = tuple(x.contiguous() for x in inputs)
        out = torch.empty((rows, cols), dtype=out_dtype or inputs[0].dtype, device=inputs[0].device)
        try:
            launch.run(*inputs, out)
        except Exception as exc:
            if type(exc).__name__ == "OutOfResources":
                raise LimitError(f"{where}: {exc}; lower BLOCK_K, num_stages or the tile") from exc
            raise
        return out
    return run
