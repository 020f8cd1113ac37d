"""Benchmark your own kernel: a plugin with a new op and one more GeLU implementation.

    workbench --list --kernels tests/plugins/my_ops.py

It uses the same API as the shipped kernels (kernels/gelu.py reads the same way):
- a new op `relu`, y = max(x, 0), x: (M, N) -> (M, N), with the built-in form and a Triton kernel;
- `manual_erf` on the shipped `gelu`: the exact GeLU written by hand, checked against gelu's
  "erf" reference (the tanh form would fail that check, and should).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from workbench.cost import Cost
from workbench.dtypes import DType
from workbench.kernel_source import TritonLaunch, TritonSource, triton_ptr
from workbench.registry import REGISTRY, Op
from workbench.spec import Spec
from workbench.triton_support import jit, tl


# -- a new op: spec, inputs, reference, cost model, implementations ---------------------------
@dataclass(frozen=True)
class ReluSpec(Spec):
    """x: (M, N) -> (M, N)."""

    M: int = 4096
    N: int = 4096
    dtype: DType = DType.float32


RELU = Op("relu", ReluSpec, description="ReLU, elementwise over M x N",
          test_specs=[{"M": 1, "N": 1000}, {"M": 3, "N": 4097}])


@RELU.inputs
def make_inputs(spec: ReluSpec, device: str, seed: int) -> tuple[torch.Tensor]:
    gen = torch.Generator(device=device).manual_seed(seed)
    return (torch.randn(spec.M, spec.N, generator=gen, device=device).to(spec.dtype.torch),)


@RELU.reference()
def reference(x: torch.Tensor) -> torch.Tensor:
    return x.clamp_min(0.0)


@RELU.cost_model
def cost(spec: ReluSpec) -> Cost:
    numel = spec.M * spec.N
    return Cost(bytes_read=numel * spec.dtype.itemsize,     # x, read once
                bytes_written=numel * spec.dtype.itemsize,  # y, written once
                flops=numel)                                # one max per element


@RELU.impl("pytorch")
def build_pytorch(spec: ReluSpec, params, ctx):
    """torch.relu: one ATen kernel."""
    return torch.relu


@jit
def _relu_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    tl.store(y_ptr + offsets, tl.maximum(x, 0.0).to(y_ptr.dtype.element_ty), mask=mask)


def _relu_launch(spec: ReluSpec, params) -> TritonLaunch:
    """The one launch: the builder runs it, the PTX view compiles it ahead of time."""
    numel, block = spec.M * spec.N, params["BLOCK_SIZE"]
    return TritonLaunch(kernel=_relu_kernel, grid=(-(-numel // block), 1, 1),
                        signature={"x_ptr": triton_ptr(spec.dtype), "y_ptr": triton_ptr(spec.dtype),
                                   "n_elements": "i32", "BLOCK_SIZE": "constexpr"},
                        constexprs={"BLOCK_SIZE": block}, scalars={"n_elements": numel})


@RELU.impl("triton", params={"BLOCK_SIZE": 1024}, source=TritonSource(_relu_launch))
def build_triton(spec: ReluSpec, params, ctx):
    """Triton: one program per BLOCK_SIZE elements."""
    launch = _relu_launch(spec, params)

    def run(x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        launch.run(x, y)
        return y
    return run


# -- one more implementation of a shipped op ---------------------------------------------------
GELU = REGISTRY.op("gelu")


@GELU.impl("manual_erf", math="erf", tolerance_scale={"float16": 512.0, "bfloat16": 4096.0})
def build_manual_erf(spec, params, ctx):
    """Exact GeLU by hand, 0.5 x (1 + erf(x / sqrt 2)): checked against the erf reference.

    Tolerance factor 512 (float16) and 4096 (bfloat16), as the shipped `manual`: each operator
    rounds to the dtype, and 1 + erf cancels for x << 0 (workbench.check.tolerance)."""
    return lambda x: 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
