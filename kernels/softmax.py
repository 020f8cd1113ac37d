"""Softmax over the rows of a matrix (the lecture's section 6: from elementwise to a row reduction).

    y[i, j] = exp(x[i, j] - m_i) / sum_k exp(x[i, k] - m_i),   m_i = max_k x[i, k]
    x: (M, N) -> y: (M, N)

dtypes: float32, float16, bfloat16 (the fused kernels compute in float32).
Subtracting the row max keeps exp from overflowing and does not change the result.
The unfused `manual` form launches five kernels and moves ~8MN elements against the fused
kernels' 2MN (the lecture's worked example, section 6.1). `triton` holds a whole row in one
block, so a row too long for one block fails naming `triton_looped`, which streams the row
in blocks with an online (running max, running sum) pair (Milakov & Gimelshein, "Online
normalizer calculation for softmax", 2018). `cuda` reads every row once: the row stays in
registers, one block per row, or a thread-block cluster per row for long rows (up to 262144
columns; kernels/_onepass.py has its plan), and only longer rows take a two-pass kernel.
`triton`'s num_warps (and for 16384-wide rows unmasked tiles: kernels/_softmax_rows.py) and `cuda`'s cluster shape (registers only, or with packs staged
in shared memory, and whether the exponentials are kept over the input) are tuned on the device
(workbench/tuning.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from workbench.cost import Cost
from workbench.cuda_build import BINDING_HEADERS, load_cuda
from workbench.errors import LimitError
from workbench.check.inputs import seeded_normal
from workbench.check.chunks import CheckChunks
from workbench.kernel_source import CudaSource, TritonLaunch, TritonSource, triton_ptr
from workbench.registry import BuildContext, Op
from workbench.triton_support import jit, next_power_of_2, tl

from . import _softmax_rows as rows_kernel
from workbench.tuning import CandidateLists, attach, can_tune, choose, default_choice
from ._onepass import (MEASURED_ON as ONEPASS_MEASURED_ON, ONEPASS_VERSION, cluster_candidates, config_from, fits, geometry,
                       pack_width, row_candidates)
from ._utils import MATRIX_TEST_SPECS, MatrixSpec, elementwise_cost, elementwise_runner, num_warps_for

CU_FILE = Path(__file__).with_name("softmax.cu")
# One row in registers: 16384 float32 over 16 warps is 32 values per thread (plus the exps);
# longer rows spill, so `triton` stops here and names `triton_looped`.
MAX_BLOCK_SIZE = 16384
# Tuning times candidates on a second, seeded copy of the inputs (and their outputs): up to 2^30
# elements (4 GiB of float32: the long rows, 4096 x 262144, where the tuned cluster shape is worth
# 73% -> 85% of copy on the H200); larger problems take the first candidate untimed.
TUNE_MAX_ELEMENTS = 2**30


# -- spec ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SoftmaxSpec(MatrixSpec):
    """x: (M, N) -> (M, N), softmax along N."""

    N: int = 4096


SOFTMAX = Op(
    "softmax", SoftmaxSpec,
    description="Row softmax of an M x N matrix",
    test_specs=[*MATRIX_TEST_SPECS, {"M": 5, "N": 1}],  # and rows of one element
    check_chunks=CheckChunks.rows(0),
    sum_length=lambda spec: spec.N,  # the denominator's float32 sum scales every output
)


# -- inputs and reference --------------------------------------------------------------------
@SOFTMAX.inputs
def make_inputs(spec: SoftmaxSpec, device: str, seed: int, out=None) -> tuple[torch.Tensor]:
    """One seeded x of shape (M, N): standard normal scaled x4, so rows have a dominant entry
    (out: refill that tensor in place)."""
    return (seeded_normal((spec.M, spec.N), spec.dtype.torch, device, seed, 0, scale=4.0,
                          out=out[0] if out else None),)


# Row offsets of the special set, cycling over the rows: exp(x) without the max subtracted
# overflows float32 above ~88.7 (rows +100, +1000) and underflows to 0/0 below ~-104 (-200).
SPECIAL_ROW_OFFSETS = (0.0, 100.0, -200.0, 1000.0)


@SOFTMAX.special_inputs
def special_inputs(spec: SoftmaxSpec, inputs, seed: int) -> tuple[torch.Tensor]:
    """Seeded x with rows shifted by SPECIAL_ROW_OFFSETS (the result must not change: the max
    is subtracted) and -inf (a masked entry, exp gives 0) at columns 1, 14, 27, ... (column 0
    stays finite, so no row is all -inf)."""
    (x,) = make_inputs(spec, str(inputs[0].device), seed, out=inputs)
    for start, offset in enumerate(SPECIAL_ROW_OFFSETS):
        if offset:
            x[start::len(SPECIAL_ROW_OFFSETS)].add_(offset)
    x[:, 1::13].fill_(float("-inf"))
    return (x,)


@SOFTMAX.reference()
def reference(x: torch.Tensor) -> torch.Tensor:
    """float64 softmax along the last dim."""
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)


# -- cost model ------------------------------------------------------------------------------
# FLOPs per element: max compare (1), subtract (1), exp (1, as roofline models count
# transcendentals), sum (1), divide (1).
FLOPS_PER_ELEMENT = 5


@SOFTMAX.cost_model
def cost(spec: SoftmaxSpec) -> Cost:
    """x read once, y written once, FLOPS_PER_ELEMENT per element."""
    return elementwise_cost(spec, FLOPS_PER_ELEMENT)


def manual_bytes_moved(spec: SoftmaxSpec) -> int:
    """Traffic of the five eager kernels `manual_softmax` launches (lecture section 6.1, ~8MN)."""
    mn, m, size = spec.M * spec.N, spec.M, spec.dtype.itemsize
    return (
        (mn + m) * size + 8 * m     # max: reads x, writes M maxima and M int64 indices (max(dim) returns both)
        + (2 * mn + m) * size       # sub: reads x and the maxima, writes x - max
        + 2 * mn * size             # exp: reads x - max, writes the numerator
        + (mn + m) * size           # sum: reads the numerator, writes M sums
        + (2 * mn + m) * size       # div: reads the numerator and the sums, writes y
    )


def reread_bytes_moved(spec: SoftmaxSpec) -> int:
    """Traffic of the two-pass kernels (`triton_looped`, `cuda`): the row is read twice, y written
    once. The second read usually hits L2 (rows in flight are far smaller than L2), so HBM sees
    close to the ideal 2MN; this is the upper estimate."""
    mn, size = spec.M * spec.N, spec.dtype.itemsize
    return (
        2 * mn * size   # x: read for the (max, sum) pass, read again for the output pass
        + mn * size     # y: written once
    )


# -- implementations -------------------------------------------------------------------------
def manual_softmax(x: torch.Tensor) -> torch.Tensor:
    """The lecture's formula: max, sub, exp, sum, div (each one an eager kernel)."""
    x = x - x.max(dim=-1, keepdim=True).values
    numerator = torch.exp(x)
    denominator = numerator.sum(dim=-1, keepdim=True)
    return numerator / denominator


