"""Size estimate before a row runs (time and memory), so a session sized for an H200 does not
hang a laptop: a row estimated far beyond its timeout or the device's memory is `skipped` with
the estimate in `error`, unless --force.

Rates are deliberately conservative (slow) so that only rows that are surely too large are
skipped. Measured on a 2-core CPU box (GeLU, ideal bytes): eager torch ~2-6 GB/s, the Triton
interpreter ~6 MB/s; the rates below are about 10x slower still.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.cost import Cost

# bytes/s of the bytes an implementation moves, and FLOP/s, per way of running
RATES = {
    "cpu": (200e6, 2e9),            # eager torch on a small CPU
    "interpreter": (0.5e6, 50e6),   # Triton under TRITON_INTERPRET (numpy per program)
    "cuda": (500e9, 20e12),         # any recent datacenter GPU is faster than this
}
TIME_FACTOR = 3.0        # skip when the estimate exceeds 3x timeout_s ("far beyond")
MEMORY_FRACTION = 0.9    # skip when the estimate exceeds 90% of the device's memory
REFERENCE_CALLS = 4.0    # the float64 reference and comparison cost about 4 calls
PROFILE_CALLS = 6        # one warm-up and five profiled calls
# Unfused forms allocate intermediates the size of their inputs/outputs, a few alive at once;
# traffic beyond that is re-reads through the caches (cuda_naive matmul's 2*M*N*K loads) and
# takes no memory. Scratch memory is therefore capped at this many times the ideal bytes.
SCRATCH_IO_FACTOR = 4


@dataclass(frozen=True)
class Estimate:
    """Estimated wall time of a whole row (s) and peak memory on its device (bytes)."""

    seconds: float
    memory_bytes: int
    call_s: float

    def describe(self) -> str:
        return f"estimated {duration_text(self.seconds)} and {self.memory_bytes / 2**30:.1f} GiB"


def duration_text(seconds: float) -> str:
    """'45 s', '12 min', '3.5 h', '1.2e+05 days': a duration a person reads at a glance."""
    for limit, size, form in ((120, 1, "{:.0f} s"), (7200, 60, "{:.0f} min"), (172800, 3600, "{:.1f} h")):
        if seconds < limit:
            return form.format(seconds / size)
    return f"{seconds / 86400:.3g} days"


def call_seconds(cost: Cost, way: str) -> float:
    """Conservative time of one call: the slower of its traffic and its arithmetic."""
    bytes_per_s, flops_per_s = RATES[way]
    return max(cost.moved / bytes_per_s, cost.flops / flops_per_s)


def estimate_row(cost: Cost, way: str, actions: tuple[str, ...], *, itemsize: int,
                 warmup_ms: float, rep_ms: float, min_samples: int,
                 footprint_bytes: int | None = None) -> Estimate:
    """Time and memory of one row.

    way: "cpu" | "interpreter" | "cuda"; itemsize: bytes per element of the spec's dtype (the
    float64 reference holds 8/itemsize times the inputs and outputs); footprint_bytes: what one
    call keeps resident (Op.footprint_bytes; default the cost's ideal bytes).
    """
    call_s = call_seconds(cost, way)
    calls = 1.0                                     # build: the first call
    seconds = 0.0
    if "check" in actions:
        calls += REFERENCE_CALLS
    if "bench" in actions:
        calls += 1 + min_samples                    # warm-up (>= 1 call), then >= min_samples
        seconds += (warmup_ms + rep_ms) / 1e3       # the time budgets themselves
    if "profile" in actions:
        calls += PROFILE_CALLS
    io_bytes = cost.bytes if footprint_bytes is None else footprint_bytes
    scratch = min(max(cost.moved - cost.bytes, 0), SCRATCH_IO_FACTOR * io_bytes)  # intermediates
    reference = 4 * io_bytes * 8 // max(itemsize, 1) if "check" in actions else 0
    return Estimate(seconds=seconds + calls * call_s, memory_bytes=io_bytes + scratch + reference,
                    call_s=call_s)


def skip_reason(estimate: Estimate, timeout_s: float, memory_bytes: int | None) -> str | None:
    """Why the row is too large to run without --force, or None."""
    if estimate.seconds > TIME_FACTOR * timeout_s:
        return f"{estimate.describe()}: far beyond timeout_s {timeout_s:g} s (run with --force to try)"
    if memory_bytes and estimate.memory_bytes > MEMORY_FRACTION * memory_bytes:
        return (f"{estimate.describe()}: more than the device's {memory_bytes / 2**30:.1f} GiB "
                f"(run with --force to try)")
    return None
