"""Matrix multiply (the lecture's section 7: tiling, grouped ordering, why GEMM is hard).

    C = A @ B        A: (M, K), B: (K, N) -> C: (M, N)

dtypes: float32, float16, bfloat16; every implementation accumulates in float32.
float32 follows the run's `fp32_precision` (MEASUREMENT.md rule 7): "ieee" or "tf32", set on
torch by the engine for the row (engine/precision.py, never inside the timed call) and on
Triton's `tl.dot(..., input_precision=...)` alike; the check's tolerance follows it (P9) and
grows with sqrt(K).
The Triton kernel is the Triton tutorial's tiled, GROUP_M-ordered GEMM (kernels/_gemm.py); the
same kernel, with a GeLU epilogue, is `matmul_gelu`'s fused implementation.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from workbench.cost import Cost
from workbench.cuda_build import BINDING_HEADERS, load_cuda
from workbench.dtypes import DType
from workbench.check.inputs import seeded_normal
from workbench.check.chunks import CheckChunks
from workbench.kernel_source import CudaSource, TritonLaunch, TritonSource
from workbench.registry import BuildContext, Op

from ._gemm import GEMM_TEST_SPECS, TRITON_PARAMS, GemmSpec, gemm_builder, gemm_cost, gemm_k, matmul_launch
from ._utils import cdiv

CU_FILE = Path(__file__).with_name("matmul.cu")


# -- spec ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MatmulSpec(GemmSpec):
    """A: (M, K) @ B: (K, N) -> (M, N)."""


MATMUL = Op(
    "matmul", MatmulSpec,
    description="Matrix multiply A (M x K) @ B (K x N)",
    test_specs=GEMM_TEST_SPECS,
    reduction_length=gemm_k,
    matmul_like=True,
    check_chunks=CheckChunks.rows(0),
)


# -- inputs and reference --------------------------------------------------------------------
@MATMUL.inputs
def make_inputs(spec: MatmulSpec, device: str, seed: int, out=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Seeded standard-normal A (M, K) and B (K, N) in spec.dtype (out: refill those)."""
    a, b = out or (None, None)
    return (seeded_normal((spec.M, spec.K), spec.dtype.torch, device, seed, 0, out=a),
            seeded_normal((spec.K, spec.N), spec.dtype.torch, device, seed, 1, out=b))


# Exponents of the special set's scaling (A * 2^s, B * 2^-s: the same products): float16's range
# is 2^-24..65504, so 2^8 keeps A finite and makes many entries of B subnormal.
SPECIAL_EXPONENT = {DType.float16: 8, DType.bfloat16: 40, DType.float32: 40}


