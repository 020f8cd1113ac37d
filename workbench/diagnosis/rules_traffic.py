"""Rules over the cost model, the counters and the roofline: unfused chains, extra passes,
memory- and compute-bound rows, tensor cores, L2-resident working sets.

Thresholds are the lecture's and the roofline's: a row "at the roofline" is within AT_ROOF of the
measured reference (copy or cuBLAS); an unfused chain moves at least UNFUSED_RATIO x the fused
model's bytes over more than one kernel (the lecture: manual GeLU 11x, manual softmax ~4x).
"""

from __future__ import annotations

from workbench.diagnosis.core import Context, Finding
from workbench.diagnosis.figures import (dram_bytes, gb, ideal_and_moved, kernels_per_call, label, median_ms,
                                         number, ptx_kernels, timing, traffic, x)
from workbench.results.record import Record, Traffic

UNFUSED_RATIO = 1.5     # bytes moved / fused model's bytes that make a multi-kernel chain "unfused"
EXTRA_PASS_RATIO = 1.2  # one kernel moving this much more than ideal reads its data twice
AT_ROOF = 85.0          # % of the measured reference counted as "at the roofline"
TENSOR_KERNEL_MARKS = ("xmma", "wgmma", "gmma", "tensorop", "16816", "1688", "hmma", "s16816", "cutlass_80_tensorop")


def _fused_peer(record: Record, ctx: Context) -> Record | None:
    """The fastest ok row at the same point whose kernels move no more than the ideal bytes."""
    fused = []
    for peer in ctx.same_point(record):
        ideal, moved = ideal_and_moved(peer)
        kernels, _ = kernels_per_call(peer)
        if ideal and moved and moved <= ideal * 1.01 and kernels in (None, 1) and median_ms(peer):
            fused.append(peer)
    return min(fused, key=lambda peer: median_ms(peer) or 0.0, default=None)


def unfused(record: Record, ctx: Context) -> Finding | None:
    """Several kernels per call moving well over the fused model's bytes (lecture: "many
    aten::add/mul/tanh in the profiler -> small operators not fused")."""
    ideal, moved = ideal_and_moved(record)
    kernels, source = kernels_per_call(record)
    real = dram_bytes(record)
    moving = real if real is not None else moved
    if not ideal or moving is None or moving < UNFUSED_RATIO * ideal or kernels is None or kernels < 2:
        return None
    count = f"{kernels} kernels per call ({source})"
    parts = [f"{count}; they move {gb(moved)} by the cost model against the fused model's {gb(ideal)} "
             f"({x(moved / ideal)})" if moved else count]
    if real is not None:
        parts.append(f"ncu measured {gb(real)} of DRAM traffic ({x(real / ideal)} the fused model)")
    suggestion = "fuse the chain: torch.compile (Inductor emits one kernel) or one Triton kernel; every " \
                 "intermediate tensor makes a round trip to HBM"
    peer = _fused_peer(record, ctx)
    data = {"kernels": kernels, "bytes_moved": moved, "ideal_bytes": ideal, "dram_bytes": real,
            "ratio": moving / ideal}
    mine, theirs = median_ms(record), median_ms(peer) if peer is not None else None
    if peer is not None and mine and theirs:
        speedup = mine / theirs
        suggestion += f" (here the fused `{label(peer)}` takes {theirs:.3g} ms, {x(speedup)} faster)"
        data["fused_speedup"] = speedup
    return Finding("unfused", "; ".join(parts), suggestion, "problem", data)


def extra_passes(record: Record, ctx: Context) -> Finding | None:
    """One kernel that moves clearly more than the ideal bytes: it reads its data twice."""
    ideal, moved = ideal_and_moved(record)
    kernels, _ = kernels_per_call(record)
    real = dram_bytes(record)
    moving = real if real is not None else moved
    if kernels != 1 or not ideal or moving is None or moving < EXTRA_PASS_RATIO * ideal:
        return None
    how = "ncu measured" if real is not None else "the cost model says it moves"
    return Finding("extra_passes", f"one kernel, but {how} {gb(moving)} against the ideal {gb(ideal)} "
                   f"({x(moving / ideal)}): its input is read more than once",
                   "reuse data on chip instead of re-reading it: tiles in shared memory or registers "
                   "(matmul), one pass per row (softmax: the whole row in registers, or an online "
                   "running max and sum)", "problem",
                   {"ratio": moving / ideal, "bytes_moved": moving, "ideal_bytes": ideal})


def _pct(t: Traffic, value: float | None, ceiling: str) -> float | None:
    """`value` (pct_of_copy, pct_of_cublas), or in an older document pct_of_ceiling where the
    ceiling is `ceiling`."""
    found = number(value)
    if found is None and str(t.ceiling or "").startswith(ceiling):  # older documents
        found = number(t.pct_of_ceiling)
    return found


