"""Measured DRAM traffic from Nsight Compute (`ncu`): the command, its CSV, the `measured` record.

The engine (engine/counters_run.py) runs one row's implementation in a subprocess under

    ncu --clock-control none --profile-from-start off --target-processes all
        --csv --page raw --print-units base --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum
        --log-file LOG  python -m workbench.engine.measure.counters_entry JOB.json

The entry builds the implementation, warms it up, and makes ONE call between cudaProfilerStart
and cudaProfilerStop (`--profile-from-start off`: only that call's kernels are profiled). Clocks
are left alone (`--clock-control none`: the GPU runs at its own clock, as in the timed loop);
caches keep ncu's default control (`--cache-control all`: flushed before each kernel, as the
timing's L2 flush does before each call). Nsight Compute's CLI documents the options and the CSV:
https://docs.nvidia.com/nsight-compute/NsightComputeCli/ ("Command Line Options", "--csv").

CSV shapes read here (both, whichever ncu prints):
- details page (the default): one line per (kernel, metric) with columns "ID", "Kernel Name",
  "Block Size", "Grid Size", ..., "Metric Name", "Metric Unit", "Metric Value";
- raw page (`--page raw`): one line per kernel, one column per metric, a second header line of units.
Values may carry thousands separators ("1,073,741,824") and scaled units ("Gbyte", "usecond");
they are converted to bytes and microseconds.

Torch-free: the front end and the tests import it. The `measured` record (docs/CONTRACTS.md):
every key of MEASURED_KEYS is present; `reason` says why nothing was measured (no ncu,
ERR_NVGPUCTRPERM, a CPU row, a failed run), and the figures are then None.
"""

from __future__ import annotations

import csv
import io
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum")
MAX_KERNELS = 500  # --launch-count: a call with more kernels is profiled in part (complete: false)
NCU_PATHS = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/ncu")
MEASURED_KEYS = ("tool", "clock_control", "cache_control", "dram_bytes_read", "dram_bytes_write",
                 "dram_bytes", "kernel_us", "kernel_count", "kernels", "complete", "model_bytes",
                 "ideal_bytes", "pct_of_model", "reason")
KERNEL_KEYS = ("name", "grid", "block", "dram_bytes_read", "dram_bytes_write", "kernel_us")

