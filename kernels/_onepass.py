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
# (threads, packs) instantiated in softmax.cu for clustered rows, per elements per 16-byte pack.
# The H200 exploration (4096 x 262144) found no single rule: float32 ran 85% of copy as 8 x 1024
# threads x 8 packs and 73% as the plan's 16 x 512 x 8; bfloat16 80% as the plan's 16 x 512 x 4
# and 72% as 8 x 1024 x 4. So clustered rows are tuned over these.
CLUSTER_SHAPES = {4: ((512, 8), (1024, 8), (1024, 4), (256, 16)),
                  8: ((512, 4), (512, 8), (1024, 8), (256, 8), (1024, 4)),
                  1: ((512, 16), (1024, 16))}
# (threads, packs, spacks): softmax.cu's ONEPASS_STAGED_V*, which also keep `spacks` 16-byte packs
# per thread in shared memory (cp.async). Why: on the H200 the register-only shapes ran one block
# per SM (8 x 1024 x 8 in float32) or left 20 of 132 SMs idle (16-block clusters: 14 fit at once),
# 85% / 79% of copy. Staging makes 2- to 8-block clusters hold the row, or lets two blocks share an
# SM so that one block's loads overlap the other's reduction (QuACK stages its tile the same way).
# Untimed guesses until the tune19 stage measures them; the autotuner keeps whichever is fastest.
STAGED_SHAPES = {4: ((512, 8, 8), (512, 4, 12), (256, 16, 16), (256, 8, 24), (1024, 8, 8), (512, 8, 24)),
                 8: ((256, 4, 4), (512, 4, 4), (256, 8, 8), (512, 8, 8), (1024, 4, 4), (512, 4, 12), (1024, 8, 8)),
                 1: ()}
ONEPASS_VERSION = "2"  # the autotune cache key's version: bump when the candidates change


@dataclass(frozen=True)
class OnepassConfig:
    """threads per block, packs per thread in registers, blocks per cluster (1: no cluster), pack
    width, and packs per thread staged in shared memory (16 bytes each)."""

    threads: int
    packs: int
    cluster: int
    vec: int
    spacks: int = 0

    @property
    def elements(self) -> int:
        """Columns the configuration holds (one row)."""
        return self.threads * (self.packs + self.spacks) * self.vec * self.cluster

    @property
    def smem_bytes(self) -> int:
        """Dynamic shared memory per block (the staged packs)."""
        return self.threads * self.spacks * 16

    def params(self) -> dict[str, int]:
        return {"threads": self.threads, "packs": self.packs, "spacks": self.spacks, "cluster": self.cluster}


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
    """The configurations the autotuner compares for a clustered row: the plan first, then every
    instantiated (threads, packs) and staged (threads, packs, spacks) in the smallest cluster that
    holds the row. Empty for a row
    that fits one block (nothing to tune) or needs the two-pass kernel."""
    plan = onepass_plan(n_cols, itemsize)
    if plan is None or plan.cluster == 1:
        return []
    vec, out = plan.vec, [plan]
    n_packs = -(-n_cols // vec)
    shapes = [(t, p, 0) for t, p in CLUSTER_SHAPES[vec]] + list(STAGED_SHAPES[vec])
    for threads, packs, spacks in shapes:
        per_block = threads * (packs + spacks)
        cluster = 2
        while cluster < MAX_CLUSTER and cluster * per_block < n_packs:
            cluster *= 2
        cfg = OnepassConfig(threads, packs, cluster, vec, spacks)
        if cluster * per_block >= n_packs and cfg not in out:
            out.append(cfg)
    return out


def fits(n_rows: int, n_cols: int, itemsize: int) -> bool:
    """Whether the one-pass kernel takes the problem (softmax_onepass_fits in softmax.cu)."""
    plan = onepass_plan(n_cols, itemsize)
    return plan is not None and n_rows * plan.cluster <= 2**31 - 1


def geometry(n_rows: int, config: OnepassConfig) -> tuple[tuple[int, int, int], int]:
    """(grid, threads per block): one block per row, or `cluster` blocks per row."""
    return (n_rows * config.cluster, 1, 1), config.threads


def config_from(params: Any, n_cols: int, itemsize: int) -> OnepassConfig | None:
    """A tuned {threads, packs, cluster} as an OnepassConfig (threads 0: the plan)."""
    if not params or not params.get("threads"):
        return onepass_plan(n_cols, itemsize)
    return OnepassConfig(int(params["threads"]), int(params["packs"]), int(params["cluster"]),
                         pack_width(n_cols, itemsize), int(params.get("spacks", 0)))
