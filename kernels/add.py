"""Elementwise add, the lecture's first profiled op (section 1.3: one memory-bound kernel).

    z = x + y        x, y: (M, N) -> z: (M, N)

dtypes: float32, float16, bfloat16 (`cupy`: float32). The fused kernels add in float32 and
round once to the dtype, which is the correctly rounded sum (the same result as a native add in
that dtype). `cupy` runs a CUDA kernel through CuPy's RawKernel instead of load_inline
(workbench/backends/cupy.py): the same kind of kernel, another launch path.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from workbench.backends.cupy import raw_kernel
from workbench.cost import Cost
from workbench.cuda_build import BINDING_HEADERS, load_cuda
from workbench.check.inputs import large_and_subnormal, periodic_fill_, seeded_normal
from workbench.check.chunks import CheckChunks
from workbench.kernel_source import CudaSource, TritonLaunch, TritonSource, triton_index, triton_ptr
from workbench.registry import BuildContext, Op
from workbench.triton_support import jit, tl

from ._utils import MATRIX_TEST_SPECS, MatrixSpec, cdiv, elementwise_cost, elementwise_runner

CU_FILE = Path(__file__).with_name("add.cu")
CUPY_CU_FILE = Path(__file__).with_name("add_cupy.cu")


# -- spec ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AddSpec(MatrixSpec):
    """x, y: (M, N) -> (M, N)."""


ADD = Op(
    "add", AddSpec,
    description="Elementwise x + y over M x N",
    test_specs=MATRIX_TEST_SPECS,
    check_chunks=CheckChunks.flat(0, 1),
)


# -- inputs and reference --------------------------------------------------------------------
@ADD.inputs
def make_inputs(spec: AddSpec, device: str, seed: int, out=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Two seeded standard-normal tensors of shape (M, N) in spec.dtype (out: refill those)."""
    x, y = out or (None, None)
    return (seeded_normal((spec.M, spec.N), spec.dtype.torch, device, seed, 0, out=x),
            seeded_normal((spec.M, spec.N), spec.dtype.torch, device, seed, 1, out=y))


