"""Row-wise fp8 quantization (the memory-bound kernel around an fp8 GEMM: amax, scale, cast).

    s[i] = max(amax_j |x[i, j]|, AMAX_FLOOR) / FP8_MAX      q[i, j] = saturate(x[i, j] / s[i])
    x: (M, N) bfloat16 -> q: (M, N) float8_e4m3fn (the spec's dtype), s: (M, 1) float32

One read and one write, with a row reduction in between: the lecture's softmax pattern. The
implementations return (q, s); the check compares one float32 (M, N + 1) view of them
(`check_view`): q in the scaled units, then s, against the float64 reference [x / s, s]. The
rounding term is the fp8 dtype's (e4m3: u = 2^-4; the subnormal floor 2 * 2^-6 * u is in the
scaled units, where it belongs); a wrong scale fails on both columns, a wrong q on the first.
AMAX_FLOOR keeps a row of zeros at q = 0, s = 1e-12 / FP8_MAX (no 0 / 0). The cast saturates
(a value past the max becomes +-max), as torch's and PTX's (cvt.rn.satfinite) do; with these
scales only float32 rounding reaches past the max, so saturation never changes a right result.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from workbench.cost import Cost
from workbench.check.chunks import CheckChunks
from workbench.cuda_build import BINDING_HEADERS, load_cuda
from workbench.dtypes import DType
from workbench.errors import LimitError
from workbench.check.inputs import seeded_normal
from workbench.kernel_source import CudaSource, TritonLaunch, TritonSource, triton_ptr
from workbench.registry import BuildContext, Op, OutputForm
from workbench.check.tolerance import FP8_MAX
from workbench.triton_support import jit, next_power_of_2, tl

from ._utils import MATRIX_TEST_SPECS, MatrixSpec, num_warps_for

CU_FILE = Path(__file__).with_name("quantize.cu")
AMAX_FLOOR = 1e-12
MAX_BLOCK_SIZE = 16384  # `triton` holds one row in one block


@dataclass(frozen=True)
class QuantizeSpec(MatrixSpec):
    """x: (M, N) bfloat16 -> q: (M, N) in `dtype` (fp8), s: (M, 1) float32."""

    N: int = 4096
    dtype: DType = DType.float8_e4m3fn


def check_view(spec: QuantizeSpec, out) -> torch.Tensor:
    """(q, s) -> float32 [q, s] of shape (M, N + 1); OutputForm for another form."""
    if not (isinstance(out, (tuple, list)) and len(out) == 2 and all(torch.is_tensor(t) for t in out)):
        what = f"a {out.dtype} tensor" if torch.is_tensor(out) else type(out).__name__
        raise OutputForm("shape", f"output is {what}, expected (q, scales)")
    q, s = out
    if q.dtype != spec.dtype.torch or s.dtype != torch.float32:
        raise OutputForm("dtype", f"outputs (q, scales) are ({str(q.dtype).removeprefix('torch.')}, "
                                  f"{str(s.dtype).removeprefix('torch.')}), expected ({spec.dtype.value}, float32)")
    if tuple(q.shape) != (spec.M, spec.N) or tuple(s.shape) != (spec.M, 1):
        raise OutputForm("shape", f"outputs (q, scales) have shapes ({tuple(q.shape)}, {tuple(s.shape)}), "
                                  f"expected ({(spec.M, spec.N)}, {(spec.M, 1)})")
    return torch.cat([q.float(), s], dim=1)


def outputs_from_reference(spec: QuantizeSpec, ref: torch.Tensor):
    """The float64 reference [x / s, s] as an implementation returns it: (q, s)."""
    return ref[:, :-1].to(spec.dtype.torch), ref[:, -1:].float().contiguous()


QUANTIZE = Op(
    "quantize", QuantizeSpec,
    description="bfloat16 -> fp8 with a per-row amax scale (q, scales)",
    dtypes=(DType.float8_e4m3fn,),  # e4m3 carries activations; e5m2 (gradients) is not here yet
    test_specs=MATRIX_TEST_SPECS,
    check_chunks=CheckChunks.rows(0),
    out_dtype=lambda spec: DType.float32,  # the check's view [q, s]
    check_view=check_view,
    outputs_from_reference=outputs_from_reference,
)


@QUANTIZE.inputs
def make_inputs(spec: QuantizeSpec, device: str, seed: int, out=None) -> tuple[torch.Tensor]:
    """One seeded standard-normal x (M, N) in bfloat16 (out: refill it in place)."""
    return (seeded_normal((spec.M, spec.N), torch.bfloat16, device, seed, 0, out=out[0] if out else None),)


# Row scalings of the special set, cycling: a row of zeros (the amax floor), huge and tiny rows
# (the scale spans bfloat16's exponent range; s stays a float32 normal), and -0 entries.
SPECIAL_ROW_SCALES = (1.0, 0.0, 2.0 ** 100, 2.0 ** -100)


@QUANTIZE.special_inputs
def special_inputs(spec: QuantizeSpec, inputs, seed: int) -> tuple[torch.Tensor]:
    """Seeded x with rows scaled by SPECIAL_ROW_SCALES and every 5th column -0."""
    (x,) = make_inputs(spec, str(inputs[0].device), seed, out=inputs)
    for start, scale in enumerate(SPECIAL_ROW_SCALES):
        if scale != 1.0:
            x[start::len(SPECIAL_ROW_SCALES)].mul_(scale)
    x[:, ::5].fill_(-0.0)
    return (x,)


E4M3_MAX = FP8_MAX["float8_e4m3fn"]


@QUANTIZE.reference()
def reference(x: torch.Tensor) -> torch.Tensor:
    """float64 [clamp(x / s, +-448), s] with s = max(amax, AMAX_FLOOR) / 448 per row (the fp8
    rounding of the first N columns is the check's rounding term)."""
    s = x.abs().amax(dim=-1, keepdim=True).clamp(min=AMAX_FLOOR) / E4M3_MAX
    return torch.cat([(x / s).clamp(-E4M3_MAX, E4M3_MAX), s], dim=-1)


@QUANTIZE.cost_model
def cost(spec: QuantizeSpec) -> Cost:
    """x read once (bfloat16), q written once (1 byte), M float32 scales; per element an abs, a
    max, a divide and the cast."""
    numel = spec.M * spec.N
    return Cost(bytes_read=numel * 2, bytes_written=numel * spec.dtype.itemsize + spec.M * 4, flops=3 * numel)


def manual_quantize(x: torch.Tensor):
    """The PyTorch formula: amax, scale, divide, clamp, cast (each an eager kernel)."""
    s = x.abs().amax(dim=-1, keepdim=True).float().clamp(min=AMAX_FLOOR) / E4M3_MAX
    return (x.float() / s).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn), s