def memory_bound(record: Record, ctx: Context) -> Finding | None:
    """Memory-bound at X% of the measured copy; per byte really moved where that differs."""
    t = traffic(record)
    pct = _pct(t, t.pct_of_copy, "copy_gbps")
    if t.bound != "memory" or t.l2_resident or pct is None:
        return None
    ideal, moved = ideal_and_moved(record)
    gbps = number(t.gbps) or 0.0
    evidence = f"memory-bound (intensity {number(t.intensity) or 0:.3g} FLOP/B): {gbps:.0f} GB/s effective = {pct:.1f}% of the measured copy"
    per_moved = pct * moved / ideal if ideal and moved and moved > 1.05 * ideal else None
    if per_moved is not None and moved and ideal:
        evidence += f"; per byte really moved ({x(moved / ideal)} the ideal) {per_moved:.0f}%"
    if pct >= AT_ROOF:
        return Finding("memory_bound", evidence, "at the memory roofline: only moving fewer bytes helps "
                       "(fusion, a narrower dtype)", "note", {"pct_of_copy": pct})
    if per_moved is not None and per_moved >= AT_ROOF:
        suggestion = "it runs at copy speed per byte it moves: cut the bytes (fuse, read each input once)"
    else:
        suggestion = ("below the copy: keep more bytes in flight (16-byte vector loads, several elements "
                      "per thread, enough blocks for every SM) and coalesce the accesses")
    return Finding("memory_bound", evidence, suggestion, "problem", {"pct_of_copy": pct, "pct_per_moved": per_moved})


def tensor_cores(record: Record) -> tuple[bool | None, str]:
    """(tensor cores used?, how we know): PTX mma/wgmma counts, else the profiler's kernel names."""
    kernels = ptx_kernels(record)
    if kernels:
        hits = sum((k.get("counts") or {}).get(key, 0) for k in kernels for key in ("mma", "wgmma", "tcgen05_mma"))
        return hits > 0, f"{hits} mma/wgmma instructions in the PTX" if hits else "no mma/wgmma in the PTX"
    names = [r.get("name", "") for r in (record.profile or {}).get("rows") or () if r.get("kind") == "kernel"]
    if names:
        used = any(mark in name.lower() for name in names for mark in TENSOR_KERNEL_MARKS)
        return used, "tensor-core kernel names in the profile" if used else "CUDA-core kernel names in the profile"
    return None, "not known (add ptx or profile)"


def compute_bound(record: Record, ctx: Context) -> Finding | None:
    """Compute-bound, with the dtype, the float32 precision and whether tensor cores ran."""
    t = traffic(record)
    tflops = number(t.tflops)
    if t.bound != "compute" or tflops is None:
        return None
    dtype, precision = record.dtype, record.fp32_precision
    used, how = tensor_cores(record)
    pct = _pct(t, t.pct_of_cublas, "matmul_tflops")
    peak = number(t.pct_of_peak)
    where = f" = {pct:.0f}% of cuBLAS {dtype}" if pct is not None else ""
    where += f", {peak:.0f}% of the datasheet peak" if peak is not None else ""
    cores = f"yes ({how})" if used else f"no ({how})" if used is False else how
    evidence = f"compute-bound: {tflops:.3g} TFLOP/s{where}; {dtype}" + (f" ({precision})" if precision else "") + \
               f"; tensor cores: {cores}"
    data = {"tflops": tflops, "pct_of_cublas": pct, "tensor_cores": used}
    if dtype == "float32" and precision != "tf32" and used is not True:
        return Finding("compute_bound", evidence, "float32 IEEE runs on CUDA cores: fp32_precision: tf32 "
                       "(tensor cores, ~1e-3 relative error) or bfloat16/float16 inputs reach several times "
                       "the TFLOP/s", "problem", data)
    if used is False and dtype in ("bfloat16", "float16"):
        return Finding("compute_bound", evidence, "the kernel does not use tensor cores: tl.dot in Triton, "
                       "mma/wgmma (or cuBLAS) in CUDA", "problem", data)
    if pct is not None and pct < AT_ROOF:
        return Finding("compute_bound", evidence, "below cuBLAS: tile sizes, num_stages and the tile order "
                       "(GROUP_M) are the usual levers; for a plain GEMM call the library", "problem", data)
    return Finding("compute_bound", evidence, "at the compute roofline for this dtype", "note", data)


def l2_resident(record: Record, ctx: Context) -> Finding | None:
    """A working set that fits in L2: its GB/s is L2's, or may be in a real model's loop."""
    t = traffic(record)
    l2 = number(ctx.environment.get("l2_bytes"))
    ideal, moved = ideal_and_moved(record)
    working = moved or ideal
    warm = t.l2_resident or timing(record).flush_l2 is False
    if not l2 or not working or working > l2 or (not warm and t.bound != "memory"):
        return None
    size = f"working set {gb(working)} fits in the {gb(l2)} L2"
    if warm:
        return Finding("l2_resident", f"{size} and was timed without an L2 flush",
                       "its GB/s is L2 bandwidth, not HBM: set flush_l2: true for HBM figures", "note",
                       {"working_bytes": working, "l2_bytes": l2})
    return Finding("l2_resident", f"{size}; L2 was flushed before each call",
                   "inside a model's loop this data may stay in L2 and run faster than here; writes of "
                   "the last call can still be in L2 at its end", "note", {"working_bytes": working, "l2_bytes": l2})

