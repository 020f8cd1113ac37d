"""The Python side of softmax.cu's one-pass kernel: its launch plan, the cluster configurations
the autotuner compares, and the launch geometry the PTX view shows (torch-free, no GPU needed).

`onepass_plan` mirrors `softmax_onepass_plan` in softmax.cu: the fewest threads (32..1024) that
hold the row at 32 elements per thread (16 for rows of odd length, which load scalars) in one
block; past that, 512-thread blocks in the smallest power-of-two cluster (<= 16) that holds it.
A row longer than that (262144 columns in 16-byte packs) takes the two-pass kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ELEMS_PER_THREAD = 32
MAX_CLUSTER = 16  # sm_90's largest (non-portable) thread-block cluster
# The shapes the autotuner compares for clustered rows, pruned (issue #19's tuning) to the fastest
# of a wider sweep measured on H200 (4096 x 262144, % of the same-dtype copy, L2 flushed; file
# results/history/h200/2026-12-01b/tune19/tune19.json) and their nearest neighbours. Each list's first is
# the measured fastest, which cluster_candidates puts first: the default when nothing can be tuned.
# (threads, packs) in registers only: float32 1024 x 8 (cluster 8) 85.4%, the best of them (the
# plan, 512 x 8 x 16 blocks, 72.8%: 16-block clusters leave 20 of 132 SMs idle); bfloat16's best
# register-only shape was the plan itself (512 x 4 x 16 blocks, 79.2%), which is always compared.
CLUSTER_SHAPES = {4: ((1024, 8),), 8: (), 1: ((512, 16), (1024, 16))}
# (threads, packs, spacks): softmax.cu's ONEPASS_STAGED_V*, which also keep `spacks` 16-byte packs
# per thread in shared memory (cp.async), so 2- to 8-block clusters hold the row. Measured:
# float32 1024 x 8 x 8 (cluster 4) 89.26%, 256 x 16 x 16 (8) 88.59%, 512 x 8 x 8 (8) 87.52%;
# bfloat16 1024 x 8 x 8 (cluster 2) 85.3%, 512 x 4 x 4 (8) 84.43%, 512 x 8 x 8 (4) 83.1%. Dropped:
# the 7 others (70.9-86.0%).
STAGED_SHAPES = {4: ((1024, 8, 8), (256, 16, 16), (512, 8, 8)),
                 8: ((1024, 8, 8), (512, 4, 4), (512, 8, 8)),
                 1: ()}
# (threads, packs, spacks) with KEEP (softmax.cu ONEPASS_KEPT_V*): the sum pass keeps exp(x - m)
# over the input (float32, or float16 scaled by 2^15 in 16-bit packs), so the output pass is a
# multiply: one ex2 per element instead of two. Why: sm_90 runs 16 MUFU.EX2 per SM per clock, so
# two per element of 4096 x 262144 take ~0.5 ms at ~1.9 GHz, half the bfloat16 copy (1.009 ms)
# and a quarter of the float32 one; the SM does no loads while its block computes (one block per
# SM in the staged winners). Measured on H200 (results/history/h200/2026-12-01b/tune19-round2/):
# float32 1024 x 8 x 8 (cluster 4) 92.84% of copy against 88.1% without KEEP in the same run;
# bfloat16 1024 x 8 x 8 (cluster 2) 90.14% against 84.95%, 512 x 4 x 4 (8) 89.62%. So kept
# shapes come first (the untuned default).
KEPT_SHAPES = {4: ((1024, 8, 8), (256, 16, 16)), 8: ((1024, 8, 8), (512, 4, 4)), 1: ()}
# (threads, packs, spacks) of KEPT_SHAPES with an EVEN twin (softmax.cu ONEPASS_EVEN_V*: no bounds
# checks, for a row of exactly the cluster's slices). Why: in the bfloat16 winner the checks were
# 240 of 2192 SASS instructions a thread (sm_90a, nvcc 13.0; 1952 without, 63 registers both,
# no spills), and the block computes with its SM issuing no loads. Not float32 (1024 x (8 + 8)
# spilled 212 bytes with it) nor the 512-thread 16-bit shapes (32-40 -> 59-64 registers).
# cluster_candidates puts the twin first, so the tuner times it beside the checked kernel: on the
# H200 (results/history/h200/2026-12-03e) 1.0915-1.0941 ms against 1.1113-1.1243, 91.9-92.4% of copy.
EVEN_SHAPES = {4: (), 8: ((1024, 8, 8),), 1: ()}
# (threads, packs, spacks, keep) for a wide row that one block holds in the plan (softmax.cu
# ONEPASS_ROWS_V*, launched without a cluster): the tuner compares them with the plan and the
# two-pass kernel (kernels/softmax.py cuda_candidates). Why: at 16384 x 16384 float32 the plan
# (512 x 8, two blocks an SM) reached 85.4% of DRAM peak under ncu against torch.compile's 88.5%
# (0.5178 against 0.4999 ms on the H200, results/history/h200/2026-12-03): while a block reduces and
# computes, its SM issues no loads. KEEP halves the ex2 of that phase; 256 threads with 8 of each
# thread's 16 packs staged in shared memory (32 KiB a block) allow four blocks an SM for the same
# registers, so more rows are loading while others compute.
# The staged 256 x (8 + 8) shapes, with and without KEEP, ran 3-5% behind the plan in three H200
# calls (results/history/h200/2026-12-03b) and were dropped.
ROW_SHAPES = {4: ((512, 8, 0, 1),), 8: ((512, 4, 0, 1),), 1: ()}
ONEPASS_VERSION = "4"  # the autotune cache key's version: bump when the candidates change (4: EVEN)
# The devices these shapes were measured on (workbench/tuning.py CandidateLists.same; any other
# device tunes over the same shapes on first use and its note says so): chosen on the H200; on the
# H100 (issue #40) the tuner's pick reached 97-101% of copy at 16384^2 and 98.8% at
# 4096 x 262144 float32.
MEASURED_ON = ("H200 sm_90", "H100 sm_90")


@dataclass(frozen=True)
class OnepassConfig:
    """threads per block, packs per thread in registers, blocks per cluster (1: no cluster), pack
    width, packs per thread staged in shared memory (16 bytes each), keep (1: the kernel's
    KEEP, the exponentials kept over the input) and even (1: its EVEN twin, no bounds checks; only
    for a row of exactly `elements` columns)."""

    threads: int
    packs: int
    cluster: int
    vec: int
    spacks: int = 0
    keep: int = 0
    even: int = 0

    @property
    def elements(self) -> int:
        """Columns the configuration holds (one row)."""
        return self.threads * (self.packs + self.spacks) * self.vec * self.cluster

    @property
    def smem_bytes(self) -> int:
        """Dynamic shared memory per block (the staged packs)."""
        return self.threads * self.spacks * 16

    def params(self) -> dict[str, int]:
        return {"threads": self.threads, "packs": self.packs, "spacks": self.spacks, "cluster": self.cluster,
                "keep": self.keep, "even": self.even}


def pack_width(n_cols: int, itemsize: int) -> int:
    """Elements per 16-byte pack when the row length allows it (the pointers are torch's, aligned)."""
    vec = 16 // itemsize
    return vec if n_cols % vec == 0 else 1


def onepass_plan(n_cols: int, itemsize: int) -> OnepassConfig | None:
    """softmax.cu's default plan for a row of n_cols, or None when it needs the two-pass kernel."""
    vec = pack_width(n_cols, itemsize)
    per_thread = ELEMS_PER_THREAD // 2 if vec == 1 else ELEMS_PER_THREAD // vec
    n_packs = -(-n_cols // vec)
    threads = 32
    while threads < 1024 and threads * per_thread < n_packs:
        threads *= 2
    if threads * per_thread >= n_packs:
        return OnepassConfig(threads, per_thread, 1, vec)
    cluster = 2
    while cluster < MAX_CLUSTER and cluster * 512 * per_thread < n_packs:
        cluster *= 2
    if cluster * 512 * per_thread < n_packs:
        return None
    return OnepassConfig(512, per_thread, cluster, vec)


def cluster_candidates(n_cols: int, itemsize: int) -> list[OnepassConfig]:
    """The configurations the autotuner compares for a row that needs more than one block in the
    plan: every kept (KEPT_SHAPES, the H200's fastest first, each after its EVEN twin where the row is
    exactly its slices: EVEN_SHAPES), staged (STAGED_SHAPES) and
    register-only (CLUSTER_SHAPES) shape in the smallest cluster (1, 2, 4, 8 or 16 blocks) that
    holds the row, then the plan. The first is the default of an untuned run. Empty for a row that
    fits one block in the plan (nothing to tune) or needs the two-pass kernel."""
    plan = onepass_plan(n_cols, itemsize)
    if plan is None or plan.cluster == 1:
        return []
    vec, out = plan.vec, []
    n_packs = -(-n_cols // vec)
    shapes = ([(t, p, sp, 1) for t, p, sp in KEPT_SHAPES[vec]] + [(t, p, sp, 0) for t, p, sp in STAGED_SHAPES[vec]]
              + [(t, p, 0, 0) for t, p in CLUSTER_SHAPES[vec]])
    for threads, packs, spacks, keep in shapes:
        per_block = threads * (packs + spacks)
        cluster = 1
        while cluster < MAX_CLUSTER and cluster * per_block < n_packs:
            cluster *= 2
        cfg = OnepassConfig(threads, packs, cluster, vec, spacks, keep)
        if cluster * per_block * vec == n_cols and keep and (threads, packs, spacks) in EVEN_SHAPES[vec]:
            out.append(OnepassConfig(threads, packs, cluster, vec, spacks, keep, even=1))  # its EVEN twin first
        if cluster * per_block >= n_packs and cfg not in out:
            out.append(cfg)
    return out + [plan] if plan not in out else out


def row_candidates(n_cols: int, itemsize: int) -> list[OnepassConfig]:
    """ROW_SHAPES for a row one block holds in the plan: those that hold the row with no more
    than half of the block idle (a 16384-wide float32 row: 512 x 8 kept, 256 x (8 + 8) staged,
    with and without KEEP). Empty for clustered rows, two-pass rows and scalar packs."""
    plan = onepass_plan(n_cols, itemsize)
    if plan is None or plan.cluster != 1:
        return []
    n_packs = -(-n_cols // plan.vec)
    return [OnepassConfig(t, p, 1, plan.vec, sp, k) for t, p, sp, k in ROW_SHAPES[plan.vec]
            if n_packs <= t * (p + sp) < 2 * n_packs]


def fits(n_rows: int, n_cols: int, itemsize: int) -> bool:
    """Whether the one-pass kernel takes the problem (softmax_onepass_fits in softmax.cu)."""
    plan = onepass_plan(n_cols, itemsize)
    return plan is not None and n_rows * plan.cluster <= 2**31 - 1


def geometry(n_rows: int, config: OnepassConfig) -> tuple[tuple[int, int, int], int]:
    """(grid, threads per block): one block per row, or `cluster` blocks per row."""
    return (n_rows * config.cluster, 1, 1), config.threads


def config_from(params: Any, n_cols: int, itemsize: int) -> OnepassConfig | None:
    """A tuned {threads, packs, spacks, cluster, keep, even} as an OnepassConfig (threads 0: the plan;
    an older cache's entry without spacks, keep or even: 0)."""
    if not params or not params.get("threads"):
        return onepass_plan(n_cols, itemsize)
    return OnepassConfig(int(params["threads"]), int(params["packs"]), int(params["cluster"]),
                         pack_width(n_cols, itemsize), int(params.get("spacks", 0)), int(params.get("keep", 0)),
                         int(params.get("even", 0)))
