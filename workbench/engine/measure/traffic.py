"""The `traffic` record: ideal bytes and FLOPs, effective GB/s and TFLOP/s, and the row's bars
(MEASUREMENT.md rule 11; engine/ceilings.py for peaks vs references).

gbps = bytes (ideal: each input read once, each output written once) / median time;
tflops = flops / median time; intensity = flops / bytes.
- bound: "compute" when the intensity is at or above the PEAKS' machine balance (peak FLOP/s /
  peak bytes/s), else "memory";
- peak / pct_of_peak: the physical peak `bound` picks ("hbm_gbps" or "tflops.<key>"; the peak is
  the reference x REFERENCE_MARGIN where the datasheet has no figure);
- ceiling / pct_of_ceiling (kept from the first contract): the measured REFERENCE `bound` picks,
  "copy_gbps" or "matmul_tflops.<key>"; it may exceed 100;
- pct_of_copy: GB/s against the measured copy (every row); pct_of_cublas: TFLOP/s against cuBLAS
  of the same dtype (matmul-like ops only); speedup_vs_pytorch: filled after the run
  (engine/relative.py).

Not speed (all of gbps, tflops, bound, peak, ceiling, pcts None): the Triton interpreter's host
time. L2-resident (rule 3): a working set (bytes_moved_est) that fits in L2 measured without a
flush is labelled `l2_resident: true` and has no memory bars (HBM peak, copy) at all.
"""

from __future__ import annotations

from typing import Any, Mapping

from workbench.cost import Cost
from workbench.datasheet import PEAK_MARGIN
from workbench.engine.measure.ceilings import Ceilings
from workbench.results.record import Flag, Timing, Traffic

CEILING_MARGIN = PEAK_MARGIN  # the former name (rule 11 before the peaks/references split)
BEATS_MIN = 1.005  # a ratio within the default target error (0.5%) of 1 is a tie, not a win


def traffic_record(cost: Cost, timing: Timing | Mapping[str, Any], ceilings: Ceilings, *,
                   l2_bytes: int | None) -> Traffic:
    """The record for one row from its cost model, timing record and bars."""
    record = Traffic(bytes_read=cost.bytes_read, bytes_written=cost.bytes_written, bytes=cost.bytes,
                     bytes_moved_est=cost.moved, flops=cost.flops, intensity=cost.intensity)
    if l2_bytes:
        record.l2_resident = (not timing["flush_l2"]) and cost.moved <= l2_bytes
    median_ms = timing.get("median_ms")
    if timing.get("timer") == "interpreter" or not median_ms:
        return record
    seconds = median_ms * 1e-3
    record.gbps = cost.bytes / seconds / 1e9
    record.tflops = cost.flops / seconds / 1e12
    _references(record, ceilings)
    _place(record, ceilings)
    return record


def machine_balance(ceilings: Ceilings) -> float | None:
    """FLOPs per byte at which the compute and memory PEAKS meet."""
    if not ceilings.peak_gbps or not ceilings.peak_tflops:
        return None
    return ceilings.peak_tflops * 1e12 / (ceilings.peak_gbps * 1e9)


def _pct(value: float | None, bar: float | None) -> float | None:
    return 100.0 * value / bar if value is not None and bar else None


def _references(record: Traffic, ceilings: Ceilings) -> None:
    if not record.l2_resident:
        record.pct_of_copy = _pct(record.gbps, ceilings.copy_gbps)
    if ceilings.matmul_like:
        record.pct_of_cublas = _pct(record.tflops, ceilings.compute_tflops)


def _place(record: Traffic, ceilings: Ceilings) -> None:
    balance = machine_balance(ceilings)
    if balance is None or record.intensity is None:
        return
    compute = record.intensity >= balance
    record.bound = "compute" if compute else "memory"
    if compute:
        record.peak = f"tflops.{ceilings.compute_key}"
        record.pct_of_peak = _pct(record.tflops, ceilings.peak_tflops)
        if ceilings.compute_tflops:
            record.ceiling = f"matmul_tflops.{ceilings.compute_key}"
            record.pct_of_ceiling = _pct(record.tflops, ceilings.compute_tflops)
    elif not record.l2_resident:
        record.peak = "hbm_gbps"
        record.pct_of_peak = _pct(record.gbps, ceilings.peak_gbps)
        if ceilings.copy_gbps:
            record.ceiling = "copy_gbps"
            record.pct_of_ceiling = record.pct_of_copy


def above_peak(record: Traffic | Mapping[str, Any], ceilings: Ceilings) -> str | None:
    """A one-line description of a figure above its physical peak (+PEAK_MARGIN), or None.
    Only this fails a row (rule 11). GB/s is not bounded when the working set is L2-resident."""
    gbps, tflops = record.get("gbps"), record.get("tflops")
    checks = []
    if gbps is not None and not record.get("l2_resident"):
        checks.append((gbps, ceilings.peak_gbps, "GB/s", ceilings.peak_source("gbps")))
    if tflops is not None:
        checks.append((tflops, ceilings.peak_tflops, "TFLOP/s", ceilings.peak_source("tflops")))
    for value, peak, unit, source in checks:
        if peak and value > peak * PEAK_MARGIN:
            return Flag.ABOVE_PEAK.format(value=f"{value:.4g} {unit}",
                                          detail=f"+{100 * (PEAK_MARGIN - 1):.0f}% ({peak:.4g} {unit}: {source})")
    return None


# The former name of above_peak.
above_ceiling = above_peak


def reference_flags(record: Traffic | Mapping[str, Any], ceilings: Ceilings, l2_bytes: int | None = None) -> list[str]:
    """Notes for a row that beats a measured reference (shown, never failed): "beats cuBLAS
    bfloat16 1.06x (...)"; above the copy it is flagged as odd (with L2 flushed, the data may still
    have come from L2, or the cost model may undercount the bytes)."""
    flags = []
    cublas, tflops = ceilings.compute_tflops, record.get("tflops")
    if ceilings.matmul_like and cublas and tflops and tflops / cublas >= BEATS_MIN:
        flags.append(Flag.BEATS_CUBLAS.format(detail=f"{ceilings.compute_key} {tflops / cublas:.2f}x "
                                              f"({tflops:.4g} vs {cublas:.4g} TFLOP/s measured at calibration)"))
    copy, gbps = ceilings.copy_gbps, record.get("gbps")
    if copy and gbps and not record.get("l2_resident") and gbps / copy >= BEATS_MIN:
        moved = record.get("bytes_moved_est") or 0
        where = f"working set {moved / 2**20:.0f} MiB" + (f", L2 {l2_bytes / 2**20:.0f} MiB" if l2_bytes else "")
        flags.append(Flag.ABOVE_COPY.format(detail=f"{gbps / copy:.2f}x ({gbps:.4g} vs {copy:.4g} GB/s): "
                                            f"odd for HBM traffic: L2-resident data? ({where})"))
    return flags
