"""Figures the rules read from a result record, whichever source holds them, and their wording.

Each getter returns None when the record has no such figure (an older document, an action that
did not run). Sources, best first: Nsight Compute's counters (`measured`), the profiler's kernel
table (`profile`), the timing record, the cost model (`traffic`).
"""

from __future__ import annotations

from typing import Any, Mapping

Record = Mapping[str, Any]


def section(record: Record, name: str) -> dict:
    value = record.get(name)
    return value if isinstance(value, dict) else {}


def number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def measured(record: Record) -> dict:
    """The `measured` record when counters were measured (no reason), else {}."""
    m = section(record, "measured")
    return m if m and not m.get("reason") else {}


def kernels_per_call(record: Record) -> tuple[int | None, str | None]:
    """(kernels launched by one call, where the count comes from: "ncu" | "profiler")."""
    m = measured(record)
    if number(m.get("kernel_count")) is not None and m.get("complete", True):
        return int(m["kernel_count"]), "ncu"
    count = number(section(record, "profile").get("kernel_count"))
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
    if number(m.get("kernel_us")) is not None and m.get("complete", True):
        return m["kernel_us"] / 1e3, "ncu kernel time"
    profile = section(record, "profile")
    calls = profiled_calls(profile)
    if calls and not profile.get("reason"):
        total = sum(r.get("self_device_us") or 0 for r in profile["rows"] if r.get("kind") == "kernel")
        if total > 0:
            return total / calls / 1e3, "profiler kernel time"
    timing = section(record, "timing")
    if number(timing.get("device_median_ms")) is not None:
        return timing["device_median_ms"], f"{timing.get('device_median_source') or 'device'} time, L2-warm"
    return None, None


def median_ms(record: Record) -> float | None:
    timing = section(record, "timing")
    if timing.get("timer") == "interpreter":
        return None
    return number(timing.get("median_ms"))


def ideal_and_moved(record: Record) -> tuple[float | None, float | None]:
    traffic = section(record, "traffic")
    return number(traffic.get("bytes")), number(traffic.get("bytes_moved_est"))


def dram_bytes(record: Record) -> float | None:
    return number(measured(record).get("dram_bytes"))


def ptx_kernels(record: Record) -> list[dict]:
    """The kernels of the row's ptx record that its run launches: the one named `launched` where
    the record names it (a CUDA module of many instantiations, CudaSource.launched), else all."""
    ptx = section(record, "ptx")
    kernels = [k for k in ptx.get("kernels") or () if isinstance(k, dict)]
    launched = [k for k in kernels if ptx.get("launched") and k.get("name") == ptx.get("launched")]
    return launched or kernels


def label(record: Record) -> str:
    return str(record.get("label") or record.get("impl") or "?")


def graph_peer(record: Record, peers) -> Record | None:
    """The `<label>+graph` row (or a graph-mode row of the same impl) at the same point."""
    for peer in peers:
        timing = section(peer, "timing")
        if peer.get("label") == f"{label(record)}+graph" or (
                peer.get("impl") == record.get("impl") and timing.get("mode") == "graph"
                and section(record, "timing").get("mode") != "graph"):
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