def manual_bytes_moved(spec: QuantizeSpec) -> int:
    """The eager kernels' traffic: abs (read x, write |x|), amax (read |x|), x.float() (read x,
    write float32), divide (read, write), clamp (read, write), cast (read float32, write fp8)."""
    mn = spec.M * spec.N
    return 2 * mn * 2 + mn * 2 + mn * (2 + 4) + 2 * mn * 8 + mn * (4 + 1) + spec.M * 8


@QUANTIZE.impl("manual", moved_bytes=manual_bytes_moved)
def build_manual(spec: QuantizeSpec, params, ctx: BuildContext):
    """Hand-written PyTorch: amax, scale, divide, clamp, cast (six eager kernels)."""
    return manual_quantize


@QUANTIZE.impl("compiled")
def build_compiled(spec: QuantizeSpec, params, ctx: BuildContext):
    """torch.compile(manual_quantize, dynamic=False): Inductor fuses it (a reduction, then the cast)."""
    return torch.compile(manual_quantize, dynamic=False)


# -- Triton: one program per row, the row in one block ---------------------------------------
@jit
def _quantize_kernel(x_ptr, q_ptr, s_ptr, n_cols, AMAX_MIN: tl.constexpr, FP8_MAX_: tl.constexpr,
                     BLOCK_SIZE: tl.constexpr):
    """One row: amax over the block (padding 0), the scale, then x / s clamped and cast."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), axis=0), AMAX_MIN) / FP8_MAX_
    q = tl.clamp(x / scale, -FP8_MAX_, FP8_MAX_)  # saturate before the cast
    tl.store(q_ptr + row * n_cols + cols, q.to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(s_ptr + row, scale)


def _block(spec: QuantizeSpec) -> int:
    block = next_power_of_2(spec.N)
    if block > MAX_BLOCK_SIZE:
        raise LimitError(f"quantize triton: a row of N={spec.N} needs BLOCK_SIZE={block}, over the one-block "
                         f"limit {MAX_BLOCK_SIZE}; use cuda (any N)")
    return block


def _triton_launch(spec: QuantizeSpec, params) -> TritonLaunch:
    block = _block(spec)
    return TritonLaunch(
        kernel=_quantize_kernel,
        signature={"x_ptr": "*bf16", "q_ptr": triton_ptr(spec.dtype), "s_ptr": "*fp32", "n_cols": "i32",
                   "AMAX_MIN": "constexpr", "FP8_MAX_": "constexpr", "BLOCK_SIZE": "constexpr"},
        constexprs={"AMAX_MIN": AMAX_FLOOR, "FP8_MAX_": E4M3_MAX, "BLOCK_SIZE": block},
        grid=(spec.M, 1, 1), num_warps=num_warps_for(block), scalars={"n_cols": spec.N})


@QUANTIZE.impl("triton", needs=["fp8"], source=TritonSource(_triton_launch, interpreter_dtypes=()))
def build_triton(spec: QuantizeSpec, params, ctx: BuildContext):
    """Triton, the softmax pattern, fused: one program per row computes the amax on chip and writes
    q and the row's scale in the same pass (one read, one write). Triton's e4m3 type needs sm_89+."""
    launch = _triton_launch(spec, params)

    def run(x):
        x = x.contiguous()
        q = torch.empty(x.shape, dtype=spec.dtype.torch, device=x.device)
        s = torch.empty((x.shape[0], 1), dtype=torch.float32, device=x.device)
        launch.run(x, q, s)
        return q, s
    return run


# -- CUDA: one block per row (quantize.cu) ------------------------------------------------------
_CPP_BINDING = BINDING_HEADERS + r"""
extern "C" cudaError_t quantize_rows_bf16(const void*, void*, void*, int64_t, int, int, cudaStream_t);

