"""softmax's `triton` kernel with the whole row in one block, and the configurations its autotuner
compares (workbench/tuning.py).

    y[i, j] = exp(x[i, j] - m_i) / sum_k exp(x[i, k] - m_i)     x, y: (M, N), N <= BLOCK_SIZE

Knobs (all constexpr; candidates() says which the device times, with the H200 figures):
- num_warps: on the H200 at 16384 columns the best differed by dtype (32 in float32, 8 in
  float16, 16 in bfloat16), each by about 1% over the others.
- ROWS: rows per program, a (ROWS, BLOCK_SIZE) tile: one pair of cross-warp reductions serves
  ROWS rows (the barriers of tl.max and tl.sum are paid once), and twice the bytes are in flight
  per program (the Triton fused-softmax tutorial and Liger-Kernel's softmax launch several rows
  per program for short rows; here it is tried for the long ones too).
- STREAM: loads with L2 evict-first and stores with `.cs` (streaming: evict first), since every
  byte is touched once (PTX ISA "ld" eviction priorities, "st" cache operators).
- EVEN: no masks where the shape allows (N == BLOCK_SIZE, M a multiple of ROWS): the compiler
  cannot know that n_cols fills the block, so the lecture's kernel computes a predicate per
  16-byte access (sm_90 AOT, 16384 bfloat16 columns at 8 warps: 127 registers per thread
  masked, 79 unmasked, so 3 programs fit an SM instead of 2; at 16 and 32 warps no change).
- Not a candidate: recomputing the exponential for the output from the 16-bit input instead of
  holding a float32 numerator (to halve the registers per element): compiled for sm_90 it used
  as many registers (64 against 63 at 16 warps, 16384 bfloat16 columns), so it was dropped.
"""

from __future__ import annotations

from typing import Any

from workbench.triton_support import jit, tl

LOG2E = tl.constexpr(1.4426950408889634)  # a global a @jit function may read
TRITON_VERSION = "5"  # the autotune cache key's version: bump when the kernel or candidates change
DEFAULTS = {"ROWS": 1, "STREAM": 0, "EVEN": 0, "L2PASS": 0}
VARIANTS_FROM = 8192  # BLOCK_SIZE from which the variants are candidates
# The devices these candidates were measured on (workbench/tuning.py CandidateLists.same: the same
# list for both, and the generic list for any other device, tuned there on first use). Chosen on
# the H200 (below); the H100 (one call, issue #40) ran the tuner's pick from the same
# list at 97-101% of its copy in every dtype at 16384^2, as the H200 did.
MEASURED_ON = ("H200 sm_90", "H100 sm_90")


@jit
def _softmax_rows_kernel(x_ptr, y_ptr, x_row_stride, y_row_stride, n_rows, n_cols, BLOCK_SIZE: tl.constexpr,
                         ROWS: tl.constexpr, STREAM: tl.constexpr, MASKED: tl.constexpr):
    """ROWS rows per program, each whole in BLOCK_SIZE >= n_cols columns (padding -inf). MASKED 0:
    the launch knows n_cols == BLOCK_SIZE and n_rows % ROWS == 0, so no access needs a mask."""
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)[:, None]
    cols = tl.arange(0, BLOCK_SIZE)[None, :]
    mask = (rows < n_rows) & (cols < n_cols) if MASKED else None
    x_ptrs = x_ptr + rows * x_row_stride + cols
    if STREAM:
        x = tl.load(x_ptrs, mask=mask, other=-float("inf") if MASKED else None, eviction_policy="evict_first")
    else:
        x = tl.load(x_ptrs, mask=mask, other=-float("inf") if MASKED else None)
    row_max = tl.max(x.to(tl.float32), axis=1, keep_dims=True)  # padding stays -inf
    # exp(x - max) as 2^((x - max) log2 e): the difference first (exact near the max), one ex2.
    numerator = tl.exp2((x.to(tl.float32) - row_max) * LOG2E)
    # One reciprocal per row, then a multiply per element, instead of a division per element.
    y = numerator * (1.0 / tl.sum(numerator, axis=1, keep_dims=True))
    y_ptrs = y_ptr + rows * y_row_stride + cols
    if STREAM:
        tl.store(y_ptrs, y.to(y_ptr.dtype.element_ty), mask=mask, cache_modifier=".cs")
    else:
        tl.store(y_ptrs, y.to(y_ptr.dtype.element_ty), mask=mask)


