"""GeLU, tanh approximation (the lecture's first example, sections 2-5).

    y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))        x: (M, N) -> y: (M, N)

dtypes: float32, float16, bfloat16 (arithmetic in float32 inside the fused kernels).
Math variants: "tanh" (every implementation but pytorch_erf) and "erf",
y = 0.5 x (1 + erf(x / sqrt(2))), offered as `pytorch_erf` and checked against its own reference.
Source of the formula: Hendrycks & Gimpel, "Gaussian Error Linear Units" (2016), eq. for the
tanh approximation; the lecture writes it as `manual_gelu`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from workbench.cost import Cost
from workbench.cuda_build import BINDING_HEADERS, load_cuda
from workbench.check.inputs import large_and_subnormal, periodic_fill_, seeded_normal
from workbench.check.chunks import CheckChunks
from workbench.kernel_source import CudaSource, TritonLaunch, TritonSource, triton_index, triton_ptr
from workbench.registry import BuildContext, Op
from workbench.triton_support import jit, tl

from ._utils import MATRIX_TEST_SPECS, MatrixSpec, cdiv, elementwise_cost, elementwise_runner

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)  # 0.7978845608...; the lecture rounds it to 0.79788456
CU_FILE = Path(__file__).with_name("gelu.cu")


# -- spec ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GeluSpec(MatrixSpec):
    """x: (M, N) -> (M, N)."""


GELU = Op(
    "gelu", GeluSpec,
    description="GeLU (tanh approximation), elementwise over M x N",
    test_specs=MATRIX_TEST_SPECS,
    check_chunks=CheckChunks.flat(0),
)


# -- inputs and references -------------------------------------------------------------------
@GELU.inputs
def make_inputs(spec: GeluSpec, device: str, seed: int, out=None) -> tuple[torch.Tensor]:
    """One seeded standard-normal x of shape (M, N) in spec.dtype, scaled x3 to reach both tails
    (out: refill that tensor in place)."""
    return (seeded_normal((spec.M, spec.N), spec.dtype.torch, device, seed, 0, scale=3.0,
                          out=out[0] if out else None),)


@GELU.special_inputs
def special_inputs(spec: GeluSpec, inputs, seed: int) -> tuple[torch.Tensor]:
    """Seeded x with, every 16 elements: 0, -0, NaN, +-0.25 x the dtype's max (x^3 overflows
    inside the kernels; 2x does not), +-a subnormal, and -5.5, -8, -12 (the tail where 1 + tanh
    cancels). No inf: the tanh formula gives -inf * 0 = NaN at -inf (the float64 reference too),
    and torch 2.13's CPU F.gelu (erf form, `pytorch_erf`) returns NaN at +inf."""
    (x,) = make_inputs(spec, str(inputs[0].device), seed, out=inputs)
    big, tiny = large_and_subnormal(x.dtype, 0.25)
    periodic_fill_(x, [0.0, -0.0, float("nan"), big, -big, tiny, -tiny, -5.5, -8.0, -12.0], 16)
    return (x,)


@GELU.reference("tanh")
def reference_tanh(x: torch.Tensor) -> torch.Tensor:
    """float64 tanh-approximation GeLU."""
    return 0.5 * x * (1.0 + torch.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x.pow(3))))


@GELU.reference("erf")
def reference_erf(x: torch.Tensor) -> torch.Tensor:
    """float64 exact GeLU."""
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


# -- cost model ------------------------------------------------------------------------------
# FLOPs per element of the tanh form: x^3 (2 mul), 0.044715*x^3 (1), x + ... (1), * sqrt(2/pi) (1),
# tanh (counted as 1, as roofline models count transcendentals), 1 + (1), 0.5*x (1), final * (1).
FLOPS_PER_ELEMENT = 9


@GELU.cost_model
def cost(spec: GeluSpec) -> Cost:
    """x read once, y written once, FLOPS_PER_ELEMENT per element."""
    return elementwise_cost(spec, FLOPS_PER_ELEMENT)


def manual_bytes_moved(spec: GeluSpec) -> int:
    """Traffic of the nine eager kernels `manual_gelu` launches (one per operator):

    0.5*x (r1 w1), 0.044715*x (r1 w1), *x (r2 w1), *x (r2 w1), x+ (r2 w1), 0.79788456* (r1 w1),
    tanh (r1 w1), 1+ (r1 w1), final * (r2 w1): 13 reads + 9 writes = 22 tensors of M x N,
    against 2 for a fused kernel (11x the bytes).
    """
    return 22 * spec.M * spec.N * spec.dtype.itemsize