# The unfused forms in half precision round x - max, exp and the sum to the dtype: an entry
# e^(x - max) with x - max = -10 carries ~10 u of relative error, and the dominant entry ~2 u in
# norm (CPU: least passing factors 256 float16 and 2048 bfloat16 for manual over the test specs
# and tiny shapes, seeds 0-2; 64 and 512 for CPU Inductor's compiled form at the test specs;
# benchmarks/calibrate_check.py). Factors with a 2x margin:
UNFUSED_HALF_FACTOR = {"float16": 512.0, "bfloat16": 4096.0}


@SOFTMAX.impl("manual", moved_bytes=manual_bytes_moved, tolerance_scale=UNFUSED_HALF_FACTOR)
def build_manual(spec: SoftmaxSpec, params, ctx: BuildContext):
    """Hand-written PyTorch formula: five eager kernels, ~8MN elements moved.

    Tolerance factor UNFUSED_HALF_FACTOR in half precision (each operator rounds to the dtype)."""
    return manual_softmax


@SOFTMAX.impl("pytorch")
def build_pytorch(spec: SoftmaxSpec, params, ctx: BuildContext):
    """torch.softmax(x, dim=-1): one fused ATen kernel."""
    return lambda x: torch.softmax(x, dim=-1)


@SOFTMAX.impl("compiled", tolerance_scale=UNFUSED_HALF_FACTOR)
def build_compiled(spec: SoftmaxSpec, params, ctx: BuildContext):
    """torch.compile(manual_softmax, dynamic=False): Inductor fuses the five kernels into one.

    Tolerance factor UNFUSED_HALF_FACTOR in half precision: Inductor's CPU code rounds the
    intermediates to the dtype as eager does (its GPU code computes in float32)."""
    return torch.compile(manual_softmax, dynamic=False)


