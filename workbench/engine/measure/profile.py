"""Kernel tables from torch.profiler (MEASUREMENT.md P5, P6).

`profile_calls` runs PROFILED_CALLS calls after one warm-up (CUDA initialised by then) and
returns the `profile` record: rows {name, kind, calls, self_device_us, self_cpu_us, pct},
kernel_count (kernels per call), device_events, reason, wall_us.

- kind: "kernel" (a device event), "runtime" (cuda*/cu* driver and runtime calls), "operator".
- pct: of total kernel device time for kernels; of total self CPU time for the other rows.
- device_events false (with `reason`) when there are no device rows: CPU device, a CPU-only
  torch build, or CUPTI unavailable; kernel_count is None then. Never a table of 0.000 rows.
- Times are read from `self_device_time_total` (falling back to `self_cuda_time_total` only where
  the new name does not exist, i.e. old torch); FutureWarnings are silenced around the reads.
- The profiler's own rows ("Activity Buffer Request", ProfilerStep, our sync) are hidden.
- wall_us is the region's wall time per profiled call; kernel self-times sum below it (where
  they do not, `reason` says the profiler's timestamps are unreliable).
"""

from __future__ import annotations

import time
import warnings
from typing import Any, Callable

from workbench.results.document import PROFILE_KEYS, PROFILE_ROW_KEYS, blank

PROFILED_CALLS = 5
HIDDEN_PREFIXES = ("Activity Buffer Request", "ProfilerStep", "cudaDeviceSynchronize",
                   "cudaStreamSynchronize", "cudaEventSynchronize", "## ")
MAX_ROWS = 40
WALL_SLACK = 1.01  # kernel self-time per call may not exceed the region's wall time (P6)


def profile_calls(call: Callable[[], Any], on_cuda: bool, sync: Callable[[], None] = lambda: None,
                  calls: int = PROFILED_CALLS, trace_path: str | None = None) -> dict:
    """Profile `calls` calls of `call`; optional chrome trace written to `trace_path`.

    The autograd profiler that `torch.profiler.profile` wraps (the same Kineto events, the same
    key_averages), not the wrapper: the wrapper's first start asks `hasattr(torch, "_inductor")`,
    which imports Inductor and dynamo into a worker that may never compile anything: 6.3 s of
    the first profiled row on the 2-core CPU box (a one-row gelu replay, WORKBENCH_TRACE), 6.5 s
    on the H200 (results/history/h200/2026-12-02b/README.md)."""
    from torch.autograd.profiler import profile

    call()  # warm-up: CUDA context, caches and lazy init happen outside the profile
    sync()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with profile(use_cpu=True, use_device="cuda" if on_cuda else None, use_kineto=True) as prof:
            t0 = time.perf_counter()
            for _ in range(calls):
                call()
            sync()
            wall_us = (time.perf_counter() - t0) * 1e6 / calls
        if trace_path:
            prof.export_chrome_trace(trace_path)
        events = list(prof.key_averages())
    rows = [profile_row(evt) for evt in events if not evt.key.startswith(HIDDEN_PREFIXES)]
    return build_profile(rows, calls, wall_us, on_cuda)


def build_profile(rows: list[dict], calls: int, wall_us: float, on_cuda: bool) -> dict:
    """Percentages, ordering, per-call kernel count and the no-device-events case (pure)."""
    kernels = [r for r in rows if r["kind"] == "kernel"]
    others = [r for r in rows if r["kind"] != "kernel" and r["self_cpu_us"] > 0]
    device_total = sum(r["self_device_us"] for r in kernels)
    cpu_total = sum(r["self_cpu_us"] for r in others)
    for r in kernels:
        r["pct"] = 100.0 * r["self_device_us"] / device_total if device_total else None
    for r in others:
        r["pct"] = 100.0 * r["self_cpu_us"] / cpu_total if cpu_total else None
    ordered = sorted(kernels, key=lambda r: -r["self_device_us"]) + sorted(others, key=lambda r: -r["self_cpu_us"])
    record = blank(PROFILE_KEYS, rows=ordered[:MAX_ROWS], wall_us=wall_us, device_events=bool(kernels))
    if kernels:
        record["kernel_count"] = sum(r["calls"] for r in kernels) / calls
        if device_total / calls > wall_us * WALL_SLACK:
            record["reason"] = (f"kernel time {device_total / calls:.1f} us per call exceeds the region's wall "
                                f"time {wall_us:.1f} us: the profiler's timestamps are unreliable here")
    else:
        record["reason"] = no_device_reason(on_cuda)
    return record


