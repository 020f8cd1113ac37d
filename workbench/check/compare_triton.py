"""`ChunkTotals.add` (workbench/check/compare.py) of a CUDA chunk in one Triton pass: the same
statistics as the torch path, which launches ~25 elementwise kernels and six host reads per
chunk over float64 temporaries.

Why: the value gates compare every checked output with its float64 reference, five times a row
(first, special, two kept timed outputs, timed). On an H100 a 16384^2 float32 comparison took
69 ms, 54 ms of it in the torch path's statistics and 15 ms in the reference itself: ~0.27 s of
a row's ~0.4 s check (benchmarks/check_split.py). One pass reads the output and the reference
once and keeps every intermediate in registers.

Same statistics, element by element as compare._chunk_errors and ChunkTotals.add define them:
- expected = ref, or +-inf where |ref| >= the output dtype's overflow threshold (a value that
  rounds to inf in that dtype);
- same = got == expected, or both NaN; err = |got - expected| (NaN -> +inf), 0 where same;
- finite: count of finite expected values; mismatches: count of elements where either side is
  not finite and they are not `same`;
- err_sq, ref_sq: sums of err^2 and expected^2 over finite expected values;
- max_abs = max err; max_rel = max err/|expected| (0 where same or expected == 0; NaN -> +inf);
- max_excess = max (err - rtol |expected|) (NaN -> +inf; -inf where same).
Counts and maxima equal the torch path's exactly; the two sums and the excess may differ in the
last bits of a float64 (summation order, a fused multiply-add), far below any tolerance.
tests/test_compare_triton.py compares the two paths under TRITON_INTERPRET=1.

    chunk_statistics(out, ref, rtol, threshold)  # out: contiguous 1-D float16/bfloat16/float32/float64; ref: float64
    usable(out, ref)  # whether the engine takes this path for a chunk (CUDA)
"""

from __future__ import annotations

import math

import torch

from workbench.triton_support import jit, tl, triton

TILE = 2048
NUM_WARPS = 8
# output dtypes the kernel reads (float8 and integer outputs take the torch path)
OUT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
# per-tile float statistics, in this order, then the two counts
FLOATS = ("err_sq", "ref_sq", "max_abs", "max_rel", "max_excess")
COUNTS = ("finite", "mismatches")


@jit
def _compare_tiles(out_ptr, ref_ptr, params_ptr, floats_ptr, counts_ptr, n,
                   CLAMP: tl.constexpr, TILE: tl.constexpr):
    # rtol and the threshold come as float64 values in memory: a Python float argument is passed
    # as float32, which rounds float32's own overflow threshold (2^128 (1 - 2^-25)) up to inf
    rtol = tl.load(params_ptr)
    threshold = tl.load(params_ptr + 1)
    pid = tl.program_id(0).to(tl.int64)
    start = pid * TILE
    lane = tl.arange(0, TILE)
    mask = lane < n - start
    got = tl.load(out_ptr + start + lane, mask=mask, other=0.0).to(tl.float64)
    ref = tl.load(ref_ptr + start + lane, mask=mask, other=0.0)
    inf = float("inf")
    if CLAMP:  # compare._expected: a value past the dtype's overflow threshold is the inf it rounds to
        ref = tl.where(tl.abs(ref) >= threshold, tl.where(ref > 0, inf, -inf), ref)
    absref = tl.abs(ref)
    same = (got == ref) | ((got != got) & (ref != ref))
    finite_ref = absref < inf           # NaN compares false: not finite
    finite_got = tl.abs(got) < inf
    diff = tl.abs(got - ref)
    err = tl.where(same, 0.0, tl.where(diff != diff, inf, diff))
    counted = mask & finite_ref
    err_sq = tl.sum(tl.where(counted, err * err, 0.0), axis=0)
    ref_sq = tl.sum(tl.where(counted, absref * absref, 0.0), axis=0)
    max_abs = tl.max(tl.where(mask, err, 0.0), axis=0)
    rel = tl.where(same | (absref == 0.0), 0.0, err / absref)
    max_rel = tl.max(tl.where(mask, tl.where(rel != rel, inf, rel), 0.0), axis=0)
    excess = err - rtol * absref
    excess = tl.where(same, -inf, tl.where(excess != excess, inf, excess))
    max_excess = tl.max(tl.where(mask, excess, -inf), axis=0)
    finite = tl.sum(counted.to(tl.int32), axis=0)
    mismatches = tl.sum((mask & (~finite_ref | ~finite_got) & ~same).to(tl.int32), axis=0)
    base = floats_ptr + pid * 5
    tl.store(base, err_sq)
    tl.store(base + 1, ref_sq)
    tl.store(base + 2, max_abs)
    tl.store(base + 3, max_rel)
    tl.store(base + 4, max_excess)
    tl.store(counts_ptr + pid * 2, finite.to(tl.int64))
    tl.store(counts_ptr + pid * 2 + 1, mismatches.to(tl.int64))


