"""softmax's `triton` kernel with the whole row in one block, and the configurations its autotuner
compares (kernels/_autotune.py).

    y[i, j] = exp(x[i, j] - m_i) / sum_k exp(x[i, k] - m_i)     x, y: (M, N), N <= BLOCK_SIZE

Knobs (all constexpr, each a candidate the device times; none is assumed to win):
- num_warps: on the H200 at 16384 columns the best differed by dtype (32 in float32, 8 in
  float16, 16 in bfloat16), each by about 1% over the others.
- ROWS: rows per program, a (ROWS, BLOCK_SIZE) tile: one pair of cross-warp reductions serves
  ROWS rows (the barriers of tl.max and tl.sum are paid once), and twice the bytes are in flight
  per program (the Triton fused-softmax tutorial and Liger-Kernel's softmax launch several rows
  per program for short rows; here it is tried for the long ones too).
- STREAM: loads with L2 evict-first and stores with `.cs` (streaming: evict first), since every
  byte is touched once (PTX ISA "ld" eviction priorities, "st" cache operators).
- RECOMPUTE (16-bit inputs only): the row stays in its own 16-bit registers across the two
  reductions and the exponential is computed again for the output, instead of holding a float32
  numerator: half the registers per element (more programs per SM), one more ex2 per element.
  bfloat16 widens a second time by its bits (a bfloat16 is the high half of a float32), so the
  compiler cannot merge the two widenings back into one float32 copy; float16 has no such form.
"""

from __future__ import annotations

from typing import Any

from workbench.triton_support import jit, tl

LOG2E = 1.4426950408889634
TRITON_VERSION = "2"  # the autotune cache key's version: bump when the kernel or candidates change
DEFAULTS = {"ROWS": 1, "STREAM": 0, "RECOMPUTE": 0}
VARIANTS_FROM = 8192  # BLOCK_SIZE from which the variants are candidates


@jit
def _widen_again(x, BF16_BITS: tl.constexpr):
    """x as float32 by another route than x.to(float32) (bfloat16: its bits shifted into the high
    half), so the two widenings stay two operations."""
    if BF16_BITS:
        return (x.to(tl.int16, bitcast=True).to(tl.int32) << 16).to(tl.float32, bitcast=True)
    return x.to(tl.float32)


@jit
def _softmax_rows_kernel(x_ptr, y_ptr, x_row_stride, y_row_stride, n_rows, n_cols, BLOCK_SIZE: tl.constexpr,
                         ROWS: tl.constexpr, STREAM: tl.constexpr, RECOMPUTE: tl.constexpr):
    """ROWS rows per program, each whole in BLOCK_SIZE >= n_cols columns (padding -inf)."""
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)[:, None]
    cols = tl.arange(0, BLOCK_SIZE)[None, :]
    mask = (rows < n_rows) & (cols < n_cols)
    x_ptrs = x_ptr + rows * x_row_stride + cols
    if STREAM:
        x = tl.load(x_ptrs, mask=mask, other=-float("inf"), eviction_policy="evict_first")
    else:
        x = tl.load(x_ptrs, mask=mask, other=-float("inf"))
    row_max = tl.max(x.to(tl.float32), axis=1, keep_dims=True)  # padding stays -inf
    # exp(x - max) as 2^((x - max) log2 e): the difference first (exact near the max), one ex2.
    if RECOMPUTE:
        total = tl.sum(tl.exp2((x.to(tl.float32) - row_max) * LOG2E), axis=1, keep_dims=True)
        bf16 = x.dtype == tl.bfloat16
        y = tl.exp2((_widen_again(x, bf16) - row_max) * LOG2E - tl.log2(total))
    else:
        numerator = tl.exp2((x.to(tl.float32) - row_max) * LOG2E)
        # One reciprocal per row, then a multiply per element, instead of a division per element.
        y = numerator * (1.0 / tl.sum(numerator, axis=1, keep_dims=True))
    y_ptrs = y_ptr + rows * y_row_stride + cols
    if STREAM:
        tl.store(y_ptrs, y.to(y_ptr.dtype.element_ty), mask=mask, cache_modifier=".cs")
    else:
        tl.store(y_ptrs, y.to(y_ptr.dtype.element_ty), mask=mask)


def config(tuned: dict[str, Any]) -> dict[str, int]:
    """A tuned config with every knob (an older cache holds num_warps alone)."""
    return {"num_warps": int(tuned["num_warps"]), **{k: int(tuned.get(k, v)) for k, v in DEFAULTS.items()}}


def is_lecture(cfg: dict[str, Any]) -> bool:
    """Whether a config is the lecture's kernel (softmax.py's `_softmax_kernel`) at some num_warps:
    ROWS 1, no hints, no recompute. Those configs launch that kernel, so the PTX view and source
    maps of an untuned run are the lecture's."""
    return all(int(cfg.get(k, v)) == v for k, v in DEFAULTS.items())


def candidates(block: int, rule: int, itemsize: int) -> list[dict[str, int]]:
    """The configs to compare for rows of BLOCK_SIZE `block`: the rule's num_warps first (the
    default, the lecture's kernel), then twice and half of it. From VARIANTS_FROM columns (the
    16384-wide rows, 94% of copy in 16-bit on the H200): every num_warps from 4 to 32, and ROWS,
    STREAM and (16-bit) RECOMPUTE at the warps where a row keeps 8-64 values per thread. Shorter
    rows already ran at 99-100% of copy, so they compare num_warps alone."""
    warps = [rule, rule * 2, rule // 2] + ([4, 8, 16, 32] if block >= VARIANTS_FROM else [])
    warps = [w for w in dict.fromkeys(warps) if 1 <= w <= 32]
    out = [{"num_warps": w, **DEFAULTS} for w in warps]
    if block < VARIANTS_FROM:
        return out
    wide = [w for w in warps if 8 <= block // (32 * w) <= 64]  # values per thread in a sane range
    rows = 2 if block >= 4096 else 4  # keep ROWS * block <= 32768 for the long rows
    for w in wide:
        out.append({"num_warps": w, "ROWS": 1, "STREAM": 1, "RECOMPUTE": 0})
        if rows * block <= 32768 and rows * block // (32 * w) <= 64:
            out.append({"num_warps": w, "ROWS": rows, "STREAM": 0, "RECOMPUTE": 0})
            out.append({"num_warps": w, "ROWS": rows, "STREAM": 1, "RECOMPUTE": 0})
        if itemsize == 2:
            out.append({"num_warps": w, "ROWS": 1, "STREAM": 1, "RECOMPUTE": 1})
    return out


def grid(n_rows: int, rows_per_program: int) -> tuple[int, int, int]:
    """Programs: one per ROWS rows."""
    return (-(-n_rows // rows_per_program), 1, 1)