def no_device_reason(on_cuda: bool) -> str:
    if not on_cuda:
        return "device is cpu: no device events (operator CPU times only)"
    return ("the profiler recorded no device events: no kernel ran in the profiled calls (host-only work, "
            "such as the sleep op), or CUPTI is unavailable")


def profile_row(evt: Any) -> dict:
    """One key_averages() entry as a profile row (times in us, totals over all profiled calls)."""
    device_us = _time(evt, "self_device_time_total", "self_cuda_time_total")
    is_kernel = _is_device_event(evt)
    name = evt.key
    kind = "kernel" if is_kernel else ("runtime" if name.startswith(("cuda", "cu")) else "operator")
    return blank(PROFILE_ROW_KEYS, name=name, kind=kind, calls=int(evt.count),
                 self_device_us=float(device_us) if is_kernel else 0.0,
                 self_cpu_us=float(getattr(evt, "self_cpu_time_total", 0.0) or 0.0))


def _is_device_event(evt: Any) -> bool:
    device_type = getattr(evt, "device_type", None)
    return device_type is not None and "CPU" not in str(device_type)


def _time(evt: Any, name: str, old_name: str) -> float:
    """Read the new attribute where the event has it, the old cuda_* one only otherwise.

    key_averages() entries (FunctionEventAvg) carry `self_device_time_total` as an instance
    attribute, not a class property: checking the class read 0 for every kernel (torch 2.11,
    measured on H200)."""
    attr = name if (hasattr(type(evt), name) or name in getattr(evt, "__dict__", {})) else old_name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return float(getattr(evt, attr, 0.0) or 0.0)


def trace_file(trace_dir: str, row_key: tuple, session: str = "") -> str:
    """`trace_dir/<session>-run<i>-<label>[-<sweep value>].pt.trace.json` for a row's chrome
    trace (the `.pt.trace.json` ending is the one Perfetto, TensorBoard and HTA look for)."""
    return row_file(trace_dir, row_key, session, ".pt.trace.json")


def row_file(folder: str, row_key: tuple, session: str, suffix: str) -> str:
    """`folder/<session>-run<i>-<label>[-<sweep value>]<suffix>` (folder created). Every character
    outside [A-Za-z0-9_.=-] becomes `_` (labels and sweep values come from the user)."""
    import re
    from pathlib import Path

    run_index, label, sweep_value = row_key
    parts = ([session] if session else []) + [f"run{run_index}", str(label)]
    parts += [] if sweep_value is None else [str(sweep_value)]
    stem = re.sub(r"[^A-Za-z0-9_.=-]", "_", "-".join(parts))
    Path(folder).mkdir(parents=True, exist_ok=True)
    return str(Path(folder) / (stem + suffix))


def kernel_ms_per_call(call: Callable[[], Any], calls: int = 20) -> float:
    """Sum of kernel self device time per call, ms (device-only time of a short callable).

    Raises RuntimeError when the profiler saw no device events.
    """
    import torch

    record = profile_calls(call, True, sync=torch.cuda.synchronize, calls=calls)
    if not record["device_events"]:
        raise RuntimeError(record["reason"])
    return sum(r["self_device_us"] for r in record["rows"] if r["kind"] == "kernel") / calls / 1e3
