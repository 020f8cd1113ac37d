"""Launch geometry: grid, threads per block, blocks resident per SM (occupancy) and waves.

Occupancy follows the CUDA Occupancy Calculator's rules as `cuda_occupancy.h` implements them
(cudaOccMaxBlocksPerSMWarpsLimit / RegsLimit / SMemLimit), with the sm_90 limits of the CUDA C++
Programming Guide, "Compute Capabilities", Technical Specifications table, compute capability 9.0.
A wave is the number of blocks the whole GPU holds at once (SMs x blocks per SM); the lecture's
rule of thumb wants at least 4 blocks per SM in the grid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

H200_SM_COUNT = 132          # NVIDIA H200 SXM: 132 SMs (H100/H200 datasheet)
BLOCKS_PER_SM_RULE = 4       # the lecture's rule of thumb: grid >= 4 x SMs


@dataclass(frozen=True)
class SmLimits:
    """Per-SM limits of one compute capability; defaults are sm_90 (Hopper).

    Source: CUDA C++ Programming Guide, Technical Specifications per Compute Capability (9.0):
    2048 threads, 64 warps and 32 blocks resident per SM; 64K 32-bit registers per SM, at most
    255 per thread and 64K per block; 228 KB shared memory per SM, 227 KB per block; 1 KB of
    shared memory reserved by the system per block. Allocation granularities from
    cuda_occupancy.h: registers in units of 256 per warp over 4 SM sub-partitions, shared memory
    in units of 128 bytes.
    """

    max_threads_per_sm: int = 2048
    max_warps_per_sm: int = 64
    max_blocks_per_sm: int = 32
    max_threads_per_block: int = 1024
    registers_per_sm: int = 65536
    registers_per_block: int = 65536
    max_registers_per_thread: int = 255
    register_alloc_unit: int = 256
    sub_partitions: int = 4
    shared_per_sm: int = 228 * 1024
    max_shared_per_block: int = 227 * 1024
    shared_reserved_per_block: int = 1024
    shared_alloc_unit: int = 128
    warp_size: int = 32


SM90 = SmLimits()


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def blocks_per_sm(block_threads: int, registers: int | None = None, shared_bytes: int | None = None,
                  limits: SmLimits = SM90) -> tuple[int, dict[str, int], str]:
    """(resident blocks per SM, the limit of each resource, the limiting resource(s), comma-joined).

    registers: per thread (None: not limiting, unknown); shared_bytes: per block, static plus
    dynamic (None: 0). A block over a hard limit (threads, registers or shared memory per block)
    gives 0.
    """
    warps = -(-block_threads // limits.warp_size)
    found: dict[str, int] = {
        "blocks": limits.max_blocks_per_sm,
        "warps": limits.max_warps_per_sm // warps if block_threads <= limits.max_threads_per_block else 0,
    }
    if registers:
        regs_per_warp = _round_up(registers * limits.warp_size, limits.register_alloc_unit)
        per_partition = limits.registers_per_sm // limits.sub_partitions
        warps_by_regs = (per_partition // regs_per_warp) * limits.sub_partitions
        fits = registers <= limits.max_registers_per_thread and regs_per_warp * warps <= limits.registers_per_block
        found["registers"] = warps_by_regs // warps if fits else 0
    smem = _round_up((shared_bytes or 0) + limits.shared_reserved_per_block, limits.shared_alloc_unit)
    fits = (shared_bytes or 0) <= limits.max_shared_per_block
    found["shared"] = limits.shared_per_sm // smem if fits else 0
    resident = min(found.values())
    limiter = ", ".join(k for k, v in found.items() if v == resident)  # every resource at the minimum
    return resident, found, limiter


def waves(total_blocks: int, sm_count: int, resident_per_sm: int) -> float | None:
    """Grid blocks / (SMs x blocks resident per SM); None when nothing fits."""
    if resident_per_sm <= 0 or sm_count <= 0:
        return None
    return total_blocks / (sm_count * resident_per_sm)


def geometry_notes(total_blocks: int, sm_count: int, resident: int, n_waves: float | None,
                   limiter: str) -> list[str]:
    """The rule of thumb (blocks >= 4 x SMs), tail effect and occupancy limiter, as notes."""
    notes: list[str] = []
    want = BLOCKS_PER_SM_RULE * sm_count
    if total_blocks >= want:
        notes.append(f"{total_blocks} blocks >= {BLOCKS_PER_SM_RULE} x {sm_count} SMs = {want}: "
                     "enough blocks to fill the GPU (rule of thumb)")
    else:
        notes.append(f"only {total_blocks} blocks < {BLOCKS_PER_SM_RULE} x {sm_count} SMs = {want}: "
                     "too few to fill the GPU and hide latency (rule of thumb); use more, smaller blocks")
    if resident == 0:
        notes.append(f"the block does not fit on an SM ({limiter} over the per-block limit)")
    elif n_waves is not None and 1 < n_waves < 8 and 0 < n_waves % 1 < 0.5:
        notes.append(f"{n_waves:.2f} waves: the last wave is {100 * (n_waves % 1):.0f}% full (tail effect)")
    elif n_waves is not None and n_waves < 1:
        notes.append(f"{n_waves:.2f} waves: less than one wave, some SMs idle")
    if resident and not {"blocks", "warps"} & set(limiter.split(", ")):
        notes.append(f"occupancy limited by {limiter}: {resident} blocks per SM")
    return notes


def geometry_record(grid: tuple[int, ...], block_threads: int, *, sm_count: int,
                    registers: int | None = None, shared_bytes: int | None = None,
                    limits: SmLimits = SM90) -> dict[str, Any]:
    """The `launch` record: CONTRACTS keys (grid, num_warps, block_threads, waves) plus occupancy."""
    grid = tuple(int(g) for g in grid) + (1,) * (3 - len(grid))
    total = math.prod(grid)
    resident, limits_found, limiter = blocks_per_sm(block_threads, registers, shared_bytes, limits)
    n_waves = waves(total, sm_count, resident)
    active_warps = resident * -(-block_threads // limits.warp_size)
    return {
        "grid": list(grid),
        "num_warps": -(-block_threads // limits.warp_size),
        "block_threads": block_threads,
        "waves": round(n_waves, 3) if n_waves is not None else None,
        "blocks": total,
        "sm_count": sm_count,
        "blocks_per_sm": resident,
        "blocks_per_sm_limits": limits_found,
        "limiter": limiter,
        "occupancy": round(active_warps / limits.max_warps_per_sm, 4),
        "registers": registers,
        "shared_bytes": shared_bytes,
        "notes": geometry_notes(total, sm_count, resident, n_waves, limiter),
    }
