"""The Triton GEMM shared by `matmul` and `matmul_gelu` (the Triton tutorial's "Matrix Multiplication").

    C = act(A @ B)        A: (M, K), B: (K, N) -> C: (M, N); act: none or GeLU (tanh form)

BLOCK_M x BLOCK_N tiles, K in BLOCK_K steps, and programs ordered in groups of GROUP_M tile rows so
that neighbouring programs share A and B tiles in L2 (GROUP_M = 1 is plain row-major order).
float32 accumulation; float32 inputs follow the run's `fp32_precision` through `tl.dot(...,
input_precision=...)`. The GeLU epilogue runs on the tile while it is still in registers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import torch

from workbench.cost import Cost
from workbench.dtypes import DType
from workbench.errors import LimitError
from workbench.kernel_source import TritonLaunch, triton_ptr
from workbench.registry import BuildContext
from workbench.spec import Spec
from workbench.triton_support import jit, tl

from workbench.tuning import attach, can_tune, choose
from ._tma_gemm import TMA_VERSION, _tile_ids, candidate_lists, sm_count, tma_launch, tma_runner, tma_supported
from ._utils import cdiv, matrix_runner

# Tuning times the candidates on a second, seeded A and B: only while each tensor is at most 2^28
# elements (8192^3 is 2^26); past that the first candidate runs untimed.
TUNE_MAX_ELEMENTS = 2**28


@dataclass(frozen=True)
class GemmSpec(Spec):
    """A: (M, K) @ B: (K, N) -> (M, N); an op subclasses it with its own docstring."""

    M: int = 4096
    N: int = 4096
    K: int = 4096
    dtype: DType = DType.bfloat16


# Awkward GEMM shapes: a square 257, one row against 1000 columns, a K of 4097 (one past a K tile).
GEMM_TEST_SPECS = ({"M": 257, "N": 257, "K": 257}, {"M": 1, "N": 1000, "K": 64}, {"M": 100, "N": 130, "K": 4097})


def gemm_k(spec: GemmSpec) -> int:
    """The reduction length of A @ B (the check's tolerance grows with sqrt(K))."""
    return spec.K


def gemm_cost(spec: GemmSpec, epilogue_flops_per_element: int = 0) -> Cost:
    """C = act(A @ B): A and B read once, C written once; 2MNK FLOPs plus the epilogue's per output."""
    size = spec.dtype.itemsize
    return Cost(
        bytes_read=(spec.M * spec.K + spec.K * spec.N) * size,  # A and B, each read once
        bytes_written=spec.M * spec.N * size,                    # C, written once
        flops=(2 * spec.M * spec.N * spec.K                      # one multiply-add per (m, n, k)
               + epilogue_flops_per_element * spec.M * spec.N),  # the activation on each output
    )


# Shared memory one block may opt in to on sm_90 (H100/H200): 227 KiB (CUDA C Programming Guide,
# "Compute Capabilities", table of technical specifications). Used where no device can be asked.
SM90_MAX_SHARED_BYTES = 232448


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


def tile_config(spec: Spec, params: Mapping[str, int], ctx: BuildContext | None = None,
                op_name: str = "matmul") -> TileConfig:
    """The Triton config from resolved impl params (resolve_params has refused block sizes that
    are not powers of two and GROUP_M < 1). Raises LimitError naming a block size under 16 (tl.dot
    needs 16) or a config over the device's shared memory per block (sm_90's without one)."""
    cfg = TileConfig(*(int(params[k]) for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages")))
    for name, value in (("BLOCK_M", cfg.block_m), ("BLOCK_N", cfg.block_n), ("BLOCK_K", cfg.block_k)):
        if value < 16:
            raise LimitError(f"{op_name} triton: {name} must be >= 16 (tl.dot), got {value}")
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


def use_tma(spec: Spec, params) -> bool:
    """The TMA kernel takes the row: autotune on, the default tile (none asked for), a 16-bit
    dtype and 16-byte aligned rows."""
    default_tile = all(params.get(k) == v for k, v in TRITON_PARAMS.items() if k != "autotune")
    return bool(params.get("autotune")) and default_tile and tma_supported(str(spec.dtype), spec.K, spec.N)


def matmul_launch(spec: Spec, params, *, activation: str = "none", ctx: BuildContext | None = None,
                  op_name: str = "matmul") -> TritonLaunch:
    """The launch the run performs (for the PTX view): the tuned TMA kernel where
    `params["autotune"]` and the problem allow it (`use_tma`), else the tutorial kernel."""
    if use_tma(spec, params):
        return tma_gemm_launch(spec, activation, ctx, op_name)
    return tutorial_launch(spec, params, activation=activation, ctx=ctx, op_name=op_name)


def gemm_builder(spec: Spec, params, ctx: BuildContext, activation: str, op_name: str, make_inputs):
    """The timed callable of `matmul` / `matmul_gelu` triton: the TMA kernel tuned on the device
    (candidates timed on `make_inputs(spec, device, seed=1)`), or the tutorial kernel's one launch."""
    if not use_tma(spec, params):
        launch = tutorial_launch(spec, params, activation=activation, ctx=ctx, op_name=op_name)
        return matrix_runner(launch, spec.M, spec.N, where=f"{op_name} triton")
    sms = sm_count(ctx)
    small = max(spec.M * spec.K, spec.K * spec.N, spec.M * spec.N) <= TUNE_MAX_ELEMENTS
    tuning = make_inputs(spec, ctx.device, 1) if can_tune(ctx) and small else None
    run = (lambda config: tma_runner(spec, config, activation, sms)(*tuning)) if tuning else None
    tuned = choose(ctx, op_name, "triton", spec, candidate_lists(activation, spec.K), run, version=TMA_VERSION)
    return attach(tma_runner(spec, tuned.config, activation, sms), tuned)


def tma_gemm_launch(spec: Spec, activation: str, ctx: BuildContext | None, op_name: str) -> TritonLaunch:
    """The TMA kernel's launch with the cached (else the default) config, for the PTX view."""
    tuned = choose(ctx, op_name, "triton", spec, candidate_lists(activation, spec.K), version=TMA_VERSION)
    return tma_launch(spec.M, spec.N, spec.K, str(spec.dtype), tuned.config, activation=activation,
                      sms=sm_count(ctx), note=tuned.note)


def tutorial_launch(spec: Spec, params, *, activation: str = "none", ctx: BuildContext | None = None,
                  op_name: str = "matmul") -> TritonLaunch:
    """The one launch of the tutorial GEMM on contiguous A, B and C (the run and the PTX view
    alike); int64 offsets past 2^31 elements. Raises LimitError for a config over the shared memory."""
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