def usable(out: torch.Tensor, ref: torch.Tensor) -> bool:
    """Whether the engine hands this pair to `chunk_statistics`: CUDA tensors it reads."""
    return out.device.type == "cuda" and readable(out, ref)


def readable(out: torch.Tensor, ref: torch.Tensor) -> bool:
    """Whether the kernel reads this pair: one device, contiguous, 1-D, the same length, a float64
    reference and an output dtype in OUT_DTYPES (CPU tensors only under TRITON_INTERPRET=1)."""
    return (ref.device == out.device and out.dtype in OUT_DTYPES and ref.dtype == torch.float64
            and out.dim() == 1 and ref.dim() == 1 and out.numel() == ref.numel()
            and out.is_contiguous() and ref.is_contiguous())


def chunk_statistics(out: torch.Tensor, ref: torch.Tensor, rtol: float, threshold: float | None) -> dict:
    """The statistics of one chunk (FLOATS and COUNTS as Python numbers, one host read): `out`
    and `ref` as `readable` requires (ValueError otherwise), `rtol` the elementwise gate's relative
    tolerance, `threshold` the output dtype's overflow threshold (compare._expected) or None.
    An empty chunk gives zeros (and -inf excess)."""
    if not readable(out, ref):
        raise ValueError(f"chunk_statistics: contiguous 1-D tensors of one length on one device, an output in "
                         f"{', '.join(str(d).removeprefix('torch.') for d in OUT_DTYPES)} and a float64 "
                         f"reference; got {out.dtype} {tuple(out.shape)} on {out.device} and {ref.dtype} "
                         f"{tuple(ref.shape)} on {ref.device}")
    n = out.numel()
    if n == 0:
        return {**dict.fromkeys(FLOATS, 0.0), "max_excess": -math.inf, **dict.fromkeys(COUNTS, 0)}
    tiles = triton.cdiv(n, TILE)
    floats = torch.empty((tiles, len(FLOATS)), dtype=torch.float64, device=out.device)
    counts = torch.empty((tiles, len(COUNTS)), dtype=torch.int64, device=out.device)
    limit = threshold if threshold is not None and math.isfinite(threshold) else None
    params = torch.tensor([float(rtol), limit or 0.0], dtype=torch.float64).to(out.device)
    _compare_tiles[(tiles,)](out, ref, params, floats, counts, n, CLAMP=limit is not None, TILE=TILE,
                             num_warps=NUM_WARPS)
    # the two sums, the three maxima, the counts (exact as float64 below 2^53 elements): one host read
    values = torch.cat([floats[:, :2].sum(dim=0), floats[:, 2:].amax(dim=0), counts.sum(dim=0).to(torch.float64)])
    stats = dict(zip(FLOATS + COUNTS, values.tolist()))
    return {**stats, **{name: int(stats[name]) for name in COUNTS}}
