"""Scaled fp8 matrix multiply (what an fp8 linear layer runs on Hopper: cuBLASLt's scaled GEMM).

    C = (A * sa) @ (B * sb)      A: (M, K), B: (K, N) in float8_e4m3fn -> C: (M, N) bfloat16

Scales (float32): `rowwise: 0` one per tensor (sa, sb of shape (1, 1)); `rowwise: 1` one per row
of A (sa: (M, 1)) and one per column of B (sb: (1, N)), the shapes `torch._scaled_mm` takes.
The inputs' quantisation is part of the op (MEASUREMENT.md, fp8): A and B are fp8 values, and
the float64 reference is the product of the dequantised inputs (A * sa) @ (B * sb), so the check
measures the kernel, not the fp8 rounding of the data. The output rounds to bfloat16 (the check's
rounding term, Op.rounding_dtype), after a K-term float32 accumulation (the sqrt(K) term).

B is stored column-major (a (K, N) view of an (N, K) row-major tensor): cuBLASLt's fp8 GEMM
takes only the "TN" layout (A row-major, B column-major: both K-major), and Hopper's fp8 wgmma
reads both operands K-major from shared memory, so the inputs are made in that layout once and no
transpose is timed (`b.t().contiguous().t()` is how a row-major B gets there).

Implementations: `pytorch` (torch._scaled_mm: cuBLASLt on the GPU; torch's CPU kernel on a CPU),
`triton` (fp8 tl.dot into a float32 accumulator, scales applied in the epilogue: on sm_90 a
persistent kernel whose tiles come and go through TMA, else a pointer kernel; its tile tuned per
device over a small candidate list, workbench/tuning.py), and `manual`: the lecture-style
row, a bfloat16 matmul of the inputs dequantised in bfloat16. fp8 tensor cores (mma/wgmma e4m3)
need sm_89+ (Ada, Hopper): `pytorch` and `triton` are unavailable on older GPUs (Need.fp8); on a
CPU the check still runs (torch's CPU _scaled_mm, the Triton interpreter, whose fp8 dot is right).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from workbench.cost import Cost
from workbench.dtypes import DType
from workbench.errors import SpecError
from workbench.check.inputs import seeded_normal
from workbench.kernel_source import TritonLaunch, TritonSource, triton_ptr
from workbench.registry import BuildContext, Op
from workbench.spec import Spec
from workbench.check.tolerance import FP8_MAX
from workbench.triton_support import jit, tl

from workbench.tuning import CandidateLists, attach, can_tune, choose, compiled_on_gpu
from ._tma_gemm import SM90_SMS, _StandIn, _halves, _tile_ids, sm_count, tensor_descriptor_class
from ._utils import cdiv

FP8_DTYPES = (DType.float8_e4m3fn,)
TUNE_VERSION = "2"  # 2: the TMA kernel and its configs (TMA, SUBTILE)


# -- spec ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ScaledMmSpec(Spec):
    """A (M, K) fp8 @ B (K, N) fp8 with float32 scales -> (M, N) bfloat16; rowwise: 0 per-tensor
    scales, 1 per-row (A) and per-column (B) scales."""

    M: int = 4096
    N: int = 4096
    K: int = 4096
    rowwise: int = 0
    dtype: DType = DType.float8_e4m3fn

    NON_NEGATIVE = frozenset({"rowwise"})

    def check(self) -> None:
        if self.rowwise not in (0, 1):
            raise SpecError(f"rowwise: must be 0 (per-tensor scales) or 1 (per-row of A, per-column of B), "
                            f"got {self.rowwise!r}")


SCALED_MM = Op(
    "scaled_mm", ScaledMmSpec,
    description="fp8 scaled matmul (A*sa) @ (B*sb) -> bfloat16",
    dtypes=FP8_DTYPES,
    test_specs=[{"M": 257, "N": 257, "K": 257}, {"M": 1, "N": 1000, "K": 64},
                {"M": 100, "N": 130, "K": 4097, "rowwise": 1}],
    reduction_length=lambda spec: spec.K,
    matmul_like=True,
    out_dtype=lambda spec: DType.bfloat16,
    rounding_dtype=lambda spec: DType.bfloat16,  # the output's dtype sets the rounding term
)


# -- inputs and reference --------------------------------------------------------------------
def quantize_tensor(x: torch.Tensor, dim: int | None, fp8: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(x / s saturated to fp8, s) with s = amax / FP8_MAX over the whole tensor (dim None, shape
    (1, 1)) or along `dim` (keepdim): the per-tensor and rowwise recipes of an fp8 linear layer."""
    amax = x.abs().amax() if dim is None else x.abs().amax(dim=dim, keepdim=True)
    scale = (amax.float().clamp(min=1e-12) / FP8_MAX[str(fp8).removeprefix("torch.")])
    scale = scale.reshape(1, 1) if dim is None else scale
    q = (x.float() / scale).clamp(-FP8_MAX[str(fp8).removeprefix("torch.")], FP8_MAX[str(fp8).removeprefix("torch.")])
    return q.to(fp8), scale.contiguous()


