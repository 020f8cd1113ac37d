"""The two kinds of bar of a row (MEASUREMENT.md rule 11), never confused:

- physical PEAKS: the device's datasheet figures (workbench/datasheet.py). Only a figure above its
  peak (+ datasheet.PEAK_MARGIN) is a measurement error and fails the row;
- measured REFERENCES: a large device-to-device copy (copy_gbps, bytes read + written) and cuBLAS
  per dtype (matmul_tflops[key], key "bfloat16", "float16", "tf32" or "float32" IEEE), measured
  at calibration (engine/calibrate.py) and cached per device here. "% of copy" and "% of cuBLAS"
  are taken against them; a kernel may beat them, which is shown, never failed.

Where the device, or one of its figures, has no datasheet entry, the peak is the reference times
datasheet.REFERENCE_MARGIN, and `peak_source` says so. The compute key of a non-matmul op is
"float32": elementwise kernels compute in float32 on CUDA cores, never on tensor cores.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path

from workbench.datasheet import REFERENCE_MARGIN, known_devices, peaks_for
from workbench.fileio import atomic_write_text, exclusive

COPY_BYTES = 2**30          # 1 GiB each way: far beyond any L2
MATMUL_N = 8192             # 2 * 8192^3 = 1.1 TFLOP per product
# The cuBLAS reference is the best of these sizes (memory permitting): on the H200 cuBLAS float32
# IEEE ran 50.8 TFLOP/s at 8192^3 but 53.4 at 16384^3.
MATMUL_SIZES = (8192, 16384)
MATMUL_KEYS = ("bfloat16", "float16", "tf32", "float32")
# Bumped when how a reference is measured changes (older entries are measured again).
# 3: batched event timing with a read flush (engine/timing.py), SM clock recorded beside each.
CACHE_VERSION = 3


@dataclass(frozen=True)
class Ceilings:
    """The bars of one row. copy_gbps / compute_tflops: the measured references (compute_key names
    the cuBLAS one: "bfloat16", "float16", "tf32", "float32"); datasheet_gbps / datasheet_tflops:
    the physical peaks (None: no datasheet figure); matmul_like: whether "% of cuBLAS" applies;
    device: the datasheet entry's name (None: no entry)."""

    copy_gbps: float | None = None
    compute_tflops: float | None = None
    compute_key: str | None = None
    datasheet_gbps: float | None = None
    datasheet_tflops: float | None = None
    matmul_like: bool = False
    device: str | None = None

    @property
    def peak_gbps(self) -> float | None:
        """The memory bound: the datasheet figure, else the copy reference x REFERENCE_MARGIN."""
        return self.datasheet_gbps or (self.copy_gbps and self.copy_gbps * REFERENCE_MARGIN) or None

    @property
    def peak_tflops(self) -> float | None:
        """The compute bound: the datasheet figure, else the cuBLAS reference x REFERENCE_MARGIN."""
        return self.datasheet_tflops or (self.compute_tflops and self.compute_tflops * REFERENCE_MARGIN) or None

    def peak_source(self, what: str) -> str:
        """Where the bound of `what` ("gbps" or "tflops") comes from, in words."""
        sheet = self.datasheet_gbps if what == "gbps" else self.datasheet_tflops
        label = "HBM bandwidth" if what == "gbps" else f"{self.compute_key} peak"
        if sheet:
            return f"datasheet {label} of {self.device}"
        ref = "measured copy" if what == "gbps" else f"measured cuBLAS {self.compute_key}"
        why = "no datasheet entry for this device" if self.device is None else f"no datasheet {label} for {self.device}"
        return f"{ref} x{REFERENCE_MARGIN:g} ({why})"


def compute_key(matmul_like: bool, dtype: str, fp32_precision: str) -> str:
    """Which compute figure bounds an op's arithmetic (module docstring)."""
    if not matmul_like:
        return "float32"
    if dtype == "float32":
        return "tf32" if fp32_precision == "tf32" else "float32"
    if dtype.startswith("float8"):  # e4m3 and e5m2 share the tensor cores' fp8 rate
        return "float8"
    return dtype


def datasheet_for(device_name: str | None) -> dict | None:
    """The `environment.datasheet` record for a device name (its peaks and sources), or None."""
    peaks = peaks_for(device_name)
    return peaks.record() if peaks else None


