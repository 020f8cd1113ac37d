"""Matrix multiply (the lecture's section 7: tiling, grouped ordering, why GEMM is hard).

    C = A @ B        A: (M, K), B: (K, N) -> C: (M, N)

dtypes: float32, float16, bfloat16; every implementation accumulates in float32.
float32 follows the run's `fp32_precision` (MEASUREMENT.md rule 7): "ieee" or "tf32", set on
torch (`torch.backends.cuda.matmul.fp32_precision`, only while the implementation runs) and on
Triton's `tl.dot(..., input_precision=...)` alike; the check's tolerance follows it (P9) and
grows with sqrt(K).
The Triton kernel is the Triton tutorial's ("Matrix Multiplication"): BLOCK_M x BLOCK_N tiles,
K in BLOCK_K steps, and programs ordered in groups of GROUP_M tile rows so that neighbouring
programs share A and B tiles in L2 (GROUP_M = 1 is plain row-major order). The same kernel,
with a GeLU epilogue, is `matmul_gelu`'s fused implementation.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping

import torch

from workbench.cost import Cost
from workbench.cuda_build import load_cuda
from workbench.dtypes import DType
from workbench.errors import LimitError
from workbench.inputs import seeded_normal
from workbench.kernel_source import CudaSource, TritonLaunch, triton_ptr
from workbench.chunking import CheckChunks
from workbench.registry import BuildContext, Op
from workbench.spec import Spec
from workbench.triton_support import jit, tl

from ._autotune import attach, can_tune, choose
from ._tma_gemm import TMA_VERSION, _tile_ids, candidate_configs, sm_count, tma_launch, tma_runner, tma_supported

# Tuning times the candidates on a second, seeded A and B: only while each tensor is at most 2^28
# elements (8192^3 is 2^26); past that the first candidate runs untimed.
TUNE_MAX_ELEMENTS = 2**28

CU_FILE = Path(__file__).with_name("matmul.cu")
# Shared memory one block may opt in to on sm_90 (H100/H200): 227 KiB (CUDA C Programming Guide,
# "Compute Capabilities", table of technical specifications). Used where no device can be asked.
SM90_MAX_SHARED_BYTES = 232448


# -- spec ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MatmulSpec(Spec):
    """A: (M, K) @ B: (K, N) -> (M, N)."""

    M: int = 4096
    N: int = 4096
    K: int = 4096
    dtype: DType = DType.bfloat16


MATMUL = Op(
    "matmul", MatmulSpec,
    description="Matrix multiply A (M x K) @ B (K x N)",
    test_specs=[{"M": 257, "N": 257, "K": 257}, {"M": 1, "N": 1000, "K": 64},
                {"M": 100, "N": 130, "K": 4097}],
    reduction_length=lambda spec: spec.K,
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
    size = spec.dtype.itemsize
    return Cost(
        bytes_read=(spec.M * spec.K + spec.K * spec.N) * size,  # A and B, each read once
        bytes_written=spec.M * spec.N * size,                    # C, written once
        flops=2 * spec.M * spec.N * spec.K,                      # one multiply-add per (m, n, k)
    )


def naive_bytes_moved(spec: MatmulSpec) -> int:
    """Loads the one-thread-per-output kernel issues (lecture section 7: ~MKN elements each of A
    and B, served mostly by L1/L2, not HBM) plus C written once: the traffic tiling removes."""
    size = spec.dtype.itemsize
    return (
        2 * spec.M * spec.N * spec.K * size   # a row of A and a column of B per output element
        + spec.M * spec.N * size              # C, written once
    )


# -- precision -------------------------------------------------------------------------------
@contextlib.contextmanager
def fp32_precision(precision: str) -> Iterator[None]:
    """Run the block with torch's float32 matmul precision set to "ieee" or "tf32" (rule 7).

    Sets `torch.backends.cuda.matmul.fp32_precision` (never the deprecated allow_tf32, which
    must not be mixed with it) and restores the previous value, so nothing leaks past the call.
    """
    backend = torch.backends.cuda.matmul
    previous = backend.fp32_precision
    backend.fp32_precision = precision
    try:
        yield
    finally:
        backend.fp32_precision = previous


def with_fp32_precision(fn, precision: str):
    """`fn` wrapped so that every call runs under `fp32_precision(precision)`."""
    def run(*args):
        with fp32_precision(precision):
            return fn(*args)
    return run


# -- implementations: PyTorch ----------------------------------------------------------------
@MATMUL.impl("pytorch")
def build_pytorch(spec: MatmulSpec, params, ctx: BuildContext):
    """torch.matmul: cuBLAS (cuBLASLt) on the GPU."""
    return with_fp32_precision(torch.matmul, ctx.fp32_precision)


@MATMUL.impl("compiled")
def build_compiled(spec: MatmulSpec, params, ctx: BuildContext):
    """torch.compile(torch.matmul, dynamic=False): Inductor's choice (cuBLAS unless autotuned)."""
    return with_fp32_precision(torch.compile(torch.matmul, dynamic=False), ctx.fp32_precision)


