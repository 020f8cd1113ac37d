"""A plausibility bound on CPU rows (MEASUREMENT.md rule 13, issue 38 class 7), as the datasheet
bound is on the GPU: no CPU row may move its ideal bytes (cost: read + written) in less than
1/CPU_BOUND_MARGIN of the time a warm torch copy of as many bytes takes, less an empty copy's
overhead. A no-op, or a result cached on the CPU, otherwise gets a time; with the bound it fails
("measurement error: CPU bound: ...").

The copy is measured in this worker, once per power-of-two size bucket (cached for the worker's
life, as the GPU copy reference is cached per device): its FASTEST of COPY_SAMPLES on torch's
threads and as many on one thread (the least contended, so the bound is the lowest plausible one),
measured again before a row is failed. The
margin: a fused op moves its bytes no faster than a memcpy of them; 3x leaves room for an op whose cost model over-counts bytes, for
caches a copy of separate buffers does not hit, and for a copy timed while the 2-core host was
busy. Tiny rows, where a copy is all dispatch overhead, are bounded only loosely (the overhead is
subtracted): the bound is about bandwidth.
"""

from __future__ import annotations

import time
from typing import Callable

from workbench.results.record import Flag

CPU_BOUND_MARGIN = 3.0
COPY_SAMPLES = 15
_COPY_MS: dict[int, tuple[float, float]] = {}  # size bucket -> (copy ms, empty-copy overhead ms)


def _fastest_copy_ms(nbytes: int, clock: Callable[[], float]) -> float:
    import torch

    half = max(1, nbytes // 2)  # read half, write half: as cost.bytes counts read + written
    src, dst = torch.ones(half, dtype=torch.uint8), torch.empty(half, dtype=torch.uint8)
    dst.copy_(src)
    best = float("inf")
    threads = torch.get_num_threads()
    # also on one thread: on a busy host a multi-threaded copy waits at its barrier for a preempted
    # thread (measured on the 2-core box: the fastest of 15 at 0.6 GB/s while the row ran at 7 GB/s)
    for count in sorted({threads, 1}, reverse=True):
        torch.set_num_threads(count)
        try:
            for _ in range(COPY_SAMPLES):
                t0 = clock()
                dst.copy_(src)
                best = min(best, (clock() - t0) * 1e3)
        finally:
            torch.set_num_threads(threads)
    return best


def copy_reference(nbytes: int, clock: Callable[[], float] = time.perf_counter,
                   again: bool = False) -> tuple[float, float]:
    """(fastest warm copy of the bucket of `nbytes` in ms, fastest copy of 64 bytes in ms), cached;
    again: measure once more and keep the faster (before a row is failed on it: a copy timed
    while another process held the core must not fail a right row)."""
    bucket = 1 << max(6, int(nbytes).bit_length() - 1)
    if bucket not in _COPY_MS or again:
        fresh = (_fastest_copy_ms(bucket, clock), _fastest_copy_ms(64, clock))
        old = _COPY_MS.get(bucket, fresh)
        _COPY_MS[bucket] = (min(old[0], fresh[0]), min(old[1], fresh[1]))
    return _COPY_MS[bucket]


def cpu_bound_failure(median_ms: float | None, nbytes: int, copy_ms: float, overhead_ms: float) -> str | None:
    """The bound's reason when a CPU row's median is below it, else None."""
    if median_ms is None or nbytes <= 0:
        return None
    floor_ms = max(0.0, copy_ms - overhead_ms) / CPU_BOUND_MARGIN
    if median_ms >= floor_ms:
        return None
    return Flag.CPU_BOUND.format(
        detail=f"a median of {median_ms:.3g} ms for {nbytes} bytes is below 1/{CPU_BOUND_MARGIN:g} of a warm copy "
               f"of as many bytes on this CPU ({copy_ms:.3g} ms, {overhead_ms:.3g} ms of it the copy's overhead): "
               f"no work of that size fits in that time")