# -- Triton: one program per row, the whole row in one block ----------------------------------
@jit
def _softmax_kernel(x_ptr, y_ptr, x_row_stride, y_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    """The lecture's kernel: one program per row, BLOCK_SIZE >= n_cols, padding masked as -inf."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)          # on-chip reduction; padding stays -inf
    # exp(x) as 2^(x log2 e): one ex2.approx per element (tl.exp adds nothing but the multiply);
    # exp(-inf) = 0, so padding adds nothing to the sum.
    numerator = tl.exp2(x * 1.4426950408889634)
    # One reciprocal per row, then a multiply per element, instead of a division per element.
    y = numerator * (1.0 / tl.sum(numerator, axis=0))
    tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def _one_block(spec: SoftmaxSpec) -> tuple[int, int]:
    """(BLOCK_SIZE, num_warps) for one row in one block; raises LimitError past MAX_BLOCK_SIZE."""
    block = next_power_of_2(spec.N)
    if block > MAX_BLOCK_SIZE:
        raise LimitError(
            f"softmax triton: a row of N={spec.N} needs BLOCK_SIZE={block}, over the one-block limit "
            f"MAX_BLOCK_SIZE={MAX_BLOCK_SIZE}; use triton_looped (online softmax over column blocks)")
    return block, num_warps_for(block)


def _row_launch(kernel, spec: SoftmaxSpec, block: int, num_warps: int) -> TritonLaunch:
    ptr = triton_ptr(spec.dtype)
    return TritonLaunch(
        kernel=kernel,
        signature={"x_ptr": ptr, "y_ptr": ptr, "x_row_stride": "i32", "y_row_stride": "i32",
                   "n_cols": "i32", "BLOCK_SIZE": "constexpr"},
        constexprs={"BLOCK_SIZE": block},
        grid=(spec.M, 1, 1),
        num_warps=num_warps,
        scalars={"x_row_stride": spec.N, "y_row_stride": spec.N, "n_cols": spec.N},
    )


def _tuned_launch(spec: SoftmaxSpec, block: int, cfg: dict[str, Any]) -> TritonLaunch:
    """The launch of a tuned config: the lecture's kernel for its configs (kernels/_softmax_rows.py
    `is_lecture`), the three-pass kernel for L2PASS > 0 (chunks of L2PASS columns), else the
    variant kernel with ROWS rows per program."""
    cfg = rows_kernel.config(cfg)
    if rows_kernel.is_lecture(cfg):
        return _row_launch(_softmax_kernel, spec, block, cfg["num_warps"])
    ptr = triton_ptr(spec.dtype)
    if cfg["L2PASS"]:
        chunk = min(cfg["L2PASS"] * 4 // spec.dtype.itemsize, block)  # L2PASS counts float32 columns: same bytes
        return TritonLaunch(
            kernel=rows_kernel._softmax_l2_kernel,
            signature={"x_ptr": ptr, "y_ptr": ptr, "x_row_stride": "i32", "y_row_stride": "i32", "n_cols": "i32",
                       "BLOCK_SIZE": "constexpr", "MASKED": "constexpr"},
            constexprs={"BLOCK_SIZE": chunk, "MASKED": int(spec.N % chunk != 0)},
            grid=(spec.M, 1, 1),
            num_warps=cfg["num_warps"],
            scalars={"x_row_stride": spec.N, "y_row_stride": spec.N, "n_cols": spec.N},
        )
    knobs = {k: cfg[k] for k in ("ROWS", "STREAM")}
    knobs["MASKED"] = rows_kernel.masked(cfg, spec.M, spec.N, block)
    return TritonLaunch(
        kernel=rows_kernel._softmax_rows_kernel,
        signature={"x_ptr": ptr, "y_ptr": ptr, "x_row_stride": "i32", "y_row_stride": "i32", "n_rows": "i32",
                   "n_cols": "i32", "BLOCK_SIZE": "constexpr", **{k: "constexpr" for k in knobs}},
        constexprs={"BLOCK_SIZE": block, **knobs},
        grid=rows_kernel.grid(spec.M, cfg["ROWS"]),
        num_warps=cfg["num_warps"],
        scalars={"x_row_stride": spec.N, "y_row_stride": spec.N, "n_rows": spec.M, "n_cols": spec.N},
    )


def _triton_candidates(spec: SoftmaxSpec) -> tuple[int, list[dict[str, int]]]:
    block, rule = _one_block(spec)
    return block, rows_kernel.candidates(block, rule)


def _triton_choice(spec: SoftmaxSpec, ctx, run=None):
    block, configs = _triton_candidates(spec)
    lists = CandidateLists.same(configs, rows_kernel.MEASURED_ON)
    return block, choose(ctx, "softmax", "triton", spec, lists, run, version=rows_kernel.TRITON_VERSION)


def _triton_launch(spec: SoftmaxSpec, params, ctx: BuildContext | None = None) -> TritonLaunch:
    block, tuned = _triton_choice(spec, ctx)
    return dataclasses.replace(_tuned_launch(spec, block, tuned.config), note=tuned.note)


def _triton_candidate_launches(spec: SoftmaxSpec, params, ctx: BuildContext | None = None) -> list[TritonLaunch]:
    """What build_triton's tuner times: every candidate while no choice is cached, else the one."""
    block, tuned = _triton_choice(spec, ctx)
    if tuned.source == "cached":
        return [_tuned_launch(spec, block, tuned.config)]
    return [_tuned_launch(spec, block, config) for config in _triton_candidates(spec)[1]]