# -- implementation: Triton, tiled with grouped program ordering ------------------------------
@jit
def _gelu_tanh(x):
    """GeLU, tanh form, on a float32 tile (as kernels/gelu.py: tanh a = 1 - 2 / (exp(2a) + 1))."""
    a = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    return 0.5 * x * (2.0 - 2.0 / (tl.exp(2.0 * a) + 1.0))


@jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                   stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   GROUP_M: tl.constexpr, INPUT_PRECISION: tl.constexpr, ACTIVATION: tl.constexpr,
                   INDEX_64: tl.constexpr = False):
    """One program per BLOCK_M x BLOCK_N tile of C; float32 accumulator; optional GeLU epilogue.
    INDEX_64: row and column offsets in int64, for tensors of 2^31 elements or more (the launch
    sets it only there: on the H200 at 8192^3 bfloat16 it measured 1.656 ms against 1.677 ms
    without, within the spread, so the common case keeps the tutorial's int32 arithmetic)."""
    # Grouped ordering: walk GROUP_M tile rows column by column, so that the programs running at
    # the same time reuse the same A rows and B columns from L2 (the tutorial's 90 -> 54 loads).
    # (kernels/_tma_gemm.py's _tile_ids: the same walk for both GEMM kernels.)
    pid_m, pid_n = _tile_ids(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)

    # Rows/columns past M/N wrap around (% M, % N): they load valid data and are never stored,
    # which keeps the main-loop loads unmasked along M and N. Only the K tail is masked.
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    if INDEX_64:  # row * stride_am passes 2^31 when A has 2^31 elements or more
        offs_am = offs_am.to(tl.int64)
        offs_bn = offs_bn.to(tl.int64)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    if ACTIVATION == "gelu":
        acc = _gelu_tanh(acc)  # fused epilogue: the tile is still in registers
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    if INDEX_64:
        offs_cm = offs_cm.to(tl.int64)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


# autotune: in float16/bfloat16 with 16-byte aligned rows, take the TMA kernel (kernels/_tma_gemm.py)
# with its config tuned on the device. A tile given in the params (any value off these defaults), or
# autotune: false, runs this kernel as configured (the lecture's GROUP_M: 1 row stays what it says).
TRITON_PARAMS = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 3,
                 "autotune": True}


@dataclass(frozen=True)
class TileConfig:
    """A validated Triton matmul configuration."""

    block_m: int
    block_n: int
    block_k: int
    group_m: int
    num_warps: int
    num_stages: int

    @property
    def constexprs(self) -> dict[str, int]:
        return {"BLOCK_M": self.block_m, "BLOCK_N": self.block_n, "BLOCK_K": self.block_k,
                "GROUP_M": self.group_m}

    def shared_bytes(self, dtype: DType, precision: str) -> int:
        """Shared memory Triton 3.6 allocates for the pipelined A and B tiles on sm_90, as read from
        ahead-of-time compiles: num_stages buffers on the tensor-core path (16-bit, or float32 as
        tf32), num_stages - 1 on the FMA path (float32 as ieee). The 16-bit default is 144 KiB;
        float32 as tf32 at the same tile is 288 KiB, over the limit (use BLOCK_K=32)."""
        buffers = self.num_stages - 1 if (dtype == DType.float32 and precision == "ieee") else self.num_stages
        return max(buffers, 1) * (self.block_m * self.block_k + self.block_k * self.block_n) * dtype.itemsize