BYTE_UNITS = {"byte": 1, "b": 1, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12,
              "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "kib": 2**10, "mib": 2**20, "gib": 2**30}
TIME_UNITS_US = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6,
                 "ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
PERMISSION_ERROR = "ERR_NVGPUCTRPERM"
_THOUSANDS = re.compile(r"^-?\d{1,3}(,\d{3})+(\.\d+)?$")


@dataclass(frozen=True)
class KernelCounters:
    """One profiled kernel: bytes read and written by DRAM, device time in microseconds."""

    name: str
    dram_bytes_read: int | None
    dram_bytes_write: int | None
    kernel_us: float | None
    grid: str | None = None
    block: str | None = None

    def as_dict(self) -> dict:
        return {"name": self.name, "grid": self.grid, "block": self.block,
                "dram_bytes_read": self.dram_bytes_read, "dram_bytes_write": self.dram_bytes_write,
                "kernel_us": self.kernel_us}


# -- availability ----------------------------------------------------------------------------
def find_ncu(which: Callable[[str], str | None] = shutil.which,
             exists: Callable[[str], bool] = lambda p: Path(p).is_file()) -> str | None:
    """The ncu executable: on PATH, else in the usual CUDA folders; None when there is none."""
    found = which("ncu")
    if found:
        return found
    return next((p for p in NCU_PATHS if exists(p)), None)


def unavailable_reason(device: str, ncu: str | None) -> str | None:
    """Why counters cannot be measured for a row on `device` with this ncu (None: they can)."""
    if not device.startswith("cuda"):
        return f"counters need a CUDA device (this row runs on {device})"
    if ncu is None:
        return "no ncu (Nsight Compute) on PATH or in /usr/local/cuda/bin: counters not measured"
    return None


def failure_reason(log_text: str, returncode: int | None) -> str:
    """One line saying why an ncu run measured nothing, from its log and exit code."""
    if PERMISSION_ERROR in log_text:
        return (f"{PERMISSION_ERROR}: this user may not read the GPU's performance counters "
                "(an administrator can allow it: NVreg_RestrictProfilingToAdminUsers=0)")
    errors = [line.split("==ERROR==", 1)[1].strip() for line in log_text.splitlines() if "==ERROR==" in line]
    if errors:
        return f"ncu: {errors[0]}"
    if "No kernels were profiled" in log_text:
        return "ncu profiled no kernels: the call launched none between cudaProfilerStart and Stop"
    return f"ncu exited with code {returncode} and no counters"


# -- the command -----------------------------------------------------------------------------
def ncu_command(ncu: str, log_path: str | Path, program: Iterable[str],
                max_kernels: int = MAX_KERNELS) -> list[str]:
    """The argv that runs `program` (a Python command line) under ncu (module docstring)."""
    return [ncu, "--clock-control", "none", "--profile-from-start", "off", "--target-processes", "all",
            "--csv", "--page", "raw", "--print-units", "base", "--metrics", ",".join(METRICS),
            "--launch-count", str(max_kernels), "--log-file", str(log_path), *program]


# -- parsing ---------------------------------------------------------------------------------
def number(text: str) -> float | None:
    """A metric value as a float: thousands separators dropped; None for "n/a" or empty."""
    text = (text or "").strip().strip('"')
    if _THOUSANDS.match(text):
        text = text.replace(",", "")
    try:
        return float(text)
    except ValueError:
        return None


def scaled(metric: str, unit: str, value: float | None) -> float | None:
    """`value` in bytes (dram__bytes_*) or microseconds (gpu__time_duration); raises ValueError
    naming an unknown unit (a silent wrong scale would be worse)."""
    if value is None:
        return None
    key = (unit or "").strip().lower()
    table = TIME_UNITS_US if metric.startswith("gpu__time_duration") else BYTE_UNITS
    if key not in table:
        raise ValueError(f"ncu metric {metric}: unknown unit {unit!r}; known: {', '.join(table)}")
    return value * table[key]


def _csv_rows(text: str) -> list[list[str]]:
    """The CSV lines of an ncu log (its ==PROF== / ==WARNING== lines and blank lines dropped)."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    return list(csv.reader(io.StringIO("\n".join(lines))))


def parse_ncu_csv(text: str) -> list[KernelCounters]:
    """Kernels, in launch order, from ncu's CSV output (details or raw page, module docstring).

    Raises ValueError when the text holds no ncu CSV table or a metric has an unknown unit.
    """
    rows = _csv_rows(text)
    header_at = next((i for i, row in enumerate(rows) if "Kernel Name" in row), None)
    if header_at is None:
        raise ValueError("no ncu CSV table in the output (no header with 'Kernel Name')")
    header, body = rows[header_at], rows[header_at + 1:]
    if "Metric Name" in header:
        return _details(header, body)
    return _raw(header, body)


def _details(header: list[str], body: list[list[str]]) -> list[KernelCounters]:
    col = {name: i for i, name in enumerate(header)}
    found: dict[str, dict] = {}
    for row in body:
        if len(row) < len(header):
            continue
        entry = found.setdefault(row[col["ID"]], {"name": row[col["Kernel Name"]],
                                                 "grid": _get(row, col, "Grid Size"),
                                                 "block": _get(row, col, "Block Size")})
        metric = row[col["Metric Name"]]
        if metric in METRICS:
            entry[metric] = scaled(metric, row[col["Metric Unit"]], number(row[col["Metric Value"]]))
    return [_kernel(entry) for _id, entry in sorted(found.items(), key=lambda kv: _id_order(kv[0]))]


def _raw(header: list[str], body: list[list[str]]) -> list[KernelCounters]:
    col = {name: i for i, name in enumerate(header)}
    units = body[0] if body and not (body[0][col["Kernel Name"]] or "").strip() else None
    kernels = []
    for row in body[1:] if units else body:
        if len(row) < len(header):
            continue
        entry = {"name": row[col["Kernel Name"]], "grid": _get(row, col, "Grid Size"),
                 "block": _get(row, col, "Block Size")}
        for metric in METRICS:
            if metric in col:
                unit = units[col[metric]] if units else "byte"
                entry[metric] = scaled(metric, unit, number(row[col[metric]]))
        kernels.append(_kernel(entry))
    return kernels


def _get(row: list[str], col: dict[str, int], name: str) -> str | None:
    return row[col[name]] if name in col and col[name] < len(row) else None


def _id_order(text: str) -> tuple[int, str]:
    value = number(text)
    return (int(value) if value is not None else 1 << 62, text)


def _kernel(entry: dict) -> KernelCounters:
    def as_int(value):
        return None if value is None else int(round(value))
    return KernelCounters(entry["name"], as_int(entry.get(METRICS[0])), as_int(entry.get(METRICS[1])),
                          entry.get(METRICS[2]), entry.get("grid"), entry.get("block"))


# -- the record ------------------------------------------------------------------------------
def unmeasured(reason: str) -> dict:
    """A `measured` record that says why there are no counters (every figure None)."""
    record = dict.fromkeys(MEASURED_KEYS)
    record.update(tool="ncu", kernels=[], reason=reason)
    return record


def measured_record(kernels: list[KernelCounters], *, model_bytes: int | None = None,
                    ideal_bytes: int | None = None, max_kernels: int = MAX_KERNELS) -> dict:
    """The `measured` record of one call: per kernel and summed. model_bytes: the cost model's
    bytes_moved_est (what the implementation's kernels should move), ideal_bytes: its `bytes`;
    pct_of_model = 100 x measured DRAM bytes / model_bytes. complete is False when ncu stopped at
    max_kernels (the sums then cover only those kernels)."""
    if not kernels:
        return unmeasured("ncu profiled no kernels: the call launched none between cudaProfilerStart and Stop")
    read = _sum(k.dram_bytes_read for k in kernels)
    write = _sum(k.dram_bytes_write for k in kernels)
    total = None if read is None or write is None else read + write
    record = dict.fromkeys(MEASURED_KEYS)
    record.update(tool="ncu", clock_control="none", cache_control="all", dram_bytes_read=read,
                  dram_bytes_write=write, dram_bytes=total, kernel_us=_sum(k.kernel_us for k in kernels),
                  kernel_count=len(kernels), kernels=[k.as_dict() for k in kernels],
                  complete=len(kernels) < max_kernels, model_bytes=model_bytes, ideal_bytes=ideal_bytes,
                  pct_of_model=100.0 * total / model_bytes if total is not None and model_bytes else None)
    return record


def _sum(values: Iterable[float | None]):
    values = list(values)
    return None if any(v is None for v in values) else sum(values)
