"""`--doctor`'s view of the bars (MEASUREMENT.md rule 11), torch-free: this GPU's physical peaks
from the datasheet table and the references cached by calibration, one readable line per figure.
"""

from __future__ import annotations

from pathlib import Path

from workbench.datasheet import REFERENCE_MARGIN, peaks_for
from workbench.engine.measure.ceilings import MATMUL_KEYS, CeilingCache, no_datasheet_note

FIGURES = (("memory", "hbm_gbps", "GB/s", "copy_gbps", "copy"),
           *((key, key, "TFLOP/s", f"matmul_tflops.{key}", "cuBLAS") for key in MATMUL_KEYS),
           ("float64", "float64", "TFLOP/s", None, None))


def _reference(entry: dict, name: str | None) -> tuple[float | None, dict | None, str | None]:
    if name is None:
        return None, None, None
    field, _, sub = name.partition(".")
    value = entry.get(field)
    value = value.get(sub) if sub and isinstance(value, dict) else value
    return value, (entry.get("sm_clock_mhz") or {}).get(name), (entry.get("reference_errors") or {}).get(name)


def _line(peak: float | None, unit: str, ref: tuple, what: str | None) -> str:
    value, clock, error = ref
    parts = [f"peak {peak:g} {unit}" if peak else f"no datasheet figure (bound: reference x{REFERENCE_MARGIN:g})"]
    if what is not None:
        if value is not None:
            mhz = f" at SM {clock['median']:.0f} MHz" if clock else ""
            parts.append(f"{what} {value:.4g} {unit}{mhz}" + (f" ({100 * value / peak:.0f}% of peak)" if peak else ""))
        else:
            parts.append(f"{what}: {error or 'not measured yet (the first benched row whose bars use it measures it)'}")
    return " · ".join(parts)


def bars_summary(device_name: str | None, driver: str | None, cache_dir: Path | None) -> dict:
    """{"device", "datasheet", "source", <figure>: line, "launch_floor", "calibrated"} for --doctor."""
    if not device_name:
        return {"device": None, "datasheet": "no GPU: no peaks, no references"}
    peaks = peaks_for(device_name)
    key = f"{device_name} | driver {driver or 'unknown'}"
    entry = CeilingCache(cache_dir).load().get(key) or {}
    out = {"device": device_name, "datasheet": peaks.device if peaks else no_datasheet_note(device_name),
           "source": peaks.source if peaks else None}
    for label, peak_key, unit, ref_name, what in FIGURES:
        peak = (peaks.memory_gbps if peak_key == "hbm_gbps" else peaks.tflops(peak_key)) if peaks else None
        out[label] = _line(peak, unit, _reference(entry, ref_name), what)
    floors = (entry.get("launch_floor_ms"), entry.get("launch_floor_ms_warm"))
    out["launch_floor"] = (f"{floors[0]:.4g} ms flushed, {floors[1]:.4g} ms warm" if None not in floors
                           else "not calibrated yet")
    out["calibrated"] = (f"references cached for {key!r} (flush {entry.get('flush_kind')})" if entry
                         else "no references cached yet: the first row that benches on this device measures them")
    return out
