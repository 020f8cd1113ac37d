"""RMSNorm, fused in Triton: a plugin op, written the way a kernel engineer brings their own kernel.

    y[i, j] = x[i, j] / sqrt(mean_k x[i, k]^2 + eps) * w[j]          x: (M, N), w: (N,) -> y: (M, N)

dtypes: float32, float16, bfloat16 (the fused kernel and the manual form compute in float32).
Source of the formula: Zhang & Sennrich, "Root Mean Square Layer Normalization" (2019), eq. 4;
`manual` is the lecture-style form (upcast as Llama's RMSNorm does, normalise, scale, cast back
once: one rounding to the output dtype, as the fused kernel and F.rms_norm have).

    workbench --replay examples/rmsnorm.yaml           # from any folder: plugins are relative to the session
    workbench examples/rmsnorm.yaml --watch            # edit this file in another window, save, watch

Implementations: `manual` (six eager kernels in float32 plus the casts), `pytorch`
(torch.nn.functional.rms_norm), `compiled` (torch.compile of `manual`, dynamic=False), and
`triton`: one program per row, the whole row in one block, sum of squares on chip, x read
once and y written once. docs/PLUGINS.md walks through this file.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from workbench.check.chunks import CheckChunks
from workbench.cost import Cost
from workbench.dtypes import DType
from workbench.errors import LimitError
from workbench.check.inputs import seeded_normal
from workbench.kernel_source import TritonLaunch, TritonSource, triton_ptr
from workbench.registry import BuildContext, Op
from workbench.spec import Spec
from workbench.triton_support import jit, next_power_of_2, tl

EPS = 1e-6            # as Llama's RMSNorm
MAX_BLOCK_SIZE = 16384  # one row in registers: 16384 float32 over 16 warps is 32 values per thread
FLOAT32_BYTES = 4


# -- spec ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RMSNormSpec(Spec):
    """x: (M, N), w: (N,) -> (M, N), normalised along N."""

    M: int = 16384
    N: int = 8192
    dtype: DType = DType.bfloat16


RMSNORM = Op(
    "rmsnorm", RMSNormSpec,
    description="RMSNorm of the rows of an M x N matrix, scaled by w (N,)",
    test_specs=[{"M": 1, "N": 1000}, {"M": 257, "N": 257}, {"M": 3, "N": 4097}],
    check_chunks=CheckChunks.rows(0),  # reference rows [r0, r1) from x's rows, all of w
    sum_length=lambda spec: spec.N,    # the float32 sum of squares scales every output
)


# -- inputs and reference --------------------------------------------------------------------
@RMSNORM.inputs
def make_inputs(spec: RMSNormSpec, device: str, seed: int, out=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Seeded x (M, N), standard normal x2, and w (N,) around 1 as a trained norm's weights
    (out: refill those tensors in place)."""
    x = seeded_normal((spec.M, spec.N), spec.dtype.torch, device, seed, 0, scale=2.0, out=out[0] if out else None)
    w = seeded_normal((spec.N,), spec.dtype.torch, device, seed, 1, scale=0.1, out=out[1] if out else None)
    return x, w.add_(1.0)


@RMSNORM.reference()
def reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """float64 RMSNorm (the inputs arrive as float64)."""
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * w


# -- cost model ------------------------------------------------------------------------------
@RMSNORM.cost_model
def cost(spec: RMSNormSpec) -> Cost:
    mn, s = spec.M * spec.N, spec.dtype.itemsize
    return Cost(
        bytes_read=mn * s + spec.N * s,   # x, read once; w, read once
        bytes_written=mn * s,             # y, written once
        flops=4 * mn + 2 * spec.M,        # square, sum, x * r, * w per element; + eps, rsqrt per row
    )