@SOFTMAX.impl("triton", source=TritonSource(_triton_launch, candidates=_triton_candidate_launches))
def build_triton(spec: SoftmaxSpec, params, ctx: BuildContext):
    """Triton, the lecture's kernel: one program per row, the row in one block (N <= 16384);
    num_warps (and, for 16384-wide rows, unmasked tiles, rows per program, streaming hints) tuned on
    the device (workbench/tuning.py, kernels/_softmax_rows.py)."""
    block, _ = _one_block(spec)
    tuning = tuning_inputs(spec, ctx)

    def run(config):
        return elementwise_runner(_tuned_launch(spec, block, config))(*tuning)
    _, tuned = _triton_choice(spec, ctx, run if tuning else None)
    return attach(elementwise_runner(_tuned_launch(spec, block, tuned.config)), tuned)


def tuning_inputs(spec: SoftmaxSpec, ctx: BuildContext) -> tuple[torch.Tensor, ...] | None:
    """Seeded inputs to time candidate configs on, or None (no GPU; or over TUNE_MAX_ELEMENTS,
    where a second copy of the inputs would crowd the device: the default config then)."""
    if not can_tune(ctx) or spec.M * spec.N > TUNE_MAX_ELEMENTS:
        return None
    return make_inputs(spec, ctx.device, 1)


# -- Triton: one program per row, streamed in column blocks (online softmax) ------------------
@jit
def _softmax_looped_kernel(x_ptr, y_ptr, x_row_stride, y_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    """Pass 1 keeps a running (max, sum) per lane over the column blocks; pass 2 writes."""
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    cols = tl.arange(0, BLOCK_SIZE)
    m_i = tl.full([BLOCK_SIZE], -float("inf"), tl.float32)
    s_i = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m_i, x)
        # A lane that has seen only padding keeps m = -inf: shift by 0 there, never -inf - -inf.
        shift = tl.where(m_new == -float("inf"), 0.0, m_new)
        s_i = s_i * tl.exp(m_i - shift) + tl.exp(x - shift)
        m_i = m_new
    row_max = tl.max(m_i, axis=0)
    row_sum = tl.sum(s_i * tl.exp(m_i - row_max), axis=0)  # lanes with m = -inf contribute 0
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - row_max) / row_sum
        tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def _looped_config(params) -> tuple[int, int]:
    """(BLOCK_SIZE, num_warps); BLOCK_SIZE over MAX_BLOCK_SIZE raises LimitError (resolve_params
    has already refused one that is not a power of two)."""
    block = int(params["BLOCK_SIZE"])
    if block > MAX_BLOCK_SIZE:
        raise LimitError(f"softmax triton_looped: BLOCK_SIZE must be <= {MAX_BLOCK_SIZE}, got {block}")
    return block, int(params["num_warps"])


def _looped_launch(spec: SoftmaxSpec, params) -> TritonLaunch:
    return _row_launch(_softmax_looped_kernel, spec, *_looped_config(params))


@SOFTMAX.impl("triton_looped", params={"BLOCK_SIZE": 2048, "num_warps": 8},
              moved_bytes=reread_bytes_moved, source=TritonSource(_looped_launch))
def build_triton_looped(spec: SoftmaxSpec, params, ctx: BuildContext):
    """Triton, online softmax: one program per row streaming BLOCK_SIZE columns at a time (any N)."""
    return elementwise_runner(_looped_launch(spec, params))