@SCALED_MM.inputs
def make_inputs(spec: ScaledMmSpec, device: str, seed: int) -> tuple[torch.Tensor, ...]:
    """Seeded standard-normal A and B quantised to fp8 (saturating) with their scales: A (M, K)
    row-major, B (K, N) column-major (the layout cuBLASLt takes), sa (1, 1) or (M, 1), sb (1, 1)
    or (1, N) float32."""
    fp8 = spec.dtype.torch
    a_hi = seeded_normal((spec.M, spec.K), torch.float32, device, seed, 0)
    b_hi = seeded_normal((spec.N, spec.K), torch.float32, device, seed, 1)  # B^T, row-major
    a, sa = quantize_tensor(a_hi, 1 if spec.rowwise else None, fp8)
    bt, sb = quantize_tensor(b_hi, 1 if spec.rowwise else None, fp8)
    return a, bt.t(), sa, sb.reshape(1, -1)


@SCALED_MM.reference()
def reference(a, b, sa, sb):
    """float64 (A * sa) @ (B * sb): the product of the dequantised inputs."""
    return (a * sa) @ (b * sb)


@SCALED_MM.cost_model
def cost(spec: ScaledMmSpec) -> Cost:
    """A and B read once (1 byte an element) with their float32 scales, C written once in bfloat16;
    one multiply-add per (m, n, k)."""
    scales = (spec.M + spec.N) * 4 if spec.rowwise else 8
    return Cost(bytes_read=(spec.M * spec.K + spec.K * spec.N) * spec.dtype.itemsize + scales,
                bytes_written=spec.M * spec.N * 2,
                flops=2 * spec.M * spec.N * spec.K)


# -- implementations -------------------------------------------------------------------------
CUBLASLT_MULTIPLE = 16  # cuBLASLt's fp8 GEMM takes K and N (leading dimensions) in multiples of 16