# -- implementations -------------------------------------------------------------------------
def manual_gelu(x: torch.Tensor) -> torch.Tensor:
    """The lecture's formula, operator by operator (each one an eager kernel)."""
    return 0.5 * x * (1 + torch.tanh(0.79788456 * (x + 0.044715 * x * x * x)))


@GELU.impl("manual", math="tanh", moved_bytes=manual_bytes_moved,
           tolerance_scale={"float16": 512.0, "bfloat16": 8192.0})
def build_manual(spec: GeluSpec, params, ctx: BuildContext):
    """Hand-written PyTorch formula: nine eager kernels.

    Tolerance factor (workbench.check.tolerance) 512 in float16, 8192 in bfloat16: each operator rounds
    to the dtype, so tanh(a) near -1 keeps ~8 bits and 1 + tanh(a) cancels: for x < -3 the
    output is off by up to ~u_dtype * |x| absolute (CPU: up to 176x the default float16
    tolerance; least passing factor 256 float16, 4096 bfloat16 over the test specs and tiny
    shapes, seeds 0-2, benchmarks/calibrate_check.py; x2 margin).
    """
    return manual_gelu


@GELU.impl("pytorch", math="tanh")
def build_pytorch(spec: GeluSpec, params, ctx: BuildContext):
    """F.gelu(x, approximate="tanh"): one fused ATen kernel."""
    return lambda x: F.gelu(x, approximate="tanh")


@GELU.impl("pytorch_erf", math="erf")
def build_pytorch_erf(spec: GeluSpec, params, ctx: BuildContext):
    """F.gelu(x): the exact (erf) GeLU, checked against the erf reference."""
    return F.gelu


@GELU.impl("compiled", math="tanh")
def build_compiled(spec: GeluSpec, params, ctx: BuildContext):
    """torch.compile(manual_gelu, dynamic=False): Inductor fuses the nine operators into one kernel."""
    return torch.compile(manual_gelu, dynamic=False)


# -- Triton ------------------------------------------------------------------------------------
@jit
def _gelu_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    """One program per BLOCK_SIZE elements; float32 arithmetic; masked tail; correct past 2^31
    elements."""
    # The block's start in 64 bits, added to the pointers once; the lanes and the mask stay
    # int32. Per-element int64 offsets cost up to 1.2% on the H200 (float32, 16384^2); this form
    # costs nothing measurable, and int32 offsets alone would wrap past 2^31 elements.
    start = tl.program_id(0).to(tl.int64) * BLOCK_SIZE
    lanes = tl.arange(0, BLOCK_SIZE)
    mask = lanes < tl.minimum(n_elements - start, BLOCK_SIZE).to(tl.int32)
    x = tl.load(x_ptr + start + lanes, mask=mask).to(tl.float32)
    # 0.5 x (1 + tanh a) = x sigmoid(2a) = x / (1 + 2^u), u = -2 log2(e) a: one exp2 and one
    # division, finite for every x (2^u = inf gives x / inf = -0), and portable across Triton
    # versions and the interpreter (P8: tanh moved between tl.math and libdevice). The form
    # 1 - 2 / (exp(2a) + 1) did the same math in 4 more operations: 93% of copy in float16
    # against 101% for this one (H200, 16384^2).
    # u = K1 x + K3 x^3 with K1 = -2 log2(e) sqrt(2/pi) = -2.3022..., K3 = 0.044715 K1.
    u = x * (x * x * -0.10294323958002350 + -2.3022081981443250)
    y = x / (1.0 + tl.exp2(u))
    tl.store(y_ptr + start + lanes, y.to(y_ptr.dtype.element_ty), mask=mask)


def _triton_launch(spec: GeluSpec, params) -> TritonLaunch:
    numel, block = spec.M * spec.N, int(params["BLOCK_SIZE"])
    ptr = triton_ptr(spec.dtype)
    return TritonLaunch(
        kernel=_gelu_kernel,
        signature={"x_ptr": ptr, "y_ptr": ptr, "n_elements": triton_index(numel), "BLOCK_SIZE": "constexpr"},
        constexprs={"BLOCK_SIZE": block},
        grid=(cdiv(numel, block), 1, 1),
        num_warps=int(params["num_warps"]),
        scalars={"n_elements": numel},
    )


@GELU.impl("triton", math="tanh", params={"BLOCK_SIZE": 1024, "num_warps": 4},
           source=TritonSource(_triton_launch, interpreter_dtypes=("float32", "float16", "bfloat16")))
