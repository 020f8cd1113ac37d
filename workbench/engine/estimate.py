"""Size estimate before a row runs (time and memory), so a session sized for an H200 does not
hang a laptop: a row estimated far beyond its timeout or the device's memory is `skipped` with
the estimate in `error`, unless --force.

Rates are deliberately conservative (slow) so that only rows that are surely too large are
skipped. Measured on a 2-core CPU box (GeLU, ideal bytes): eager torch ~2-6 GB/s, the Triton
interpreter ~6 MB/s; the rates below are about 10x slower still.

Memory is a model of the row's device peak (issue 14): footprint (inputs and outputs; the op's
`@footprint` where its traffic is not its memory) + max(implementation scratch, check workspace)
(an unfused form's intermediates are freed before the check starts) + the L2 flush buffer (CUDA
only). The check workspace is `workbench.check.chunks.check_workspace_bytes`: float64 copies of the
inputs the reference takes whole, one chunk of the rest, and the reference's and comparison's
temporaries for one chunk (about 1 GiB at 2^24 output elements a chunk), not float64 copies of
everything.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.cost import Cost
from workbench.engine.measure.timing import MIN_FLUSH_BYTES

# bytes/s of the bytes an implementation moves, and FLOP/s, per way of running
RATES = {
    "cpu": (200e6, 2e9),            # eager torch on a small CPU
    "interpreter": (0.5e6, 50e6),   # Triton under TRITON_INTERPRET (numpy per program)
    "cuda": (500e9, 20e12),         # any recent datacenter GPU is faster than this
}
TIME_FACTOR = 3.0        # skip when the estimate exceeds 3x timeout_s ("far beyond")
MEMORY_FRACTION = 0.9    # skip when the estimate exceeds 90% of the device's memory
REFERENCE_CALLS = 4.0    # the float64 reference and comparison of one input set cost about 4 calls
CHECK_SETS = 3           # the first call, the special-values set, the timed call (workbench.check.row)
PROFILE_CALLS = 6        # one warm-up and five profiled calls
# Unfused forms allocate intermediates the size of their inputs/outputs, a few alive at once;
# traffic beyond that is re-reads through the caches (cuda_naive matmul's 2*M*N*K loads) and
# takes no memory. Scratch memory is therefore capped at this many times the ideal bytes: 2,
# measured on H200 (benchmarks/stages/check.py, memory part): the manual GeLU at 8192^2 fp32
# (9 kernels, 11x the ideal traffic) peaked at 1.70 GiB, 0.95 GiB above its in+out and flush
# buffer, i.e. ~1.8x in+out alive at once; a factor 4 estimated 2.75 GiB (1.6x over the peak).
SCRATCH_IO_FACTOR = 2


@dataclass(frozen=True)
class Estimate:
    """Estimated wall time of a whole row (s) and peak memory on its device (bytes), with the
    memory's parts: footprint, implementation scratch, check workspace, L2 flush buffer."""

    seconds: float
    memory_bytes: int
    call_s: float
    footprint_bytes: int = 0
    scratch_bytes: int = 0
    check_bytes: int = 0
    flush_bytes: int = 0

    def describe(self) -> str:
        """'estimated 3 s and 18.3 GiB (footprint 12.0 + max(scratch 0.0, check 1.4) + flush 0.3 GiB)'."""
        text = f"estimated {duration_text(self.seconds)} and {self.memory_bytes / 2**30:.1f} GiB"
        if not self.footprint_bytes:
            return text
        gib = [x / 2**30 for x in (self.footprint_bytes, self.scratch_bytes, self.check_bytes, self.flush_bytes)]
        return (text + f" (footprint {gib[0]:.1f} + max(scratch {gib[1]:.1f}, check {gib[2]:.1f}) "
                f"+ flush {gib[3]:.1f} GiB)")

    def as_dict(self) -> dict:
        """The record's `estimate` field (CONTRACTS.md)."""
        return {"seconds": self.seconds, "memory_bytes": self.memory_bytes,
                "footprint_bytes": self.footprint_bytes, "scratch_bytes": self.scratch_bytes,
                "check_bytes": self.check_bytes, "flush_bytes": self.flush_bytes}


