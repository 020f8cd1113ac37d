"""Figures the rules read from a result record, whichever source holds them, and their wording.

Each getter returns None when the record has no such figure (an older document, an action that
did not run). Sources, best first: Nsight Compute's counters (`measured`), the profiler's kernel
table (`profile`), the timing record, the cost model (`traffic`). The rules read a Record's
fields (workbench/results/record.py); an absent part reads as an empty one (every figure None).
"""

from __future__ import annotations

from typing import Any, Mapping

from workbench.results.record import Launch, Measured, Record, Timing, Traffic


def section(data: Mapping[str, Any] | None, name: str) -> dict:
    """`data[name]` when it is an object (profile, ptx and the environment stay plain), else {}."""
    value = (data or {}).get(name)
    return value if isinstance(value, dict) else {}


def timing(record: Record) -> Timing:
    return record.timing or Timing()


def traffic(record: Record) -> Traffic:
    return record.traffic or Traffic()


def launch(record: Record) -> Launch:
    return record.launch or Launch()


def number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def measured(record: Record) -> Measured:
    """The `measured` record when counters were measured (no reason), else an empty one."""
    m = record.measured
    return m if m is not None and m.to_dict() and not m.reason else Measured()


def complete(m: Measured) -> bool:
    """Whether the counters saw every kernel of the call (an older document without the key: yes)."""
    return bool(m.complete) if "complete" not in m.absent else True


def kernels_per_call(record: Record) -> tuple[int | None, str | None]:
    """(kernels launched by one call, where the count comes from: "ncu" | "profiler")."""
    m = measured(record)
    if number(m.kernel_count) is not None and complete(m):
        return int(m.kernel_count or 0), "ncu"
    count = number((record.profile or {}).get("kernel_count"))
    return (round(count), "profiler") if count is not None else (None, None)


def profiled_calls(profile: dict) -> float | None:
    kernels = [r for r in profile.get("rows") or () if r.get("kind") == "kernel"]
    count = number(profile.get("kernel_count"))
    if not kernels or not count:
        return None
    return sum(r.get("calls") or 0 for r in kernels) / count


def device_ms_per_call(record: Record) -> tuple[float | None, str | None]:
    """(device (kernel) time of one call in ms, its source in words)."""
    m = measured(record)
    if m.kernel_us is not None and number(m.kernel_us) is not None and complete(m):
        return m.kernel_us / 1e3, "ncu kernel time"
    profile = record.profile or {}
    calls = profiled_calls(profile)
    if calls and not profile.get("reason"):
        total = sum(r.get("self_device_us") or 0 for r in profile["rows"] if r.get("kind") == "kernel")
        if total > 0:
            return total / calls / 1e3, "profiler kernel time"
    t = timing(record)
    if t.device_median_ms is not None and number(t.device_median_ms) is not None:
        return t.device_median_ms, f"{t.device_median_source or 'device'} time, L2-warm"
    return None, None


def median_ms(record: Record) -> float | None:
    t = timing(record)
    if t.timer == "interpreter":
        return None
    return number(t.median_ms)


def ideal_and_moved(record: Record) -> tuple[float | None, float | None]:
    t = traffic(record)
    return number(t.bytes), number(t.bytes_moved_est)


def dram_bytes(record: Record) -> float | None:
    return number(measured(record).dram_bytes)


def ptx_kernels(record: Record) -> list[dict]:
    """The kernels of the row's ptx record that its run launches: the one named `launched` where
    the record names it (a CUDA module of many instantiations, CudaSource.launched), else all."""
    ptx = record.ptx or {}
    kernels = [k for k in ptx.get("kernels") or () if isinstance(k, dict)]
    launched = [k for k in kernels if ptx.get("launched") and k.get("name") == ptx.get("launched")]
    return launched or kernels


def label(record: Record) -> str:
    return str(record.label or record.impl or "?")


def graph_peer(record: Record, peers) -> Record | None:
    """The `<label>+graph` row (or a graph-mode row of the same impl) at the same point."""
    for peer in peers:
        if peer.label == f"{label(record)}+graph" or (
                peer.impl == record.impl and timing(peer).mode == "graph"
                and timing(record).mode != "graph"):
            return peer
    return None


# -- wording ---------------------------------------------------------------------------------
def gb(nbytes: float | None) -> str:
    if nbytes is None:
        return "-"
    if nbytes >= 1e9:
        return f"{nbytes / 1e9:.3g} GB"
    if nbytes >= 1e6:
        return f"{nbytes / 1e6:.3g} MB"
    return f"{nbytes / 1e3:.3g} kB"


def ms(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 0.1:
        return f"{value * 1e3:.3g} us"
    return f"{value:.3g} ms"


def x(ratio: float) -> str:
    return f"{ratio:.3g}x"