def tile_config(spec: MatmulSpec, params: Mapping[str, int], ctx: BuildContext | None = None,
                op_name: str = "matmul") -> TileConfig:
    """The Triton config from impl params. Raises LimitError naming a block size that is not a
    power of two, or a config over the device's shared memory per block (sm_90's without one)."""
    cfg = TileConfig(*(int(params[k]) for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages")))
    for name, value in (("BLOCK_M", cfg.block_m), ("BLOCK_N", cfg.block_n), ("BLOCK_K", cfg.block_k)):
        if value < 16 or value & (value - 1):
            raise LimitError(f"{op_name} triton: {name} must be a power of two >= 16 (tl.dot), got {value}")
    if cfg.group_m < 1:
        raise LimitError(f"{op_name} triton: GROUP_M must be >= 1 (1 = row-major order), got {cfg.group_m}")
    precision = input_precision(ctx)
    need, limit = cfg.shared_bytes(spec.dtype, precision), _max_shared_bytes(ctx)
    if need > limit:
        raise LimitError(
            f"{op_name} triton: BLOCK_M={cfg.block_m} BLOCK_N={cfg.block_n} BLOCK_K={cfg.block_k} "
            f"num_stages={cfg.num_stages} needs {need // 1024} KiB of shared memory ({spec.dtype}, {precision}), "
            f"over the limit of {limit // 1024} KiB per block; lower BLOCK_K, num_stages or the tile")
    return cfg


def _max_shared_bytes(ctx: BuildContext | None) -> int:
    """Opt-in shared memory per block of the run's device (sm_90's where there is no device)."""
    if ctx is not None and ctx.is_cuda and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.device(ctx.device))
        return int(getattr(props, "shared_memory_per_block_optin", SM90_MAX_SHARED_BYTES))
    return SM90_MAX_SHARED_BYTES


def input_precision(ctx: BuildContext | None) -> str:
    """tl.dot's input_precision: the run's fp32_precision (it only matters for float32 inputs)."""
    return ctx.fp32_precision if ctx is not None else "ieee"


def needs_index_64(*numels: int) -> bool:
    """Whether a tensor has 2^31 elements or more (then the kernel indexes in int64)."""
    return max(numels) >= 2**31


def matmul_launch(spec: MatmulSpec, params, *, activation: str = "none", ctx: BuildContext | None = None,
                  op_name: str = "matmul") -> TritonLaunch:
    """The launch `build_triton` performs, for ahead-of-time PTX (contiguous A, B and C): the
    tuned TMA kernel where `params["autotune"]` and the problem allow it, else the tutorial kernel."""
    if use_tma(spec, params):
        return tma_gemm_launch(spec, activation, ctx, op_name)
    cfg = tile_config(spec, params, ctx, op_name)
    ptr = triton_ptr(spec.dtype)
    ints = ("M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm", "stride_cn")
    grid = cdiv(spec.M, cfg.block_m) * cdiv(spec.N, cfg.block_n)
    return TritonLaunch(
        kernel=_matmul_kernel,
        signature={"a_ptr": ptr, "b_ptr": ptr, "c_ptr": ptr, **{name: "i32" for name in ints},
                   **{name: "constexpr" for name in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M",
                                                     "INPUT_PRECISION", "ACTIVATION", "INDEX_64")}},
        constexprs={**cfg.constexprs, "INPUT_PRECISION": input_precision(ctx), "ACTIVATION": activation,
                    "INDEX_64": needs_index_64(spec.M * spec.K, spec.K * spec.N, spec.M * spec.N)},
        grid=(grid, 1, 1),
        num_warps=cfg.num_warps,
        num_stages=cfg.num_stages,
        scalars={"M": spec.M, "N": spec.N, "K": spec.K, "stride_am": spec.K, "stride_ak": 1,
                 "stride_bk": spec.N, "stride_bn": 1, "stride_cm": spec.N, "stride_cn": 1},
    )