// x: bfloat16 (M, N) contiguous; scales: float32 (M, 1), written; e5m2: 0 for e4m3, 1 for e5m2;
// returns q (M, N) as uint8 bytes (the Python side views them as the spec's fp8 dtype).
at::Tensor quantize_rows(at::Tensor x, at::Tensor scales, int64_t e5m2) {
    TORCH_CHECK(x.is_cuda() && scales.is_cuda(), "quantize: x and scales must be CUDA tensors");
    WB_CHECK(x.dim() == 2, "quantize: x must be 2-D (M, N), got %lld dims", (long long)x.dim());
    TORCH_CHECK(x.is_contiguous() && scales.is_contiguous(), "quantize: x and scales must be contiguous");
    WB_CHECK(x.scalar_type() == at::kBFloat16, "quantize: x must be bfloat16, got %s", c10::toString(x.scalar_type()));
    WB_CHECK(scales.scalar_type() == at::kFloat && scales.numel() == x.size(0), "quantize: scales must be float32 (M, 1)");
    WB_CHECK(x.size(1) < ((int64_t)1 << 31), "quantize: N must be < 2^31, got %lld", (long long)x.size(1));
    const c10::cuda::CUDAGuard guard(x.device());
    auto q = at::empty(x.sizes(), x.options().dtype(at::kByte));
    auto err = quantize_rows_bf16(x.data_ptr(), q.data_ptr(), scales.data_ptr(), x.size(0), (int)x.size(1), (int)e5m2,
                                  c10::cuda::getCurrentCUDAStream());
    WB_CHECK(err == cudaSuccess, "quantize launch failed: %s", cudaGetErrorString(err));
    return q;
}
"""


# quantize.cu's launch_fitting: (most 16-byte packs a row, threads a block) of the register kernel
CUDA_SHAPES = ((128, 128), (256, 128), (512, 128), (1024, 256), (2048, 512), (4096, 512))


def _cuda_launch(spec: QuantizeSpec, params) -> tuple[tuple[int, ...], int]:
    """One block a row; its threads as quantize.cu picks them (aligned bases: torch's allocations)."""
    threads = next((t for packs, t in CUDA_SHAPES if spec.N // 8 <= packs), 512)
    return (spec.M, 1, 1), threads


@QUANTIZE.impl("cuda", source=CudaSource(CU_FILE, ("quantize_rows_vec_kernel", "quantize_rows_long_kernel",
                                                     "quantize_rows_kernel"), launch=_cuda_launch))
def build_cuda(spec: QuantizeSpec, params, ctx: BuildContext):
    """CUDA C++, fused: one block per row, the row in registers as 16-byte packs (one HBM read),
    a shuffle max reduction, x * (1 / s) and paired cvt.rn.satfinite.e4m3x2 (or e5m2x2) into 8-byte
    stores; any N (a misaligned row's head and tail one element a thread; rows past 32768 elements
    read twice)."""
    module = load_cuda("wb_quantize", CU_FILE, _CPP_BINDING, ["quantize_rows"], ctx.build_dir, binding="library")
    e5m2 = int(spec.dtype.value == "float8_e5m2")

    def run(x):
        x = x.contiguous()
        s = torch.empty((x.shape[0], 1), dtype=torch.float32, device=x.device)
        return module.quantize_rows(x, s, e5m2).view(spec.dtype.torch), s
    return run