def build_triton(spec: GeluSpec, params, ctx: BuildContext):
    """Triton: one program per BLOCK_SIZE elements, fused, float32 arithmetic."""
    return elementwise_runner(_triton_launch(spec, params))


# -- CUDA --------------------------------------------------------------------------------------
_CPP_BINDING = BINDING_HEADERS + r"""
extern "C" cudaError_t gelu_naive_f32(const void*, void*, int, cudaStream_t);
extern "C" cudaError_t gelu_naive_f16(const void*, void*, int, cudaStream_t);
extern "C" cudaError_t gelu_naive_bf16(const void*, void*, int, cudaStream_t);
extern "C" cudaError_t gelu_vec_f32(const void*, void*, int64_t, int, cudaStream_t);
extern "C" cudaError_t gelu_vec_f16(const void*, void*, int64_t, int, cudaStream_t);
extern "C" cudaError_t gelu_vec_bf16(const void*, void*, int64_t, int, cudaStream_t);

static void check_input(const at::Tensor& x) {
    TORCH_CHECK(x.is_cuda(), "gelu: x must be a CUDA tensor");
    TORCH_CHECK(x.is_contiguous(), "gelu: x must be contiguous");
}

at::Tensor gelu_naive(at::Tensor x) {
    check_input(x);
    WB_CHECK(x.numel() < (int64_t)1 << 31, "gelu_naive: numel must be < 2^31 (int indexing), got %lld", (long long)x.numel());
    const c10::cuda::CUDAGuard guard(x.device());
    auto y = at::empty_like(x);
    auto stream = c10::cuda::getCurrentCUDAStream();
    int n = (int)x.numel();
    cudaError_t err;
    switch (x.scalar_type()) {
        case at::kFloat: err = gelu_naive_f32(x.data_ptr(), y.data_ptr(), n, stream); break;
        case at::kHalf: err = gelu_naive_f16(x.data_ptr(), y.data_ptr(), n, stream); break;
        case at::kBFloat16: err = gelu_naive_bf16(x.data_ptr(), y.data_ptr(), n, stream); break;
        default: WB_CHECK(false, "gelu_naive: dtype must be float32, float16 or bfloat16, got %s", c10::toString(x.scalar_type()));
    }
    WB_CHECK(err == cudaSuccess, "gelu_naive launch failed: %s", cudaGetErrorString(err));
    return y;
}

at::Tensor gelu_vec(at::Tensor x) {
    check_input(x);
    const c10::cuda::CUDAGuard guard(x.device());
    auto y = at::empty_like(x);
    auto stream = c10::cuda::getCurrentCUDAStream();
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, x.get_device());
    cudaError_t err;
    switch (x.scalar_type()) {
        case at::kFloat: err = gelu_vec_f32(x.data_ptr(), y.data_ptr(), x.numel(), sms, stream); break;
        case at::kHalf: err = gelu_vec_f16(x.data_ptr(), y.data_ptr(), x.numel(), sms, stream); break;
        case at::kBFloat16: err = gelu_vec_bf16(x.data_ptr(), y.data_ptr(), x.numel(), sms, stream); break;
        default: WB_CHECK(false, "gelu: dtype must be float32, float16 or bfloat16, got %s", c10::toString(x.scalar_type()));
    }
    WB_CHECK(err == cudaSuccess, "gelu launch failed: %s", cudaGetErrorString(err));
    return y;
}
"""


def _load_module(ctx: BuildContext):
    return load_cuda("wb_gelu", CU_FILE, _CPP_BINDING, ["gelu_naive", "gelu_vec"], ctx.build_dir, binding="library")


def _naive_launch(spec: GeluSpec, params) -> tuple[tuple[int, ...], int]:
    return (cdiv(spec.M * spec.N, 1024), 1, 1), 1024


@GELU.impl("cuda_naive", math="tanh", source=CudaSource(CU_FILE, ("gelu_naive_kernel",), launch=_naive_launch))
def build_cuda_naive(spec: GeluSpec, params, ctx: BuildContext):
    """The lecture's CUDA kernel: one element per thread, 1024 threads, double-precision literals."""
    module = _load_module(ctx)
    return lambda x: module.gelu_naive(x.contiguous())


@GELU.impl("cuda", math="tanh", source=CudaSource(CU_FILE, ("gelu_vec_kernel",)))
def build_cuda(spec: GeluSpec, params, ctx: BuildContext):
    """CUDA C++: float arithmetic, 16-byte vector loads and stores, grid-stride loop."""
    module = _load_module(ctx)
    return lambda x: module.gelu_vec(x.contiguous())