def matmul_runner(cfg: TileConfig, precision: str, activation: str, op_name: str):
    """The timed callable: C = act(A @ B) through `_matmul_kernel` (any strides; C contiguous)."""
    def run(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        (m, k), (k_b, n) = a.shape, b.shape
        if k != k_b:
            raise ValueError(f"{op_name}: inner dimensions differ: A is {m}x{k}, B is {k_b}x{n}")
        c = torch.empty((m, n), dtype=a.dtype, device=a.device)
        grid = (cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n),)
        try:
            _matmul_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                 c.stride(0), c.stride(1), **cfg.constexprs, INPUT_PRECISION=precision,
                                 ACTIVATION=activation, INDEX_64=needs_index_64(a.numel(), b.numel(), c.numel()),
                                 num_warps=cfg.num_warps, num_stages=cfg.num_stages)
        except Exception as exc:  # Triton's OutOfResources, where our estimate was too low
            if type(exc).__name__ == "OutOfResources":
                raise LimitError(f"{op_name} triton: {exc}; lower BLOCK_K, num_stages or the tile") from exc
            raise
        return c
    return run


def cdiv(a: int, b: int) -> int:
    """Ceiling division: programs or blocks needed to cover a elements b at a time."""
    return -(-a // b)


def _triton_launch(spec: MatmulSpec, params, ctx: BuildContext | None = None) -> TritonLaunch:
    return matmul_launch(spec, params, ctx=ctx)


@MATMUL.impl("triton", needs=["triton"], params=TRITON_PARAMS,
             interpreter_dtypes=["float32", "float16"], triton_launch=_triton_launch)
def build_triton(spec: MatmulSpec, params, ctx: BuildContext):
    """Triton: in 16-bit dtypes the persistent TMA + wgmma kernel, its tile tuned on the device
    (kernels/_tma_gemm.py); otherwise the tutorial's tiled, GROUP_M-ordered kernel."""
    return gemm_builder(spec, params, ctx, "none", "matmul")


def use_tma(spec: MatmulSpec, params) -> bool:
    """The TMA kernel takes the row: autotune on, the default tile (none asked for), a 16-bit
    dtype and 16-byte aligned rows."""
    default_tile = all(params.get(k) == v for k, v in TRITON_PARAMS.items() if k != "autotune")
    return bool(params.get("autotune")) and default_tile and tma_supported(str(spec.dtype), spec.K, spec.N)


def gemm_builder(spec: MatmulSpec, params, ctx: BuildContext, activation: str, op_name: str):
    """The timed callable of `matmul` / `matmul_gelu` triton: tuned TMA or the tutorial kernel."""
    if not use_tma(spec, params):
        return matmul_runner(tile_config(spec, params, ctx, op_name), input_precision(ctx), activation, op_name)
    sms = sm_count(ctx)
    small = max(spec.M * spec.K, spec.K * spec.N, spec.M * spec.N) <= TUNE_MAX_ELEMENTS
    tuning = make_inputs(spec, ctx.device, 1) if can_tune(ctx) and small else None
    run = (lambda config: tma_runner(spec, config, activation, sms)(*tuning)) if tuning else None
    tuned = choose(ctx, op_name, "triton", spec, candidate_configs(), run, version=TMA_VERSION)
    return attach(tma_runner(spec, tuned.config, activation, sms), tuned)


def tma_gemm_launch(spec: MatmulSpec, activation: str, ctx: BuildContext | None, op_name: str) -> TritonLaunch:
    """The TMA kernel's launch with the cached (else the default) config, for the PTX view."""
    tuned = choose(ctx, op_name, "triton", spec, candidate_configs(), version=TMA_VERSION)
    return tma_launch(spec.M, spec.N, spec.K, str(spec.dtype), tuned.config, activation=activation,
                      sms=sm_count(ctx), note=tuned.note)


# -- implementations: CUDA -------------------------------------------------------------------
_CPP_BINDING = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
extern "C" cudaError_t matmul_naive_f32(const void*, const void*, void*, int, int, int, cudaStream_t);
extern "C" cudaError_t matmul_tiled_f32(const void*, const void*, void*, int, int, int, cudaStream_t);
extern "C" cudaError_t matmul_tiled_f16(const void*, const void*, void*, int, int, int, cudaStream_t);
extern "C" cudaError_t matmul_tiled_bf16(const void*, const void*, void*, int, int, int, cudaStream_t);

static void check_inputs(const torch::Tensor& a, const torch::Tensor& b, const char* name) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), name, ": A and B must be CUDA tensors");
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2, name, ": A and B must be 2-D");
    TORCH_CHECK(a.is_contiguous() && b.is_contiguous(), name, ": A and B must be contiguous");
    TORCH_CHECK(a.size(1) == b.size(0), name, ": inner dimensions differ: A is ", a.sizes(), ", B is ", b.sizes());
    TORCH_CHECK(a.scalar_type() == b.scalar_type(), name, ": dtypes differ");
    TORCH_CHECK(a.device() == b.device(), name, ": A and B must be on the same device");
    TORCH_CHECK(a.size(0) < (1 << 22) && a.size(1) < ((int64_t)1 << 31) && b.size(1) < ((int64_t)1 << 31),
                name, ": M must be < 2^22 (grid rows) and N, K < 2^31");
}

