"""Rules over timing and the environment: launch-bound (host time >> device time), time that
does not follow the work, clock drops and power limits, CUDA_LAUNCH_BLOCKING, recompiles, noise.

Launch-bound (the lecture: "CUDA time small, CPU time large -> launch overhead: fuse, bigger
batches, CUDA graphs"): the device's kernels take under HOST_BOUND of the host's time per call
(timing.host_launch_ms, measured at warm-up), or of the median; or, with no kernel time known,
a CUDA-event median that is the host's pace (_host_window: behind the headroom spin the events
hold device work); or the engine's own launch-bound
flag (median under ~20 us or 2x the launch floor); or, across a sweep of one implementation,
WORK_GREW x the FLOPs and bytes took under TIME_FOLLOWED x the time.
"""

from __future__ import annotations

from workbench.diagnosis.core import Context, Finding
from workbench.results.record import Flag, Record, Timing, first_flag
from workbench.diagnosis.figures import (device_ms_per_call, graph_peer, kernels_per_call, label, median_ms,
                                         ms, number, timing, traffic, x)

HOST_BOUND = 0.5       # device time per call under this fraction of host time: the GPU waits
WORK_GREW = 3.0        # a sweep whose work grew this much ...
TIME_FOLLOWED = 1.5    # ... but whose time grew less than this: time is not the work's
HOST_WINDOW = 1.25     # a median within this of the host time a capped spin left uncovered: the host's
CLOCK_LIMITS = ("sw_power_cap", "hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake")


def _work(record: Record) -> float | None:
    t = traffic(record)
    return number(t.flops) or number(t.bytes)


def _sweep_evidence(record: Record, ctx: Context) -> str | None:
    """The widest sweep of this label: work x WORK_GREW, time under x TIME_FOLLOWED (the same for
    every ok point of the label: found once)."""
    if record.status == "ok":
        key = ("sweep_evidence", record.run_index, record.label)
        return ctx.memo(key, lambda: _sweep_points_evidence([record, *ctx.same_label(record)]))
    return _sweep_points_evidence([record, *ctx.same_label(record)])


def _sweep_points_evidence(records: list[Record]) -> str | None:
    points = [p for p in records if _work(p) and median_ms(p)]
    if len(points) < 3:
        return None
    low, high = min(points, key=lambda p: _work(p) or 0.0), max(points, key=lambda p: _work(p) or 0.0)
    grew, took = _work(high) / _work(low), median_ms(high) / median_ms(low)  # type: ignore[operator]
    if grew < WORK_GREW or took >= TIME_FOLLOWED:
        return None
    return (f"across the sweep {x(grew)} the work took {x(took)} the time "
            f"({ms(median_ms(low))} at {low.sweep_value}, {ms(median_ms(high))} at {high.sweep_value})")


def launch_bound(record: Record, ctx: Context) -> Finding | None:
    t = timing(record)
    median = median_ms(record)
    if median is None:
        return None
    device, source = device_ms_per_call(record)
    host = number(t.host_launch_ms)
    kernels, _ = kernels_per_call(record)
    evidence = []
    if device is not None and host and device < HOST_BOUND * host:
        evidence.append(f"host {ms(host)} per call against {ms(device)} of kernels ({source}, "
                        f"{100 * device / host:.0f}%)")
    elif device is None and host and t.timer == "cuda_event" and (window := _host_window(t, median, host)):
        evidence.append(window)
    elif device is not None and device < HOST_BOUND * median and source != "cuda_graph time, L2-warm":
        evidence.append(f"median {ms(median)} against {ms(device)} of kernels per call ({source})")
    if t.launch_bound:
        floor = number(t.launch_floor_ms)
        evidence.append(f"median {ms(median)}" + (f", launch floor {ms(floor)}" if floor else "") +
                        " (under ~20 us or 2x the floor)")
    sweep = _sweep_evidence(record, ctx)
    if sweep:
        evidence.append(sweep)
    if not evidence:
        return None
    if kernels:
        evidence.append(f"{kernels} kernels per call")
    suggestion, data = _graph_prescription(record, ctx, median)
    data.update(host_ms=host, device_ms=device, median_ms=median, kernels=kernels)
    return Finding("launch_bound", "; ".join(evidence), suggestion, "problem", data)


