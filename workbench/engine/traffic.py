"""The `traffic` record: ideal bytes and FLOPs, effective GB/s and TFLOP/s, roofline placement.

gbps = bytes (ideal: each input read once, each output written once) / median time;
tflops = flops / median time; intensity = flops / bytes; bound = "compute" when the intensity
is at or above the machine balance (compute ceiling / copy ceiling, FLOP per byte), else
"memory"; ceiling names the ceiling that `bound` picks and pct_of_ceiling is against it.

Not speed (all of gbps, tflops, bound, ceiling, pct None): the Triton interpreter's host time.
L2-resident (rule 3): a working set (bytes_moved_est) that fits in L2 measured without a flush
is labelled `l2_resident: true` and has no HBM ceiling (ceiling and pct None).
"""

from __future__ import annotations

from workbench.cost import Cost
from workbench.engine.ceilings import Ceilings
from workbench.results import TRAFFIC_KEYS, blank

CEILING_MARGIN = 1.05  # a figure more than 5% above its measured ceiling is a measurement error


def traffic_record(cost: Cost, timing: dict, ceilings: Ceilings, *, l2_bytes: int | None) -> dict:
    """The record for one row from its cost model, timing record and ceilings."""
    record = blank(TRAFFIC_KEYS, bytes_read=cost.bytes_read, bytes_written=cost.bytes_written,
                   bytes=cost.bytes, bytes_moved_est=cost.moved, flops=cost.flops,
                   intensity=cost.intensity)
    if l2_bytes:
        record["l2_resident"] = (not timing["flush_l2"]) and cost.moved <= l2_bytes
    median_ms = timing.get("median_ms")
    if timing.get("timer") == "interpreter" or not median_ms:
        return record
    seconds = median_ms * 1e-3
    record["gbps"] = cost.bytes / seconds / 1e9
    record["tflops"] = cost.flops / seconds / 1e12
    _place(record, ceilings)
    return record


def machine_balance(ceilings: Ceilings) -> float | None:
    """FLOPs per byte at which the compute and copy ceilings meet."""
    if not ceilings.copy_gbps or not ceilings.compute_tflops:
        return None
    return ceilings.compute_tflops * 1e12 / (ceilings.copy_gbps * 1e9)


def _place(record: dict, ceilings: Ceilings) -> None:
    balance = machine_balance(ceilings)
    if balance is None or record["intensity"] is None:
        return
    compute = record["intensity"] >= balance
    record["bound"] = "compute" if compute else "memory"
    if record["l2_resident"]:
        return
    if compute:
        record["ceiling"] = f"matmul_tflops.{ceilings.compute_key}"
        record["pct_of_ceiling"] = 100.0 * record["tflops"] / ceilings.compute_tflops
    else:
        record["ceiling"] = "copy_gbps"
        record["pct_of_ceiling"] = 100.0 * record["gbps"] / ceilings.copy_gbps


def above_ceiling(record: dict, ceilings: Ceilings) -> str | None:
    """A one-line description of a figure above its physical ceiling (rule 11), or None.

    Checked: GB/s against the measured copy ceiling (+5%) and the datasheet HBM figure (unless
    the working set is L2-resident), TFLOP/s against the measured compute ceiling (+5%) and the
    datasheet.
    """
    gbps, tflops = record.get("gbps"), record.get("tflops")
    if gbps is not None and not record.get("l2_resident"):
        for limit, what in ((ceilings.copy_gbps and ceilings.copy_gbps * CEILING_MARGIN, "measured copy ceiling +5%"),
                            (ceilings.datasheet_gbps, "datasheet HBM bandwidth")):
            if limit and gbps > limit:
                return f"{gbps:.0f} GB/s is above the {what} ({limit:.0f} GB/s)"
    if tflops is not None:
        for limit, what in ((ceilings.compute_tflops and ceilings.compute_tflops * CEILING_MARGIN,
                             f"measured {ceilings.compute_key} ceiling +5%"),
                            (ceilings.datasheet_tflops, f"datasheet {ceilings.compute_key} peak")):
            if limit and tflops > limit:
                return f"{tflops:.1f} TFLOP/s is above the {what} ({limit:.1f} TFLOP/s)"
    return None