def manual_bytes_moved(spec: RMSNormSpec) -> int:
    """Traffic of the eager kernels `manual_rmsnorm` launches (what fusing saves)."""
    mn, m, n, s, f = spec.M * spec.N, spec.M, spec.N, spec.dtype.itemsize, FLOAT32_BYTES
    casts = s != f  # float32 input: .float() and .to(x.dtype) launch nothing
    return (
        (mn * s + mn * f if casts else 0)   # x.float(): reads x, writes a float32 copy
        + 2 * mn * f                        # pow(2): reads the copy, writes the squares
        + mn * f + m * f                    # mean: reads the squares, writes M means
        + 2 * m * f + 2 * m * f             # + eps, rsqrt: M values each, read and written
        + mn * f + m * f + mn * f           # xf * r: reads the copy and r, writes the product
        + (n * s + n * f if casts else 0)   # w.float(): N values
        + mn * f + n * f + mn * f           # * w: reads the product and w, writes it scaled
        + (mn * f + mn * s if casts else 0)  # .to(x.dtype): reads it, writes y
    )


# -- implementations -------------------------------------------------------------------------
def manual_rmsnorm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """The lecture-style formula: upcast, mean of squares, rsqrt, scale by w, cast back once."""
    xf = x.float()
    normed = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + EPS)
    return (normed * w.float()).to(x.dtype)


@RMSNORM.impl("manual", moved_bytes=manual_bytes_moved)
def build_manual(spec: RMSNormSpec, params, ctx: BuildContext):
    """Hand-written PyTorch formula: pow, mean, add, rsqrt, two multiplies, casts: eager kernels."""
    return manual_rmsnorm


@RMSNORM.impl("pytorch")
def build_pytorch(spec: RMSNormSpec, params, ctx: BuildContext):
    """torch.nn.functional.rms_norm(x, (N,), w, eps): PyTorch's own kernel."""
    return lambda x, w: F.rms_norm(x, (x.shape[-1],), w, EPS)


@RMSNORM.impl("compiled")
def build_compiled(spec: RMSNormSpec, params, ctx: BuildContext):
    """torch.compile(manual_rmsnorm, dynamic=False): Inductor fuses it into one row kernel."""
    return torch.compile(manual_rmsnorm, dynamic=False)


# -- Triton: one program per row, the whole row in one block ----------------------------------
@jit
def _rmsnorm_kernel(x_ptr, w_ptr, y_ptr, row_stride, n_cols, eps, BLOCK_SIZE: tl.constexpr):
    """Load a row (float32), sum its squares on chip, scale by rsqrt(mean + eps) and w, store."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    mean_square = tl.sum(x * x, axis=0) / n_cols   # padding loads 0: it adds nothing
    y = x * (1.0 / tl.sqrt(mean_square + eps)) * w
    tl.store(y_ptr + row * row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def _one_block(n_cols: int) -> tuple[int, int]:
    """(BLOCK_SIZE, num_warps) for one row in one block; LimitError past MAX_BLOCK_SIZE."""
    block = next_power_of_2(n_cols)
    if block > MAX_BLOCK_SIZE:
        raise LimitError(f"rmsnorm triton: a row of N={n_cols} needs BLOCK_SIZE={block}, over the "
                         f"one-block limit MAX_BLOCK_SIZE={MAX_BLOCK_SIZE}")
    # More warps for longer rows keep the values per thread bounded (Triton's softmax tutorial).
    return block, 4 if block < 2048 else 8 if block < 8192 else 16


def _triton_launch(spec: RMSNormSpec, params) -> TritonLaunch:
    """The one launch: the builder runs it, and the PTX pane compiles exactly it."""
    block, num_warps = _one_block(spec.N)
    ptr = triton_ptr(spec.dtype)
    return TritonLaunch(
        kernel=_rmsnorm_kernel,
        signature={"x_ptr": ptr, "w_ptr": ptr, "y_ptr": ptr, "row_stride": "i32", "n_cols": "i32",
                   "eps": "fp32", "BLOCK_SIZE": "constexpr"},
        constexprs={"BLOCK_SIZE": block}, grid=(spec.M, 1, 1), num_warps=num_warps,
        scalars={"row_stride": spec.N, "n_cols": spec.N, "eps": EPS})


@RMSNORM.impl("triton", source=TritonSource(_triton_launch, interpreter_dtypes=("float32", "float16")))
def build_triton(spec: RMSNormSpec, params, ctx: BuildContext):
    """Triton, fused: one program per row, x read once, y written once (N <= 16384)."""
    launch = _triton_launch(spec, params)

    def run(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        x, w = x.contiguous(), w.contiguous()
        y = torch.empty_like(x)
        launch.run(x, w, y)
        return y
    return run