torch::Tensor matmul_naive(torch::Tensor a, torch::Tensor b) {
    check_inputs(a, b, "matmul_naive");
    TORCH_CHECK(a.scalar_type() == at::kFloat, "matmul_naive: float32 only, got ", a.scalar_type());
    TORCH_CHECK(a.size(0) < 65535 * 8, "matmul_naive: M must be < 524280 (grid.y of 8-row blocks)");
    const at::cuda::CUDAGuard guard(a.device());
    auto c = torch::empty({a.size(0), b.size(1)}, a.options());
    auto err = matmul_naive_f32(a.data_ptr(), b.data_ptr(), c.data_ptr(), (int)a.size(0), (int)b.size(1),
                                (int)a.size(1), at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == cudaSuccess, "matmul_naive launch failed: ", cudaGetErrorString(err));
    return c;
}

torch::Tensor matmul_tiled(torch::Tensor a, torch::Tensor b) {
    check_inputs(a, b, "matmul_tiled");
    const at::cuda::CUDAGuard guard(a.device());
    auto c = torch::empty({a.size(0), b.size(1)}, a.options());
    auto stream = at::cuda::getCurrentCUDAStream();
    int m = (int)a.size(0), n = (int)b.size(1), k = (int)a.size(1);
    cudaError_t err;
    switch (a.scalar_type()) {
        case at::kFloat: err = matmul_tiled_f32(a.data_ptr(), b.data_ptr(), c.data_ptr(), m, n, k, stream); break;
        case at::kHalf: err = matmul_tiled_f16(a.data_ptr(), b.data_ptr(), c.data_ptr(), m, n, k, stream); break;
        case at::kBFloat16: err = matmul_tiled_bf16(a.data_ptr(), b.data_ptr(), c.data_ptr(), m, n, k, stream); break;
        default: TORCH_CHECK(false, "matmul_tiled: dtype must be float32, float16 or bfloat16, got ", a.scalar_type());
    }
    TORCH_CHECK(err == cudaSuccess, "matmul_tiled launch failed: ", cudaGetErrorString(err));
    return c;
}
"""


def _load_module(ctx: BuildContext):
    return load_cuda("wb_matmul", CU_FILE, _CPP_BINDING, ["matmul_naive", "matmul_tiled"], ctx.build_dir)


def _naive_launch(spec: MatmulSpec, params) -> tuple[tuple[int, ...], int]:
    return (cdiv(spec.N, 32), cdiv(spec.M, 8), 1), 256


def _tiled_launch(spec: MatmulSpec, params) -> tuple[tuple[int, ...], int]:
    return (cdiv(spec.N, 128), cdiv(spec.M, 128), 1), 256


@MATMUL.impl("cuda_naive", dtypes=["float32"], needs=["cuda_device", "nvcc"], moved_bytes=naive_bytes_moved,
             cuda_source=CudaSource(CU_FILE, ("matmul_naive_kernel",), launch=_naive_launch))
def build_cuda_naive(spec: MatmulSpec, params, ctx: BuildContext):
    """CUDA C++, the lecture's triple loop: one thread per output, float32, IEEE FMA."""
    module = _load_module(ctx)
    return lambda a, b: module.matmul_naive(a.contiguous(), b.contiguous())


@MATMUL.impl("cuda", needs=["cuda_device", "nvcc"],
             cuda_source=CudaSource(CU_FILE, ("matmul_tiled_kernel",), launch=_tiled_launch))
def build_cuda(spec: MatmulSpec, params, ctx: BuildContext):
    """CUDA C++: 128x128 shared-memory tiles, 8x8 outputs per thread, float32 FMA (no tensor cores)."""
    module = _load_module(ctx)
    return lambda a, b: module.matmul_tiled(a.contiguous(), b.contiguous())