@jit
def _softmax_l2_kernel(x_ptr, y_ptr, x_row_stride, y_row_stride, n_cols, BLOCK_SIZE: tl.constexpr,
                       MASKED: tl.constexpr):
    """One program per row, three passes over it in BLOCK_SIZE chunks (torch.compile's form for
    long rows): the running max, the sum of exponentials, then the output. The row is read from
    HBM once and from L2 twice (`evict_last` keeps it there for the next pass; the last pass reads
    `evict_first`), so a program holds a chunk, not the row: few registers, every thread slot of
    an SM filled, more rows' loads in flight. MASKED 0: BLOCK_SIZE divides n_cols."""
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    cols = tl.arange(0, BLOCK_SIZE)
    running = tl.full([BLOCK_SIZE], -float("inf"), tl.float32)
    for start in tl.range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols if MASKED else None
        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf") if MASKED else None,
                    eviction_policy="evict_last")
        running = tl.maximum(running, x.to(tl.float32))
    row_max = tl.max(running, axis=0)
    total = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in tl.range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols if MASKED else None
        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf") if MASKED else None,
                    eviction_policy="evict_last")
        total += tl.exp2((x.to(tl.float32) - row_max) * LOG2E)  # padding: 2^-inf = 0
    inverse = 1.0 / tl.sum(total, axis=0)
    for start in tl.range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols if MASKED else None
        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf") if MASKED else None,
                    eviction_policy="evict_first")
        y = tl.exp2((x.to(tl.float32) - row_max) * LOG2E) * inverse
        tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def config(tuned: dict[str, Any]) -> dict[str, int]:
    """A tuned config with every knob (an older cache holds num_warps alone)."""
    return {"num_warps": int(tuned["num_warps"]), **{k: int(tuned.get(k, v)) for k, v in DEFAULTS.items()}}


def is_lecture(cfg: dict[str, Any]) -> bool:
    """Whether a config is the lecture's kernel (softmax.py's `_softmax_kernel`) at some num_warps:
    ROWS 1, no hints, masks kept. Those configs launch that kernel, so the PTX view and source
    maps of an untuned run are the lecture's."""
    return all(int(cfg.get(k, v)) == v for k, v in DEFAULTS.items())


# The 16384-wide candidates, pruned to the fastest measured on H200 (issue #19; tune19 --quick,
# results/history/h200/2026-12-01b/tune19/tune19.json, % of the same-dtype copy, bfloat16 / float16):
# 8 warps EVEN 98.3 / 98.22 (the winner, first: the default of an untuned run), 16 warps EVEN
# 96.93 / 97.37, 4 warps 96.78 / 97.05, the lecture's 16 warps 95.96 / 95.3, and 32 warps (95.46 /
# 94.75; kept because float32 preferred it in the exploration). Dropped: STREAM (every one 0.4-5
# points slower than the same config without) and ROWS 2 (73-81%).
WIDE_FIRST = ({"num_warps": 8, "ROWS": 1, "STREAM": 0, "EVEN": 1}, {"num_warps": 16, "ROWS": 1, "STREAM": 0, "EVEN": 1})
WIDE_LECTURE_WARPS = (4, 32)


# Three-pass candidates for the widest rows (L2PASS: the chunk in float32 columns, twice as many
# 16-bit ones so a thread still moves 16 bytes an access; _softmax_l2_kernel),
# torch.compile's own design for a 16384-wide float32 row (its generated kernel, measured on
# H200: three looped passes, 32 warps, 32 registers, 100.8% of copy against 98.0% for the
# best program-per-row config here). Tried and dropped before them: a persistent kernel walking
# the rows with the next row's loads pipelined through shared memory (cp.async, 2 stages,
# 1-2 programs per SM): 0.548-0.581 ms against 0.519 ms for the best program-per-row config.
L2_PASSES = ({"num_warps": 32, "ROWS": 1, "STREAM": 0, "EVEN": 1, "L2PASS": 4096},
             {"num_warps": 16, "ROWS": 1, "STREAM": 0, "EVEN": 1, "L2PASS": 2048},
             {"num_warps": 16, "ROWS": 1, "STREAM": 0, "EVEN": 1, "L2PASS": 4096})


def candidates(block: int, rule: int) -> list[dict[str, int]]:
    """The configs to compare for rows of BLOCK_SIZE `block`. Below VARIANTS_FROM columns (rows
    that already ran at 99-100% of copy): the rule's num_warps first (the lecture's kernel, the
    untuned default), then twice and half of it. From VARIANTS_FROM: WIDE_FIRST (the measured
    winner first, so an untuned run launches it, not the lecture's kernel), then the lecture's
    kernel at the rule's num_warps and at WIDE_LECTURE_WARPS."""
    if block < VARIANTS_FROM:
        warps = [w for w in dict.fromkeys([rule, rule * 2, rule // 2]) if 1 <= w <= 32]
        return [{"num_warps": w, **DEFAULTS} for w in warps]
    out = [{**DEFAULTS, **c} for c in WIDE_FIRST]
    for w in dict.fromkeys((rule, *WIDE_LECTURE_WARPS)):
        if 1 <= w <= 32:
            out.append({"num_warps": w, **DEFAULTS})
    return out + [dict(c) for c in L2_PASSES]


def masked(cfg: dict[str, int], n_rows: int, n_cols: int, block: int) -> int:
    """The kernel's MASKED: 0 only for an EVEN config on a shape that fills every tile."""
    return 0 if cfg.get("EVEN") and n_cols == block and n_rows % cfg.get("ROWS", 1) == 0 else 1


def grid(n_rows: int, rows_per_program: int) -> tuple[int, int, int]:
    """Programs: one per ROWS rows."""
    return (-(-n_rows // rows_per_program), 1, 1)
