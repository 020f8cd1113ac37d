"""Test plugin: `triton_int32`, a float32-accumulating Triton add whose offsets are int32, the
classic bug past 2^31 elements (issue 14). Past 2^31 the offsets wrap negative; the mask also
drops negative offsets, so those outputs are never written (a zero-filled output shows them)
instead of faulting: the check must fail at a first bad index >= 2^31. Below 2^31 it is right.
Loaded by benchmarks/stages/check.py (--kernels tests/plugins/int32_offsets.py)."""

from __future__ import annotations

import torch

from workbench.registry import REGISTRY
from workbench.triton_support import jit, tl

ADD = REGISTRY.op("add")
BLOCK_SIZE = 1024


@jit
def _add_int32_kernel(x_ptr, y_ptr, z_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)                                # int32, never widened: the bug
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)  # wraps past 2^31
    mask = (offsets >= 0) & (offsets < n_elements)
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offsets, mask=mask).to(tl.float32)
    tl.store(z_ptr + offsets, (x + y).to(z_ptr.dtype.element_ty), mask=mask)


@ADD.impl("triton_int32", needs=["triton"])
def build_triton_int32(spec, params, ctx):
    """Triton add with int32 offsets (wrong past 2^31 elements, on purpose)."""
    def run(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        z = torch.zeros_like(x)
        n = x.numel()
        _add_int32_kernel[(triton_cdiv(n, BLOCK_SIZE),)](x, y, z, n, BLOCK_SIZE=BLOCK_SIZE)
        return z
    return run


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)