def pad_for_cublaslt(a, b, sa, sb):
    """A, B (column-major) and the scales with K and N zero-padded to multiples of 16 (zeros add
    nothing to the product; padded scales are 1), and the output's (M, N) to slice back."""
    m, k = a.shape
    n = b.shape[1]
    k16, n16 = (-(-k // CUBLASLT_MULTIPLE) * CUBLASLT_MULTIPLE, -(-n // CUBLASLT_MULTIPLE) * CUBLASLT_MULTIPLE)
    a_p = torch.zeros((m, k16), dtype=a.dtype, device=a.device)
    a_p[:, :k] = a
    bt_p = torch.zeros((n16, k16), dtype=b.dtype, device=b.device)
    bt_p[:n, :k] = b.t()
    if sb.numel() > 1:  # rowwise: one scale per column of B
        sb_p = torch.ones((1, n16), dtype=sb.dtype, device=sb.device)
        sb_p[:, :n] = sb
        sb = sb_p
    return a_p, bt_p.t(), sa, sb, (m, n)


def torch_scaled_mm(a, b, sa, sb):
    """torch._scaled_mm with the layouts it requires (B column-major; rowwise scales (M,1), (1,N));
    on the GPU, shapes whose K or N is not a multiple of 16 are zero-padded first (cuBLASLt
    refuses them; the padding is timed: it is what such a shape costs)."""
    m, n = a.shape[0], b.shape[1]
    if a.is_cuda and (a.shape[1] % CUBLASLT_MULTIPLE or n % CUBLASLT_MULTIPLE):
        a, b, sa, sb, _ = pad_for_cublaslt(a, b, sa, sb)
    elif b.stride(0) != 1:
        b = b.t().contiguous().t()
    if sa.numel() == 1:
        sa, sb = sa.reshape(()), sb.reshape(())
    out = torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
    return out if out.shape == (m, n) else out[:, :n]


@SCALED_MM.impl("pytorch", needs=["fp8"])
def build_pytorch(spec: ScaledMmSpec, params, ctx: BuildContext):
    """torch._scaled_mm: cuBLASLt's fp8 GEMM on the GPU (B column-major, float32 scales)."""
    return torch_scaled_mm


def manual_scaled_mm(a, b, sa, sb):
    """The lecture's way: dequantise to bfloat16, then a bfloat16 matmul (cuBLAS)."""
    return (a.to(torch.bfloat16) * sa.to(torch.bfloat16)) @ (b.to(torch.bfloat16) * sb.to(torch.bfloat16))


# Dequantising in bfloat16 rounds every input once (fp8 x float32 scale has more bits than
# bfloat16 keeps) and the scales once per row or tensor: errors of ~u_bf16 relative per product,
# absolute against rms(ref) and independent of K (~u_bf16 * rms(ref) per output). Measured on CPU
# (the test specs and 64x64x16, 128x96x1024, per-tensor and rowwise, seeds 0-2): least passing
# factor 12033 (the work term then ~0.7 u_bf16); 2^15 is a 2.7x margin.
MANUAL_FACTOR = 32768.0


@SCALED_MM.impl("manual", tolerance_scale=MANUAL_FACTOR)
def build_manual(spec: ScaledMmSpec, params, ctx: BuildContext):
    """bfloat16 matmul of the inputs dequantised in bfloat16 (the reference row for fp8's speed).

    Tolerance factor MANUAL_FACTOR: the dequantised inputs are rounded to bfloat16."""
    return manual_scaled_mm


# -- Triton: fp8 tl.dot, scales in the epilogue ----------------------------------------------
@jit
def _scaled_mm_kernel(a_ptr, b_ptr, c_ptr, sa_ptr, sb_ptr, M, N, K,
                      stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                      ROWWISE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """One program per BLOCK_M x BLOCK_N tile of C: fp8 x fp8 products accumulated in float32
    (wgmma ... e4m3 on sm_90), then the scales: sa[m] * sb[n] (rowwise) or sa * sb, on the
    float32 tile in registers, and one rounding to bfloat16."""
    pid_m, pid_n = _tile_ids(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M  # wrapped rows load valid data, never stored
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    if ROWWISE:
        acc = acc * tl.load(sa_ptr + offs_am)[:, None] * tl.load(sb_ptr + offs_bn)[None, :]
    else:
        acc = acc * (tl.load(sa_ptr) * tl.load(sb_ptr))
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


@jit
def _scaled_mm_tma_kernel(a_desc, b_desc, c_desc, sa_ptr, sb_ptr, M, N, K, ROWWISE: tl.constexpr,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                          GROUP_M: tl.constexpr, NUM_PROGRAMS: tl.constexpr, SUBTILE: tl.constexpr):
    """Persistent TMA + wgmma fp8 GEMM (kernels/_tma_gemm.py's form): program p computes tiles p,
    p + NUM_PROGRAMS, ... in GROUP_M order; A (M, K) and B^T (N, K) tiles come in through TMA
    (both K-major, as fp8 wgmma reads them: the dot takes b.T), the K tail and rows past M or N
    as TMA's zeros; the scales multiply the float32 tile, and C leaves through TMA in bfloat16
    (in two BLOCK_N / 2 halves with SUBTILE, which frees shared memory for a 4th stage)."""
    start_pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    tile_id_c = start_pid - NUM_PROGRAMS  # the epilogue's own counter (Triton's persistent tutorial)
    for tile_id in tl.range(start_pid, num_tiles, NUM_PROGRAMS, flatten=True):
        pid_m, pid_n = _tile_ids(tile_id, num_pid_m, num_pid_n, GROUP_M)
        offs_am = pid_m * BLOCK_M
        offs_bn = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            a = a_desc.load([offs_am, ki * BLOCK_K])
            b = b_desc.load([offs_bn, ki * BLOCK_K])
            acc = tl.dot(a, b.T, acc)
        tile_id_c += NUM_PROGRAMS
        pid_m, pid_n = _tile_ids(tile_id_c, num_pid_m, num_pid_n, GROUP_M)
        offs_cm = pid_m * BLOCK_M
        offs_cn = pid_n * BLOCK_N
        if ROWWISE:
            rows = offs_cm + tl.arange(0, BLOCK_M)
            cols = offs_cn + tl.arange(0, BLOCK_N)
            acc = acc * tl.load(sa_ptr + rows, mask=rows < M, other=0.0)[:, None] \
                * tl.load(sb_ptr + cols, mask=cols < N, other=0.0)[None, :]
        else:
            acc = acc * (tl.load(sa_ptr) * tl.load(sb_ptr))
        if SUBTILE:
            acc0, acc1 = _halves(acc, BLOCK_M, BLOCK_N)
            c_desc.store([offs_cm, offs_cn], acc0.to(c_desc.dtype))
            c_desc.store([offs_cm, offs_cn + BLOCK_N // 2], acc1.to(c_desc.dtype))
        else:
            c_desc.store([offs_cm, offs_cn], acc.to(c_desc.dtype))


# The tuner's candidates (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages, TMA, SUBTILE),
# per device. TMA 0: _scaled_mm_kernel (pointer loads, one program a tile); TMA 1:
# _scaled_mm_tma_kernel (persistent, TMA loads and stores), for shapes it fits (tma_fits: K % 16 == 0,
# N % 8 == 0), else the pointer kernel with the same tile. sm_90 has 227 KiB of shared memory a
# block: a 128x256x128 stage is 48 KiB of fp8 tiles (3 stages 144 KiB, 4 stages 192 KiB), plus C's
# TMA staging, 64 KiB or 32 KiB with SUBTILE (Triton 3.6 AOT: s4 SUBTILE 224 KiB, s3 no SUBTILE
# 208 KiB; s4 without SUBTILE would not fit). sm_89 (99 KiB): pointer tiles; the CPU interpreter:
# small tiles (nothing is timed there).
#
# CANDIDATES[90] is the exploration list, timed once on the H100 (80GB HBM3, Triton 3.6, torch
# 2.11, 2026-12-06, one call of `benchmarks/gpu_evidence.py --stage fp8`: the tuner's 4 alternating
# do_bench rounds, L2 flushed; ms at 4096^3 / 8192^3 / 8192^3 rowwise):
#   TMA 128x256 s3 SUBTILE G8    0.1031 / 0.7944 / 0.8308  (8192^3 winner, both scalings)
#   TMA 128x256 s4 SUBTILE G8    0.1015 / 0.8228 / 0.8407  (4096^3 winner)
#   TMA 128x256 s4 SUBTILE G16   0.1022 / 0.8366 / 0.8363;  s3 SUBTILE G16 0.1037 / 0.8362 / 0.8385
#   TMA 128x256 s4 SUBTILE G4    0.1035 / 0.8486 / 0.8420;  s3 no SUBTILE G8 0.1050 / 0.8263 / 0.8474
#   TMA 256x128 s3 SUBTILE G8    0.1114 / 0.8590 / 0.8864;  TMA 128x128 w4 s4 0.1121 / 0.8553 / 0.8810
#   pointer 256x128 s3 0.1169 / 0.9493 / 0.9504; 128x128 w4 s4 0.1281 / 0.9682 / 0.9634;
#   128x256 s3 0.1452 / 1.1785 / 0.8776; 128x256 s4 0.1474 / 1.3065 / 0.8831
# (the pointer kernel was main's: 0.924x cuBLASLt at 2048^3, 0.943x at 4096^3 before this list).
# Then, in the same call, the winners against cuBLASLt (torch._scaled_mm) in 5 interleaved rounds:
# 4096^3 0.1020 ms against 0.1078 (1.056x), 8192^3 0.8430 against 0.8920 (1.058x), 8192^3 rowwise
# 0.8505 against 0.9009 (1.059x); fp8 cuBLASLt against bf16 cuBLAS 1.76x and 1.82x.
# H100_CANDIDATES keeps the configs within 5% of a winner in some column, and one pointer config
# (the pointer kernel's best: shapes TMA cannot take tune over the same tiles through it). The
# H200 tunes over CANDIDATES[90] until it is measured there.
_KEYS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages", "TMA", "SUBTILE")
CANDIDATES = {
    90: [(128, 256, 128, 8, 8, 3, 1, 1), (128, 256, 128, 8, 8, 4, 1, 1), (128, 256, 128, 16, 8, 4, 1, 1),
         (128, 256, 128, 16, 8, 3, 1, 1), (128, 256, 128, 4, 8, 4, 1, 1), (128, 256, 128, 8, 8, 3, 1, 0),
         (256, 128, 128, 8, 8, 3, 1, 1), (128, 128, 128, 8, 4, 4, 1, 1), (256, 128, 128, 8, 8, 3, 0, 0),
         (128, 128, 128, 8, 4, 4, 0, 0), (128, 256, 128, 8, 8, 3, 0, 0), (128, 256, 128, 8, 8, 4, 0, 0)],
    89: [(128, 128, 64, 8, 4, 3, 0, 0), (128, 64, 64, 8, 4, 4, 0, 0), (64, 128, 128, 8, 4, 3, 0, 0)],
    0: [(32, 32, 32, 1, 4, 1, 0, 0)],
}
H100_CANDIDATES = CANDIDATES[90][:6] + [(256, 128, 128, 8, 8, 3, 0, 0)]


def _configs(table) -> list[dict[str, int]]:
    return [dict(zip(_KEYS, c)) for c in table]


def candidates(ctx: BuildContext | None) -> list[dict[str, int]] | CandidateLists:
    """The tile configs tried on this device (workbench.tuning.CandidateLists: H100_CANDIDATES on
    the H100, CANDIDATES[90] on the H200, the smaller-tile sm_89 list as the generic one; the
    interpreter's on a CPU)."""
    if not (compiled_on_gpu(ctx) if ctx is not None else torch.cuda.is_available()):
        return _configs(CANDIDATES[0])
    return GPU_LISTS


GPU_LISTS = CandidateLists({"H100 sm_90": _configs(H100_CANDIDATES), "H200 sm_90": _configs(CANDIDATES[90])},
                           _configs(CANDIDATES[89]))


def tma_fits(spec: ScaledMmSpec) -> bool:
    """Whether the TMA kernel takes this problem: rows of A, B^T (fp8: K % 16) and C (bfloat16:
    N % 8) 16-byte aligned, and a Triton with host tensor descriptors."""
    return spec.K % 16 == 0 and spec.N % 8 == 0 and tensor_descriptor_class() is not None


def _launch_of(spec: ScaledMmSpec, config, tensors=None, sms: int = SM90_SMS) -> TritonLaunch:
    """The launch of `config` (TMA 1 and the shape fits: the persistent TMA kernel, else the
    pointer kernel). tensors (a, b, c, sa, sb): the TMA kernel's descriptors point at them (the
    run); without, at stand-ins (the ahead-of-time PTX, the same specialisation)."""
    if int(config.get("TMA", 0)) and tma_fits(spec):
        return _tma_launch(spec, config, tensors, sms)
    ptr = triton_ptr(spec.dtype)
    return TritonLaunch(
        kernel=_scaled_mm_kernel,
        signature={"a_ptr": ptr, "b_ptr": ptr, "c_ptr": "*bf16", "sa_ptr": "*fp32", "sb_ptr": "*fp32",
                   "M": "i32", "N": "i32", "K": "i32", "stride_am": "i32", "stride_ak": "i32",
                   "stride_bk": "i32", "stride_bn": "i32", "stride_cm": "i32", "stride_cn": "i32",
                   **{k: "constexpr" for k in ("ROWWISE", "BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")}},
        constexprs={"ROWWISE": int(spec.rowwise), **{k: int(config[k]) for k in _KEYS[:4]}},
        grid=(cdiv(spec.M, int(config["BLOCK_M"])) * cdiv(spec.N, int(config["BLOCK_N"])), 1, 1),
        num_warps=int(config["num_warps"]), num_stages=int(config["num_stages"]),
        # A row-major, B column-major (make_inputs), C row-major
        scalars={"M": spec.M, "N": spec.N, "K": spec.K, "stride_am": spec.K, "stride_ak": 1,
                 "stride_bk": 1, "stride_bn": spec.K, "stride_cm": spec.N, "stride_cn": 1},
    )


def _tma_launch(spec: ScaledMmSpec, config, tensors, sms: int) -> TritonLaunch:
    descriptor = tensor_descriptor_class()
    m, n, k = spec.M, spec.N, spec.K
    bm, bn, bk, sub = (int(config[key]) for key in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "SUBTILE"))
    if tensors is None:
        fp8 = spec.dtype.torch
        tensors = (_StandIn(fp8, (m, k)), _StandIn(fp8, (n, k)), _StandIn(torch.bfloat16, (m, n)),
                   _StandIn(torch.float32, (m, 1)), _StandIn(torch.float32, (1, n)))
    a, bt, c, sa, sb = tensors
    cn = bn // 2 if sub else bn
    t = triton_ptr(spec.dtype).removeprefix("*")
    programs = max(1, min(sms, cdiv(m, bm) * cdiv(n, bn)))
    return TritonLaunch(
        kernel=_scaled_mm_tma_kernel,
        signature={"a_desc": f"tensordesc<{t}[{bm}, {bk}]>", "b_desc": f"tensordesc<{t}[{bn}, {bk}]>",
                   "c_desc": f"tensordesc<bf16[{bm}, {cn}]>", "sa_ptr": "*fp32", "sb_ptr": "*fp32",
                   "M": "i32", "N": "i32", "K": "i32",
                   **{key: "constexpr" for key in ("ROWWISE", "BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M",
                                                   "NUM_PROGRAMS", "SUBTILE")}},
        constexprs={"ROWWISE": int(spec.rowwise), "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk,
                    "GROUP_M": int(config["GROUP_M"]), "NUM_PROGRAMS": programs, "SUBTILE": sub},
        grid=(programs, 1, 1), num_warps=int(config["num_warps"]), num_stages=int(config["num_stages"]),
        scalars={"a_desc": descriptor(a, [m, k], [k, 1], [bm, bk]), "b_desc": descriptor(bt, [n, k], [k, 1], [bn, bk]),
                 "c_desc": descriptor(c, [m, n], [n, 1], [bm, cn]), "sa_ptr": sa, "sb_ptr": sb,
                 "M": m, "N": n, "K": k},
    )


def _choice(spec: ScaledMmSpec, ctx, run=None):
    return choose(ctx, "scaled_mm", "triton", spec, candidates(ctx), run, version=TUNE_VERSION)


def _triton_launch(spec: ScaledMmSpec, params, ctx: BuildContext | None = None) -> TritonLaunch:
    import dataclasses

    tuned = _choice(spec, ctx)
    return dataclasses.replace(_launch_of(spec, tuned.config, sms=sm_count(ctx)), note=tuned.note)


def runner(spec: ScaledMmSpec, config, sms: int = SM90_SMS):
    """The timed call: A row-major and the (K, N) B column-major, as make_inputs makes them (then
    nothing is copied); other layouts are copied into those first. The TMA kernel's descriptors
    are made per call (host objects over the call's tensors)."""
    tma = bool(int(config.get("TMA", 0))) and tma_fits(spec)
    launch = None if tma else _launch_of(spec, config)

    def run(a, b, sa, sb):
        a = a.contiguous()
        if b.stride(0) != 1 or b.stride(1) != b.shape[0]:
            b = b.t().contiguous().t()
        out = torch.empty((spec.M, spec.N), dtype=torch.bfloat16, device=a.device)
        sa, sb = sa.contiguous(), sb.contiguous()
        if tma:
            run_launch(_tma_launch(spec, config, (a, b.t(), out, sa, sb), sms))
        else:
            launch.run(a, b, out, sa, sb)
        return out
    return run


def run_launch(launch: TritonLaunch):
    """`kernel[grid](...)` of a launch whose scalars hold its descriptors and scale pointers."""
    return launch.kernel[launch.grid](**launch.scalars, **launch.constexprs, num_warps=launch.num_warps,
                                      num_stages=launch.num_stages)


@SCALED_MM.impl("triton", needs=["fp8"], source=TritonSource(_triton_launch))
def build_triton(spec: ScaledMmSpec, params, ctx: BuildContext):
    """Triton: fp8 tl.dot (wgmma e4m3 on sm_90), float32 accumulator, scales in the epilogue;
    the kernel (persistent TMA or pointer loads) and its tile tuned on the device over a small
    per-device list (CANDIDATES, H100_CANDIDATES)."""
    sms = sm_count(ctx)
    tuning = make_inputs(spec, ctx.device, 1) if can_tune(ctx) else None
    run = (lambda config: runner(spec, config, sms)(*tuning)) if tuning else None
    tuned = _choice(spec, ctx, run)
    return attach(runner(spec, tuned.config, sms), tuned)
