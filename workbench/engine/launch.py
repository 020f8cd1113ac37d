"""The `launch` record: grid, warps, threads per block, and waves over the device's SMs.

waves = blocks / (sm_count x blocks_per_sm). blocks_per_sm is the occupancy limit from what
is known: threads per SM (2048 on sm_80/sm_90), blocks per SM (32), and, when the PTX stage
supplies them, registers per thread (64K registers per SM) and shared memory per block.
Without registers and shared memory this is an upper bound on occupancy, so `waves` is then a
lower bound. Register allocation granularity (per warp, rounded to 256) is ignored.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from workbench.results import LAUNCH_KEYS, blank

DEFAULT_MAX_THREADS_PER_SM = 2048
DEFAULT_MAX_BLOCKS_PER_SM = 32
DEFAULT_REGS_PER_SM = 65536


def blocks_per_sm(block_threads: int, *, max_threads_per_sm: int | None = None,
                  max_blocks_per_sm: int | None = None, registers_per_thread: int | None = None,
                  regs_per_sm: int | None = None, shared_bytes: int | None = None,
                  smem_per_sm_bytes: int | None = None) -> int:
    """Resident blocks per SM from the limits that are known (at least 1)."""
    limits = [(max_threads_per_sm or DEFAULT_MAX_THREADS_PER_SM) // max(block_threads, 1),
              max_blocks_per_sm or DEFAULT_MAX_BLOCKS_PER_SM]
    if registers_per_thread:
        limits.append((regs_per_sm or DEFAULT_REGS_PER_SM) // (registers_per_thread * block_threads))
    if shared_bytes and smem_per_sm_bytes:
        limits.append(smem_per_sm_bytes // shared_bytes)
    return max(1, min(limits))


def waves(blocks: int, sm_count: int | None, per_sm: int) -> float | None:
    """Blocks over (SMs x resident blocks per SM); None when the SM count is unknown (CPU)."""
    if not sm_count:
        return None
    return blocks / (sm_count * per_sm)


def geometry(impl: Any, spec: Any, params: Mapping[str, Any]) -> tuple[list[int], int | None, int] | None:
    """(grid padded to 3 dims, num_warps or None, threads per block) of an implementation's
    declared launch, or None when it declares none (torch forms, CUDA without `launch`)."""
    if impl.triton_launch is not None:
        launch = impl.triton_launch(spec, params)
        grid = [int(g) for g in launch.grid] + [1] * (3 - len(launch.grid))
        return grid, int(launch.num_warps), 32 * int(launch.num_warps)
    source = impl.cuda_source
    if source is not None and source.launch is not None:
        grid, threads = source.launch(spec, params)
        grid = [int(g) for g in grid] + [1] * (3 - len(grid))
        return grid, math.ceil(threads / 32), int(threads)
    return None


def launch_record(impl: Any, spec: Any, params: Mapping[str, Any], info: Any,
                  registers_per_thread: int | None = None, shared_bytes: int | None = None) -> dict | None:
    """The record for a row on a device (`info`: DeviceInfo), or None without a declared launch."""
    geo = geometry(impl, spec, params)
    if geo is None:
        return None
    grid, num_warps, threads = geo
    per_sm = blocks_per_sm(threads, max_threads_per_sm=info.max_threads_per_sm,
                           max_blocks_per_sm=info.max_blocks_per_sm,
                           registers_per_thread=registers_per_thread, regs_per_sm=info.regs_per_sm,
                           shared_bytes=shared_bytes, smem_per_sm_bytes=info.smem_per_sm_bytes)
    return blank(LAUNCH_KEYS, grid=grid, num_warps=num_warps, block_threads=threads,
                 waves=waves(math.prod(grid), info.sm_count, per_sm))


def launch_for(op: Any, impl: Any, spec: Any, params: Mapping[str, Any], info: Any,
               ptx: Mapping[str, Any] | None = None) -> dict | None:
    """The launch record of a row: the PTX module's `launch_record` where it exists (full
    occupancy rules, registers and shared memory from the row's ptx record), else this module's."""
    try:
        from workbench.ptx.extract import launch_record as ptx_launch_record
    except ImportError:
        return launch_record(impl, spec, params, info)
    return ptx_launch_record(op, impl, spec, params, sm_count=info.sm_count, ptx=ptx)