# -- CUDA: one pass, the row in registers (a block, or a cluster of blocks) ---------------------
_CPP_BINDING = BINDING_HEADERS + r"""
extern "C" cudaError_t softmax_f32(const void*, void*, int64_t, int, int, cudaStream_t);
extern "C" cudaError_t softmax_f16(const void*, void*, int64_t, int, int, cudaStream_t);
extern "C" cudaError_t softmax_bf16(const void*, void*, int64_t, int, int, cudaStream_t);
extern "C" cudaError_t softmax_onepass_f32(const void*, void*, int64_t, int, int, int, int, int, int, int, cudaStream_t);
extern "C" cudaError_t softmax_onepass_f16(const void*, void*, int64_t, int, int, int, int, int, int, int, cudaStream_t);
extern "C" cudaError_t softmax_onepass_bf16(const void*, void*, int64_t, int, int, int, int, int, int, int, cudaStream_t);
extern "C" int softmax_onepass_fits(int64_t, int, int, const void*, const void*);
extern "C" cudaError_t softmax_l2_f32(const void*, void*, int64_t, int, int, int, cudaStream_t);
extern "C" cudaError_t softmax_l2_f16(const void*, void*, int64_t, int, int, int, cudaStream_t);
extern "C" cudaError_t softmax_l2_bf16(const void*, void*, int64_t, int, int, int, cudaStream_t);

// threads, packs, spacks, cluster, keep, even: a configuration of the one-pass kernel, threads = 0
// for its plan (even = 1: the instantiation without bounds checks, for a row of exactly the
// cluster's slices; refused for any other). A row too long for one pass (softmax_onepass_fits) takes the two-pass kernel, as does any
// row with twopass = 1 (then with `threads` threads a block, 0: the kernel's own choice); twopass = 2
// takes the three-pass L2 kernel (softmax_l2_kernel) at `threads` (1024), twopass = 3 the same with
// Triton's loads (TRITON_FORM: L1 eviction hints).
at::Tensor softmax_rows(at::Tensor x, int64_t threads, int64_t packs, int64_t spacks, int64_t cluster,
                           int64_t keep, int64_t even, int64_t twopass) {
    TORCH_CHECK(x.is_cuda(), "softmax: x must be a CUDA tensor");
    WB_CHECK(x.dim() == 2, "softmax: x must be 2-D (M, N), got %lld dims", (long long)x.dim());
    TORCH_CHECK(x.is_contiguous(), "softmax: x must be contiguous");
    WB_CHECK(x.size(1) < ((int64_t)1 << 31), "softmax: N must be < 2^31, got %lld", (long long)x.size(1));
    WB_CHECK(x.size(0) < ((int64_t)1 << 31), "softmax: M must be < 2^31 (one block per row), got %lld", (long long)x.size(0));
    const c10::cuda::CUDAGuard guard(x.device());
    auto y = at::empty_like(x);
    auto stream = c10::cuda::getCurrentCUDAStream();
    int64_t rows = x.size(0);
    int cols = (int)x.size(1);
    const bool onepass = twopass == 0 &&
                         softmax_onepass_fits(rows, cols, (int)x.element_size(), x.data_ptr(), y.data_ptr());
    const int t = (int)threads, p = (int)packs, sp = (int)spacks, c = (int)cluster, k = (int)keep, e = (int)even;
    const int tp = twopass ? t : 0;  // the two-pass kernel's block: tuned, or its own choice
    cudaError_t err;
    if (twopass >= 2) {
        const int form = twopass == 3 ? 1 : 0;
        switch (x.scalar_type()) {
            case at::kFloat: err = softmax_l2_f32(x.data_ptr(), y.data_ptr(), rows, cols, t, form, stream); break;
            case at::kHalf: err = softmax_l2_f16(x.data_ptr(), y.data_ptr(), rows, cols, t, form, stream); break;
            case at::kBFloat16: err = softmax_l2_bf16(x.data_ptr(), y.data_ptr(), rows, cols, t, form, stream); break;
            default: WB_CHECK(false, "softmax: dtype must be float32, float16 or bfloat16, got %s", c10::toString(x.scalar_type()));
        }
    } else switch (x.scalar_type()) {
        case at::kFloat: err = onepass ? softmax_onepass_f32(x.data_ptr(), y.data_ptr(), rows, cols, t, p, sp, c, k, e, stream)
                                       : softmax_f32(x.data_ptr(), y.data_ptr(), rows, cols, tp, stream); break;
        case at::kHalf: err = onepass ? softmax_onepass_f16(x.data_ptr(), y.data_ptr(), rows, cols, t, p, sp, c, k, e, stream)
                                      : softmax_f16(x.data_ptr(), y.data_ptr(), rows, cols, tp, stream); break;
        case at::kBFloat16: err = onepass ? softmax_onepass_bf16(x.data_ptr(), y.data_ptr(), rows, cols, t, p, sp, c, k, e, stream)
                                          : softmax_bf16(x.data_ptr(), y.data_ptr(), rows, cols, tp, stream); break;
        default: WB_CHECK(false, "softmax: dtype must be float32, float16 or bfloat16, got %s", c10::toString(x.scalar_type()));
    }
    WB_CHECK(err == cudaSuccess, "softmax launch failed (threads %d, packs %d, spacks %d, cluster %d, keep %d, even %d, "
             "twopass %lld): %s%s", t, p, sp, c, k, e, (long long)twopass, cudaGetErrorString(err),
             err == cudaErrorInvalidConfiguration ? " (a configuration softmax.cu does not instantiate, or one this "
                                                    "module was built without: WB_SOFTMAX_KERNELS)" : "");
    return y;
}
"""
PLAN = {"threads": 0, "packs": 0, "spacks": 0, "cluster": 0, "keep": 0, "even": 0}  # the one-pass kernel's own plan
# A row that fits one block in the plan but holds at least TWO_PASS_FROM_BYTES (16384 float32 or
# bfloat16 columns) also tries the three-pass L2 kernel (softmax.cu softmax_l2_kernel:
# torch.compile's form, two blocks of 1024 an SM; 16-byte packs only) as it was written (twopass 2)
# and with the loads Triton compiles its own to (twopass 3: L1 eviction hints too). Why:
# the one-pass kernel keeps a 16384-wide float32 row in 52 registers a thread at 512 threads (two
# blocks, 1024 threads an SM), 97.1-97.4% of the copy on the H200, where torch.compile's three
# passes over the row, the later ones served by L2 at 32 registers a thread, reached 100.8%
# (README, issue #19). Dropped after three H200 calls (each candidate timed in four alternating
# rounds): the L2 kernel at 512 threads (4-27% behind 1024) and the two-pass kernel at
# 256, 512 and 1024 threads (40-50% behind the plan).
L2_PASS_FORMS = (2, 3)
TWO_PASS_FROM_BYTES = 32 * 1024
CUDA_VERSION = "tp4"  # the one-block rows' cache key: tp2 added ROW_SHAPES, tp3 the L2 kernel, tp4 its Triton form


