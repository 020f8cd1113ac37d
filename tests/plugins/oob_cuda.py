"""Test-only op `oob` for the GPU isolation evidence (loaded with --kernels; benchmarks/stages/engine.py).

    y = x + 1        x: (N,) -> y: (N,)        float32

cuda: a kernel that writes far out of bounds (an illegal memory access that poisons the CUDA
context of its process); pytorch: correct, and must still run in a fresh child afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from workbench.cost import Cost
from workbench.cuda_build import load_cuda
from workbench.dtypes import DType
from workbench.kernel_source import CudaSource
from workbench.registry import Op
from workbench.spec import Spec

CU_FILE = Path(__file__).with_name("oob.cu")


@dataclass(frozen=True)
class OobSpec(Spec):
    """x: (N,) -> (N,)."""

    N: int = 1 << 20
    dtype: DType = DType.float32


OOB = Op("oob", OobSpec, description="x + 1 with an out-of-bounds CUDA kernel", dtypes=["float32"])


@OOB.inputs
def make_inputs(spec: OobSpec, device: str, seed: int):
    gen = torch.Generator(device=device).manual_seed(seed)
    return (torch.randn(spec.N, generator=gen, device=device, dtype=torch.float32),)


@OOB.reference("default")
def reference(x):
    return x + 1.0


@OOB.cost_model
def cost(spec: OobSpec) -> Cost:
    return Cost(bytes_read=4 * spec.N, bytes_written=4 * spec.N, flops=spec.N)  # read x, write y, one add


_BINDING = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
extern "C" cudaError_t oob_add_one(const void*, void*, long long, cudaStream_t);

torch::Tensor add_one_oob(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kFloat && x.is_contiguous(), "x: contiguous float32 CUDA");
    auto y = torch::empty_like(x);
    cudaError_t err = oob_add_one(x.data_ptr(), y.data_ptr(), x.numel(), at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == cudaSuccess, "oob launch failed: ", cudaGetErrorString(err));
    return y;
}
"""


@OOB.impl("cuda", needs=["cuda_device", "nvcc"], cuda_source=CudaSource(CU_FILE, ("oob_add_one_kernel",)))
def build_cuda(spec, params, ctx):
    """Writes 4 TiB past the output: an illegal memory access."""
    module = load_cuda("wb_oob", CU_FILE, _BINDING, ["add_one_oob"], ctx.build_dir)
    return module.add_one_oob


@OOB.impl("pytorch")
def build_pytorch(spec, params, ctx):
    """x + 1."""
    return lambda x: x + 1.0
