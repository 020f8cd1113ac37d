"""Pairwise Euclidean distances (the lecture's section 1.3: one API call, a chain of kernels).

    out[i, j] = sqrt(sum_d (x[i, d] - y[j, d])^2)       x: (M, D), y: (N, D) -> out: (M, N)

dtypes: float32.
torch.cdist switches to a matmul form, sqrt(|x|^2 + |y|^2 - 2 x.y), above 25 rows, which loses
digits when the points are far from the origin (MEASUREMENT.md P12). So the reference is a
float64 direct difference, and the tolerance grows with sqrt(D) like a matmul's with sqrt(K).
The inputs here are standard normal, where the matmul form still passes; shift them and it won't.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from workbench.cost import Cost
from workbench.dtypes import DType
from workbench.check.inputs import seeded_normal
from workbench.check.chunks import CheckChunks
from workbench.kernel_source import TritonLaunch, TritonSource, triton_ptr
from workbench.registry import BuildContext, Op
from workbench.spec import Spec
from workbench.triton_support import jit, tl

from ._utils import cdiv, matrix_runner

# The float64 reference materialises (rows, N, D) differences: this many elements per chunk.
REFERENCE_CHUNK_ELEMENTS = 2**26


# -- spec ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CdistSpec(Spec):
    """x: (M, D), y: (N, D) -> (M, N)."""

    M: int = 2048
    N: int = 2048
    D: int = 128
    dtype: DType = DType.float32


CDIST = Op(
    "cdist", CdistSpec,
    description="Pairwise Euclidean distances between M and N points in D dims",
    dtypes=[DType.float32],
    test_specs=[{"M": 1, "N": 1000, "D": 3}, {"M": 257, "N": 257, "D": 16},
                {"M": 30, "N": 26, "D": 1000}, {"M": 3, "N": 4097, "D": 5}],
    reduction_length=lambda spec: spec.D,
    # The reference holds the (rows, N, D) differences and their squares, REFERENCE_CHUNK_ELEMENTS
    # at most, and its row pieces twice while they are concatenated.
    check_chunks=CheckChunks.rows(0, reference_bytes=lambda spec, chunk_out: (
        2 * 8 * min(chunk_out * spec.D, REFERENCE_CHUNK_ELEMENTS) + 2 * 8 * chunk_out)),
)


# -- inputs and reference --------------------------------------------------------------------
@CDIST.inputs
def make_inputs(spec: CdistSpec, device: str, seed: int, out=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Seeded standard-normal points x (M, D) and y (N, D) (out: refill those). No special set:
    points far from the origin are where torch.cdist's matmul form loses digits (P12)."""
    x, y = out or (None, None)
    return (seeded_normal((spec.M, spec.D), spec.dtype.torch, device, seed, 0, out=x),
            seeded_normal((spec.N, spec.D), spec.dtype.torch, device, seed, 1, out=y))