def l2_flush_bytes(l2_bytes: int | None) -> int:
    """The flush buffer the bench stage allocates on a CUDA device (engine/timing.make_l2_flush:
    max(2 x L2, 256 MiB))."""
    return max(2 * int(l2_bytes or 0), MIN_FLUSH_BYTES)


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
                 footprint_bytes: int | None = None, check_bytes: int | None = None,
                 flush_bytes: int = 0) -> Estimate:
    """Time and memory of one row.

    way: "cpu" | "interpreter" | "cuda"; itemsize: bytes per element of the spec's dtype;
    footprint_bytes: what one call keeps resident (Op.footprint_bytes; default the cost's ideal
    bytes); check_bytes: the check's workspace (workbench.check.chunks.check_workspace_bytes; default
    float64 copies of four times the footprint, for an op that cannot say); flush_bytes: the L2
    flush buffer (l2_flush_bytes, CUDA rows that bench).
    """
    call_s = call_seconds(cost, way)
    calls = 1.0                                     # build: the first call
    seconds = 0.0
    if "check" in actions:
        calls += CHECK_SETS * REFERENCE_CALLS + (CHECK_SETS - 1)  # references, and two more calls
    if "bench" in actions:
        calls += 1 + min_samples                    # warm-up (>= 1 call), then >= min_samples
        seconds += (warmup_ms + rep_ms) / 1e3       # the time budgets themselves
    if "profile" in actions:
        calls += PROFILE_CALLS
    io_bytes = cost.bytes if footprint_bytes is None else footprint_bytes
    scratch = min(max(cost.moved - cost.bytes, 0), SCRATCH_IO_FACTOR * io_bytes)  # intermediates
    check = 0
    if "check" in actions:
        check = check_bytes if check_bytes is not None else 4 * io_bytes * 8 // max(itemsize, 1)
    flush = flush_bytes if "bench" in actions else 0
    return Estimate(seconds=seconds + calls * call_s, memory_bytes=io_bytes + max(scratch, check) + flush,
                    call_s=call_s, footprint_bytes=io_bytes, scratch_bytes=scratch, check_bytes=check,
                    flush_bytes=flush)


def skip_reason(estimate: Estimate, timeout_s: float, memory_bytes: int | None) -> str | None:
    """Why the row is too large to run without --force, or None. Past all of the device's
    memory it cannot run at all, so --force is not offered (`M: 99999999999` on a CPU was told
    to try --force for 47685 GiB)."""
    if memory_bytes and estimate.memory_bytes > memory_bytes:
        return (f"{estimate.describe()}: more than all of the device's {memory_bytes / 2**30:.1f} GiB, "
                f"so it cannot run here; a smaller shape can")
    if estimate.seconds > TIME_FACTOR * timeout_s:
        return f"{estimate.describe()}: far beyond timeout_s {timeout_s:g} s (run with --force to try)"
    if memory_bytes and estimate.memory_bytes > MEMORY_FRACTION * memory_bytes:
        return (f"{estimate.describe()}: more than the device's {memory_bytes / 2**30:.1f} GiB "
                f"(run with --force to try)")
    return None


def exact_check_bytes_matter(footprint_bytes: int, itemsize: int, memory_bytes: int | None) -> bool:
    """Whether a row's exact check workspace can change its admission: the conservative default
    estimate_row assumes without it (float64 copies of four times the footprint) brings the row
    past half of MEMORY_FRACTION of the device's memory (unknown memory: always). Below that, the
    default admits the row as the exact figure would, and the exact one is not worth its price:
    running the reference on the meta device imports torch._dynamo (a Python decomposition such
    as `pow` is wrapped in `torch._disable_dynamo`), which held the first plan of a fresh H200
    worker for ~5.6 s."""
    if not memory_bytes:
        return True
    default = 4 * footprint_bytes * 8 // max(itemsize, 1)
    return footprint_bytes + default > 0.5 * MEMORY_FRACTION * memory_bytes


def check_bytes_of(op, impl, spec) -> int | None:
    """The check workspace of one row (workbench.check.chunks.check_workspace_bytes), from the input
    and output shapes found on torch's meta device (no memory, no values); None when the op's
    inputs or reference cannot run there (estimate_row then assumes the conservative default).
    In the front end (a torch-free planner: engine/planning.CostedRegistry) the implementation
    carries the worker's answer instead, `impl.check_bytes(spec)`."""
    from workbench.check.chunks import check_workspace_bytes

    if callable(getattr(impl, "check_bytes", None)):
        return impl.check_bytes(spec)
    try:
        import torch

        inputs = op.make_inputs(spec, "meta", 0)
        shapes = [tuple(t.shape) for t in inputs if torch.is_tensor(t)]
        upcast = [t.to(torch.float64) if torch.is_tensor(t) and t.is_floating_point() else t for t in inputs]
        out_elements = op.reference_fn(impl.math)(*upcast).numel()
    except Exception:  # a plugin's factory with a device generator, a reference meta cannot run
        return None
    whole = op.footprint_bytes(spec) * 8 // max(spec.dtype.itemsize, 1) if hasattr(spec, "dtype") else 0
    return check_workspace_bytes(op.check_chunks, spec, shapes, out_elements, whole)