def no_datasheet_note(device_name: str) -> str:
    return (f"no datasheet entry for {device_name!r}: bounds are the measured references "
            f"x{REFERENCE_MARGIN:g}; known: {', '.join(known_devices())}")


def copy_gbps(bytes_moved: int, median_ms: float) -> float:
    """GB/s (1e9 bytes/s) of `bytes_moved` (read + written) in `median_ms`."""
    return bytes_moved / (median_ms * 1e-3) / 1e9


def matmul_tflops(n: int, median_ms: float) -> float:
    """TFLOP/s (1e12) of one n x n x n product (2 n^3 FLOPs) in `median_ms`."""
    return 2 * n**3 / (median_ms * 1e-3) / 1e12


class CeilingCache:
    """JSON file of references per device key (engine/environment.DeviceInfo.cache_key):
    {key: {"version", "copy_gbps", "matmul_tflops": {k: v}, "sm_clock_mhz": {name: {min, median,
    max, n}}, "launch_floor_ms", "launch_floor_ms_warm", "flush_kind", "measured_at"}}.

    cache_dir None keeps values in memory only. Writes are atomic (temporary file, rename).
    """

    def __init__(self, cache_dir: Path | None):
        self.path = Path(cache_dir) / "ceilings.json" if cache_dir else None
        self._memory: dict = {}

    def load(self) -> dict:
        """Entries of this CACHE_VERSION only (an entry measured another way is measured again)."""
        if self.path is None:
            return self._memory
        try:
            data = json.loads(self.path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {k: v for k, v in data.items() if isinstance(v, dict) and v.get("version") == CACHE_VERSION}

    def get(self, device_key: str, field: str, sub: str | None = None) -> float | None:
        value = self.load().get(device_key, {}).get(field)
        return value.get(sub) if sub is not None and isinstance(value, dict) else value

    def has(self, device_key: str, field: str, sub: str | None = None) -> bool:
        """Whether the entry holds `field` (`sub`), measured (a number) or found unavailable (None)."""
        entry = self.load().get(device_key, {})
        if sub is None:
            return field in entry
        return isinstance(entry.get(field), dict) and sub in entry[field]

    def put(self, device_key: str, field: str, value, sub: str | None = None) -> None:
        with self._locked():  # workers of several devices calibrate at once (engine/spread.py)
            data = self.load()
            entry = data.setdefault(device_key, {})
            entry["version"] = CACHE_VERSION
            if sub is None:
                entry[field] = value
            else:
                entry.setdefault(field, {})[sub] = value
            self._write(data)

    @contextlib.contextmanager
    def _locked(self):
        """An exclusive lock on `ceilings.json.lock` around a read-modify-write, so two processes
        writing at once keep both their fields (fcntl; without it, or in memory, no lock)."""
        if self.path is None:
            yield
            return
        with exclusive(self.path.with_name(self.path.name + ".lock")):
            yield

    def get_or_measure(self, device_key: str, field: str, measure_fn, sub: str | None = None) -> float:
        value = self.get(device_key, field, sub)
        if value is None:
            value = float(measure_fn())
            self.put(device_key, field, value, sub)
        return value

    def _write(self, data: dict) -> None:
        if self.path is None:
            self._memory = data
            return
        atomic_write_text(self.path, json.dumps(data, indent=2))  # workbench.fileio: the one writer


def bars(device_name: str, entry: dict | None, op_matmul_like: bool, dtype: str, fp32_precision: str) -> Ceilings:
    """The bars of a row from the device's name, its cached references `entry` and the op."""
    entry = entry or {}
    key = compute_key(op_matmul_like, dtype, fp32_precision)
    peaks = peaks_for(device_name)
    return Ceilings(copy_gbps=entry.get("copy_gbps"), compute_tflops=(entry.get("matmul_tflops") or {}).get(key),
                    compute_key=key, datasheet_gbps=peaks.memory_gbps if peaks else None,
                    datasheet_tflops=peaks.tflops(key) if peaks else None, matmul_like=op_matmul_like,
                    device=peaks.device if peaks else None)


def ceilings_for(dev, op, spec, fp32_precision: str) -> Ceilings:
    """The bars of a row on `dev` (a DeviceSession), from the references its calibration cached
    (engine/calibrate.py runs before the device's first benched row; none cached: peaks only)."""
    entry = CeilingCache(dev.cache_dir).load().get(dev.info.cache_key)
    return bars(dev.info.name, entry, op.matmul_like, str(spec.dtype), fp32_precision)