@CDIST.reference()
def reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """float64 direct difference (never the matmul form: P12), in row chunks to bound memory."""
    rows = max(1, REFERENCE_CHUNK_ELEMENTS // max(1, y.shape[0] * x.shape[1]))
    return torch.cat([direct_distances(x[i:i + rows], y) for i in range(0, x.shape[0], rows)])


def direct_distances(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The broadcast difference: (M, 1, D) - (1, N, D), squared, summed over D, square root."""
    return ((x[:, None, :] - y[None, :, :]) ** 2).sum(dim=-1).sqrt()


# -- cost model ------------------------------------------------------------------------------
@CDIST.cost_model
def cost(spec: CdistSpec) -> Cost:
    size = spec.dtype.itemsize
    return Cost(
        bytes_read=(spec.M + spec.N) * spec.D * size,  # x and y, each read once
        bytes_written=spec.M * spec.N * size,          # out, written once
        flops=(3 * spec.M * spec.N * spec.D            # subtract, square, add per (i, j, d)
               + spec.M * spec.N),                     # one square root per output
    )


def manual_bytes_moved(spec: CdistSpec) -> int:
    """Traffic of the four eager kernels `manual` launches; three touch the (M, N, D) tensor."""
    mnd, mn, size = spec.M * spec.N * spec.D, spec.M * spec.N, spec.dtype.itemsize
    return (
        ((spec.M + spec.N) * spec.D + mnd) * size   # sub: reads x and y (broadcast), writes the differences
        + 2 * mnd * size                            # pow: reads and writes (M, N, D)
        + (mnd + mn) * size                         # sum: reads (M, N, D), writes (M, N)
        + 2 * mn * size                             # sqrt: reads and writes (M, N)
    )


# -- implementations -------------------------------------------------------------------------
@CDIST.impl("manual", moved_bytes=manual_bytes_moved)
def build_manual(spec: CdistSpec, params, ctx: BuildContext):
    """Broadcast difference in PyTorch: materialises the (M, N, D) tensor, four kernels."""
    return direct_distances


@CDIST.impl("pytorch")
def build_pytorch(spec: CdistSpec, params, ctx: BuildContext):
    """torch.cdist: the matmul form above 25 rows (cuBLAS plus pow/sum/clamp/sqrt kernels).

    Its matmul runs IEEE float32 (cdist is not matmul-like: engine/precision.py), as the check's
    float32 tolerance assumes."""
    return torch.cdist


@CDIST.impl("compiled")
def build_compiled(spec: CdistSpec, params, ctx: BuildContext):
    """torch.compile(manual, dynamic=False): Inductor fuses difference, square and sum."""
    return torch.compile(direct_distances, dynamic=False)


@jit
def _cdist_kernel(x_ptr, y_ptr, out_ptr, M, N, D, stride_xm, stride_xd, stride_yn, stride_yd,
                  stride_om, stride_on, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  INDEX_64: tl.constexpr = False):
    """One program per BLOCK_M x BLOCK_N tile of out; one rank-1 update per d (direct difference).
    INDEX_64: offsets in int64, for tensors of 2^31 elements or more (set only there)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    if INDEX_64:  # m * stride_om (or m * stride_xm) passes 2^31
        offs_m = offs_m.to(tl.int64)
        offs_n = offs_n.to(tl.int64)
    mask_m = offs_m < M
    mask_n = offs_n < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for d in range(0, D):
        # One coordinate of BLOCK_M points and of BLOCK_N points: the next d hits the same cache
        # lines, so global memory sees each row of x and y about once per tile.
        x_d = tl.load(x_ptr + offs_m * stride_xm + d * stride_xd, mask=mask_m, other=0.0)
        y_d = tl.load(y_ptr + offs_n * stride_yn + d * stride_yd, mask=mask_n, other=0.0)
        diff = x_d[:, None] - y_d[None, :]
        acc += diff * diff
    out_ptrs = out_ptr + offs_m[:, None] * stride_om + offs_n[None, :] * stride_on
    tl.store(out_ptrs, tl.sqrt(acc), mask=mask_m[:, None] & mask_n[None, :])


def _triton_launch(spec: CdistSpec, params) -> TritonLaunch:
    block_m, block_n = int(params["BLOCK_M"]), int(params["BLOCK_N"])
    ptr = triton_ptr(spec.dtype)
    ints = ("M", "N", "D", "stride_xm", "stride_xd", "stride_yn", "stride_yd", "stride_om", "stride_on")
    return TritonLaunch(
        kernel=_cdist_kernel,
        signature={"x_ptr": ptr, "y_ptr": ptr, "out_ptr": ptr, **{name: "i32" for name in ints},
                   "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "INDEX_64": "constexpr"},
        constexprs={"BLOCK_M": block_m, "BLOCK_N": block_n,
                    "INDEX_64": max(spec.M * spec.D, spec.N * spec.D, spec.M * spec.N) >= 2**31},
        grid=(cdiv(spec.M, block_m), cdiv(spec.N, block_n), 1),
        num_warps=int(params["num_warps"]),
        scalars={"M": spec.M, "N": spec.N, "D": spec.D, "stride_xm": spec.D, "stride_xd": 1,
                 "stride_yn": spec.D, "stride_yd": 1, "stride_om": spec.N, "stride_on": 1},
    )


@CDIST.impl("triton", params={"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4}, source=TritonSource(_triton_launch))
def build_triton(spec: CdistSpec, params, ctx: BuildContext):
    """Triton: tiles of distances by direct difference, float32 FMA (no cancellation, P12)."""
    return matrix_runner(_triton_launch(spec, params), spec.M, spec.N, where="cdist triton")