def special_inputs(spec, inputs, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Seeded A * 2^s and B * 2^-s (large magnitudes in A, tiny and subnormal ones in B; the
    exact products are unchanged) with every 7th column of A set to -0."""
    a, b = make_inputs(spec, str(inputs[0].device), seed, out=inputs)
    shift = 2.0 ** SPECIAL_EXPONENT[spec.dtype]
    a.mul_(shift)
    b.mul_(1.0 / shift)
    a[:, ::7].fill_(-0.0)
    return a, b


MATMUL.special_inputs(special_inputs)


@MATMUL.reference()
def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """float64 A @ B."""
    return a @ b


# -- cost model ------------------------------------------------------------------------------
@MATMUL.cost_model
def cost(spec: MatmulSpec) -> Cost:
    """A and B read once, C written once, one multiply-add per (m, n, k)."""
    return gemm_cost(spec)


def naive_bytes_moved(spec: MatmulSpec) -> int:
    """Loads the one-thread-per-output kernel issues (lecture section 7: ~MKN elements each of A
    and B, served mostly by L1/L2, not HBM) plus C written once: the traffic tiling removes."""
    size = spec.dtype.itemsize
    return (
        2 * spec.M * spec.N * spec.K * size   # a row of A and a column of B per output element
        + spec.M * spec.N * size              # C, written once
    )


# -- implementations: PyTorch ----------------------------------------------------------------
@MATMUL.impl("pytorch")
def build_pytorch(spec: MatmulSpec, params, ctx: BuildContext):
    """torch.matmul: cuBLAS (cuBLASLt) on the GPU."""
    return torch.matmul


@MATMUL.impl("compiled")
def build_compiled(spec: MatmulSpec, params, ctx: BuildContext):
    """torch.compile(torch.matmul, dynamic=False): Inductor's choice (cuBLAS unless autotuned)."""
    return torch.compile(torch.matmul, dynamic=False)


# -- implementation: Triton, tiled with grouped program ordering (kernels/_gemm.py) ----------
def _triton_launch(spec: MatmulSpec, params, ctx: BuildContext | None = None) -> TritonLaunch:
    return matmul_launch(spec, params, ctx=ctx)


@MATMUL.impl("triton", params=TRITON_PARAMS,
             source=TritonSource(_triton_launch, interpreter_dtypes=("float32", "float16")))
def build_triton(spec: MatmulSpec, params, ctx: BuildContext):
    """Triton: in 16-bit dtypes the persistent TMA + wgmma kernel, its tile tuned on the device
    (kernels/_tma_gemm.py); otherwise the tutorial's tiled, GROUP_M-ordered kernel (kernels/_gemm.py)."""
    return gemm_builder(spec, params, ctx, "none", "matmul", make_inputs)


# -- implementations: CUDA -------------------------------------------------------------------
_CPP_BINDING = BINDING_HEADERS + r"""
extern "C" cudaError_t matmul_naive_f32(const void*, const void*, void*, int, int, int, cudaStream_t);
extern "C" cudaError_t matmul_tiled_f32(const void*, const void*, void*, int, int, int, cudaStream_t);
extern "C" cudaError_t matmul_tiled_f16(const void*, const void*, void*, int, int, int, cudaStream_t);
extern "C" cudaError_t matmul_tiled_bf16(const void*, const void*, void*, int, int, int, cudaStream_t);

static void check_inputs(const at::Tensor& a, const at::Tensor& b, const char* name) {
    WB_CHECK(a.is_cuda() && b.is_cuda(), "%s: A and B must be CUDA tensors", name);
    WB_CHECK(a.dim() == 2 && b.dim() == 2, "%s: A and B must be 2-D", name);
    WB_CHECK(a.is_contiguous() && b.is_contiguous(), "%s: A and B must be contiguous", name);
    WB_CHECK(a.size(1) == b.size(0), "%s: inner dimensions differ: A is %s, B is %s", name, wb_sizes(a).c, wb_sizes(b).c);
    WB_CHECK(a.scalar_type() == b.scalar_type(), "%s: dtypes differ", name);
    WB_CHECK(a.device() == b.device(), "%s: A and B must be on the same device", name);
    WB_CHECK(a.size(0) < (1 << 22) && a.size(1) < ((int64_t)1 << 31) && b.size(1) < ((int64_t)1 << 31),
             "%s: M must be < 2^22 (grid rows) and N, K < 2^31", name);
}

at::Tensor matmul_naive(at::Tensor a, at::Tensor b) {
    check_inputs(a, b, "matmul_naive");
    WB_CHECK(a.scalar_type() == at::kFloat, "matmul_naive: float32 only, got %s", c10::toString(a.scalar_type()));
    TORCH_CHECK(a.size(0) < 65535 * 8, "matmul_naive: M must be < 524280 (grid.y of 8-row blocks)");
    const c10::cuda::CUDAGuard guard(a.device());
    auto c = at::empty({a.size(0), b.size(1)}, a.options());
    auto err = matmul_naive_f32(a.data_ptr(), b.data_ptr(), c.data_ptr(), (int)a.size(0), (int)b.size(1),
                                (int)a.size(1), c10::cuda::getCurrentCUDAStream());
    WB_CHECK(err == cudaSuccess, "matmul_naive launch failed: %s", cudaGetErrorString(err));
    return c;
}

at::Tensor matmul_tiled(at::Tensor a, at::Tensor b) {
    check_inputs(a, b, "matmul_tiled");
    const c10::cuda::CUDAGuard guard(a.device());
    auto c = at::empty({a.size(0), b.size(1)}, a.options());
    auto stream = c10::cuda::getCurrentCUDAStream();
    int m = (int)a.size(0), n = (int)b.size(1), k = (int)a.size(1);
    cudaError_t err;
    switch (a.scalar_type()) {
        case at::kFloat: err = matmul_tiled_f32(a.data_ptr(), b.data_ptr(), c.data_ptr(), m, n, k, stream); break;
        case at::kHalf: err = matmul_tiled_f16(a.data_ptr(), b.data_ptr(), c.data_ptr(), m, n, k, stream); break;
        case at::kBFloat16: err = matmul_tiled_bf16(a.data_ptr(), b.data_ptr(), c.data_ptr(), m, n, k, stream); break;
        default: WB_CHECK(false, "matmul_tiled: dtype must be float32, float16 or bfloat16, got %s", c10::toString(a.scalar_type()));
    }
    WB_CHECK(err == cudaSuccess, "matmul_tiled launch failed: %s", cudaGetErrorString(err));
    return c;
}
"""


def _load_module(ctx: BuildContext):
    return load_cuda("wb_matmul", CU_FILE, _CPP_BINDING, ["matmul_naive", "matmul_tiled"], ctx.build_dir, binding="library")


def _naive_launch(spec: MatmulSpec, params) -> tuple[tuple[int, ...], int]:
    return (cdiv(spec.N, 32), cdiv(spec.M, 8), 1), 256


def _tiled_launch(spec: MatmulSpec, params) -> tuple[tuple[int, ...], int]:
    return (cdiv(spec.N, 128), cdiv(spec.M, 128), 1), 256


@MATMUL.impl("cuda_naive", dtypes=["float32"], moved_bytes=naive_bytes_moved,
             source=CudaSource(CU_FILE, ("matmul_naive_kernel",), launch=_naive_launch))
def build_cuda_naive(spec: MatmulSpec, params, ctx: BuildContext):
    """CUDA C++, the lecture's triple loop: one thread per output, float32, IEEE FMA."""
    module = _load_module(ctx)
    return lambda a, b: module.matmul_naive(a.contiguous(), b.contiguous())


@MATMUL.impl("cuda", source=CudaSource(CU_FILE, ("matmul_tiled_kernel",), launch=_tiled_launch))
def build_cuda(spec: MatmulSpec, params, ctx: BuildContext):
    """CUDA C++: 128x128 shared-memory tiles, 8x8 outputs per thread, float32 FMA (no tensor cores)."""
    module = _load_module(ctx)
    return lambda a, b: module.matmul_tiled(a.contiguous(), b.contiguous())