def cuda_candidates(spec: SoftmaxSpec) -> list[dict[str, int]]:
    """The configs the `cuda` implementation's tuner compares at `spec` (the first is an untuned
    run's): clustered rows, kernels/_onepass.py's shapes (H200, 4096 x 262144: 71-89% of copy by
    shape alone), the measured fastest first; a wide one-block row, the plan, its ROW_SHAPES
    (kept one-block shapes: kernels/_onepass.py row_candidates), then the three-pass L2 kernel in
    L2_PASS_FORMS (twopass 2 and 3); any other row, the plan alone."""
    clustered = [c.params() for c in cluster_candidates(spec.N, spec.dtype.itemsize)]
    if clustered:
        return clustered
    if fits(spec.M, spec.N, spec.dtype.itemsize) and spec.N * spec.dtype.itemsize >= TWO_PASS_FROM_BYTES:
        rows = [c.params() for c in row_candidates(spec.N, spec.dtype.itemsize)]
        l2 = [{**PLAN, "threads": 1024, "twopass": f} for f in L2_PASS_FORMS] if spec.N % (16 // spec.dtype.itemsize) == 0 else []
        return [dict(PLAN)] + rows + l2
    return [dict(PLAN)]


def cuda_call(module: Any, config: dict) -> Any:
    """x -> softmax_rows(x, ...) with `config` (a cached config from before `twopass`: one-pass).

    An EVEN config (no bounds checks in the kernel) is refused here with LimitError, before the
    launch, for a row that is not exactly its columns, with a message that names the config.
    softmax.cu refuses it too (cudaErrorInvalidValue), and the binding raises RuntimeError for
    that since its checks format with snprintf (workbench/cuda_build.py CHECK_HELPERS; before,
    the refusal ended the process with a segmentation fault on the H200:
    benchmarks/binding_errors.py)."""
    t, p, sp, c, keep, even, twopass = (int(config.get(k, 0)) for k in ("threads", "packs", "spacks", "cluster", "keep",
                                                                         "even", "twopass"))

    def call(x):
        if even:
            cols = t * (p + sp) * (16 // x.element_size()) * max(c, 1)
            if x.shape[-1] != cols:
                raise LimitError(f"softmax cuda: the EVEN kernel (threads {t}, packs {p} + {sp}, cluster {c}) "
                                 f"takes rows of exactly {cols} columns, got {x.shape[-1]}: use even=0")
        return module.softmax_rows(x.contiguous(), t, p, sp, c, keep, even, twopass)
    return call


def _cuda_config(spec: SoftmaxSpec, ctx: BuildContext | None, run=None):
    """The tuned configuration (cuda_candidates); a row with one candidate has nothing to tune."""
    candidates = cuda_candidates(spec)
    if len(candidates) == 1:
        return default_choice(candidates, "one-block row: the plan, nothing to tune")
    version = ONEPASS_VERSION if candidates[0] != PLAN else f"{ONEPASS_VERSION}-{CUDA_VERSION}"
    return choose(ctx, "softmax", "cuda", spec, CandidateLists.same(candidates, ONEPASS_MEASURED_ON), run, version=version)


def _two_pass_threads(spec: SoftmaxSpec) -> int:
    """Threads per block of launch_softmax in softmax.cu (~4 packs per thread, 32..1024)."""
    vec = 16 // spec.dtype.itemsize
    packs = spec.N // vec if spec.N % vec == 0 else spec.N
    threads = 32
    while threads < 1024 and threads * 4 < packs:
        threads *= 2
    return threads


def cuda_geometry(spec: SoftmaxSpec, config: dict) -> tuple[tuple[int, ...], int]:
    """(grid, threads per block) of softmax_rows with `config`: the one-pass kernel's, or the
    two-pass kernel's one block per row (at the config's threads, or its own choice)."""
    if config.get("twopass"):
        return (spec.M, 1, 1), int(config.get("threads") or 0) or _two_pass_threads(spec)
    if not fits(spec.M, spec.N, spec.dtype.itemsize):
        return (spec.M, 1, 1), _two_pass_threads(spec)
    return geometry(spec.M, config_from(config, spec.N, spec.dtype.itemsize))


def _cuda_launch(spec: SoftmaxSpec, params, ctx: BuildContext | None = None) -> tuple[tuple[int, ...], int]:
    """The launch geometry softmax_rows uses with the (tuned) configuration."""
    return cuda_geometry(spec, _cuda_config(spec, ctx).config)


CXX_TYPE = {"float32": "float", "float16": "__half", "bfloat16": "__nv_bfloat16"}  # softmax.cu's T, demangled
TYPE_TAG = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}  # softmax.cu's pick::type_tag
# softmax.cu's kernels: the token's kind (WB_SOFTMAX_KERNELS) and which template arguments after
# T are bools (named true/false by the demangler)
KERNEL_KINDS = {"softmax_onepass_kernel": ("onepass", (3, 5, 6)), "softmax_l2_kernel": ("l2", (1,)),
                "softmax_kernel": ("twopass", ())}


def cuda_kernel(spec: SoftmaxSpec, config: dict) -> tuple[str, tuple[int, ...]]:
    """(kernel, its template arguments after T) that softmax_rows launches with `config` at
    `spec`, as softmax.cu dispatches it (16-byte aligned tensors assumed, as torch allocates
    them): the L2 kernel at 1024 threads (twopass 2, 3: TRITON_FORM), the two-pass kernel (twopass
    1, or a row too long for one pass), else the one-pass kernel (threads 0: its plan)."""
    twopass = int(config.get("twopass") or 0)
    if twopass >= 2:
        return "softmax_l2_kernel", (1024, int(twopass == 3))
    one = config_from(config, spec.N, spec.dtype.itemsize)
    if twopass == 1 or one is None or not fits(spec.M, spec.N, spec.dtype.itemsize):
        return "softmax_kernel", (pack_width(spec.N, spec.dtype.itemsize),)
    return "softmax_onepass_kernel", (one.vec, one.threads, one.packs, int(one.cluster > 1), one.spacks,
                                      int(one.keep), int(one.even))


def kernel_token(spec: SoftmaxSpec, config: dict) -> str:
    """cuda_kernel's instantiation as softmax.cu's WB_SOFTMAX_KERNELS names it:
    `onepass_f32_4_512_8_0_0_1_0` (kind, T, then each template argument, bools as 0/1)."""
    kernel, args = cuda_kernel(spec, config)
    return "_".join([KERNEL_KINDS[kernel][0], TYPE_TAG[str(spec.dtype)], *(str(int(a)) for a in args)])


def cuda_kernels(spec: SoftmaxSpec) -> tuple[str, ...]:
    """The tokens of the kernels the `cuda` implementation may launch at `spec`: the one of each
    config its tuner compares (cuda_candidates), in their order, without repeats. Depends on the
    spec alone, not on a cached choice, so the build-ahead worker (which tunes nothing) and the
    timing worker build one module."""
    return tuple(dict.fromkeys(kernel_token(spec, config) for config in cuda_candidates(spec)))


def kernels_flag(kernels: Sequence[str]) -> str:
    """The nvcc define that builds only `kernels` (tokens) of softmax.cu. Raises ValueError for
    none, or for a token that is not of the form kind_type_n_n..."""
    if not kernels:
        raise ValueError("softmax: a build needs at least one kernel token, got none")
    for token in kernels:
        kind, _, rest = token.partition("_")
        tag, _, args = rest.partition("_")
        if kind not in {k for k, _ in KERNEL_KINDS.values()} or tag not in TYPE_TAG.values() or not all(
                a.isdigit() for a in args.split("_")):
            raise ValueError(f"softmax: kernel token {token!r} is not kind_type_n[_n...] (kinds "
                             f"{', '.join(k for k, _ in KERNEL_KINDS.values())}; types {', '.join(TYPE_TAG.values())})")
    return "-DWB_SOFTMAX_KERNELS=" + "__".join(kernels)


def cuda_build_flags(spec: SoftmaxSpec, params=None) -> tuple[str, ...]:
    """The nvcc flags of the `cuda` row's module at `spec`, which the PTX view compiles with too:
    only the kernels it may launch (cuda_kernels)."""
    return (kernels_flag(cuda_kernels(spec)),)


def _cuda_launched(spec: SoftmaxSpec, params, ctx: BuildContext | None = None) -> str:
    """The kernel softmax_rows launches with the (tuned) configuration, as softmax.cu dispatches
    it (cuda_kernel), with its template arguments: `softmax_l2_kernel<float, 1024, true>`."""
    kernel, args = cuda_kernel(spec, _cuda_config(spec, ctx).config)
    bools = KERNEL_KINDS[kernel][1]
    shown = [("true" if a else "false") if i in bools else str(a) for i, a in enumerate(args)]
    return f"{kernel}<{', '.join([CXX_TYPE[str(spec.dtype)], *shown])}>"


def cuda_bytes_moved(spec: SoftmaxSpec) -> int:
    """The ideal 2MN when the one-pass kernel takes the row, else the two-pass re-read."""
    return cost(spec).bytes if fits(spec.M, spec.N, spec.dtype.itemsize) else reread_bytes_moved(spec)


def load_module(build_dir: Path | None, kernels: Sequence[str] | None = None) -> Any:
    """softmax.cu and its binding through load_inline (`softmax_rows`, a torch operator), built
    once under `build_dir`. kernels: the tokens of the kernels to build (cuda_kernels(spec): a
    row's, a module per set, its name hashing the define), None: every kernel of softmax.cu (the
    GPU scripts that call the binding directly: benchmarks/even_check.py, binding_errors.py,
    stages/tune19.py). A launch of a kernel not built raises RuntimeError naming
    WB_SOFTMAX_KERNELS."""
    flags = () if kernels is None else (kernels_flag(kernels),)
    return load_cuda("wb_softmax", CU_FILE, _CPP_BINDING, ["softmax_rows"], build_dir, binding="library",
                     extra_cuda_cflags=flags)


@SOFTMAX.impl("cuda", moved_bytes=cuda_bytes_moved,
              source=CudaSource(CU_FILE, ("softmax_onepass_kernel", "softmax_kernel", "softmax_l2_kernel"),
                                launch=_cuda_launch, launched=_cuda_launched, build_flags=cuda_build_flags))
def build_cuda(spec: SoftmaxSpec, params, ctx: BuildContext):
    """CUDA C++, one pass: the row in registers, read once; rows past one block split over a
    thread-block cluster (distributed shared memory, tuned shape); rows past 262144 (16-byte
    packs) take the two-pass kernel. Wide one-block rows (16384 columns) also try kept and staged
    one-block shapes, the three-pass L2 kernel (torch.compile's form) and the two-pass kernel,
    tuned against the one-pass plan (cuda_candidates). Only the kernels of those candidates are
    compiled (cuda_kernels: 4 of softmax.cu's 155 at 16384^2 float32)."""
    module = load_module(ctx.build_dir, cuda_kernels(spec))
    tuning = tuning_inputs(spec, ctx)
    tuned = _cuda_config(spec, ctx, (lambda config: cuda_call(module, config)(*tuning)) if tuning else None)
    return attach(cuda_call(module, tuned.config), tuned)
