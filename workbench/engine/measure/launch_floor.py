"""The launch floor and device-only time of short kernels (MEASUREMENT.md rule 5, P1).

Launch floor: the median time of a one-element in-place add (one tiny kernel) measured exactly
as rows are (same timer, same L2 flush, same stopping rule), at calibration (engine/calibrate.py),
cached per device. Nothing launched from Python through torch can be faster, so a row below it
is within launch noise: it is FLAGGED (`timing.below_launch_floor`), and its measured statistics
are kept as measured (never raised to the floor).

Device time: for launch-bound rows, CALLS_PER_GRAPH calls captured in one CUDA graph, replayed
and timed with CUDA events, divided by the number of calls (host launch overhead gone). Where
capture fails (a callable that synchronises or allocates on the host), the profiler's kernel
time per call is used instead. Both run the calls back to back without an L2 flush, so both are
L2-WARM times (`timing.device_median_l2_warm`), not comparable with the flushed median.
"""

from __future__ import annotations

from typing import Any, Callable

from workbench.engine.measure.stats import StopRule, quantile, summarize
from workbench.engine.measure.timing import Timer, measure
from workbench.results.record import Flag, Timing

LAUNCH_BOUND_MS = 0.020      # ~20 us: below this, launch overhead dominates (rule 5)
FLOOR_RULE = StopRule(rep_ms=100.0, min_samples=50, target_rel_error=0.01)
CALLS_PER_GRAPH = 20
GRAPH_REPLAYS = 10


def is_launch_bound(median_ms: float, floor_ms: float | None) -> bool:
    """Under ~20 us, or under twice the measured floor."""
    return median_ms < LAUNCH_BOUND_MS or (floor_ms is not None and median_ms < 2 * floor_ms)


def below_floor_flag(timing: Timing | dict[str, Any], floor_ms: float | None) -> str | None:
    """Set timing["below_launch_floor"] and return a flag when the median is below the measured
    floor (launch noise); the statistics themselves are left as measured. None: not below."""
    below = floor_ms is not None and timing["median_ms"] < floor_ms
    timing["below_launch_floor"] = below if floor_ms is not None else None
    if not below:
        return None
    return Flag.BELOW_LAUNCH_FLOOR.format(median=f"{timing['median_ms']:.4g}", floor=f"{floor_ms:.4g}")


def measure_floor_ms(device: str, timer: Timer, flush: Callable[[], None] | None = None,
                     rule: StopRule = FLOOR_RULE) -> float:
    """Median ms of `x.add_(1)` on a one-element tensor of `device`, timed like a row."""
    import torch

    x = torch.zeros(1, device=device)
    samples = measure(lambda: x.add_(1.0), timer, rule, warmup_ms=10.0, flush=flush)
    return summarize(samples).median_ms


def launch_floor_ms(dev: Any, flushed: bool = True) -> float | None:
    """The floor of a DeviceSession's device as its calibration cached it (engine/calibrate.py);
    None on CPU or where it was not measured."""
    from workbench.engine.measure.ceilings import CeilingCache

    if not dev.is_cuda:
        return None
    entry = CeilingCache(dev.cache_dir).load().get(dev.info.cache_key) or {}
    return entry.get("launch_floor_ms" if flushed else "launch_floor_ms_warm")


def graph_device_ms(call: Callable[[], Any], calls: int = CALLS_PER_GRAPH,
                    replays: int = GRAPH_REPLAYS) -> float:
    """Median ms per call of `call` replayed from a CUDA graph (raises if capture fails)."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on a side stream, as torch.cuda.graphs documents
        for _ in range(3):
            call()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            call()
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    per_call = []
    for _ in range(replays):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        per_call.append(start.elapsed_time(end) / calls)
    del graph
    return quantile(sorted(per_call), 0.5)


def device_time_ms(call: Callable[[], Any]) -> tuple[float | None, str | None, str]:
    """(device ms per call, source "cuda_graph" | "profiler" | None, how it was obtained in words).
    Both sources are L2-warm (module docstring)."""
    from workbench.engine.measure.profile import kernel_ms_per_call

    try:
        return graph_device_ms(call), "cuda_graph", f"CUDA-graph replay ({CALLS_PER_GRAPH} calls per graph, L2-warm)"
    except Exception as exc:  # capture not possible for this callable: fall back, say why
        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    try:
        return (kernel_ms_per_call(call), "profiler",
                f"profiler kernel time, L2-warm (graph capture failed: {reason})")
    except Exception as exc:
        return None, None, f"unavailable (graph capture failed: {reason}; profiler: {type(exc).__name__})"