def _host_window(timing: Timing, median: float, host: float) -> str | None:
    """Evidence that a CUDA-event median is the host's pace, or None. Behind the headroom spin
    (engine/timing.py: sized from the host's launch time, capped at MAX_HEADROOM_MS) the events'
    window holds device work, so a median under HOST_BOUND x the host's time per call is the GPU
    waiting for the host; where the host outran the capped spin, the window is what the spin did
    not cover (host - spin): a median within HOST_WINDOW of that is the host's time, not the GPU's."""
    spin = number(timing.headroom_ms) or 0.0
    behind = f"; timed behind a {ms(spin)} spin" if spin else ""
    if median < HOST_BOUND * host:
        return f"host {ms(host)} per call against a device median of {ms(median)} ({100 * median / host:.0f}%{behind})"
    uncovered = host - spin
    if spin and uncovered > 0 and median <= HOST_WINDOW * uncovered:
        return (f"host {ms(host)} per call outran the {ms(spin)} spin by {ms(uncovered)}: the median "
                f"{ms(median)} follows the host, not the GPU")
    return None


def _graph_prescription(record: Record, ctx: Context, median: float) -> tuple[str, dict]:
    if timing(record).mode == "graph":
        return "already a CUDA graph replay: fuse kernels (torch.compile) or give each launch more work", {}
    base = ("replay the call as a CUDA graph (`" + label(record) + "+graph` in impls, or timing_mode: graph), "
            "fuse kernels (torch.compile), or give each launch more work (a bigger batch)")
    peer = graph_peer(record, ctx.same_point(record))
    graph_ms = median_ms(peer) if peer is not None else None
    if graph_ms and peer is not None:
        return (f"{base}: here `{label(peer)}` takes {ms(graph_ms)}, {x(median / graph_ms)} faster",
                {"graph_ms": graph_ms, "graph_speedup": median / graph_ms})
    t = timing(record)
    if t.device_median_source == "cuda_graph" and t.device_median_ms and number(t.device_median_ms):
        graph_ms = t.device_median_ms
        return (f"{base}: a CUDA graph of back-to-back calls took {ms(graph_ms)} per call (L2-warm), "
                f"{x(median / graph_ms)} faster", {"graph_ms": graph_ms, "graph_speedup": median / graph_ms})
    return base, {}


def clock_drop(record: Record, ctx: Context) -> Finding | None:
    t = timing(record)
    clock = t.sm_clock_mhz or {}
    limits = [r for r in t.throttle or () if r in CLOCK_LIMITS]
    if not t.clock_fell and not limits:
        return None
    span = (f"SM clock {clock.get('min'):.0f}-{clock.get('max'):.0f} MHz (median {clock.get('median'):.0f})"
            if number(clock.get("min")) is not None else "the SM clock fell")
    evidence = span + " during the timed window" + (f"; limits hit: {', '.join(limits)}" if limits else "")
    return Finding("clock_drop", evidence, "the figure holds at this clock only: compare implementations in one "
                   "A/B (round-robin, same clock for both), and watch power/cooling; the workbench never "
                   "changes clocks", "problem", {"limits": limits, "sm_clock_mhz": dict(clock)})


def launch_blocking(record: Record, ctx: Context) -> Finding | None:
    env = timing(record).env or {}
    value = env.get("CUDA_LAUNCH_BLOCKING")
    if value in (None, "", "0"):
        return None
    return Finding("launch_blocking", f"CUDA_LAUNCH_BLOCKING={value} in the worker's environment: every launch "
                   "waits for its kernel, so host and device never overlap",
                   "unset CUDA_LAUNCH_BLOCKING to time (it is a debugging switch)", "problem", {"value": value})


def recompiles(record: Record, ctx: Context) -> Finding | None:
    count = number(record.recompiles)
    if not count:
        return None
    return Finding("recompiles", f"torch.compile compiled {int(count)} more graph(s) after the build",
                   "each new shape or guard failure recompiles: keep shapes fixed, mark the varying "
                   "dimension dynamic (torch._dynamo.mark_dynamic), and look for graph breaks "
                   "(torch._dynamo.explain)", "problem", {"recompiles": int(count)})


def cpu_contended(record: Record, ctx: Context) -> Finding | None:
    """A CPU row whose worker threads waited for a core (the engine's flag): the median is the
    stall's, and more samples only measure the stall again."""
    flag = first_flag(record, Flag.CPU_CONTENDED)
    if flag is None:
        return None
    return Finding("cpu_contended", flag, "free the cores (other jobs; in the TUI its own redraws share them: "
                   "`workbench --replay` times headless), or time on fewer threads (OMP_NUM_THREADS=1 before "
                   "starting workbench); a longer rep_ms only measures the stall again", "problem", {})


def noisy(record: Record, ctx: Context) -> Finding | None:
    flag = first_flag(record, Flag.NOT_CONVERGED)
    if flag is None:
        return None
    return Finding("noisy", flag, "raise rep_ms, or compare two implementations with `compare: [A, B]` "
                   "(a round-robin ratio with its confidence interval)", "note", {})