@ADD.special_inputs
def special_inputs(spec: AddSpec, inputs, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Seeded x, y with, every 16 elements, pairs whose sum overflows to +inf, cancels to 0,
    is -0 (-0 + -0), inf + finite, -inf + -inf, inf + -inf (NaN), NaN + finite, two subnormals."""
    x, y = make_inputs(spec, str(inputs[0].device), seed, out=inputs)
    big, tiny = large_and_subnormal(x.dtype)
    inf, nan = float("inf"), float("nan")
    periodic_fill_(x, [big, -big, 0.0, -0.0, inf, -inf, inf, nan, tiny, 1.0], 16)
    periodic_fill_(y, [big, big, -0.0, -0.0, 1.0, -inf, -inf, 2.0, tiny, -1.0], 16)
    return x, y


@ADD.reference()
def reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """float64 x + y."""
    return x + y


# -- cost model ------------------------------------------------------------------------------
@ADD.cost_model
def cost(spec: AddSpec) -> Cost:
    """x and y read once, z written once, one add per element."""
    return elementwise_cost(spec, flops_per_element=1, inputs=2)


# -- implementations -------------------------------------------------------------------------
def add_expr(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The built-in form, as written in a model (there is no separate manual form of one add)."""
    return x + y


@ADD.impl("pytorch")
def build_pytorch(spec: AddSpec, params, ctx: BuildContext):
    """torch.add: one ATen elementwise kernel."""
    return torch.add


@ADD.impl("compiled")
def build_compiled(spec: AddSpec, params, ctx: BuildContext):
    """torch.compile(x + y, dynamic=False): one Inductor-generated kernel."""
    return torch.compile(add_expr, dynamic=False)


# -- Triton ------------------------------------------------------------------------------------
@jit
def _add_kernel(x_ptr, y_ptr, z_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    """One program per BLOCK_SIZE elements; masked tail; correct past 2^31 elements."""
    # The block's start in 64 bits, moved into the pointers once; the lanes stay int32 (see
    # kernels/gelu.py: per-element int64 offsets cost up to 1% on the H200, this form nothing).
    start = tl.program_id(0).to(tl.int64) * BLOCK_SIZE
    lanes = tl.arange(0, BLOCK_SIZE)
    mask = lanes < tl.minimum(n_elements - start, BLOCK_SIZE).to(tl.int32)
    # Added in float32 and rounded once: the correctly rounded sum in every dtype, and the
    # Triton interpreter has no bfloat16 arithmetic (numpy), only conversions.
    x = tl.load(x_ptr + start + lanes, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + start + lanes, mask=mask).to(tl.float32)
    tl.store(z_ptr + start + lanes, (x + y).to(z_ptr.dtype.element_ty), mask=mask)


def _triton_launch(spec: AddSpec, params) -> TritonLaunch:
    numel, block = spec.M * spec.N, int(params["BLOCK_SIZE"])
    ptr = triton_ptr(spec.dtype)
    return TritonLaunch(
        kernel=_add_kernel,
        signature={"x_ptr": ptr, "y_ptr": ptr, "z_ptr": ptr, "n_elements": triton_index(numel),
                   "BLOCK_SIZE": "constexpr"},
        constexprs={"BLOCK_SIZE": block},
        grid=(cdiv(numel, block), 1, 1),
        num_warps=int(params["num_warps"]),
        scalars={"n_elements": numel},
    )


@ADD.impl("triton", params={"BLOCK_SIZE": 1024, "num_warps": 4}, source=TritonSource(_triton_launch))
def build_triton(spec: AddSpec, params, ctx: BuildContext):
    """Triton: one program per BLOCK_SIZE elements."""
    return elementwise_runner(_triton_launch(spec, params))


# -- CUDA --------------------------------------------------------------------------------------
_CPP_BINDING = BINDING_HEADERS + r"""
extern "C" cudaError_t add_f32(const void*, const void*, void*, int64_t, cudaStream_t);
extern "C" cudaError_t add_f16(const void*, const void*, void*, int64_t, cudaStream_t);
extern "C" cudaError_t add_bf16(const void*, const void*, void*, int64_t, cudaStream_t);

at::Tensor add_vec(at::Tensor x, at::Tensor y) {
    TORCH_CHECK(x.is_cuda() && y.is_cuda(), "add: x and y must be CUDA tensors");
    TORCH_CHECK(x.is_contiguous() && y.is_contiguous(), "add: x and y must be contiguous");
    WB_CHECK(x.sizes() == y.sizes(), "add: shapes differ: %s vs %s", wb_sizes(x).c, wb_sizes(y).c);
    WB_CHECK(x.scalar_type() == y.scalar_type(), "add: dtypes differ: %s vs %s", c10::toString(x.scalar_type()),
             c10::toString(y.scalar_type()));
    TORCH_CHECK(x.device() == y.device(), "add: x and y must be on the same device");
    const c10::cuda::CUDAGuard guard(x.device());
    auto z = at::empty_like(x);
    auto stream = c10::cuda::getCurrentCUDAStream();
    cudaError_t err;
    switch (x.scalar_type()) {
        case at::kFloat: err = add_f32(x.data_ptr(), y.data_ptr(), z.data_ptr(), x.numel(), stream); break;
        case at::kHalf: err = add_f16(x.data_ptr(), y.data_ptr(), z.data_ptr(), x.numel(), stream); break;
        case at::kBFloat16: err = add_bf16(x.data_ptr(), y.data_ptr(), z.data_ptr(), x.numel(), stream); break;
        default: WB_CHECK(false, "add: dtype must be float32, float16 or bfloat16, got %s", c10::toString(x.scalar_type()));
    }
    WB_CHECK(err == cudaSuccess, "add launch failed: %s", cudaGetErrorString(err));
    return z;
}
"""


@ADD.impl("cuda", source=CudaSource(CU_FILE, ("add_vec_kernel",)))
def build_cuda(spec: AddSpec, params, ctx: BuildContext):
    """CUDA C++: 16-byte vector loads and stores, one pack of each input per thread, int64 indexing."""
    module = load_cuda("wb_add", CU_FILE, _CPP_BINDING, ["add_vec"], ctx.build_dir, binding="library")
    return lambda x, y: module.add_vec(x.contiguous(), y.contiguous())


# -- CuPy: the same float4 add, compiled by NVRTC and launched by CuPy -------------------------
CUPY_THREADS = 256


def _cupy_launch(spec: AddSpec, params) -> tuple[tuple[int, ...], int]:
    """One float4 pack per thread per step of the grid-stride loop, one pass over the tensor."""
    packs = max(1, spec.M * spec.N // 4)
    return (min(cdiv(packs, CUPY_THREADS), 2**31 - 1), 1, 1), CUPY_THREADS


CUPY_SOURCE = CudaSource(CUPY_CU_FILE, ("add_f32_kernel",), launch=_cupy_launch)


@ADD.impl("cupy", dtypes=["float32"], source=CUPY_SOURCE)
def build_cupy(spec: AddSpec, params, ctx: BuildContext):
    """CuPy RawKernel (NVRTC): 16-byte float4 loads and stores, grid-stride, on torch's stream."""
    launch = raw_kernel(CUPY_SOURCE, "add_f32_kernel")
    grid, threads = _cupy_launch(spec, params)

    def run(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x, y = x.contiguous(), y.contiguous()
        z = torch.empty_like(x)
        aligned = (x.data_ptr() | y.data_ptr() | z.data_ptr()) % 16 == 0
        launch(grid, (threads, 1, 1), x, y, z, x.numel(), aligned)
        return z
    return run
